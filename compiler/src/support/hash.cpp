#include "support/hash.h"

#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "tbex/errors.h"

namespace tbex::support {

struct Sha256::Ctx {
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  ~Ctx() { EVP_MD_CTX_free(md); }
};

Sha256::Sha256() : ctx_(std::make_unique<Ctx>()) {
  internal_check(ctx_->md && EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr) == 1,
                 "libcrypto: cannot start a SHA-256 digest");
}

Sha256::~Sha256() = default;

void Sha256::update(const void* data, size_t n) {
  internal_check(EVP_DigestUpdate(ctx_->md, data, n) == 1, "libcrypto: SHA-256 update failed");
}

std::string Sha256::hex() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  internal_check(EVP_DigestFinal_ex(ctx_->md, digest, &len) == 1, "libcrypto: SHA-256 final failed");
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (unsigned int i = 0; i < len; ++i) s += {digits[digest[i] >> 4], digits[digest[i] & 15]};
  return s;
}

std::string sha256_hex(const void* data, size_t n) {
  Sha256 s;
  s.update(data, n);
  return s.hex();
}

std::string sha256_hex(const std::string& bytes) { return sha256_hex(bytes.data(), bytes.size()); }

bool sha256_fd(int fd, std::string& hex, int64_t& size) {
  Sha256 s;
  std::vector<unsigned char> buf(1 << 16);
  int64_t off = 0;
  for (;;) {
    const ssize_t n = ::pread(fd, buf.data(), buf.size(), off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) break;
    s.update(buf.data(), (size_t)n);
    off += n;
  }
  hex = s.hex();
  size = off;
  return true;
}

}  // namespace tbex::support
