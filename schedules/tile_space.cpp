#include "schedules/tile_space.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "tbex/errors.h"
#include "tbex/knobs.h"

namespace tbex::sched {
namespace {

/** The integer `num` in [1, 4096], or 0 when it is not one. */
int positive(const std::string& num) {
  char* end = nullptr;
  const long v = std::strtol(num.c_str(), &end, 10);
  return !num.empty() && *end == '\0' && v >= 1 && v <= 4096 ? (int)v : 0;
}

}  // namespace

TileSpace::TileSpace(std::string schedule, std::vector<std::string> keys, std::string knob,
                     size_t knob_keys)
    : schedule_(std::move(schedule)), keys_(std::move(keys)), knob_(std::move(knob)),
      knob_keys_(std::min(knob_keys, keys_.size())) {}

VariantFields TileSpace::parse(const std::string& variant) const {
  VariantFields f;
  std::string known;
  for (const auto& k : keys_) known += (known.empty() ? "" : ", ") + k;
  std::stringstream ss(variant);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t eq = item.find('=');
    const std::string key = item.substr(0, eq);
    user_check(eq != std::string::npos && std::find(keys_.begin(), keys_.end(), key) != keys_.end(),
               code::kValue, "variant",
               "'" + item + "' in variant '" + variant + "' is not KEY=N for " + schedule_ +
                   " (keys: " + known + ")");
    const int v = positive(item.substr(eq + 1));
    user_check(v > 0, code::kNotPositive, "variant",
               "'" + item + "' in variant '" + variant + "': the value must be an integer in [1, 4096]");
    user_check(f.emplace(key, v).second, code::kValue, "variant",
               "key '" + key + "' repeats in variant '" + variant + "'");
  }
  return f;
}

VariantFields TileSpace::override_fields(const std::string& variant) const {
  VariantFields f;
  if (knob_.empty() || !variant.empty() || !knobs::is_set(knob_)) return f;
  const std::string value = knobs::get_string(knob_);
  std::string names;
  for (size_t i = 0; i < knob_keys_; ++i) names += (i ? "," : "") + keys_[i];
  std::stringstream ss(value);
  std::string item;
  size_t i = 0;
  while (std::getline(ss, item, ',')) {
    const int v = positive(item);
    user_check(i < knob_keys_ && v > 0, code::kValue, knob_.c_str(),
               knob_ + "='" + value + "' is not " + names + " for " + schedule_ +
                   " (1 to " + std::to_string(knob_keys_) + " integers in [1, 4096])");
    f[keys_[i++]] = v;
  }
  user_check(!f.empty(), code::kValue, knob_.c_str(), knob_ + " is set but empty: give " + names);
  return f;
}

VariantFields TileSpace::resolve(const std::string& variant,
                                 const std::vector<std::pair<const char*, int*>>& bound) const {
  const VariantFields set = variant.empty() ? override_fields(variant) : parse(variant);
  for (const auto& [key, field] : bound)
    if (auto it = set.find(key); it != set.end()) *field = it->second;
  return set;
}

void TileSpace::require(bool ok, const std::string& variant, const std::string& rule) const {
  if (ok) return;
  if (variant.empty() && !knob_.empty() && knobs::is_set(knob_))
    throw UserError(code::kValue, knob_, knob_ + "='" + knobs::get_string(knob_) + "' for " + schedule_ + ": " + rule);
  throw UserError(code::kValue, "variant", schedule_ + " variant '" + variant + "': " + rule);
}

std::string TileSpace::key(const VariantFields& f) const {
  std::string s;
  for (const auto& k : keys_)
    if (auto it = f.find(k); it != f.end())
      s += (s.empty() ? "" : ",") + k + "=" + std::to_string(it->second);
  return s;
}

std::vector<std::string> TileSpace::candidates(const std::vector<std::string>& keys, size_t cap) {
  std::vector<std::string> out;
  for (const auto& s : keys)
    if (out.size() < cap && std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  if (!out.empty()) out[0] = "";
  return out;
}

}  // namespace tbex::sched
