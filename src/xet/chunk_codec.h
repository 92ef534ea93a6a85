// How one chunk is stored in a xorb: an 8-byte header (version 0, compressed
// size u24 LE, scheme, uncompressed size u24 LE) and its data, stored as is,
// as an LZ4 frame, or byte-grouped by 4 and then an LZ4 frame
// (xet-core xorb_object/xorb_chunk_format.rs, compression_scheme.rs,
// byte_grouping/bg4.rs; hub-docs docs/xet/xorb.md).
//
// Encoding stores a chunk compressed only when that shrinks it, with the
// scheme the policy picks: by default the one that does better on the chunk's
// first 8 KiB (huggingface.js createXorbs.ts tries both on the whole chunk,
// kBest here; xet-core predicts byte grouping from byte statistics: any
// choice decodes the same). The LZ4 frame is one independent block without
// checksums, as xet-core's lz4_flex FrameEncoder writes it for a chunk-sized
// input.
//
// Decoding treats the bytes as hostile: the header's sizes are checked
// against the limits and against what the data decodes to; errors are
// Error(kInvalidInput) (malformed) or Error(kIntegrity) (decodes to other
// sizes than declared), each naming the caller's `what`.
//
// Thread-safety: a ChunkCodec holds LZ4 contexts: one thread at a time, one
// codec per thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "xet/chunker.h"

namespace skippy::xet {

inline constexpr size_t kChunkHeaderBytes = 8;
// The chunker's maximum, which xet-core also enforces when reading a header.
inline constexpr uint32_t kMaxChunkBytes = static_cast<uint32_t>(kMaxChunkSize);
// What a header may declare as stored size (xet-core: twice the maximum).
inline constexpr uint32_t kMaxStoredChunkBytes = 2 * kMaxChunkBytes;

enum class ChunkScheme : uint8_t { kNone = 0, kLz4 = 1, kBg4Lz4 = 2 };
const char* chunk_scheme_name(ChunkScheme scheme) noexcept;

// Which schemes encoding may try (it always falls back to kNone).
enum class CompressionPolicy : uint8_t {
  kNone,     // store every chunk as is
  kLz4,      // LZ4 frame where it shrinks
  kBg4Lz4,   // byte grouping + LZ4 where it shrinks
  kBest,     // both on the whole chunk, keep the smaller (huggingface.js's choice)
  kSampled,  // both on the chunk's first 8 KiB; the whole chunk only with the
             // better one, and only if the sample shrank (the default: about
             // twice kBest's speed on weights, and no full attempt on bytes
             // that do not compress)
};

struct ChunkHeader {
  uint32_t stored_size = 0;
  ChunkScheme scheme = ChunkScheme::kNone;
  uint32_t size = 0;  // uncompressed
};

// Parses and checks an 8-byte header: version 0, a known scheme, sizes within
// the limits, size > 0, and stored == size when stored as is. `at` is where it
// sits (for the message). Throws Error(kInvalidInput).
ChunkHeader parse_chunk_header(std::span<const uint8_t, kChunkHeaderBytes> bytes, std::string_view what, size_t at);
void put_chunk_header(std::vector<uint8_t>& out, const ChunkHeader& header);

// The 4-byte grouping: bytes 0,4,8,... then 1,5,9,... then 2,... then 3,...;
// group g holds n/4 bytes plus one when g < n % 4.
void bg4_split(std::span<const uint8_t> in, uint8_t* out) noexcept;
void bg4_regroup(std::span<const uint8_t> in, uint8_t* out) noexcept;

class ChunkCodec {
 public:
  ChunkCodec();
  ~ChunkCodec();
  ChunkCodec(const ChunkCodec&) = delete;
  ChunkCodec& operator=(const ChunkCodec&) = delete;

  // Appends header + data for `chunk` (1 byte to kMaxChunkBytes) to `out`;
  // returns the header written.
  ChunkHeader encode(std::span<const uint8_t> chunk, CompressionPolicy policy, std::vector<uint8_t>& out);

  // Decodes the data of a chunk whose header is `header` into `out`, which
  // must have room for header.size bytes. Throws as described above.
  void decode(const ChunkHeader& header, std::span<const uint8_t> stored, uint8_t* out, std::string_view what,
              size_t at);

 private:
  struct Lz4;
  CompressionPolicy sample(std::span<const uint8_t> chunk);
  std::unique_ptr<Lz4> lz4_;
  std::vector<uint8_t> scratch_;  // the byte-grouped copy, the second candidate
};

}  // namespace skippy::xet
