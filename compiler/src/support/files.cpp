#include "support/files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "tbex/errors.h"

namespace tbex::support {

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string write_file(const std::string& path, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return "cannot create " + path + ": " + std::strerror(errno);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : EIO;
      ::close(fd);
      ::unlink(path.c_str());
      errno = err;  // callers may tell a vanished directory (ENOENT) from a full disk
      return "cannot write " + path + ": " + std::strerror(err);
    }
    done += size_t(n);
  }
  if (::close(fd) != 0) {  // delayed allocation failures (a full disk) can surface here
    const int err = errno;
    ::unlink(path.c_str());
    errno = err;
    return "cannot write " + path + ": " + std::strerror(err);
  }
  return "";
}

void write_text(const std::string& path, const std::string& text) {
  if (std::string why = write_file(path, text); !why.empty()) throw UserError(code::kValue, path, why);
}

std::string temp_name(const std::string& path) {
  static std::atomic<unsigned> counter{0};
  // The random part keeps names distinct for processes in different pid namespaces (containers)
  // sharing the directory.
  static const unsigned salt = std::random_device{}();
  return path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(salt) + "." +
         std::to_string(counter++);
}

std::string write_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = temp_name(path);
  if (std::string why = write_file(tmp, text); !why.empty()) return why;
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = "cannot rename " + tmp + " to " + path + ": " + std::strerror(errno);
    ::unlink(tmp.c_str());
    return why;
  }
  return "";
}

std::string make_dirs(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return "cannot create " + dir + ": " + ec.message();
  return "";
}

std::string make_parent_dirs(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? "" : make_dirs(parent.string());
}

MemFile::MemFile() : fd_(::memfd_create("tbex-output", MFD_CLOEXEC)) {
  if (fd_ < 0) throw UserError(code::kValue, "memfd", std::string("cannot make an in-memory file: ") + std::strerror(errno));
}

MemFile::~MemFile() { ::close(fd_); }

std::string MemFile::path() const { return "/proc/self/fd/" + std::to_string(fd_); }

std::string MemFile::bytes() const {
  std::string out;
  char buf[1 << 16];
  for (off_t at = 0;;) {
    const ssize_t n = ::pread(fd_, buf, sizeof buf, at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, size_t(n));
    at += n;
  }
  return out;
}

bool flock_retry(int fd, int operation) {
  while (::flock(fd, operation) != 0)
    if (errno != EINTR) return false;
  return true;
}

FileLock::FileLock(const std::string& path, Wait wait) {
  const int op = LOCK_EX | (wait == Wait::kTry ? LOCK_NB : 0);
  for (;;) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
      error_ = "cannot open " + path + ": " + std::strerror(errno);
      return;
    }
    if (!flock_retry(fd, op)) {
      error_ = errno == EWOULDBLOCK ? path + " is held by another process"
                                    : "cannot lock " + path + ": " + std::strerror(errno);
      ::close(fd);
      return;
    }
    struct stat held{}, named{};
    if (::fstat(fd, &held) == 0 && ::stat(path.c_str(), &named) == 0 && held.st_dev == named.st_dev &&
        held.st_ino == named.st_ino) {
      fd_ = fd;
      return;
    }
    ::close(fd);  // the file was deleted or replaced while we waited: lock the current one
  }
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

}  // namespace tbex::support
