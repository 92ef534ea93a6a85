// Xet's hashes (hub-docs docs/xet/hashing.md; xet-core merklehash/): every
// one is 32 bytes of keyed BLAKE3.
//   chunk hash         keyed with DATA_KEY over the chunk's bytes
//   xorb hash          the root of a Merkle tree over (chunk hash, length)
//                      pairs; internal nodes keyed with INTERNAL_NODE_KEY
//                      over lines "{hash hex} : {length}\n"
//   file hash          that root hashed again, keyed with 32 zero bytes (a
//                      file with no bytes: all zeros)
//   verification hash  keyed with VERIFICATION_KEY over the raw chunk hashes
//                      of one term's chunk range (one per shard term)
//   keyed_hash         a chunk hash keyed with a dedupe shard's HMAC key
// Internal to the library.
//
// Thread-safety: Hash is a value; the functions are pure; a MerkleHasher is
// a value without shared state.
#pragma once

#include <array>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "xet/blake3.h"

namespace skippy::xet {

struct Hash {
  std::array<uint8_t, 32> bytes{};

  // Word i (0..3) of the hash read as a little-endian u64: xet-core keeps a
  // hash as [u64; 4] and every rule (the Merkle cut, dedupe eligibility,
  // ordering, hex) works on these words.
  uint64_t word(size_t i) const;
  bool is_zero() const;
  // The form every Xet API, JSON document and reference file uses: each
  // word printed as 16 lowercase hex digits of its value (so the bytes of
  // each 8-byte group appear reversed).
  std::string to_hex() const;
  // Parses that form; nullopt unless exactly 64 hex digits (either case).
  static std::optional<Hash> from_hex(std::string_view hex);

  friend bool operator==(const Hash&, const Hash&) = default;
  // xet-core's order (words compared as numbers, word 0 first).
  friend std::strong_ordering operator<=>(const Hash& a, const Hash& b);
};

struct HashHasher {
  size_t operator()(const Hash& h) const noexcept { return static_cast<size_t>(h.word(0)); }
};

// A chunk as the Merkle tree sees it.
struct ChunkRef {
  Hash hash;
  uint64_t length = 0;
};

// The keys (hub-docs hashing.md; xet-core data_hash.rs, chunk_verification.rs).
extern const Blake3Key kDataKey;
extern const Blake3Key kInternalNodeKey;
extern const Blake3Key kVerificationKey;

Hash chunk_hash(std::span<const uint8_t> data);
// All zeros for no chunks; the chunk's own hash for one.
Hash xorb_hash(std::span<const ChunkRef> chunks);
// All zeros for no chunks (an empty file).
Hash file_hash(std::span<const ChunkRef> chunks);
Hash verification_hash(std::span<const Hash> chunk_hashes);
// BLAKE3 of `message`'s 32 bytes keyed with `key`'s: the HMAC of a dedupe
// shard's chunk hashes (its footer's chunk_hash_hmac_key), and the file hash
// step (a zero key).
Hash keyed_hash(const Hash& key, const Hash& message);

// A chunk the global dedupe index may hold besides a file's first chunk:
// word 3 divisible by 1024 (xet-core metadata_shard/constants.rs).
bool is_global_dedupe_eligible(const Hash& chunk_hash);

// A SHA-256 digest as Xet stores it (a shard's FileMetadataExt): each 8-byte
// word byte-reversed, so that to_hex() prints the usual SHA-256 hex.
Hash sha256_digest_as_hash(std::span<const uint8_t, 32> digest);

// The Merkle root over chunks fed one at a time, in memory proportional to
// the tree's depth (a file of millions of chunks keeps a few hundred bytes):
// the same value as xorb_hash / file_hash over the whole list.
class MerkleHasher {
 public:
  void add(const Hash& chunk_hash, uint64_t length);
  void add(const ChunkRef& chunk) { add(chunk.hash, chunk.length); }
  uint64_t chunk_count() const { return count_; }
  uint64_t total_length() const { return total_; }
  // The xorb hash of what was added (all zeros for nothing); the object
  // may be fed more after.
  Hash root() const;
  // The file hash of what was added.
  Hash file_hash() const;

 private:
  struct Level {
    std::vector<ChunkRef> pending;  // the open group: at most 9 nodes
    uint64_t emitted = 0;           // nodes of this level in groups already closed
  };
  void push(size_t level, const ChunkRef& node);
  std::vector<Level> levels_;
  uint64_t count_ = 0;
  uint64_t total_ = 0;
};

}  // namespace skippy::xet
