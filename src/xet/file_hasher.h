// One pass over a file's bytes for Xet: the chunks (chunker.h), each chunk's
// hash, the file hash at the end, and the file's SHA-256 beside them when
// asked (git repositories need it in the shard), so the write pass needs no
// second read. Feed the bytes in order, in buffers of any size; each chunk
// is handed to a callback with its bytes as soon as it is cut. Internal to the
// library.
//
// Thread-safety: a FileHasher is used by one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "util/sha256.h"
#include "xet/chunker.h"
#include "xet/hash.h"

namespace skippy::xet {

struct ChunkInfo {
  uint64_t offset = 0;  // in the file
  uint32_t length = 0;
  Hash hash;            // chunk_hash of its bytes
};

class FileHasher {
 public:
  // `bytes` is valid during the call only: it points into the buffer given
  // to update() when the chunk lies in it whole, else into the hasher's own
  // copy of a chunk that spanned several buffers.
  using ChunkSink = std::function<void(const ChunkInfo& chunk, std::span<const uint8_t> bytes)>;

  explicit FileHasher(ChunkSink on_chunk = {}, bool with_sha256 = true);

  void update(std::span<const uint8_t> data);

  struct Result {
    Hash file_hash;
    uint64_t size = 0;
    uint64_t chunk_count = 0;
    std::string sha256_hex;  // empty unless asked for
  };
  // Cuts the last chunk (handed to the callback first) and returns the
  // file's hashes. The hasher is finished after this.
  Result finish();

 private:
  void emit(std::span<const uint8_t> bytes);

  ChunkSink on_chunk_;
  std::optional<Sha256> sha256_;
  Chunker chunker_;
  MerkleHasher merkle_;
  std::vector<uint8_t> carry_;  // the open chunk's bytes from earlier buffers
  uint64_t offset_ = 0;         // where the open chunk starts
  uint64_t size_ = 0;
};

// The chunks and hashes of bytes held in memory (tests, small files).
struct HashedBytes {
  std::vector<ChunkInfo> chunks;
  FileHasher::Result result;
};
HashedBytes hash_bytes(std::span<const uint8_t> data, bool with_sha256 = true);

}  // namespace skippy::xet
