// BLAKE3's compression for 8 inputs at once with AVX2 (see
// blake3_sse41.cpp for the layout). Compiled with a target attribute;
// blake3.cpp calls it only when the CPU has AVX2.
#include "xet/blake3_impl.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define SKIPPY_AVX2 __attribute__((target("avx2")))

namespace skippy::xet::blake3_detail {

namespace {

SKIPPY_AVX2 inline __m256i avx2_rot16(__m256i x) {
  return _mm256_shuffle_epi8(x, _mm256_setr_epi8(2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13,  //
                                                 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13));
}
SKIPPY_AVX2 inline __m256i avx2_rot8(__m256i x) {
  return _mm256_shuffle_epi8(x, _mm256_setr_epi8(1, 2, 3, 0, 5, 6, 7, 4, 9, 10, 11, 8, 13, 14, 15, 12,  //
                                                 1, 2, 3, 0, 5, 6, 7, 4, 9, 10, 11, 8, 13, 14, 15, 12));
}
SKIPPY_AVX2 inline __m256i avx2_rot12(__m256i x) {
  return _mm256_or_si256(_mm256_srli_epi32(x, 12), _mm256_slli_epi32(x, 20));
}
SKIPPY_AVX2 inline __m256i avx2_rot7(__m256i x) {
  return _mm256_or_si256(_mm256_srli_epi32(x, 7), _mm256_slli_epi32(x, 25));
}

SKIPPY_AVX2 inline void avx2_g(__m256i v[16], int a, int b, int c, int d, __m256i mx, __m256i my) {
  v[a] = _mm256_add_epi32(_mm256_add_epi32(v[a], v[b]), mx);
  v[d] = avx2_rot16(_mm256_xor_si256(v[d], v[a]));
  v[c] = _mm256_add_epi32(v[c], v[d]);
  v[b] = avx2_rot12(_mm256_xor_si256(v[b], v[c]));
  v[a] = _mm256_add_epi32(_mm256_add_epi32(v[a], v[b]), my);
  v[d] = avx2_rot8(_mm256_xor_si256(v[d], v[a]));
  v[c] = _mm256_add_epi32(v[c], v[d]);
  v[b] = avx2_rot7(_mm256_xor_si256(v[b], v[c]));
}

// Rows in, columns out: x[i] holds 8 words of input i; afterwards x[j]
// holds word j of inputs 0..7.
SKIPPY_AVX2 inline void avx2_transpose(__m256i x[8]) {
  // Pairs of rows interleaved word by word, then pairs of those by 64 bits:
  // each 128-bit half then holds 4 words of one column (rows 0-3 or 4-7).
  const __m256i ab_lo = _mm256_unpacklo_epi32(x[0], x[1]);
  const __m256i ab_hi = _mm256_unpackhi_epi32(x[0], x[1]);
  const __m256i cd_lo = _mm256_unpacklo_epi32(x[2], x[3]);
  const __m256i cd_hi = _mm256_unpackhi_epi32(x[2], x[3]);
  const __m256i ef_lo = _mm256_unpacklo_epi32(x[4], x[5]);
  const __m256i ef_hi = _mm256_unpackhi_epi32(x[4], x[5]);
  const __m256i gh_lo = _mm256_unpacklo_epi32(x[6], x[7]);
  const __m256i gh_hi = _mm256_unpackhi_epi32(x[6], x[7]);
  const __m256i abcd_0 = _mm256_unpacklo_epi64(ab_lo, cd_lo);  // words 0 | 4
  const __m256i abcd_1 = _mm256_unpackhi_epi64(ab_lo, cd_lo);  // words 1 | 5
  const __m256i abcd_2 = _mm256_unpacklo_epi64(ab_hi, cd_hi);  // words 2 | 6
  const __m256i abcd_3 = _mm256_unpackhi_epi64(ab_hi, cd_hi);  // words 3 | 7
  const __m256i efgh_0 = _mm256_unpacklo_epi64(ef_lo, gh_lo);
  const __m256i efgh_1 = _mm256_unpackhi_epi64(ef_lo, gh_lo);
  const __m256i efgh_2 = _mm256_unpacklo_epi64(ef_hi, gh_hi);
  const __m256i efgh_3 = _mm256_unpackhi_epi64(ef_hi, gh_hi);
  x[0] = _mm256_permute2x128_si256(abcd_0, efgh_0, 0x20);
  x[4] = _mm256_permute2x128_si256(abcd_0, efgh_0, 0x31);
  x[1] = _mm256_permute2x128_si256(abcd_1, efgh_1, 0x20);
  x[5] = _mm256_permute2x128_si256(abcd_1, efgh_1, 0x31);
  x[2] = _mm256_permute2x128_si256(abcd_2, efgh_2, 0x20);
  x[6] = _mm256_permute2x128_si256(abcd_2, efgh_2, 0x31);
  x[3] = _mm256_permute2x128_si256(abcd_3, efgh_3, 0x20);
  x[7] = _mm256_permute2x128_si256(abcd_3, efgh_3, 0x31);
}

SKIPPY_AVX2 void avx2_hash8(const uint8_t* const* inputs, size_t blocks, const uint32_t key[8], uint64_t counter,
                            bool increment_counter, uint8_t flags, uint8_t flags_start, uint8_t flags_end,
                            uint8_t* out) {
  __m256i h[8];
  for (int i = 0; i < 8; ++i) h[i] = _mm256_set1_epi32(static_cast<int>(key[i]));
  uint32_t lo[8], hi[8];
  for (int i = 0; i < 8; ++i) {
    const uint64_t c = counter + (increment_counter ? static_cast<uint64_t>(i) : 0);
    lo[i] = static_cast<uint32_t>(c);
    hi[i] = static_cast<uint32_t>(c >> 32);
  }
  const __m256i counter_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lo));
  const __m256i counter_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(hi));
  for (size_t b = 0; b < blocks; ++b) {
    uint8_t f = flags;
    if (b == 0) f |= flags_start;
    if (b + 1 == blocks) f |= flags_end;
    __m256i m[16];
    for (int half = 0; half < 2; ++half) {
      for (int i = 0; i < 8; ++i) {
        m[8 * half + i] =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(inputs[i] + b * kBlockLen + 32 * half));
      }
      avx2_transpose(m + 8 * half);
    }
    __m256i v[16] = {h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7],
                     _mm256_set1_epi32(static_cast<int>(kIv[0])), _mm256_set1_epi32(static_cast<int>(kIv[1])),
                     _mm256_set1_epi32(static_cast<int>(kIv[2])), _mm256_set1_epi32(static_cast<int>(kIv[3])),
                     counter_lo, counter_hi, _mm256_set1_epi32(static_cast<int>(kBlockLen)),
                     _mm256_set1_epi32(static_cast<int>(f))};
    for (const auto& s : kSchedule.word) {
      avx2_g(v, 0, 4, 8, 12, m[s[0]], m[s[1]]);
      avx2_g(v, 1, 5, 9, 13, m[s[2]], m[s[3]]);
      avx2_g(v, 2, 6, 10, 14, m[s[4]], m[s[5]]);
      avx2_g(v, 3, 7, 11, 15, m[s[6]], m[s[7]]);
      avx2_g(v, 0, 5, 10, 15, m[s[8]], m[s[9]]);
      avx2_g(v, 1, 6, 11, 12, m[s[10]], m[s[11]]);
      avx2_g(v, 2, 7, 8, 13, m[s[12]], m[s[13]]);
      avx2_g(v, 3, 4, 9, 14, m[s[14]], m[s[15]]);
    }
    for (int i = 0; i < 8; ++i) h[i] = _mm256_xor_si256(v[i], v[i + 8]);
  }
  avx2_transpose(h);
  for (int i = 0; i < 8; ++i) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 32 * i), h[i]);
}

}  // namespace

void hash_many_avx2(const uint8_t* const* inputs, size_t num_inputs, size_t blocks, const uint32_t key[8],
                    uint64_t counter, bool increment_counter, uint8_t flags, uint8_t flags_start,
                    uint8_t flags_end, uint8_t* out) {
  while (num_inputs >= 8) {
    avx2_hash8(inputs, blocks, key, counter, increment_counter, flags, flags_start, flags_end, out);
    inputs += 8;
    num_inputs -= 8;
    if (increment_counter) counter += 8;
    out += 8 * 32;
  }
  hash_many_sse41(inputs, num_inputs, blocks, key, counter, increment_counter, flags, flags_start, flags_end, out);
}

}  // namespace skippy::xet::blake3_detail

#endif  // __x86_64__
