#include "schedules/variant.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "tbex/errors.h"

namespace tbex::sched {

VariantFields parse_variant(const std::string& variant, const std::vector<std::string>& keys,
                            const std::string& schedule) {
  VariantFields f;
  std::string known;
  for (const auto& k : keys) known += (known.empty() ? "" : ", ") + k;
  std::stringstream ss(variant);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    user_check(eq != std::string::npos && std::find(keys.begin(), keys.end(), key) != keys.end(),
               "", "variant",
               "'" + item + "' in variant '" + variant + "' is not KEY=N for " + schedule +
                   " (keys: " + known + ")");
    const std::string num = item.substr(eq + 1);
    char* end = nullptr;
    const long v = std::strtol(num.c_str(), &end, 10);
    user_check(!num.empty() && *end == '\0' && v >= 1 && v <= 4096, "", "variant",
               "'" + item + "' in variant '" + variant + "': the value must be an integer in [1, 4096]");
    user_check(f.emplace(key, (int)v).second, "", "variant",
               "key '" + key + "' repeats in variant '" + variant + "'");
  }
  return f;
}

std::string format_variant(const VariantFields& f, const std::vector<std::string>& keys) {
  std::string s;
  for (const auto& k : keys)
    if (auto it = f.find(k); it != f.end())
      s += (s.empty() ? "" : ",") + k + "=" + std::to_string(it->second);
  return s;
}

std::vector<std::string> unique_upto(const std::vector<std::string>& list, size_t cap) {
  std::vector<std::string> out;
  for (const auto& s : list)
    if (out.size() < cap && std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  return out;
}

}  // namespace tbex::sched
