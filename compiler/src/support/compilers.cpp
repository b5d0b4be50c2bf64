#include "support/compilers.h"

#include <unistd.h>

#include <cstdlib>
#include <sstream>

#include "tbex/knobs.h"
#include "tbex/log.h"

namespace tbex::support {
namespace {

std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

/** A platform variable (CC, CXX, PATH: not tbex knobs); "" when unset. */
std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

std::string find_program(const std::string& name) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return ::access(name.c_str(), X_OK) == 0 ? name : "";
  std::istringstream path(env("PATH"));
  for (std::string dir; std::getline(path, dir, ':');) {
    if (dir.empty()) continue;
    const std::string p = dir + "/" + name;
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

std::vector<std::string> c_compiler() {
  for (const std::string& v : {knobs::get_string("TBEX_CC"), env("CC")})
    if (auto w = words(v); !w.empty()) return w;
  return {"cc"};
}

std::vector<std::string> cxx_compiler() {
  const std::vector<std::string> asked = words(env("CXX"));
  if (!asked.empty()) {
    std::vector<std::string> w = asked;
    if (std::string p = find_program(w[0]); !p.empty()) return w[0] = p, w;
  }
  for (const char* c : {"c++", "g++", "clang++"})
    if (std::string p = find_program(c); !p.empty()) {
      if (!asked.empty())
        log::warn_once("cxx", "CXX=" + env("CXX") + " is not a program on PATH; the kernel cache links with " + p);
      return {p};
    }
  return {};
}

}  // namespace tbex::support
