// SHA-256 through OpenSSL (SHA-NI / AVX2 paths where the CPU has them).
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <string_view>

namespace skippy {

// An OpenSSL message digest, fed incrementally.
class Digest {
 public:
  enum class Algorithm { kSha256, kSha1 };
  explicit Digest(Algorithm algorithm);
  ~Digest();
  Digest(Digest&&) noexcept;
  Digest& operator=(Digest&&) noexcept;
  Digest(const Digest&) = delete;
  Digest& operator=(const Digest&) = delete;

  void update(std::span<const uint8_t> data);
  void update(std::string_view data) {
    update({reinterpret_cast<const uint8_t*>(data.data()), data.size()});
  }
  // Lowercase hex; the object is finished after this.
  std::string hex_digest();

 private:
  void* ctx_;
};

class Sha256 : public Digest {
 public:
  Sha256() : Digest(Algorithm::kSha256) {}
};

// git's blob id: SHA-1 over "blob <size>\0" and the contents. The Hub names
// files outside LFS by it (their ETag).
class GitBlobId : public Digest {
 public:
  explicit GitBlobId(uint64_t size);
};

std::string sha256_hex(std::span<const uint8_t> data);
std::string sha256_hex(std::string_view data);

// Streams a file through SHA-256 with large sequential reads; calls
// `on_bytes(n)` after each chunk (progress). Throws Error naming the file.
std::string sha256_file(const std::filesystem::path& path,
                        const std::function<void(uint64_t)>& on_bytes = {});

// True for 64 hex digits, either case.
bool is_sha256_hex(std::string_view s) noexcept;
// Case-insensitive comparison of two hex digests.
bool sha256_equal(std::string_view a, std::string_view b) noexcept;

}  // namespace skippy
