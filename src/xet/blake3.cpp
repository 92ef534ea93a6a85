#include "xet/blake3.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>

#include "xet/blake3_impl.h"

namespace skippy::xet {

namespace blake3_detail {

namespace {

inline uint32_t blake3_rotr32(uint32_t w, int c) { return (w >> c) | (w << (32 - c)); }

inline void blake3_g(uint32_t s[16], int a, int b, int c, int d, uint32_t mx, uint32_t my) {
  s[a] = s[a] + s[b] + mx;
  s[d] = blake3_rotr32(s[d] ^ s[a], 16);
  s[c] = s[c] + s[d];
  s[b] = blake3_rotr32(s[b] ^ s[c], 12);
  s[a] = s[a] + s[b] + my;
  s[d] = blake3_rotr32(s[d] ^ s[a], 8);
  s[c] = s[c] + s[d];
  s[b] = blake3_rotr32(s[b] ^ s[c], 7);
}

}  // namespace

void compress(const uint32_t cv[8], const uint8_t block[kBlockLen], uint8_t block_len, uint64_t counter,
              uint8_t flags, uint32_t out[8]) {
  uint32_t m[16];
  for (int i = 0; i < 16; ++i) m[i] = load_le32(block + 4 * i);
  uint32_t s[16] = {cv[0], cv[1], cv[2], cv[3], cv[4], cv[5], cv[6], cv[7],
                    kIv[0], kIv[1], kIv[2], kIv[3],
                    static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32), block_len, flags};
  for (const auto& r : kSchedule.word) {
    blake3_g(s, 0, 4, 8, 12, m[r[0]], m[r[1]]);
    blake3_g(s, 1, 5, 9, 13, m[r[2]], m[r[3]]);
    blake3_g(s, 2, 6, 10, 14, m[r[4]], m[r[5]]);
    blake3_g(s, 3, 7, 11, 15, m[r[6]], m[r[7]]);
    blake3_g(s, 0, 5, 10, 15, m[r[8]], m[r[9]]);
    blake3_g(s, 1, 6, 11, 12, m[r[10]], m[r[11]]);
    blake3_g(s, 2, 7, 8, 13, m[r[12]], m[r[13]]);
    blake3_g(s, 3, 4, 9, 14, m[r[14]], m[r[15]]);
  }
  for (int i = 0; i < 8; ++i) out[i] = s[i] ^ s[i + 8];
}

void hash_many_portable(const uint8_t* const* inputs, size_t num_inputs, size_t blocks, const uint32_t key[8],
                        uint64_t counter, bool increment_counter, uint8_t flags, uint8_t flags_start,
                        uint8_t flags_end, uint8_t* out) {
  for (size_t i = 0; i < num_inputs; ++i) {
    uint32_t cv[8];
    std::memcpy(cv, key, sizeof cv);
    const uint64_t c = counter + (increment_counter ? i : 0);
    for (size_t b = 0; b < blocks; ++b) {
      uint8_t f = flags;
      if (b == 0) f |= flags_start;
      if (b + 1 == blocks) f |= flags_end;
      compress(cv, inputs[i] + b * kBlockLen, kBlockLen, c, f, cv);
    }
    for (int w = 0; w < 8; ++w) store_le32(out + 32 * i + 4 * w, cv[w]);
  }
}

}  // namespace blake3_detail

using namespace blake3_detail;

namespace {

// The kernel for whole chunks and levels of parents, chosen at first use.
std::atomic<Blake3Backend> g_blake3_backend{Blake3Backend::kAuto};

bool blake3_cpu_has(Blake3Backend b) {
#if defined(__x86_64__)
  __builtin_cpu_init();
  switch (b) {
    case Blake3Backend::kAvx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("sse4.1");
    case Blake3Backend::kSse41: return __builtin_cpu_supports("sse4.1");
    case Blake3Backend::kAuto:
    case Blake3Backend::kPortable: return true;
  }
  return false;
#else
  return b == Blake3Backend::kPortable || b == Blake3Backend::kAuto;
#endif
}

Blake3Backend resolved_backend() {
  Blake3Backend b = g_blake3_backend.load(std::memory_order_relaxed);
  if (b != Blake3Backend::kAuto) return b;
  b = blake3_cpu_has(Blake3Backend::kAvx2)    ? Blake3Backend::kAvx2
      : blake3_cpu_has(Blake3Backend::kSse41) ? Blake3Backend::kSse41
                                       : Blake3Backend::kPortable;
  g_blake3_backend.store(b, std::memory_order_relaxed);
  return b;
}

HashManyFn hash_many_fn() {
  switch (resolved_backend()) {
#if defined(__x86_64__)
    case Blake3Backend::kAvx2: return hash_many_avx2;
    case Blake3Backend::kSse41: return hash_many_sse41;
#endif
    default: return hash_many_portable;
  }
}

void blake3_words_to_bytes(const uint32_t w[8], uint8_t out[32]) {
  for (int i = 0; i < 8; ++i) store_le32(out + 4 * i, w[i]);
}

// Subtrees hashed in one go hold at most this many chunks: a level of their
// chaining values lives on the stack (8 KiB).
constexpr size_t kMaxSubtreeChunks = 256;

// The two children of the subtree over `n` whole chunks (n a power of two,
// n >= 2) starting at chunk `counter`: all chunks through the wide kernel,
// then each level of parents the same way.
void subtree_children(HashManyFn hash_many, const uint8_t* input, size_t n, const uint32_t key[8], uint64_t counter,
                      uint8_t flags, uint8_t left[32], uint8_t right[32]) {
  alignas(64) uint8_t cvs[kMaxSubtreeChunks * 32];
  const uint8_t* ptrs[kMaxSubtreeChunks];
  for (size_t i = 0; i < n; ++i) ptrs[i] = input + i * kChunkLen;
  hash_many(ptrs, n, kChunkLen / kBlockLen, key, counter, true, flags, kChunkStart, kChunkEnd, cvs);
  while (n > 2) {
    n /= 2;
    for (size_t i = 0; i < n; ++i) ptrs[i] = cvs + 64 * i;
    hash_many(ptrs, n, 1, key, 0, false, flags | kParent, 0, 0, cvs);
  }
  std::memcpy(left, cvs, 32);
  std::memcpy(right, cvs + 32, 32);
}

// A node's compression input, not yet turned into its chaining value or
// the root digest.
struct Blake3Output {
  uint32_t cv[8];
  uint8_t block[kBlockLen];
  uint8_t block_len;
  uint64_t counter;
  uint8_t flags;

  void chaining_value(uint8_t out[32]) const {
    uint32_t w[8];
    compress(cv, block, block_len, counter, flags, w);
    blake3_words_to_bytes(w, out);
  }
  Blake3Digest root() const {
    uint32_t w[8];
    compress(cv, block, block_len, 0, flags | kRoot, w);
    Blake3Digest d;
    blake3_words_to_bytes(w, d.data());
    return d;
  }
};

Blake3Output blake3_parent_output(const uint8_t left[32], const uint8_t right[32], const uint32_t key[8], uint8_t flags) {
  Blake3Output o{};
  std::memcpy(o.cv, key, sizeof o.cv);
  std::memcpy(o.block, left, 32);
  std::memcpy(o.block + 32, right, 32);
  o.block_len = kBlockLen;
  o.counter = 0;
  o.flags = flags | kParent;
  return o;
}

}  // namespace

Blake3::Blake3() : flags_(0) {
  std::memcpy(key_.data(), kIv, sizeof kIv);
  reset();
}

Blake3::Blake3(const Blake3Key& key) : flags_(kKeyedHash) {
  for (int i = 0; i < 8; ++i) key_[i] = load_le32(key.data() + 4 * i);
  reset();
}

void Blake3::reset() {
  stack_len_ = 0;
  start_chunk(0);
}

void Blake3::start_chunk(uint64_t counter) {
  chunk_.cv = key_;
  chunk_.counter = counter;
  chunk_.block_len = 0;
  chunk_.blocks_compressed = 0;
}

void Blake3::chunk_update(std::span<const uint8_t> data) {
  while (!data.empty()) {
    if (chunk_.block_len == kBlockLen) {  // full, and more follows: not the chunk's last block
      const uint8_t f = flags_ | (chunk_.blocks_compressed == 0 ? kChunkStart : 0);
      compress(chunk_.cv.data(), chunk_.block.data(), kBlockLen, chunk_.counter, f, chunk_.cv.data());
      ++chunk_.blocks_compressed;
      chunk_.block_len = 0;
    }
    const size_t take = std::min(kBlockLen - chunk_.block_len, data.size());
    std::memcpy(chunk_.block.data() + chunk_.block_len, data.data(), take);
    chunk_.block_len = static_cast<uint8_t>(chunk_.block_len + take);
    data = data.subspan(take);
  }
}

// Completed subtrees merge lazily: before a chaining value that starts at
// chunk `total_chunks` is pushed, the stack is reduced to one entry per set
// bit of that count. The newest entry stays unmerged, so the last subtree
// pushed can still turn out to be one of the root's children.
void Blake3::merge_stack(uint64_t total_chunks) {
  const int keep = std::popcount(total_chunks);
  while (stack_len_ > keep) {
    uint8_t cv[32];
    blake3_parent_output(stack_[stack_len_ - 2], stack_[stack_len_ - 1], key_.data(), flags_).chaining_value(cv);
    std::memcpy(stack_[stack_len_ - 2], cv, 32);
    --stack_len_;
  }
}

void Blake3::push_cv(const uint8_t cv[32], uint64_t chunk_counter) {
  merge_stack(chunk_counter);
  std::memcpy(stack_[stack_len_], cv, 32);
  ++stack_len_;
}

void Blake3::update(std::span<const uint8_t> data) {
  if (chunk_.len() > 0) {
    const size_t take = std::min(kChunkLen - chunk_.len(), data.size());
    chunk_update(data.first(take));
    data = data.subspan(take);
    if (data.empty()) return;
    // The chunk is full and more follows: it is not the root.
    Blake3Output o{};
    std::memcpy(o.cv, chunk_.cv.data(), sizeof o.cv);
    std::memcpy(o.block, chunk_.block.data(), kBlockLen);
    o.block_len = chunk_.block_len;
    o.counter = chunk_.counter;
    o.flags = flags_ | kChunkEnd | (chunk_.blocks_compressed == 0 ? kChunkStart : 0);
    uint8_t cv[32];
    o.chaining_value(cv);
    push_cv(cv, chunk_.counter);
    start_chunk(chunk_.counter + 1);
  }
  const HashManyFn hash_many = data.size() > kChunkLen ? hash_many_fn() : nullptr;
  while (data.size() > kChunkLen) {
    // The largest power-of-two run of whole chunks that is aligned in the
    // tree (starts at a multiple of its size) and fits in what is left.
    const uint64_t counter = chunk_.counter;
    size_t n = std::min(std::bit_floor(data.size() / kChunkLen), kMaxSubtreeChunks);
    while ((counter & (n - 1)) != 0) n /= 2;
    if (n == 1) {  // more input follows (the loop's condition): not the root
      uint8_t cv[32];
      const uint8_t* p = data.data();
      hash_many(&p, 1, kChunkLen / kBlockLen, key_.data(), counter, true, flags_, kChunkStart, kChunkEnd, cv);
      push_cv(cv, counter);
    } else {
      // Both children, not their parent: if the input ends with this run,
      // that parent is the root and needs the root flag.
      uint8_t left[32], right[32];
      subtree_children(hash_many, data.data(), n, key_.data(), counter, flags_, left, right);
      push_cv(left, counter);
      push_cv(right, counter + n / 2);
    }
    start_chunk(counter + n);
    data = data.subspan(n * kChunkLen);
  }
  if (!data.empty()) {
    merge_stack(chunk_.counter);
    chunk_update(data);
  }
}

Blake3Digest Blake3::finalize() const {
  Blake3Output o{};
  std::memcpy(o.cv, chunk_.cv.data(), sizeof o.cv);
  std::memcpy(o.block, chunk_.block.data(), chunk_.block_len);  // zero-padded by Blake3Output{}
  o.block_len = chunk_.block_len;
  o.counter = chunk_.counter;
  o.flags = flags_ | kChunkEnd | (chunk_.blocks_compressed == 0 ? kChunkStart : 0);
  if (stack_len_ == 0) return o.root();  // one chunk (or none): it is the root
  size_t remaining = stack_len_;
  if (chunk_.len() == 0) {
    // The input ended with a pushed run: the top two entries are siblings.
    o = blake3_parent_output(stack_[remaining - 2], stack_[remaining - 1], key_.data(), flags_);
    remaining -= 2;
  }
  while (remaining > 0) {
    uint8_t cv[32];
    o.chaining_value(cv);
    o = blake3_parent_output(stack_[remaining - 1], cv, key_.data(), flags_);
    --remaining;
  }
  return o.root();
}

Blake3Digest blake3(std::span<const uint8_t> data) {
  Blake3 h;
  h.update(data);
  return h.finalize();
}

Blake3Digest blake3_keyed(const Blake3Key& key, std::span<const uint8_t> data) {
  Blake3 h(key);
  h.update(data);
  return h.finalize();
}

Blake3Backend blake3_backend() { return resolved_backend(); }

bool blake3_set_backend(Blake3Backend backend) {
  if (!blake3_cpu_has(backend)) return false;
  g_blake3_backend.store(backend, std::memory_order_relaxed);
  return true;
}

const char* blake3_backend_name(Blake3Backend backend) {
  switch (backend) {
    case Blake3Backend::kAuto: return "auto";
    case Blake3Backend::kPortable: return "portable";
    case Blake3Backend::kSse41: return "sse4.1";
    case Blake3Backend::kAvx2: return "avx2";
  }
  return "?";
}

}  // namespace skippy::xet
