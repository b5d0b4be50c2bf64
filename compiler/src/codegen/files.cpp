#include "codegen/files.h"

#include <fstream>
#include <sstream>

#include "tbex/errors.h"

namespace tbex::codegen {

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  internal_check(f.good(), "cannot write " + path);
}

}  // namespace tbex::codegen
