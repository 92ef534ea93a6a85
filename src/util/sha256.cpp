#include "util/sha256.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <memory>
#include <vector>

#include "skippy/error.h"
#include "util/file.h"

namespace skippy {

namespace {
EVP_MD_CTX* ctx_of(void* p) { return static_cast<EVP_MD_CTX*>(p); }
}  // namespace

Digest::Digest(Algorithm algorithm) : ctx_(EVP_MD_CTX_new()) {
  const EVP_MD* md = algorithm == Algorithm::kSha1 ? EVP_sha1() : EVP_sha256();
  if (ctx_ == nullptr || EVP_DigestInit_ex(ctx_of(ctx_), md, nullptr) != 1) {
    throw Error(ErrorKind::kIo, "OpenSSL: cannot initialise the digest");
  }
}

Digest::~Digest() { EVP_MD_CTX_free(ctx_of(ctx_)); }

Digest::Digest(Digest&& o) noexcept : ctx_(o.ctx_) { o.ctx_ = nullptr; }
Digest& Digest::operator=(Digest&& o) noexcept {
  if (this != &o) {
    EVP_MD_CTX_free(ctx_of(ctx_));
    ctx_ = o.ctx_;
    o.ctx_ = nullptr;
  }
  return *this;
}

void Digest::update(std::span<const uint8_t> data) {
  if (!data.empty()) EVP_DigestUpdate(ctx_of(ctx_), data.data(), data.size());
}

std::string Digest::hex_digest() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx_of(ctx_), md, &len);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(len * 2, '0');
  for (unsigned i = 0; i < len; ++i) {
    out[2 * i] = kHex[md[i] >> 4];
    out[2 * i + 1] = kHex[md[i] & 15];
  }
  return out;
}

GitBlobId::GitBlobId(uint64_t size) : Digest(Algorithm::kSha1) {
  const std::string header = "blob " + std::to_string(size);
  update({reinterpret_cast<const uint8_t*>(header.c_str()), header.size() + 1});  // with its NUL
}

std::string sha256_hex(std::span<const uint8_t> data) {
  Sha256 h;
  h.update(data);
  return h.hex_digest();
}

std::string sha256_hex(std::string_view data) {
  Sha256 h;
  h.update(data);
  return h.hex_digest();
}

std::string sha256_file(const std::filesystem::path& path, const std::function<void(uint64_t)>& on_bytes) {
  const Fd fd = open_regular_file(path);
  ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  constexpr size_t kChunk = 1u << 20;  // hashed while still in the core's L2 cache
  std::unique_ptr<uint8_t[]> buf(new uint8_t[kChunk]);
  Sha256 h;
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf.get(), kChunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_io(path.string() + ": read failed");
    }
    if (n == 0) break;
    h.update({buf.get(), static_cast<size_t>(n)});
    if (on_bytes) on_bytes(static_cast<uint64_t>(n));
  }
  return h.hex_digest();
}

bool is_sha256_hex(std::string_view s) noexcept {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

bool sha256_equal(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  }
  return true;
}

}  // namespace skippy
