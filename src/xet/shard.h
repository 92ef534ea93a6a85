// Shards (MDB shard format): how a client records files (their terms over
// xorb chunk ranges) and the xorbs it created, and how the CAS answers a
// global dedupe query (hub-docs docs/xet/shard.md; xet-core
// metadata_shard/shard_format.rs, file_structs.rs, xorb_structs.rs,
// streaming_shard.rs). All integers little-endian; every entry 48 bytes:
//   header      tag "HFRepoMetaData\0" + 17 magic bytes, u64 version 2,
//               u64 footer size (0: no footer, which an upload must use)
//   files       per file: file hash, u32 flags (1<<31 verification entries
//               follow, 1<<30 a metadata extension follows), u32 terms, 8 zero;
//               per term: xorb hash, u32 flags, u32 uncompressed bytes,
//               u32 first chunk, u32 end chunk (exclusive); then one
//               verification entry per term (hash, 16 zero); then the
//               metadata extension (the file's SHA-256, 16 zero)
//               ... ended by a bookend: 32 bytes 0xFF, 16 zero
//   xorbs       per xorb: xorb hash, u32 flags, u32 chunks, u32 uncompressed
//               bytes, u32 serialized bytes; per chunk: chunk hash,
//               u32 uncompressed offset in the xorb, u32 uncompressed bytes,
//               u32 flags (1<<31: the CAS marks a file's first chunk), 4 zero
//               ... ended by a bookend
//   [lookup tables, then the 200-byte footer: u64 version 1, u64 offsets of
//    the file and xorb sections, 6 u64 of lookup-table offsets and counts,
//    the chunk-hash HMAC key (32), u64 creation time, u64 key expiry,
//    6 u64 reserved, u64 stored bytes on disk, u64 materialized bytes,
//    u64 stored bytes, u64 the footer's offset]
// A dedupe shard's chunk hashes are keyed with the footer's HMAC key
// (keyed_hash in hash.h) unless the key is all zeros. The SHA-256 is stored
// as xet-core's DataHash::from_be_bytes does: each 8-byte word reversed.
//
// Parsing treats the bytes as hostile: counts are checked against what is
// left before anything is reserved, offsets against the layout, and every
// error (Error(kInvalidInput)) names the caller's `what`, the entry and the
// byte offset.
//
// Thread-safety: values; ShardBuilder is for one thread at a time.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "xet/hash.h"

namespace skippy::xet {

struct BuiltXorb;

inline constexpr size_t kShardHeaderBytes = 48;
inline constexpr size_t kShardFooterBytes = 200;
inline constexpr size_t kShardEntryBytes = 48;
inline constexpr size_t kShardMaxBytes = 64u << 20;
inline constexpr uint32_t kShardFileWithVerification = 1u << 31;
inline constexpr uint32_t kShardFileWithMetadataExt = 1u << 30;
inline constexpr uint32_t kShardChunkGlobalDedupe = 1u << 31;

struct ShardTerm {
  Hash xorb_hash;
  uint32_t flags = 0;
  uint32_t unpacked_bytes = 0;
  uint32_t chunk_start = 0;
  uint32_t chunk_end = 0;  // exclusive
};

struct ShardFile {
  Hash file_hash;
  std::vector<ShardTerm> terms;
  std::vector<Hash> verification;                 // one per term, or none
  std::optional<std::array<uint8_t, 32>> sha256;  // the SHA-256 digest, usual byte order

  uint64_t size() const;  // the sum of the terms' bytes
};

struct ShardChunk {
  Hash hash;
  uint32_t unpacked_offset = 0;
  uint32_t size = 0;
  uint32_t flags = 0;
};

struct ShardXorb {
  Hash hash;
  uint32_t flags = 0;
  uint32_t unpacked_bytes = 0;
  uint32_t serialized_bytes = 0;  // xet-core's client writes 0, huggingface.js the xorb's length
  std::vector<ShardChunk> chunks;
};

struct ShardFooter {
  Hash chunk_hash_key;  // all zeros: the chunk hashes are plain
  uint64_t created = 0;
  uint64_t key_expiry = 0;
  // Filled in by serialize_shard; as read by parse_shard.
  uint64_t stored_bytes_on_disk = 0;
  uint64_t materialized_bytes = 0;
  uint64_t stored_bytes = 0;
};

struct Shard {
  std::vector<ShardFile> files;
  std::vector<ShardXorb> xorbs;
  std::optional<ShardFooter> footer;  // none: an upload shard
};

struct XorbIndex;
// The CAS info block of a xorb: one this client built, or one parse_xorb read
// (with the length of its serialized bytes).
ShardXorb shard_xorb(const BuiltXorb& xorb);
ShardXorb shard_xorb(const XorbIndex& index, size_t serialized_bytes);

// The bytes of `shard`: with a footer when it has one (then without lookup
// tables, as the CAS's own dedupe shards are written), else in the upload
// form (header footer size 0, nothing after the xorb section's bookend).
std::vector<uint8_t> serialize_shard(const Shard& shard);

// Bytes a file or xorb adds to a shard.
size_t shard_file_bytes(const ShardFile& file);
size_t shard_xorb_bytes(const ShardXorb& xorb);

// Collects an upload shard: every file with one verification entry per term
// (the upload protocol requires them), and the xorbs this upload created.
// fits_* say whether the shard stays within 64 MiB with it.
class ShardBuilder {
 public:
  // `max_bytes`: the shard's limit (tests use a smaller one).
  explicit ShardBuilder(size_t max_bytes = kShardMaxBytes) : max_bytes_(max_bytes) {}
  bool empty() const noexcept { return shard_.files.empty() && shard_.xorbs.empty(); }
  size_t bytes() const noexcept { return bytes_; }
  bool fits_file(const ShardFile& file) const noexcept { return bytes_ + shard_file_bytes(file) <= max_bytes_; }
  bool fits_xorb(const ShardXorb& xorb) const noexcept { return bytes_ + shard_xorb_bytes(xorb) <= max_bytes_; }
  // Error(kUsage) when it does not fit, lacks verification entries or has an empty term.
  void add_file(ShardFile file);
  void add_xorb(ShardXorb xorb);
  const Shard& shard() const noexcept { return shard_; }
  // The upload shard's bytes; the builder is empty again after.
  std::vector<uint8_t> finish();

 private:
  size_t max_bytes_;
  Shard shard_;
  size_t bytes_ = kShardHeaderBytes + 2 * kShardEntryBytes;
};

// Reads an upload shard or a CAS dedupe shard (with footer), at most 64 MiB.
Shard parse_shard(std::span<const uint8_t> bytes, std::string_view what);

}  // namespace skippy::xet
