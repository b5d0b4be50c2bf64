#pragma once
/** Which host compilers tbex runs (the one place that decides): the C compiler of AOT wrappers
 * and the C++ driver that links the disk cache's shared objects. */
#include <string>
#include <vector>

namespace tbex::support {

/** The executable `name` resolves to on PATH (or `name` itself when it holds a '/' and is
 * executable); "" when there is none. */
std::string find_program(const std::string& name);

/** The C compiler as argv words: TBEX_CC, else $CC, else cc (a value may carry arguments, e.g.
 * "ccache gcc" or "gcc -m64"; words are split on blanks). */
std::vector<std::string> c_compiler();

/** The C++ driver as argv words, argv[0] a full path: $CXX (its first word found on PATH), else
 * c++, g++ or clang++ on PATH; empty when none is found. */
std::vector<std::string> cxx_compiler();

}  // namespace tbex::support
