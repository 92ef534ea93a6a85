// BLAKE3 (https://github.com/BLAKE3-team/BLAKE3-specs), the hash every Xet
// hash is built on: unkeyed and keyed modes, 32-byte output, fed
// incrementally. Written here (Debian ships no libblake3); checked against the
// official test vectors and b3sum (tests/xet_blake3_test.cpp).
//
// Whole 1 KiB chunks are hashed several at a time with SSE4.1 (4 lanes) or
// AVX2 (8 lanes) when the CPU has them (chosen once, at first use, with
// __builtin_cpu_supports); the portable code does everything else and is the
// whole implementation on other CPUs. Internal to the library.
//
// Thread-safety: a Blake3 object is a value without shared state; the free
// functions are pure. blake3_set_backend is for tests and benchmarks: call it
// before other threads hash.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>

namespace skippy::xet {

inline constexpr size_t kBlake3KeyBytes = 32;
inline constexpr size_t kBlake3OutBytes = 32;
using Blake3Key = std::array<uint8_t, kBlake3KeyBytes>;
using Blake3Digest = std::array<uint8_t, kBlake3OutBytes>;

class Blake3 {
 public:
  Blake3();                                 // the unkeyed hash
  explicit Blake3(const Blake3Key& key);    // the keyed hash

  void update(std::span<const uint8_t> data);
  // The digest of everything fed so far; the object may be fed more after.
  Blake3Digest finalize() const;
  // Back to empty, same mode and key.
  void reset();

 private:
  struct ChunkState {
    std::array<uint32_t, 8> cv;
    uint64_t counter;
    std::array<uint8_t, 64> block;
    uint8_t block_len;
    uint8_t blocks_compressed;
    size_t len() const { return size_t{blocks_compressed} * 64 + block_len; }
  };
  void start_chunk(uint64_t counter);
  void chunk_update(std::span<const uint8_t> data);
  void push_cv(const uint8_t cv[32], uint64_t chunk_counter);
  void merge_stack(uint64_t total_chunks);

  std::array<uint32_t, 8> key_;
  uint8_t flags_;
  ChunkState chunk_;
  // One chaining value per level of the tree, plus one not yet merged:
  // 2^54 chunks (16 EiB) is more than any input.
  uint8_t stack_[55][32];
  uint8_t stack_len_ = 0;
};

Blake3Digest blake3(std::span<const uint8_t> data);
Blake3Digest blake3_keyed(const Blake3Key& key, std::span<const uint8_t> data);

// Which code hashes whole chunks. kAuto is the best the CPU supports.
enum class Blake3Backend { kAuto, kPortable, kSse41, kAvx2 };
// The backend in use (never kAuto).
Blake3Backend blake3_backend();
// Selects a backend; false (and no change) when the CPU lacks it.
bool blake3_set_backend(Blake3Backend backend);
const char* blake3_backend_name(Blake3Backend backend);

}  // namespace skippy::xet
