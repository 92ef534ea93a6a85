// Writes the seed corpus of fuzz/xet_formats_fuzz.cpp (fuzz/corpus-xet/):
// small valid inputs for each reader, built with the library's writers (the
// tests check those against xet-core's layouts and huggingface.js's bytes),
// each prefixed with the selector byte:
//   xorb-*    0, a xorb: every scheme, with and without footer, a version 0 footer
//   range-*   1, a piece-size seed, the chunks of a xorb (a reconstruction range)
//   shard-*   2, an upload shard and a dedupe shard with footer and HMAC key
// Usage: xet_fuzz_seeds <out dir>   (scripts/fuzz.sh --seeds)
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "xet/bytes.h"
#include "xet/shard.h"
#include "xet/xorb.h"

namespace {

namespace fs = std::filesystem;
using namespace skippy::xet;

std::vector<uint8_t> pattern(size_t n, uint32_t seed, bool weight_like) {
  std::vector<uint8_t> v(n);
  uint32_t s = seed * 2654435761u + 1;
  for (size_t i = 0; i < n; ++i) {
    s = s * 1664525u + 1013904223u;
    v[i] = static_cast<uint8_t>(s >> 24);
    if (weight_like && i % 2 == 1) v[i] = static_cast<uint8_t>(0x20 | (v[i] & 3));
  }
  return v;
}

void write(const fs::path& dir, const std::string& name, uint8_t selector, const std::vector<uint8_t>& body,
           std::vector<uint8_t> prefix = {}) {
  std::ofstream out(dir / name, std::ios::binary);
  out.put(static_cast<char>(selector));
  out.write(reinterpret_cast<const char*>(prefix.data()), static_cast<std::streamsize>(prefix.size()));
  out.write(reinterpret_cast<const char*>(body.data()), static_cast<std::streamsize>(body.size()));
}

BuiltXorb xorb_of(const std::vector<std::vector<uint8_t>>& chunks, CompressionPolicy policy, XorbFooter footer) {
  XorbBuilder b(policy, footer);
  for (const auto& c : chunks) b.add(chunk_hash(c), c);
  return b.finish();
}

// The version 0 footer: hash, count, stored ends, chunk hashes, 16 zero bytes.
std::vector<uint8_t> with_v0_footer(const BuiltXorb& x) {
  std::vector<uint8_t> out(x.bytes.begin(), x.bytes.begin() + static_cast<std::ptrdiff_t>(x.index.chunks_end));
  const size_t start = out.size();
  const char ident[] = "XETBLOB";
  out.insert(out.end(), ident, ident + 7);
  put_u8(out, 0);
  put_hash(out, x.index.hash);
  put_u32(out, static_cast<uint32_t>(x.index.chunks.size()));
  for (const XorbChunk& c : x.index.chunks) put_u32(out, c.end);
  for (const XorbChunk& c : x.index.chunks) put_hash(out, c.hash);
  put_zeros(out, 16);
  put_u32(out, static_cast<uint32_t>(out.size() - start));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: xet_fuzz_seeds <out dir>\n");
    return 2;
  }
  const fs::path dir = argv[1];
  fs::create_directories(dir);
  const std::vector<std::vector<uint8_t>> chunks = {pattern(700, 1, false), std::vector<uint8_t>(1500, 0),
                                                    pattern(2000, 2, true), pattern(3, 3, false)};
  const BuiltXorb plain = xorb_of(chunks, CompressionPolicy::kNone, XorbFooter::kWrite);
  const BuiltXorb best = xorb_of(chunks, CompressionPolicy::kBest, XorbFooter::kOmit);
  const BuiltXorb lz4 = xorb_of({std::vector<uint8_t>(4000, 7)}, CompressionPolicy::kLz4, XorbFooter::kWrite);
  write(dir, "xorb-none-footer", 0, plain.bytes);
  write(dir, "xorb-best", 0, best.bytes);
  write(dir, "xorb-lz4-footer", 0, lz4.bytes);
  write(dir, "xorb-v0-footer", 0, with_v0_footer(plain));
  write(dir, "range-best", 1, best.bytes, {5});
  const auto two_chunks = static_cast<std::ptrdiff_t>(plain.index.chunks[1].end);
  write(dir, "range-none", 1, std::vector<uint8_t>(plain.bytes.begin(), plain.bytes.begin() + two_chunks), {60});

  Shard upload;
  ShardFile file;
  file.file_hash = chunk_hash(chunks[0]);
  file.terms = {{best.index.hash, 0, 700 + 1500, 0, 2}, {plain.index.hash, 0, 2003, 2, 4}};
  file.verification = {chunk_hash(chunks[1]), chunk_hash(chunks[2])};
  file.sha256 = std::array<uint8_t, 32>{1, 2, 3};
  upload.files = {file};
  upload.xorbs = {shard_xorb(best)};
  write(dir, "shard-upload", 2, serialize_shard(upload));
  Shard dedupe;
  dedupe.xorbs = {shard_xorb(plain), shard_xorb(lz4)};
  dedupe.xorbs[0].chunks[0].flags = kShardChunkGlobalDedupe;
  dedupe.footer = ShardFooter{chunk_hash(chunks[3]), 1700000000, 1700600000, 0, 0, 0};
  write(dir, "shard-dedupe-footer", 2, serialize_shard(dedupe));
  return 0;
}
