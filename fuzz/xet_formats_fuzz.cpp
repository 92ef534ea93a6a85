// libFuzzer target for the Xet formats a client reads from the network
// (src/xet/xorb.h, src/xet/shard.h). The first byte picks the reader:
//   0 parse_xorb (a whole xorb, with or without footer)
//   1 decode_chunk_range (a reconstruction's xorb range), then the same bytes
//     through ChunkRangeDecoder in pieces whose sizes the next byte seeds
//   2 parse_shard (an upload shard or a CAS dedupe shard)
// Each must accept and keep its promises, or throw skippy::Error naming the
// input. An accepted xorb's chunks tile its bytes and decode to what the
// index says, its footer (version 1) is what we would write for it (but for
// the ignored nonce bytes); an
// accepted shard serializes to bytes that parse to the same shard. Anything
// else - another exception, a sanitizer report, a broken promise - is a crash.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

#include "skippy/error.h"
#include "xet/shard.h"
#include "xet/xorb.h"

namespace {

using namespace skippy::xet;

[[noreturn]] void broken(const char* what) {
  std::fprintf(stderr, "xet_formats_fuzz: broken promise: %s\n", what);
  std::abort();
}

#define CHECK(cond)             \
  do {                          \
    if (!(cond)) broken(#cond); \
  } while (0)

void xorb(std::span<const uint8_t> in) {
  const XorbIndex x = parse_xorb(in, "fuzz.xorb");
  CHECK(!x.chunks.empty());
  uint32_t offset = 0;
  uint64_t unpacked = 0;
  for (const XorbChunk& c : x.chunks) {
    CHECK(c.offset == offset && c.end > c.offset && c.size > 0 && c.size <= kMaxChunkBytes);
    CHECK(c.unpacked_offset == unpacked);
    offset = c.end;
    unpacked += c.size;
  }
  CHECK(offset == x.chunks_end && x.unpacked_bytes == unpacked);
  CHECK(x.has_footer == (x.chunks_end < in.size()));
  std::vector<uint8_t> whole;
  extract_chunks(in, x, 0, static_cast<uint32_t>(x.chunks.size()), whole, "fuzz.xorb");
  CHECK(whole.size() == unpacked);
  std::vector<ChunkRef> refs;
  size_t at = 0;
  for (const XorbChunk& c : x.chunks) {
    CHECK(chunk_hash(std::span(whole).subspan(at, c.size)) == c.hash);
    refs.push_back({c.hash, c.size});
    at += c.size;
  }
  CHECK(xorb_hash(refs) == x.hash);
  if (x.has_footer && in[x.chunks_end + 7] == 1) {
    // What we would write, but for the 16-byte buffer before the trailing
    // length (a nonce there is the writer's, and readers ignore it).
    std::vector<uint8_t> footer;
    put_xorb_footer(footer, x);
    CHECK(footer.size() == in.size() - x.chunks_end);
    const auto theirs = in.subspan(x.chunks_end);
    for (size_t i = 0; i < footer.size(); ++i) {
      if (i >= footer.size() - 20 && i < footer.size() - 4) continue;
      CHECK(footer[i] == theirs[i]);
    }
  }
}

void range(std::span<const uint8_t> in) {
  if (in.empty()) return;
  const uint8_t seed = in[0];
  in = in.subspan(1);
  std::vector<uint8_t> whole;
  const std::vector<uint32_t> sizes = decode_chunk_range(in, whole, "fuzz range");
  // Accepted whole: accepted in pieces, with the same contents.
  ChunkRangeDecoder d("fuzz range");
  std::vector<uint8_t> pieces;
  size_t pos = 0, step = 1 + seed % 97;
  while (pos < in.size()) {
    const size_t n = std::min(step, in.size() - pos);
    d.feed(in.subspan(pos, n), [&](std::span<const uint8_t> c) { pieces.insert(pieces.end(), c.begin(), c.end()); });
    pos += n;
    step = step * 7 % 4099 + 1;
  }
  d.finish();
  CHECK(pieces == whole);
  CHECK(d.chunks() == sizes.size() && d.consumed() == in.size() && d.decoded() == whole.size());
}

void shard(std::span<const uint8_t> in) {
  const Shard s = parse_shard(in, "fuzz.shard");
  CHECK(s.footer.has_value() == (in[40] != 0));
  for (const ShardFile& f : s.files) {
    CHECK(f.verification.empty() || f.verification.size() == f.terms.size());
    for (const ShardTerm& t : f.terms) CHECK(t.chunk_start < t.chunk_end && t.unpacked_bytes > 0);
  }
  for (const ShardXorb& x : s.xorbs) {
    uint64_t sum = 0;
    for (const ShardChunk& c : x.chunks) {
      CHECK(c.unpacked_offset == sum && c.size > 0 && c.size <= kMaxChunkBytes);
      sum += c.size;
    }
    CHECK(sum == x.unpacked_bytes);
  }
  const std::vector<uint8_t> out = serialize_shard(s);
  const Shard again = parse_shard(out, "fuzz.shard again");
  CHECK(serialize_shard(again) == out);
  CHECK(again.files.size() == s.files.size() && again.xorbs.size() == s.xorbs.size());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::span<const uint8_t> in(data + 1, size - 1);
  try {
    switch (data[0] % 3) {
      case 0:
        xorb(in);
        break;
      case 1:
        range(in);
        break;
      default:
        shard(in);
        break;
    }
  } catch (const skippy::Error&) {
    // Refused: the expected outcome for most inputs.
  }
  return 0;
}
