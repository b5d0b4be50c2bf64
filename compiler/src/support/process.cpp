#include "support/process.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "support/files.h"
#include "tbex/errors.h"

extern char** environ;

namespace tbex::support {
namespace {

/** A temp file for the tool's output, deleted with the object. */
struct OutputFile {
  std::string path;
  int fd = -1;
  OutputFile() {
    const char* t = std::getenv("TMPDIR");  // the platform's variable, not a tbex knob
    std::string tmpl = std::string(t && *t ? t : "/tmp") + "/tbex_tool.XXXXXX";
    fd = ::mkstemp(tmpl.data());
    if (fd >= 0) path = tmpl;
  }
  ~OutputFile() {
    if (fd >= 0) ::close(fd), ::unlink(path.c_str());
  }
};

std::string quote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789_-+=/.,:@%") == std::string::npos)
    return s;
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

std::string command_line(const std::vector<std::string>& argv) {
  std::string s;
  for (const std::string& a : argv) s += (s.empty() ? "" : " ") + quote(a);
  return s;
}

std::string run_tool(const std::vector<std::string>& argv, const std::string& param,
                     const std::string& hint) {
  internal_check(!argv.empty() && !argv[0].empty(), "run_tool: no program given");
  const std::string tool = argv[0];
  const std::string cmd = command_line(argv);
  const std::string tail = hint.empty() ? "" : "\n(" + hint + ")";
  OutputFile out;
  if (out.fd < 0)
    throw UserError(code::kValue, param, "cannot run " + tool + ": no temporary file for its output (" +
                                   std::strerror(errno) + ")" + tail);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out.fd, 1);
  posix_spawn_file_actions_adddup2(&fa, out.fd, 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, tool.c_str(), &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0)
    throw UserError(code::kValue, param, "cannot run " + tool + " (" + std::strerror(rc) + "): " + cmd + tail);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) {
      status = -1;
      break;
    }
  const std::string output = read_text(out.path);
  if (status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) return output;
  const std::string how = status < 0           ? "could not be waited for"
                          : WIFSIGNALED(status) ? "was killed by signal " + std::to_string(WTERMSIG(status))
                                                : "exited with status " + std::to_string(WEXITSTATUS(status));
  throw UserError(code::kValue, param, tool + " " + how + ": " + cmd + "\n" + output + tail);
}

}  // namespace tbex::support
