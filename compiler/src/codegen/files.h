#pragma once
/** Whole-file text I/O for the code generators (AOT files, C++ source, the disk cache). */
#include <string>

namespace tbex::codegen {

/** The file's bytes; "" when it cannot be read (callers that need it check first). */
std::string read_text(const std::string& path);
/** Writes (truncates) the file; InternalError when it cannot. */
void write_text(const std::string& path, const std::string& text);

}  // namespace tbex::codegen
