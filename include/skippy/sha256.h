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

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void update(std::span<const uint8_t> data);
  void update(std::string_view data) {
    update({reinterpret_cast<const uint8_t*>(data.data()), data.size()});
  }
  // Lowercase hex; the object is finished after this.
  std::string hex_digest();

 private:
  void* ctx_;
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
