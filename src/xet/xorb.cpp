#include "xet/xorb.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "skippy/error.h"
#include "xet/bytes.h"

namespace skippy::xet {

namespace {

constexpr uint8_t kIdent[7] = {'X', 'E', 'T', 'B', 'L', 'O', 'B'};
constexpr uint8_t kIdentHashes[7] = {'X', 'B', 'L', 'B', 'H', 'S', 'H'};
constexpr uint8_t kIdentBoundaries[7] = {'X', 'B', 'L', 'B', 'B', 'N', 'D'};
constexpr size_t kFooterBufferBytes = 16;

bool starts_with_ident(std::span<const uint8_t> b) {
  return b.size() >= sizeof kIdent && std::memcmp(b.data(), kIdent, sizeof kIdent) == 0;
}


// The bytes from the start of each footer section to the footer's end.
uint32_t boundaries_section_bytes(size_t n) { return static_cast<uint32_t>(7 + 1 + 4 + 8 * n + 12 + kFooterBufferBytes); }
uint32_t hashes_section_bytes(size_t n) { return static_cast<uint32_t>(7 + 1 + 4 + 32 * n) + boundaries_section_bytes(n); }


void expect_ident(ByteReader& r, const uint8_t (&ident)[7], std::string_view section) {
  const size_t at = r.pos();
  const auto b = r.take(7, std::string(section) + " identifier");
  if (std::memcmp(b.data(), ident, 7) != 0) {
    r.fail_at(at, "footer: expected the " + std::string(section) + " identifier \"" +
                      std::string(reinterpret_cast<const char*>(ident), 7) + "\"");
  }
}

// Checks the footer at `r` (which starts at index.chunks_end) against the
// chunks read before it.
void check_footer(ByteReader& r, const XorbIndex& index, size_t total) {
  const size_t n = index.chunks.size();
  const size_t start = r.pos();
  auto mismatch = [&](const std::string& field) {
    throw Error(ErrorKind::kIntegrity,
                r.what() + ": the footer's " + field + " does not match the xorb's chunks (footer at byte " +
                    std::to_string(start) + ")");
  };
  auto count = [&](std::string_view field) {
    const size_t at = r.pos();
    const uint32_t c = r.u32(field);
    if (c != n) r.fail_at(at, "footer: " + std::string(field) + " is " + std::to_string(c) + ", the xorb has " + std::to_string(n) + " chunks");
  };
  expect_ident(r, kIdent, "footer");
  const uint8_t version = r.u8("footer version");
  if (version == 1) {
    if (r.hash("xorb hash") != index.hash) mismatch("xorb hash");
    expect_ident(r, kIdentHashes, "hash section");
    if (const uint8_t v = r.u8("hash section version"); v != 0) r.fail("footer: hash section version " + std::to_string(v));
    count("hash section chunk count");
    for (size_t i = 0; i < n; ++i) {
      if (r.hash("chunk hash") != index.chunks[i].hash) mismatch("hash of chunk " + std::to_string(i));
    }
    expect_ident(r, kIdentBoundaries, "boundary section");
    if (const uint8_t v = r.u8("boundary section version"); v != 1) r.fail("footer: boundary section version " + std::to_string(v));
    count("boundary section chunk count");
    for (size_t i = 0; i < n; ++i) {
      if (r.u32("chunk end") != index.chunks[i].end) mismatch("end of chunk " + std::to_string(i));
    }
    for (size_t i = 0; i < n; ++i) {
      const XorbChunk& c = index.chunks[i];
      if (r.u32("chunk unpacked end") != c.unpacked_offset + c.size) mismatch("uncompressed end of chunk " + std::to_string(i));
    }
    count("chunk count");
    if (r.u32("hash section offset") != hashes_section_bytes(n)) mismatch("hash section offset");
    if (r.u32("boundary section offset") != boundaries_section_bytes(n)) mismatch("boundary section offset");
    r.take(kFooterBufferBytes, "footer buffer");
  } else if (version == 0) {
    // The older layout: hash, count, stored ends, chunk hashes, buffer.
    if (r.hash("xorb hash") != index.hash) mismatch("xorb hash");
    count("chunk count");
    for (size_t i = 0; i < n; ++i) {
      if (r.u32("chunk end") != index.chunks[i].end) mismatch("end of chunk " + std::to_string(i));
    }
    for (size_t i = 0; i < n; ++i) {
      if (r.hash("chunk hash") != index.chunks[i].hash) mismatch("hash of chunk " + std::to_string(i));
    }
    r.take(kFooterBufferBytes, "footer buffer");
  } else {
    r.fail("footer version " + std::to_string(version) + " (0 and 1 are known)");
  }
  const size_t footer_len = r.pos() - start;
  const size_t at = r.pos();
  const uint32_t declared = r.u32("footer length");
  if (declared != footer_len) {
    r.fail_at(at, "the footer is " + std::to_string(footer_len) + " bytes, its trailing length says " + std::to_string(declared));
  }
  if (r.pos() != total) r.fail(std::to_string(total - r.pos()) + " bytes follow the footer");
}

}  // namespace

XorbBuilder::XorbBuilder(CompressionPolicy policy, XorbFooter footer) : policy_(policy), footer_(footer) {}

bool XorbBuilder::fits(size_t chunk_size) const noexcept {
  const size_t n = index_.chunks.size() + 1;
  if (chunk_size == 0 || chunk_size > kMaxChunkBytes || n > kXorbMaxChunks) return false;
  size_t total = bytes_.size() + kChunkHeaderBytes + chunk_size;
  if (footer_ == XorbFooter::kWrite) total += xorb_footer_bytes(n) + 4;
  return total <= kXorbMaxBytes;
}

uint32_t XorbBuilder::add(const Hash& hash, std::span<const uint8_t> data) {
  if (!fits(data.size())) {
    throw Error(ErrorKind::kUsage, "xorb builder: a chunk of " + std::to_string(data.size()) + " bytes does not fit (" +
                                       std::to_string(index_.chunks.size()) + " chunks, " + std::to_string(bytes_.size()) + " bytes)");
  }
  XorbChunk c;
  c.hash = hash;
  c.offset = static_cast<uint32_t>(bytes_.size());
  c.unpacked_offset = static_cast<uint32_t>(index_.unpacked_bytes);
  c.size = static_cast<uint32_t>(data.size());
  c.scheme = codec_.encode(data, policy_, bytes_).scheme;
  c.end = static_cast<uint32_t>(bytes_.size());
  index_.chunks.push_back(c);
  index_.unpacked_bytes += data.size();
  return static_cast<uint32_t>(index_.chunks.size() - 1);
}

BuiltXorb XorbBuilder::finish() {
  if (index_.chunks.empty()) throw Error(ErrorKind::kUsage, "xorb builder: finish() with no chunk");
  std::vector<ChunkRef> refs;
  refs.reserve(index_.chunks.size());
  for (const XorbChunk& c : index_.chunks) refs.push_back({c.hash, c.size});
  index_.hash = xorb_hash(refs);
  index_.chunks_end = bytes_.size();
  index_.has_footer = footer_ == XorbFooter::kWrite;
  if (index_.has_footer) put_xorb_footer(bytes_, index_);
  BuiltXorb out{std::move(index_), std::move(bytes_)};
  index_ = XorbIndex{};
  bytes_ = {};
  return out;
}

void put_xorb_footer(std::vector<uint8_t>& out, const XorbIndex& index) {
  const size_t n = index.chunks.size();
  const size_t start = out.size();
  put_bytes(out, kIdent);
  put_u8(out, 1);
  put_hash(out, index.hash);
  put_bytes(out, kIdentHashes);
  put_u8(out, 0);
  put_u32(out, static_cast<uint32_t>(n));
  for (const XorbChunk& c : index.chunks) put_hash(out, c.hash);
  put_bytes(out, kIdentBoundaries);
  put_u8(out, 1);
  put_u32(out, static_cast<uint32_t>(n));
  for (const XorbChunk& c : index.chunks) put_u32(out, c.end);
  for (const XorbChunk& c : index.chunks) put_u32(out, c.unpacked_offset + c.size);
  put_u32(out, static_cast<uint32_t>(n));
  put_u32(out, hashes_section_bytes(n));
  put_u32(out, boundaries_section_bytes(n));
  put_zeros(out, kFooterBufferBytes);
  put_u32(out, static_cast<uint32_t>(out.size() - start));
}

XorbIndex parse_xorb(std::span<const uint8_t> bytes, std::string_view what, const Hash* expected) {
  ByteReader r(bytes, what);
  if (bytes.size() > kXorbMaxBytes) {
    r.fail_at(0, "a xorb of " + std::to_string(bytes.size()) + " bytes, more than the " + std::to_string(kXorbMaxBytes) + " allowed");
  }
  XorbIndex index;
  ChunkCodec codec;
  std::vector<uint8_t> buf(kMaxChunkBytes);
  std::vector<ChunkRef> refs;
  while (!r.at_end()) {
    const size_t at = r.pos();
    if (starts_with_ident(bytes.subspan(at))) {
      index.has_footer = true;
      break;
    }
    const auto hb = r.take(kChunkHeaderBytes, "chunk header");
    const ChunkHeader h = parse_chunk_header(std::span<const uint8_t, kChunkHeaderBytes>(hb.data(), kChunkHeaderBytes),
                                             what, at);
    const auto stored = r.take(h.stored_size, "chunk data");
    codec.decode(h, stored, buf.data(), what, at);
    XorbChunk c;
    c.hash = chunk_hash({buf.data(), h.size});
    c.offset = static_cast<uint32_t>(at);
    c.end = static_cast<uint32_t>(r.pos());
    c.unpacked_offset = static_cast<uint32_t>(index.unpacked_bytes);
    c.size = h.size;
    c.scheme = h.scheme;
    index.chunks.push_back(c);
    refs.push_back({c.hash, c.size});
    index.unpacked_bytes += h.size;
  }
  if (index.chunks.empty()) r.fail_at(0, "a xorb without chunks");
  index.chunks_end = r.pos();
  index.hash = xorb_hash(refs);
  if (index.has_footer) check_footer(r, index, bytes.size());
  if (expected != nullptr && *expected != index.hash) {
    throw Error(ErrorKind::kIntegrity, std::string(what) + ": the chunks hash to xorb " + index.hash.to_hex() +
                                           ", expected " + expected->to_hex());
  }
  return index;
}

void extract_chunks(std::span<const uint8_t> bytes, const XorbIndex& index, uint32_t first, uint32_t last,
                    std::vector<uint8_t>& out, std::string_view what) {
  if (first > last || last > index.chunks.size()) {
    throw Error(ErrorKind::kUsage, std::string(what) + ": chunks [" + std::to_string(first) + ", " + std::to_string(last) + ") of a xorb of " +
                                       std::to_string(index.chunks.size()));
  }
  if (first == last) return;
  const size_t from = index.chunks[first].offset, to = index.chunks[last - 1].end;
  if (to > bytes.size()) {
    throw Error(ErrorKind::kUsage, std::string(what) + ": the index describes more bytes than given");
  }
  decode_chunk_range(bytes.subspan(from, to - from), out, what);
}

ChunkRangeDecoder::ChunkRangeDecoder(std::string what) : what_(std::move(what)) {}

size_t ChunkRangeDecoder::take_chunk(std::span<const uint8_t> in,
                                     const std::function<void(std::span<const uint8_t>)>& on_chunk) {
  if (in.size() < kChunkHeaderBytes) return 0;
  const ChunkHeader h =
      parse_chunk_header(std::span<const uint8_t, kChunkHeaderBytes>(in.data(), kChunkHeaderBytes), what_, consumed_);
  const size_t whole = kChunkHeaderBytes + h.stored_size;
  if (in.size() < whole) return 0;
  const auto stored = in.subspan(kChunkHeaderBytes, h.stored_size);
  std::span<const uint8_t> contents = stored;  // a chunk stored as is is handed out in place
  if (h.scheme != ChunkScheme::kNone) {
    out_.resize(h.size);
    codec_.decode(h, stored, out_.data(), what_, consumed_);
    contents = out_;
  }
  ++chunks_;
  consumed_ += whole;
  decoded_ += h.size;
  on_chunk(contents);
  return whole;
}

void ChunkRangeDecoder::feed(std::span<const uint8_t> bytes,
                             const std::function<void(std::span<const uint8_t>)>& on_chunk) {
  while (!bytes.empty()) {
    if (pending_.empty()) {
      const size_t took = take_chunk(bytes, on_chunk);
      if (took > 0) {
        bytes = bytes.subspan(took);
        continue;
      }
      // Not whole yet (its header, when there, is valid): keep it.
      pending_.assign(bytes.begin(), bytes.end());
      return;
    }
    size_t need = kChunkHeaderBytes > pending_.size() ? kChunkHeaderBytes - pending_.size() : 0;
    if (need == 0) {
      const ChunkHeader h = parse_chunk_header(
          std::span<const uint8_t, kChunkHeaderBytes>(pending_.data(), kChunkHeaderBytes), what_, consumed_);
      need = kChunkHeaderBytes + h.stored_size - pending_.size();
    }
    const size_t n = std::min(need, bytes.size());
    pending_.insert(pending_.end(), bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
    bytes = bytes.subspan(n);
    if (take_chunk(pending_, on_chunk) > 0) pending_.clear();
  }
}

void ChunkRangeDecoder::finish() const {
  if (!pending_.empty()) {
    throw Error(ErrorKind::kInvalidInput, what_ + ": the range ends inside the chunk at byte " + std::to_string(consumed_) + " (" +
                                              std::to_string(pending_.size()) + " of its bytes arrived)");
  }
}

std::vector<uint32_t> decode_chunk_range(std::span<const uint8_t> bytes, std::vector<uint8_t>& out,
                                         std::string_view what) {
  ChunkRangeDecoder d{std::string(what)};
  std::vector<uint32_t> sizes;
  d.feed(bytes, [&](std::span<const uint8_t> c) {
    out.insert(out.end(), c.begin(), c.end());
    sizes.push_back(static_cast<uint32_t>(c.size()));
  });
  d.finish();
  return sizes;
}

}  // namespace skippy::xet
