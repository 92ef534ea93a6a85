// Xet's content-defined chunking (hub-docs docs/xet/chunking.md; xet-core
// xet_data/src/deduplication/chunking.rs): a gear rolling hash,
// h = (h << 1) + kGearTable[byte] (64-bit, wrapping), cuts a chunk after the
// first byte where h & 0xFFFF000000000000 == 0 once the chunk holds at least
// 8 KiB, and at 128 KiB regardless; h restarts at 0 after every cut. The
// stream's last chunk is whatever remains (shorter than 8 KiB if the stream
// is), and an empty stream has no chunk.
//
// Because h shifts left each byte, it depends on the last 64 bytes only, so
// hashing starts 8 KiB - 65 bytes into each chunk (xet-core's skip-ahead):
// the first hash that may cut is the same as if every byte had been hashed.
// The cuts depend on the bytes alone, never on how the stream is split into
// calls. Internal to the library.
//
// Thread-safety: a Chunker is a value without shared state.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace skippy::xet {

inline constexpr size_t kMinChunkSize = 8 * 1024;
inline constexpr size_t kTargetChunkSize = 64 * 1024;
inline constexpr size_t kMaxChunkSize = 128 * 1024;

// rust-gearhash's DEFAULT_TABLE (src/table.rs at adad44e7), the table
// xet-core's chunker uses.
extern const uint64_t kGearTable[256];

class Chunker {
 public:
  // Scans the stream's next bytes. Returns n when the current chunk ends
  // after data[n - 1] (the next call continues with data[n...], a new
  // chunk); nullopt when all of `data` belongs to the current chunk.
  std::optional<size_t> next_cut(std::span<const uint8_t> data);
  // Bytes of the current chunk seen so far (not yet cut).
  size_t open_length() const { return open_; }
  // Ends the stream: the length of the last chunk (0: none). The chunker
  // is then ready for a new stream.
  size_t finish();

 private:
  uint64_t hash_ = 0;
  size_t open_ = 0;
};

// The end offset of every chunk of `data` taken as a whole stream.
std::vector<uint64_t> chunk_boundaries(std::span<const uint8_t> data);

}  // namespace skippy::xet
