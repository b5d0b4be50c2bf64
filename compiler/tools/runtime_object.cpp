/** tbex_runtime_object DIR: writes the Halide runtime object the disk cache links into every
 * cached kernel (the build runs it for the Python package's tbex/runtime/), so a fresh cache
 * directory does not compile its own on the first kernel. */
#include <iostream>
#include <string>

#include "codegen/jit.h"
#include "tbex/errors.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " DIR\n";
    return 2;
  }
  try {
    std::cout << tbex::codegen::write_prebuilt_runtime(argv[1]) << "\n";
  } catch (const std::exception& e) {
    std::cerr << argv[0] << ": " << e.what() << "\n";
    return 1;
  }
  return 0;
}
