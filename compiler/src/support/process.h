#pragma once
/** Running host tools (C and C++ compilers, linkers): every such call goes through run_tool. */
#include <string>
#include <vector>

namespace tbex::support {

/** Runs `argv` (argv[0] looked up on PATH when it has no '/'; no shell, so no quoting issues)
 * with stdout and stderr captured together, and returns that output. A tool that cannot be
 * started, exits non-zero or dies raises UserError(param = `param`) naming the tool, the command
 * line and its output, followed by `hint` (e.g. which knob picks another tool). */
std::string run_tool(const std::vector<std::string>& argv, const std::string& param,
                     const std::string& hint = "");

/** The command line as one shell-quoted string, for messages and logs. */
std::string command_line(const std::vector<std::string>& argv);

}  // namespace tbex::support
