// BLAKE3's constants and the kernels that hash many inputs at once, shared by
// blake3.cpp (portable, dispatch) and the SIMD files. Plain C-like code: the
// SIMD files compile their kernels with target attributes, so nothing here may
// pull in library templates. Internal to the library.
#pragma once

#include <cstddef>
#include <cstdint>

namespace skippy::xet::blake3_detail {

inline constexpr size_t kBlockLen = 64;
inline constexpr size_t kChunkLen = 1024;

enum : uint8_t {
  kChunkStart = 1 << 0,
  kChunkEnd = 1 << 1,
  kParent = 1 << 2,
  kRoot = 1 << 3,
  kKeyedHash = 1 << 4,
};

inline constexpr uint32_t kIv[8] = {0x6A09E667u, 0xBB67AE85u, 0x3C6EF372u, 0xA54FF53Au,
                                    0x510E527Fu, 0x9B05688Cu, 0x1F83D9ABu, 0x5BE0CD19u};

// The message word each of the 7 rounds reads at position i: round 0 reads
// them in order, each later round applies BLAKE3's permutation to the one
// before.
struct MessageSchedule {
  uint8_t word[7][16];
};
constexpr MessageSchedule make_message_schedule() {
  constexpr uint8_t kPermutation[16] = {2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8};
  MessageSchedule s{};
  for (uint8_t i = 0; i < 16; ++i) s.word[0][i] = i;
  for (int r = 1; r < 7; ++r) {
    for (int i = 0; i < 16; ++i) s.word[r][i] = s.word[r - 1][kPermutation[i]];
  }
  return s;
}
inline constexpr MessageSchedule kSchedule = make_message_schedule();

inline uint32_t load_le32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}
inline void store_le32(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
  p[2] = static_cast<uint8_t>(v >> 16);
  p[3] = static_cast<uint8_t>(v >> 24);
}

// The compression function: the 16-word state after 7 rounds, folded to
// the 8-word chaining value (out[i] = s[i] ^ s[i + 8]).
void compress(const uint32_t cv[8], const uint8_t block[kBlockLen], uint8_t block_len, uint64_t counter,
              uint8_t flags, uint32_t out[8]);

// Hashes `num_inputs` inputs of `blocks` whole blocks each (a chunk: 16
// blocks, flags_start = kChunkStart, flags_end = kChunkEnd; a parent: 1 block
// holding two chaining values, flags including kParent) and writes each
// input's 32-byte chaining value to out + 32 * i. Input i uses counter + i
// when increment_counter, else counter. `out` may overlap the inputs only as
// a level of parents does: output i over the bytes of inputs 2i and 2i + 1.
using HashManyFn = void (*)(const uint8_t* const* inputs, size_t num_inputs, size_t blocks, const uint32_t key[8],
                            uint64_t counter, bool increment_counter, uint8_t flags, uint8_t flags_start,
                            uint8_t flags_end, uint8_t* out);

void hash_many_portable(const uint8_t* const* inputs, size_t num_inputs, size_t blocks, const uint32_t key[8],
                        uint64_t counter, bool increment_counter, uint8_t flags, uint8_t flags_start,
                        uint8_t flags_end, uint8_t* out);
#if defined(__x86_64__)
// 4 inputs at a time (then the portable code for the rest).
void hash_many_sse41(const uint8_t* const* inputs, size_t num_inputs, size_t blocks, const uint32_t key[8],
                     uint64_t counter, bool increment_counter, uint8_t flags, uint8_t flags_start,
                     uint8_t flags_end, uint8_t* out);
// 8 inputs at a time, then 4 with SSE4.1, then the portable code.
void hash_many_avx2(const uint8_t* const* inputs, size_t num_inputs, size_t blocks, const uint32_t key[8],
                    uint64_t counter, bool increment_counter, uint8_t flags, uint8_t flags_start,
                    uint8_t flags_end, uint8_t* out);
#endif

}  // namespace skippy::xet::blake3_detail
