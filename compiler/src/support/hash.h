#pragma once
/** SHA-256 through OpenSSL's libcrypto (EVP): cache keys and checksums of cached files. */
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace tbex::support {

/** Incremental SHA-256. */
class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  void update(const void* data, size_t n);
  /** The digest as 64 lowercase hex digits; the object is spent afterwards. */
  std::string hex();

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

std::string sha256_hex(const void* data, size_t n);
std::string sha256_hex(const std::string& bytes);

/** sha256 and size of an open file's bytes, read from offset 0 with pread (the descriptor's
 * position is left alone); false on a read error. */
bool sha256_fd(int fd, std::string& hex, int64_t& size);

}  // namespace tbex::support
