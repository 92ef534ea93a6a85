#include "xet/shard.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "skippy/error.h"
#include "xet/bytes.h"
#include "xet/chunk_codec.h"
#include "xet/xorb.h"

namespace skippy::xet {

namespace {

constexpr uint8_t kTag[32] = {'H', 'F', 'R', 'e', 'p', 'o', 'M', 'e', 't', 'a', 'D', 'a', 't', 'a', 0,   85,
                              105, 103, 69,  106, 123, 129, 87,  131, 165, 189, 217, 92,  205, 209, 74,  169};
constexpr uint64_t kHeaderVersion = 2;
constexpr uint64_t kFooterVersion = 1;


void put_bookend(std::vector<uint8_t>& out) {
  out.insert(out.end(), 32, uint8_t{0xFF});
  put_zeros(out, 16);
}
bool is_bookend(const Hash& h) {
  return std::all_of(h.bytes.begin(), h.bytes.end(), [](uint8_t b) { return b == 0xFF; });
}

// The SHA-256 as stored (word-reversed) and back: the same permutation.
std::array<uint8_t, 32> reverse_words(std::span<const uint8_t, 32> in) {
  std::array<uint8_t, 32> out;
  for (size_t w = 0; w < 4; ++w) {
    for (size_t i = 0; i < 8; ++i) out[8 * w + i] = in[8 * w + 7 - i];
  }
  return out;
}

void put_file(std::vector<uint8_t>& out, const ShardFile& f) {
  uint32_t flags = 0;
  // An empty file has no terms and so no verification entries, and still
  // carries the flag (xet-core's FileDataSequenceHeader for a file of no
  // chunks: verification true, zero entries; the CAS wants it on uploads).
  if (!f.verification.empty() || f.terms.empty()) flags |= kShardFileWithVerification;
  if (f.sha256) flags |= kShardFileWithMetadataExt;
  put_hash(out, f.file_hash);
  put_u32(out, flags);
  put_u32(out, static_cast<uint32_t>(f.terms.size()));
  put_zeros(out, 8);
  for (const ShardTerm& t : f.terms) {
    put_hash(out, t.xorb_hash);
    put_u32(out, t.flags);
    put_u32(out, t.unpacked_bytes);
    put_u32(out, t.chunk_start);
    put_u32(out, t.chunk_end);
  }
  for (const Hash& v : f.verification) {
    put_hash(out, v);
    put_zeros(out, 16);
  }
  if (f.sha256) {
    put_bytes(out, reverse_words(*f.sha256));
    put_zeros(out, 16);
  }
}

void put_xorb(std::vector<uint8_t>& out, const ShardXorb& x) {
  put_hash(out, x.hash);
  put_u32(out, x.flags);
  put_u32(out, static_cast<uint32_t>(x.chunks.size()));
  put_u32(out, x.unpacked_bytes);
  put_u32(out, x.serialized_bytes);
  for (const ShardChunk& c : x.chunks) {
    put_hash(out, c.hash);
    put_u32(out, c.unpacked_offset);
    put_u32(out, c.size);
    put_u32(out, c.flags);
    put_zeros(out, 4);
  }
}

// `count` entries of `per` bytes each must fit in what is left.
void need_entries(ByteReader& r, uint64_t count, uint64_t per, const std::string& what_entries) {
  if (count > r.remaining() / per) {
    r.fail(what_entries + ": " + std::to_string(count) + " entries declared, only " + std::to_string(r.remaining() / kShardEntryBytes) +
           " entries of bytes left");
  }
}

ShardFile read_file(ByteReader& r, const Hash& file_hash, size_t index, size_t at) {
  const std::string name = "file " + std::to_string(index) + " (" + file_hash.to_hex() + ")";
  ShardFile f;
  f.file_hash = file_hash;
  const uint32_t flags = r.u32("file flags");
  const uint32_t n = r.u32("file term count");
  r.take(8, "file header reserved bytes");
  const uint32_t known = kShardFileWithVerification | kShardFileWithMetadataExt;
  if ((flags & ~known) != 0) r.fail_at(at, name + ": unknown file flags " + std::to_string(flags & ~known));
  const bool verification = (flags & kShardFileWithVerification) != 0;
  const uint64_t entries = uint64_t{n} * (verification ? 2 : 1) + ((flags & kShardFileWithMetadataExt) ? 1 : 0);
  need_entries(r, entries, kShardEntryBytes, name);
  f.terms.reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    const size_t term_at = r.pos();
    ShardTerm t;
    t.xorb_hash = r.hash("term xorb hash");
    t.flags = r.u32("term flags");
    t.unpacked_bytes = r.u32("term bytes");
    t.chunk_start = r.u32("term first chunk");
    t.chunk_end = r.u32("term end chunk");
    if (t.chunk_start >= t.chunk_end) {
      r.fail_at(term_at, name + ": term " + std::to_string(i) + ": empty chunk range [" + std::to_string(t.chunk_start) + ", " +
                             std::to_string(t.chunk_end) + ")");
    }
    if (t.unpacked_bytes == 0) r.fail_at(term_at, name + ": term " + std::to_string(i) + ": no bytes");
    if (uint64_t{t.unpacked_bytes} > uint64_t{t.chunk_end - t.chunk_start} * kMaxChunkBytes) {
      r.fail_at(term_at, name + ": term " + std::to_string(i) + ": " + std::to_string(t.unpacked_bytes) + " bytes in " +
                             std::to_string(t.chunk_end - t.chunk_start) + " chunks");
    }
    f.terms.push_back(t);
  }
  if (verification) {
    f.verification.reserve(n);
    for (uint32_t i = 0; i < n; ++i) {
      f.verification.push_back(r.hash("verification hash"));
      r.take(16, "verification entry reserved bytes");
    }
  }
  if ((flags & kShardFileWithMetadataExt) != 0) {
    const auto b = r.take(32, "file SHA-256");
    f.sha256 = reverse_words(std::span<const uint8_t, 32>(b.data(), 32));
    r.take(16, "metadata extension reserved bytes");
  }
  return f;
}

ShardXorb read_xorb(ByteReader& r, const Hash& xorb_hash, size_t index, size_t at) {
  const std::string name = "xorb " + std::to_string(index) + " (" + xorb_hash.to_hex() + ")";
  ShardXorb x;
  x.hash = xorb_hash;
  x.flags = r.u32("xorb flags");
  const uint32_t n = r.u32("xorb chunk count");
  x.unpacked_bytes = r.u32("xorb bytes");
  x.serialized_bytes = r.u32("xorb serialized bytes");
  if (n == 0) r.fail_at(at, name + ": no chunks");
  need_entries(r, n, kShardEntryBytes, name);
  x.chunks.reserve(n);
  uint64_t offset = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const size_t chunk_at = r.pos();
    ShardChunk c;
    c.hash = r.hash("chunk hash");
    c.unpacked_offset = r.u32("chunk offset");
    c.size = r.u32("chunk bytes");
    c.flags = r.u32("chunk flags");
    r.take(4, "chunk entry reserved bytes");
    if (c.unpacked_offset != offset) {
      r.fail_at(chunk_at, name + ": chunk " + std::to_string(i) + " starts at " + std::to_string(c.unpacked_offset) +
                              ", the chunks before it end at " + std::to_string(offset));
    }
    if (c.size == 0 || c.size > kMaxChunkBytes) {
      r.fail_at(chunk_at, name + ": chunk " + std::to_string(i) + " of " + std::to_string(c.size) + " bytes (1 to " +
                              std::to_string(kMaxChunkBytes) + " allowed)");
    }
    offset += c.size;
    x.chunks.push_back(c);
  }
  if (offset != x.unpacked_bytes) {
    r.fail_at(at, name + ": declares " + std::to_string(x.unpacked_bytes) + " bytes, its chunks hold " + std::to_string(offset));
  }
  return x;
}

}  // namespace

uint64_t ShardFile::size() const {
  uint64_t n = 0;
  for (const ShardTerm& t : terms) n += t.unpacked_bytes;
  return n;
}

ShardXorb shard_xorb(const XorbIndex& index, size_t serialized_bytes) {
  ShardXorb x;
  x.hash = index.hash;
  x.unpacked_bytes = static_cast<uint32_t>(index.unpacked_bytes);
  x.serialized_bytes = static_cast<uint32_t>(serialized_bytes);
  x.chunks.reserve(index.chunks.size());
  for (const XorbChunk& c : index.chunks) x.chunks.push_back({c.hash, c.unpacked_offset, c.size, 0});
  return x;
}

ShardXorb shard_xorb(const BuiltXorb& xorb) { return shard_xorb(xorb.index, xorb.bytes.size()); }

size_t shard_file_bytes(const ShardFile& f) {
  return kShardEntryBytes * (1 + f.terms.size() + f.verification.size() + (f.sha256 ? 1 : 0));
}
size_t shard_xorb_bytes(const ShardXorb& x) { return kShardEntryBytes * (1 + x.chunks.size()); }

std::vector<uint8_t> serialize_shard(const Shard& shard) {
  std::vector<uint8_t> out;
  size_t total = kShardHeaderBytes + 2 * kShardEntryBytes + (shard.footer ? kShardFooterBytes : 0);
  for (const ShardFile& f : shard.files) total += shard_file_bytes(f);
  for (const ShardXorb& x : shard.xorbs) total += shard_xorb_bytes(x);
  out.reserve(total);
  put_bytes(out, kTag);
  put_u64(out, kHeaderVersion);
  put_u64(out, shard.footer ? kShardFooterBytes : 0);
  uint64_t materialized = 0, stored = 0, on_disk = 0;
  for (const ShardFile& f : shard.files) {
    put_file(out, f);
    materialized += f.size();
  }
  put_bookend(out);
  const uint64_t xorbs_at = out.size();
  for (const ShardXorb& x : shard.xorbs) {
    put_xorb(out, x);
    stored += x.unpacked_bytes;
    on_disk += x.serialized_bytes;
  }
  put_bookend(out);
  if (shard.footer) {
    const uint64_t footer_at = out.size();
    put_u64(out, kFooterVersion);
    put_u64(out, kShardHeaderBytes);
    put_u64(out, xorbs_at);
    for (int i = 0; i < 3; ++i) {  // no lookup tables: each at the footer, with no entries
      put_u64(out, footer_at);
      put_u64(out, 0);
    }
    put_hash(out, shard.footer->chunk_hash_key);
    put_u64(out, shard.footer->created);
    put_u64(out, shard.footer->key_expiry);
    put_zeros(out, 6 * 8);
    put_u64(out, on_disk);
    put_u64(out, materialized);
    put_u64(out, stored);
    put_u64(out, footer_at);
  }
  return out;
}

void ShardBuilder::add_file(ShardFile file) {
  if (file.verification.size() != file.terms.size()) {
    throw Error(ErrorKind::kUsage, "shard builder: file " + file.file_hash.to_hex() + " has " +
                                       std::to_string(file.verification.size()) + " verification hashes for " +
                                       std::to_string(file.terms.size()) + " terms");
  }
  for (const ShardTerm& t : file.terms) {
    if (t.chunk_start >= t.chunk_end || t.unpacked_bytes == 0) {
      throw Error(ErrorKind::kUsage, "shard builder: file " + file.file_hash.to_hex() + " has an empty term");
    }
  }
  if (!fits_file(file)) throw Error(ErrorKind::kUsage, "shard builder: the file does not fit in this shard");
  bytes_ += shard_file_bytes(file);
  shard_.files.push_back(std::move(file));
}

void ShardBuilder::add_xorb(ShardXorb xorb) {
  if (!fits_xorb(xorb)) throw Error(ErrorKind::kUsage, "shard builder: the xorb does not fit in this shard");
  bytes_ += shard_xorb_bytes(xorb);
  shard_.xorbs.push_back(std::move(xorb));
}

std::vector<uint8_t> ShardBuilder::finish() {
  shard_.footer.reset();
  std::vector<uint8_t> out = serialize_shard(shard_);
  shard_ = Shard{};
  bytes_ = kShardHeaderBytes + 2 * kShardEntryBytes;
  return out;
}

Shard parse_shard(std::span<const uint8_t> bytes, std::string_view what) {
  ByteReader r(bytes, what);
  if (bytes.size() > kShardMaxBytes) {
    r.fail_at(0, "a shard of " + std::to_string(bytes.size()) + " bytes, more than the " +
                     std::to_string(kShardMaxBytes) + " allowed");
  }
  const auto tag = r.take(32, "shard header tag");
  if (std::memcmp(tag.data(), kTag, sizeof kTag) != 0) r.fail_at(0, "not a shard (the header tag is not HFRepoMetaData's)");
  if (const uint64_t v = r.u64("shard header version"); v != kHeaderVersion) {
    r.fail_at(32, "shard header version " + std::to_string(v) + " (only 2 is known)");
  }
  const uint64_t footer_size = r.u64("shard footer size");
  if (footer_size != 0 && footer_size != kShardFooterBytes) {
    r.fail_at(40, "footer size " + std::to_string(footer_size) + " (0 or " + std::to_string(kShardFooterBytes) + ")");
  }
  if (footer_size > bytes.size() - r.pos()) r.fail_at(40, "footer size " + std::to_string(footer_size) + " but the shard ends first");
  // Sections are read up to where the footer starts.
  ByteReader body(bytes.first(bytes.size() - footer_size), what);
  body.take(kShardHeaderBytes, "shard header");
  Shard shard;
  for (;;) {
    const size_t at = body.pos();
    const Hash h = body.hash("file hash");
    if (is_bookend(h)) {
      body.take(16, "file section bookend");
      break;
    }
    shard.files.push_back(read_file(body, h, shard.files.size(), at));
  }
  const size_t xorbs_at = body.pos();
  for (;;) {
    const size_t at = body.pos();
    const Hash h = body.hash("xorb hash");
    if (is_bookend(h)) {
      body.take(16, "xorb section bookend");
      break;
    }
    shard.xorbs.push_back(read_xorb(body, h, shard.xorbs.size(), at));
  }
  const size_t xorbs_end = body.pos();
  if (footer_size == 0) {
    if (!body.at_end()) body.fail(std::to_string(body.remaining()) + " bytes follow the xorb section of a shard without footer");
    return shard;
  }
  ByteReader f(bytes, what);
  const size_t footer_at = bytes.size() - kShardFooterBytes;
  f.take(footer_at, "shard");
  if (const uint64_t v = f.u64("footer version"); v != kFooterVersion) {
    f.fail_at(footer_at, "footer version " + std::to_string(v) + " (only 1 is known)");
  }
  auto offset_must_be = [&](uint64_t got, uint64_t want, const char* field) {
    if (got != want) f.fail_at(footer_at, "footer: the " + std::string(field) + " is " + std::to_string(got) + ", the section is at " + std::to_string(want));
  };
  offset_must_be(f.u64("file section offset"), kShardHeaderBytes, "file section offset");
  offset_must_be(f.u64("xorb section offset"), xorbs_at, "xorb section offset");
  const char* tables[3] = {"file lookup table", "xorb lookup table", "chunk lookup table"};
  const uint64_t entry_bytes[3] = {12, 12, 16};
  for (int i = 0; i < 3; ++i) {
    const uint64_t off = f.u64("lookup table offset"), n = f.u64("lookup table entries");
    if (off == 0 && n == 0) continue;  // huggingface.js writes no table this way
    if (off < xorbs_end || off > footer_at || n > (footer_at - off) / entry_bytes[i]) {
      f.fail_at(footer_at, std::string("footer: the ") + tables[i] + " (" + std::to_string(n) + " entries at " + std::to_string(off) +
                               ") is not between the xorb section and the footer");
    }
  }
  ShardFooter footer;
  footer.chunk_hash_key = f.hash("chunk hash key");
  footer.created = f.u64("creation time");
  footer.key_expiry = f.u64("key expiry");
  f.take(6 * 8, "footer reserved bytes");
  footer.stored_bytes_on_disk = f.u64("stored bytes on disk");
  footer.materialized_bytes = f.u64("materialized bytes");
  footer.stored_bytes = f.u64("stored bytes");
  offset_must_be(f.u64("footer offset"), footer_at, "footer offset");
  shard.footer = footer;
  return shard;
}

}  // namespace skippy::xet
