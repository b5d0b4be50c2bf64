/** tbexc: ahead-of-time tbex kernels (see `tbexc --help` and tbex/aot.h). */
#include <iostream>
#include <string>
#include <vector>

#include "tbex/aot.h"
#include "tbex/log.h"

int main(int argc, char** argv) {
  tbex::log::check();
  return tbex::aot_main(std::vector<std::string>(argv + 1, argv + argc), std::cout, std::cerr);
}
