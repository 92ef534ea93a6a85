// Xorbs: a run of chunks (each an 8-byte header and its data, see
// chunk_codec.h), optionally followed by the XorbObjectInfo footer and, as
// the last 4 bytes, the footer's length (xet-core
// xorb_object/xorb_object_format.rs, XorbObjectInfoV1; hub-docs
// docs/xet/xorb.md). The footer (version 1):
//   "XETBLOB" 1, xorb hash
//   "XBLBHSH" 0, u32 n, the n chunk hashes
//   "XBLBBND" 1, u32 n, n u32 cumulative stored ends (headers included),
//                       n u32 cumulative uncompressed ends
//   u32 n, u32 bytes from the "XBLBHSH" section to the footer's end,
//   u32 bytes from the "XBLBBND" section to the footer's end, 16 zero bytes
//   u32 the footer's length (92 + 40 n), not counting itself.
// xet-core (since it moved footers to the server) and huggingface.js upload
// xorbs without the footer; the CAS accepts both and rebuilds it. A xorb is
// at most 64 MiB serialized; xet-core also caps it at 8192 chunks. The xorb
// hash covers the chunks' contents only (hash.h).
//
// Parsing treats the bytes as hostile (they come from the network): every
// size is checked against what is left and what the data decodes to, and
// every error names the caller's `what` and the byte offset.
//
// Thread-safety: XorbBuilder and ChunkRangeDecoder are values for one
// thread at a time; parse_xorb and decode_chunk_range are reentrant.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "xet/chunk_codec.h"
#include "xet/hash.h"

namespace skippy::xet {

inline constexpr size_t kXorbMaxBytes = 64u << 20;
inline constexpr size_t kXorbMaxChunks = 8192;

// The footer's length for n chunks (without the trailing u32).
constexpr size_t xorb_footer_bytes(size_t n) { return 92 + 40 * n; }

struct XorbChunk {
  Hash hash;
  uint32_t offset = 0;           // where its header starts
  uint32_t end = 0;              // where its data ends (the next chunk's offset)
  uint32_t unpacked_offset = 0;  // the uncompressed bytes of the chunks before it
  uint32_t size = 0;             // its uncompressed bytes
  ChunkScheme scheme = ChunkScheme::kNone;
};

struct XorbIndex {
  Hash hash;
  std::vector<XorbChunk> chunks;
  uint64_t unpacked_bytes = 0;
  size_t chunks_end = 0;  // where the chunks end (the footer's start, if any)
  bool has_footer = false;
};

struct BuiltXorb {
  XorbIndex index;
  std::vector<uint8_t> bytes;
};

enum class XorbFooter : uint8_t { kOmit, kWrite };

// Packs chunks into one xorb. Each chunk is encoded as it is added (its bytes
// need not outlive the call); fits() says whether the next chunk is sure to
// fit the limits, counting it stored uncompressed and the footer if written.
class XorbBuilder {
 public:
  explicit XorbBuilder(CompressionPolicy policy = CompressionPolicy::kSampled, XorbFooter footer = XorbFooter::kOmit);

  bool fits(size_t chunk_size) const noexcept;
  // Adds a chunk whose hash the caller computed (chunk_hash of `data`);
  // returns its index. Error(kUsage) unless fits(data.size()).
  uint32_t add(const Hash& hash, std::span<const uint8_t> data);

  bool empty() const noexcept { return index_.chunks.empty(); }
  size_t chunk_count() const noexcept { return index_.chunks.size(); }
  uint64_t unpacked_bytes() const noexcept { return index_.unpacked_bytes; }
  // Bytes so far, footer excluded.
  size_t stored_bytes() const noexcept { return bytes_.size(); }

  // The finished xorb: its hash and bytes (footer written if asked). The
  // builder is empty again after. Error(kUsage) when no chunk was added.
  BuiltXorb finish();

 private:
  CompressionPolicy policy_;
  XorbFooter footer_;
  ChunkCodec codec_;
  std::vector<uint8_t> bytes_;
  XorbIndex index_;
};

// The footer for chunks laid out as `index` says.
void put_xorb_footer(std::vector<uint8_t>& out, const XorbIndex& index);

// Reads a whole xorb, with or without its footer: every chunk header, every
// chunk decoded and hashed, the xorb hash computed, and the footer (when
// present; versions 0 and 1) checked field by field against what the chunks
// are. With `expected`, the xorb hash must equal it (Error(kIntegrity)).
XorbIndex parse_xorb(std::span<const uint8_t> bytes, std::string_view what, const Hash* expected = nullptr);

// Decodes chunks [first, last) of a parsed xorb (the bytes parse_xorb read)
// and appends their contents to `out`.
void extract_chunks(std::span<const uint8_t> bytes, const XorbIndex& index, uint32_t first, uint32_t last,
                    std::vector<uint8_t>& out, std::string_view what);

// A run of whole chunks as a reconstruction's xorb range delivers them (no
// footer), fed in pieces of any size; hands out each chunk's contents as soon
// as its last byte arrives, holding at most one chunk.
class ChunkRangeDecoder {
 public:
  explicit ChunkRangeDecoder(std::string what);

  // Calls on_chunk(contents) for every chunk `bytes` completes.
  void feed(std::span<const uint8_t> bytes, const std::function<void(std::span<const uint8_t>)>& on_chunk);
  // Error(kInvalidInput) unless the input ended where a chunk ends.
  void finish() const;

  uint64_t chunks() const noexcept { return chunks_; }
  uint64_t consumed() const noexcept { return consumed_; }
  uint64_t decoded() const noexcept { return decoded_; }

 private:
  // Decodes the chunk at the start of `in` if it is whole; returns the bytes it took (0 when not whole).
  size_t take_chunk(std::span<const uint8_t> in, const std::function<void(std::span<const uint8_t>)>& on_chunk);

  std::string what_;
  ChunkCodec codec_;
  std::vector<uint8_t> pending_;  // the start of a chunk not yet whole
  std::vector<uint8_t> out_;
  uint64_t chunks_ = 0, consumed_ = 0, decoded_ = 0;
};

// The whole range at once: appends every chunk's contents to `out` and
// returns each chunk's uncompressed size.
std::vector<uint32_t> decode_chunk_range(std::span<const uint8_t> bytes, std::vector<uint8_t>& out,
                                         std::string_view what);

}  // namespace skippy::xet
