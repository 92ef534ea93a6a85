// BLAKE3's compression for 4 inputs at once with SSE4.1: lane i of each
// vector holds input i's state word, so one instruction advances all four.
// Compiled with a target attribute (only the kernel uses SSE4.1); blake3.cpp
// calls it only when the CPU has it.
#include "xet/blake3_impl.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define SKIPPY_SSE41 __attribute__((target("sse4.1")))

namespace skippy::xet::blake3_detail {

namespace {

SKIPPY_SSE41 inline __m128i sse41_rot16(__m128i x) {
  return _mm_shuffle_epi8(x, _mm_setr_epi8(2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13));
}
SKIPPY_SSE41 inline __m128i sse41_rot8(__m128i x) {
  return _mm_shuffle_epi8(x, _mm_setr_epi8(1, 2, 3, 0, 5, 6, 7, 4, 9, 10, 11, 8, 13, 14, 15, 12));
}
SKIPPY_SSE41 inline __m128i sse41_rot12(__m128i x) { return _mm_or_si128(_mm_srli_epi32(x, 12), _mm_slli_epi32(x, 20)); }
SKIPPY_SSE41 inline __m128i sse41_rot7(__m128i x) { return _mm_or_si128(_mm_srli_epi32(x, 7), _mm_slli_epi32(x, 25)); }

SKIPPY_SSE41 inline void sse41_g(__m128i v[16], int a, int b, int c, int d, __m128i mx, __m128i my) {
  v[a] = _mm_add_epi32(_mm_add_epi32(v[a], v[b]), mx);
  v[d] = sse41_rot16(_mm_xor_si128(v[d], v[a]));
  v[c] = _mm_add_epi32(v[c], v[d]);
  v[b] = sse41_rot12(_mm_xor_si128(v[b], v[c]));
  v[a] = _mm_add_epi32(_mm_add_epi32(v[a], v[b]), my);
  v[d] = sse41_rot8(_mm_xor_si128(v[d], v[a]));
  v[c] = _mm_add_epi32(v[c], v[d]);
  v[b] = sse41_rot7(_mm_xor_si128(v[b], v[c]));
}

// Rows in, columns out: x[i] holds 4 words of input i; afterwards x[j]
// holds word j of inputs 0..3.
SKIPPY_SSE41 inline void sse41_transpose(__m128i x[4]) {
  const __m128i ab01 = _mm_unpacklo_epi32(x[0], x[1]);
  const __m128i ab23 = _mm_unpackhi_epi32(x[0], x[1]);
  const __m128i cd01 = _mm_unpacklo_epi32(x[2], x[3]);
  const __m128i cd23 = _mm_unpackhi_epi32(x[2], x[3]);
  x[0] = _mm_unpacklo_epi64(ab01, cd01);
  x[1] = _mm_unpackhi_epi64(ab01, cd01);
  x[2] = _mm_unpacklo_epi64(ab23, cd23);
  x[3] = _mm_unpackhi_epi64(ab23, cd23);
}

SKIPPY_SSE41 void sse41_hash4(const uint8_t* const* inputs, size_t blocks, const uint32_t key[8], uint64_t counter,
                              bool increment_counter, uint8_t flags, uint8_t flags_start, uint8_t flags_end,
                              uint8_t* out) {
  __m128i h[8];
  for (int i = 0; i < 8; ++i) h[i] = _mm_set1_epi32(static_cast<int>(key[i]));
  uint32_t lo[4], hi[4];
  for (int i = 0; i < 4; ++i) {
    const uint64_t c = counter + (increment_counter ? static_cast<uint64_t>(i) : 0);
    lo[i] = static_cast<uint32_t>(c);
    hi[i] = static_cast<uint32_t>(c >> 32);
  }
  const __m128i counter_lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(lo));
  const __m128i counter_hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(hi));
  for (size_t b = 0; b < blocks; ++b) {
    uint8_t f = flags;
    if (b == 0) f |= flags_start;
    if (b + 1 == blocks) f |= flags_end;
    __m128i m[16];
    for (int q = 0; q < 4; ++q) {
      for (int i = 0; i < 4; ++i) {
        m[4 * q + i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(inputs[i] + b * kBlockLen + 16 * q));
      }
      sse41_transpose(m + 4 * q);
    }
    __m128i v[16] = {h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7],
                     _mm_set1_epi32(static_cast<int>(kIv[0])), _mm_set1_epi32(static_cast<int>(kIv[1])),
                     _mm_set1_epi32(static_cast<int>(kIv[2])), _mm_set1_epi32(static_cast<int>(kIv[3])),
                     counter_lo, counter_hi, _mm_set1_epi32(static_cast<int>(kBlockLen)),
                     _mm_set1_epi32(static_cast<int>(f))};
    for (const auto& s : kSchedule.word) {
      sse41_g(v, 0, 4, 8, 12, m[s[0]], m[s[1]]);
      sse41_g(v, 1, 5, 9, 13, m[s[2]], m[s[3]]);
      sse41_g(v, 2, 6, 10, 14, m[s[4]], m[s[5]]);
      sse41_g(v, 3, 7, 11, 15, m[s[6]], m[s[7]]);
      sse41_g(v, 0, 5, 10, 15, m[s[8]], m[s[9]]);
      sse41_g(v, 1, 6, 11, 12, m[s[10]], m[s[11]]);
      sse41_g(v, 2, 7, 8, 13, m[s[12]], m[s[13]]);
      sse41_g(v, 3, 4, 9, 14, m[s[14]], m[s[15]]);
    }
    for (int i = 0; i < 8; ++i) h[i] = _mm_xor_si128(v[i], v[i + 8]);
  }
  sse41_transpose(h);
  sse41_transpose(h + 4);
  for (int i = 0; i < 4; ++i) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 32 * i), h[i]);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 32 * i + 16), h[4 + i]);
  }
}

}  // namespace

void hash_many_sse41(const uint8_t* const* inputs, size_t num_inputs, size_t blocks, const uint32_t key[8],
                     uint64_t counter, bool increment_counter, uint8_t flags, uint8_t flags_start,
                     uint8_t flags_end, uint8_t* out) {
  while (num_inputs >= 4) {
    sse41_hash4(inputs, blocks, key, counter, increment_counter, flags, flags_start, flags_end, out);
    inputs += 4;
    num_inputs -= 4;
    if (increment_counter) counter += 4;
    out += 4 * 32;
  }
  hash_many_portable(inputs, num_inputs, blocks, key, counter, increment_counter, flags, flags_start, flags_end,
                     out);
}

}  // namespace skippy::xet::blake3_detail

#endif  // __x86_64__
