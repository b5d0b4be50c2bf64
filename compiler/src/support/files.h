#pragma once
/** Files as the compiler uses them: whole-file text I/O, atomic publication (temp file + rename:
 * readers see the old file or the new one, never a partial one), directories and flock locks. */
#include <string>

namespace tbex::support {

/** The file's bytes; "" when it cannot be read (callers that need it check first). */
std::string read_text(const std::string& path);
/** Writes (truncates) the file with checked writes; "" or why not (the file is removed then). */
std::string write_file(const std::string& path, const std::string& bytes);
/** write_file, or UserError naming the file (a full disk, a read-only directory). */
void write_text(const std::string& path, const std::string& text);

/** A name next to `path` no other writer (thread or process) uses: `path`.tmp.<pid>.<unique>. */
std::string temp_name(const std::string& path);

/** Writes `text` to a temp file next to `path` and renames it over `path`; "" or why not. */
std::string write_atomic(const std::string& path, const std::string& text);

/** Creates `dir` and its parents; "" or why not. */
std::string make_dirs(const std::string& dir);
/** make_dirs of the directory holding `path` (nothing for a bare file name). */
std::string make_parent_dirs(const std::string& path);

/** A file in memory (memfd) that a library writing only to paths can write through path():
 * Halide's C source and header writers do not report a full disk (a silently truncated file), so
 * their output goes here first and then through write_file. */
class MemFile {
 public:
  MemFile();  ///< throws UserError when no memfd can be made
  ~MemFile();
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;
  std::string path() const;
  /** What was written so far. */
  std::string bytes() const;

 private:
  int fd_ = -1;
};

/** flock() retried on EINTR; false when the lock is not taken (LOCK_NB and busy, or an error). */
bool flock_retry(int fd, int operation);

/** An exclusive flock on a lock file (created if missing) for the object's lifetime. The lock
 * is checked to still be on the file the path names, so a lock file deleted meanwhile (cache
 * eviction, `cache clear`) never leaves two holders. */
class FileLock {
 public:
  enum class Wait { kBlock, kTry };
  FileLock(const std::string& path, Wait wait = Wait::kBlock);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  /** Held: the file could be opened and (for kTry) nobody else holds it. */
  bool held() const { return fd_ >= 0; }
  /** Why not held ("" when held). */
  const std::string& error() const { return error_; }

 private:
  int fd_ = -1;
  std::string error_;
};

}  // namespace tbex::support
