// Xorbs (src/xet/xorb.h, chunk_codec.h): the chunk header and its limits,
// byte grouping, the compression choice, the footer byte for byte, the
// builder's limits, whole-xorb and chunk-range parsing, and hostile bytes.
// huggingface.js's own xorbs are read in tests/xet_hfjs_test.cpp.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "skippy/error.h"
#include "xet/bytes.h"
#include "xet/chunk_codec.h"
#include "xet/hash.h"
#include "xet/xorb.h"

namespace xet_xorb_tests {

using namespace skippy::xet;
using skippy::Error;
using skippy::ErrorKind;

std::vector<uint8_t> random_bytes(size_t n, uint64_t seed) {
  std::vector<uint8_t> v(n);
  uint64_t s = seed;
  for (size_t i = 0; i < n; ++i) {
    s += 0x9E3779B97F4A7C15ull;  // splitmix64
    uint64_t z = s;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    v[i] = static_cast<uint8_t>(z ^ (z >> 31));
  }
  return v;
}

// Small half-precision-like numbers: the high byte of each 16-bit word
// varies little, so grouping bytes helps LZ4.
std::vector<uint8_t> weight_like(size_t n, uint64_t seed) {
  std::vector<uint8_t> v = random_bytes(n, seed);
  for (size_t i = 1; i < n; i += 2) v[i] = static_cast<uint8_t>(0x20 | (v[i] & 0x07));
  return v;
}

std::span<const uint8_t, kChunkHeaderBytes> header_span(const std::vector<uint8_t>& b) {
  return std::span<const uint8_t, kChunkHeaderBytes>(b.data(), kChunkHeaderBytes);
}

// Runs f and returns the Error it throws (failing when it does not).
template <class F>
Error error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error thrown";
  return Error(ErrorKind::kUsage, "none");
}

BuiltXorb build(const std::vector<std::vector<uint8_t>>& chunks, XorbFooter footer,
                CompressionPolicy policy = CompressionPolicy::kBest) {
  XorbBuilder b(policy, footer);
  for (const auto& c : chunks) {
    EXPECT_TRUE(b.fits(c.size()));
    b.add(chunk_hash(c), c);
  }
  return b.finish();
}

std::vector<std::vector<uint8_t>> mixed_chunks() {
  return {random_bytes(70000, 1), std::vector<uint8_t>(9000, 0), weight_like(131072, 2), random_bytes(1, 3),
          weight_like(8195, 4)};
}

TEST(XetChunkCodec, HeaderLayoutAndLimits) {
  std::vector<uint8_t> b;
  put_chunk_header(b, {0x012345, ChunkScheme::kBg4Lz4, 0x01FFFF});
  EXPECT_EQ(b, (std::vector<uint8_t>{0, 0x45, 0x23, 0x01, 2, 0xFF, 0xFF, 0x01}));
  const ChunkHeader h = parse_chunk_header(header_span({0, 0x10, 0, 0, 1, 0x00, 0x00, 0x02}), "x", 0);
  EXPECT_EQ(h.stored_size, 0x10u);
  EXPECT_EQ(h.scheme, ChunkScheme::kLz4);
  EXPECT_EQ(h.size, kMaxChunkBytes);

  struct Bad {
    std::vector<uint8_t> bytes;
    const char* says;
  };
  const std::vector<Bad> bad = {
      {{1, 4, 0, 0, 0, 4, 0, 0}, "version 1"},
      {{0, 4, 0, 0, 3, 4, 0, 0}, "unknown compression scheme 3"},
      {{0, 4, 0, 0, 1, 0, 0, 0}, "an empty chunk"},
      {{0, 4, 0, 0, 1, 0x01, 0x00, 0x02}, "more than a chunk's 131072"},
      {{0, 0x01, 0x00, 0x04, 1, 0x00, 0x00, 0x01}, "stored bytes (1 to 262144 allowed)"},
      {{0, 5, 0, 0, 0, 4, 0, 0}, "stored as is but declares 5"},
      {{'X', 'E', 'T', 'B', 'L', 'O', 'B', 1}, "xorb footer"},
  };
  for (const Bad& c : bad) {
    const Error e = error_of([&] { parse_chunk_header(header_span(c.bytes), "some.xorb", 77); });
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_NE(std::string(e.what()).find("some.xorb: chunk header at byte 77"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << e.what();
  }
}

TEST(XetChunkCodec, ByteGroupingIsTheSpecsLayout) {
  // hub-docs xorb.md: [A1..A4, B1..B4, C1] -> [A1 B1 C1, A2 B2, A3 B3, A4 B4].
  const std::vector<uint8_t> in = {0xA1, 0xA2, 0xA3, 0xA4, 0xB1, 0xB2, 0xB3, 0xB4, 0xC1};
  std::vector<uint8_t> out(in.size());
  bg4_split(in, out.data());
  EXPECT_EQ(out, (std::vector<uint8_t>{0xA1, 0xB1, 0xC1, 0xA2, 0xB2, 0xA3, 0xB3, 0xA4, 0xB4}));
  for (size_t n = 0; n < 40; ++n) {
    const auto data = random_bytes(n, n);
    std::vector<uint8_t> g(n), back(n);
    bg4_split(data, g.data());
    bg4_regroup(g, back.data());
    EXPECT_EQ(back, data) << n;
  }
}

TEST(XetChunkCodec, KeepsTheSmallestEncodingAndDecodesEach) {
  ChunkCodec codec;
  struct Case {
    std::vector<uint8_t> data;
    CompressionPolicy policy;
    ChunkScheme want;
  };
  const std::vector<Case> cases = {
      {random_bytes(65536, 7), CompressionPolicy::kBest, ChunkScheme::kNone},  // nothing shrinks it
      {std::vector<uint8_t>(100000, 0), CompressionPolicy::kLz4, ChunkScheme::kLz4},
      {weight_like(131072, 8), CompressionPolicy::kBest, ChunkScheme::kBg4Lz4},
      {weight_like(131072, 8), CompressionPolicy::kNone, ChunkScheme::kNone},
      {std::vector<uint8_t>(3, 9), CompressionPolicy::kBest, ChunkScheme::kNone},  // a frame is longer
      // The default decides on the first 8 KiB.
      {random_bytes(65536, 7), CompressionPolicy::kSampled, ChunkScheme::kNone},
      {std::vector<uint8_t>(100000, 0), CompressionPolicy::kSampled, ChunkScheme::kLz4},
      {weight_like(131072, 8), CompressionPolicy::kSampled, ChunkScheme::kBg4Lz4},
      {std::vector<uint8_t>(5, 0), CompressionPolicy::kSampled, ChunkScheme::kNone},
  };
  for (const Case& c : cases) {
    std::vector<uint8_t> out = {0xEE};  // appends after what is there
    const ChunkHeader h = codec.encode(c.data, c.policy, out);
    EXPECT_EQ(h.scheme, c.want) << chunk_scheme_name(h.scheme);
    ASSERT_EQ(out.size(), 1 + kChunkHeaderBytes + h.stored_size);
    if (h.scheme != ChunkScheme::kNone) {
      EXPECT_LT(h.stored_size, c.data.size());
    }
    const std::vector<uint8_t> hb(out.begin() + 1, out.begin() + 9);
    const ChunkHeader parsed = parse_chunk_header(header_span(hb), "x", 1);
    EXPECT_EQ(parsed.stored_size, h.stored_size);
    EXPECT_EQ(parsed.size, c.data.size());
    std::vector<uint8_t> back(c.data.size());
    codec.decode(parsed, std::span(out).subspan(9), back.data(), "x", 1);
    EXPECT_EQ(back, c.data);
  }
  // An LZ4 frame (magic 0x184D2204, one independent block, no checksums) whose
  // block is 64 KiB up to 64 KiB of input, 256 KiB above.
  for (size_t n : {size_t{65536}, size_t{65537}}) {
    std::vector<uint8_t> out;
    codec.encode(std::vector<uint8_t>(n, 1), CompressionPolicy::kLz4, out);
    ASSERT_GT(out.size(), 15u);
    EXPECT_EQ(get_u32(out.data() + 8), 0x184D2204u);
    EXPECT_EQ(out[12], 0x60) << "version 01, independent blocks, no checksums, no content size";
    EXPECT_EQ(out[13], n <= 65536 ? 0x40 : 0x50) << "block size id";
  }
}

TEST(XetChunkCodec, HostileDataIsAClearError) {
  ChunkCodec codec;
  std::vector<uint8_t> data = random_bytes(20000, 11);
  for (size_t i = 0; i < data.size(); ++i) {
    if (i % 8 != 0) data[i] = 0;  // compresses with plain LZ4
  }
  std::vector<uint8_t> out;
  const ChunkHeader h = codec.encode(data, CompressionPolicy::kLz4, out);
  ASSERT_EQ(h.scheme, ChunkScheme::kLz4);
  const std::span<const uint8_t> frame = std::span(out).subspan(kChunkHeaderBytes);
  std::vector<uint8_t> buf(kMaxChunkBytes);
  auto decode = [&](ChunkHeader hh, std::span<const uint8_t> stored) {
    return error_of([&] { codec.decode(hh, stored, buf.data(), "hostile.xorb", 0); });
  };
  ChunkHeader smaller = h;
  smaller.size = h.size - 1;
  EXPECT_NE(std::string(decode(smaller, frame).what()).find("decodes to more than the 19999 bytes"),
            std::string::npos);
  ChunkHeader larger = h;
  larger.size = h.size + 1;
  EXPECT_EQ(decode(larger, frame).kind(), ErrorKind::kIntegrity);
  ChunkHeader shorter = h;
  shorter.stored_size = h.stored_size - 3;
  EXPECT_NE(std::string(decode(shorter, frame.first(shorter.stored_size)).what()).find("truncated"),
            std::string::npos);
  std::vector<uint8_t> trailing(frame.begin(), frame.end());
  trailing.push_back(0);
  ChunkHeader longer = h;
  longer.stored_size = h.stored_size + 1;
  EXPECT_NE(std::string(decode(longer, trailing).what()).find("follow the end of the LZ4 frame"), std::string::npos);
  std::vector<uint8_t> garbage(frame.begin(), frame.end());
  garbage[0] ^= 0xFF;  // the magic number
  EXPECT_NE(std::string(decode(h, garbage).what()).find("not a valid LZ4 frame"), std::string::npos);
  // The codec is usable after every failure.
  std::vector<uint8_t> back(data.size());
  codec.decode(h, frame, back.data(), "x", 0);
  EXPECT_EQ(back, data);
}

TEST(XetXorb, FooterIsXetCoresLayoutByteForByte) {
  const std::vector<std::vector<uint8_t>> chunks = {random_bytes(1000, 21), random_bytes(2000, 22)};
  const BuiltXorb x = build(chunks, XorbFooter::kWrite, CompressionPolicy::kNone);
  const Hash h0 = chunk_hash(chunks[0]), h1 = chunk_hash(chunks[1]);
  const Hash root = xorb_hash(std::vector<ChunkRef>{{h0, 1000}, {h1, 2000}});
  EXPECT_EQ(x.index.hash, root);
  // Written out here from the field list, independently of put_xorb_footer.
  std::vector<uint8_t> want;
  auto str = [&](const char* s) { want.insert(want.end(), s, s + std::strlen(s)); };
  str("XETBLOB");
  put_u8(want, 1);
  put_hash(want, root);
  str("XBLBHSH");
  put_u8(want, 0);
  put_u32(want, 2);
  put_hash(want, h0);
  put_hash(want, h1);
  str("XBLBBND");
  put_u8(want, 1);
  put_u32(want, 2);
  put_u32(want, 1008);  // stored ends, headers included
  put_u32(want, 3016);
  put_u32(want, 1000);  // uncompressed ends
  put_u32(want, 3000);
  put_u32(want, 2);
  put_u32(want, 8 + 4 + 64 + 8 + 4 + 16 + 12 + 16);  // from "XBLBHSH" to the footer's end
  put_u32(want, 8 + 4 + 16 + 12 + 16);               // from "XBLBBND"
  put_zeros(want, 16);
  put_u32(want, 92 + 40 * 2);
  ASSERT_EQ(want.size(), xorb_footer_bytes(2) + 4);
  ASSERT_EQ(x.bytes.size(), 3016 + want.size());
  EXPECT_EQ(std::vector<uint8_t>(x.bytes.begin() + 3016, x.bytes.end()), want);
  EXPECT_EQ(x.index.chunks_end, 3016u);
  EXPECT_TRUE(x.index.has_footer);
}

TEST(XetXorb, BuildsAndParsesWithAndWithoutFooter) {
  const auto chunks = mixed_chunks();
  for (XorbFooter footer : {XorbFooter::kOmit, XorbFooter::kWrite}) {
    const BuiltXorb x = build(chunks, footer);
    const XorbIndex p = parse_xorb(x.bytes, "built.xorb", &x.index.hash);
    EXPECT_EQ(p.hash, x.index.hash);
    EXPECT_EQ(p.has_footer, footer == XorbFooter::kWrite);
    EXPECT_EQ(p.chunks_end, x.index.chunks_end);
    ASSERT_EQ(p.chunks.size(), chunks.size());
    uint64_t unpacked = 0;
    for (size_t i = 0; i < chunks.size(); ++i) {
      const XorbChunk& c = p.chunks[i];
      EXPECT_EQ(c.hash, chunk_hash(chunks[i]));
      EXPECT_EQ(c.size, chunks[i].size());
      EXPECT_EQ(c.unpacked_offset, unpacked);
      EXPECT_EQ(c.offset, x.index.chunks[i].offset);
      EXPECT_EQ(c.end, x.index.chunks[i].end);
      EXPECT_EQ(c.scheme, x.index.chunks[i].scheme);
      unpacked += c.size;
    }
    EXPECT_EQ(p.unpacked_bytes, unpacked);
    EXPECT_EQ(p.chunks[1].scheme, ChunkScheme::kLz4);  // zeros
    for (uint32_t a = 0; a <= chunks.size(); ++a) {
      for (uint32_t b = a; b <= chunks.size(); ++b) {
        std::vector<uint8_t> got, want;
        extract_chunks(x.bytes, p, a, b, got, "x");
        for (uint32_t i = a; i < b; ++i) want.insert(want.end(), chunks[i].begin(), chunks[i].end());
        EXPECT_EQ(got, want) << a << ".." << b;
      }
    }
  }
  EXPECT_THROW(XorbBuilder().finish(), Error);
}

TEST(XetXorb, BuilderStopsAtTheChunkAndByteLimits) {
  XorbBuilder few(CompressionPolicy::kNone, XorbFooter::kWrite);
  const std::vector<uint8_t> one = {42};
  for (size_t i = 0; i < kXorbMaxChunks; ++i) few.add(chunk_hash(one), one);
  EXPECT_FALSE(few.fits(1)) << "8192 chunks";
  EXPECT_THROW(few.add(chunk_hash(one), one), Error);
  EXPECT_EQ(parse_xorb(few.finish().bytes, "x").chunks.size(), kXorbMaxChunks);

  for (XorbFooter footer : {XorbFooter::kOmit, XorbFooter::kWrite}) {
    XorbBuilder big(CompressionPolicy::kNone, footer);
    const auto chunk = random_bytes(kMaxChunkBytes, 5);
    const Hash h = chunk_hash(chunk);
    while (big.fits(chunk.size())) big.add(h, chunk);
    const size_t footer_bytes = footer == XorbFooter::kWrite ? xorb_footer_bytes(big.chunk_count() + 1) + 4 : 0;
    EXPECT_GT(big.stored_bytes() + kChunkHeaderBytes + chunk.size() + footer_bytes, kXorbMaxBytes);
    // What is left still takes a smaller chunk if it fits whole.
    const size_t room = kXorbMaxBytes - big.stored_bytes() - kChunkHeaderBytes - footer_bytes;
    EXPECT_TRUE(big.fits(room));
    EXPECT_FALSE(big.fits(room + 1));
    const BuiltXorb x = big.finish();
    EXPECT_LE(x.bytes.size(), kXorbMaxBytes);
    EXPECT_EQ(parse_xorb(x.bytes, "x", &x.index.hash).chunks.size(), x.index.chunks.size());
    EXPECT_TRUE(big.empty()) << "finish() leaves the builder empty";
  }
}

TEST(XetXorb, ChunkRangeDecoderTakesPiecesOfAnySize) {
  const auto chunks = mixed_chunks();
  const BuiltXorb x = build(chunks, XorbFooter::kWrite);
  const std::span<const uint8_t> range = std::span(x.bytes).first(x.index.chunks_end);
  std::vector<uint8_t> want;
  for (const auto& c : chunks) want.insert(want.end(), c.begin(), c.end());
  std::mt19937 rng(3);
  for (int round = 0; round < 30; ++round) {
    ChunkRangeDecoder d("range");
    std::vector<uint8_t> got;
    size_t pos = 0;
    const size_t max_piece = round < 10 ? 7 : round < 20 ? 5000 : 200000;
    while (pos < range.size()) {
      const size_t n = std::min<size_t>(range.size() - pos, 1 + rng() % max_piece);
      d.feed(range.subspan(pos, n), [&](std::span<const uint8_t> c) { got.insert(got.end(), c.begin(), c.end()); });
      pos += n;
    }
    d.finish();
    EXPECT_EQ(got, want);
    EXPECT_EQ(d.chunks(), chunks.size());
    EXPECT_EQ(d.consumed(), range.size());
    EXPECT_EQ(d.decoded(), want.size());
  }
  std::vector<uint8_t> out;
  EXPECT_EQ(decode_chunk_range(range, out, "range").size(), chunks.size());
  // A range cut inside a chunk: everything before it, then a clear error.
  ChunkRangeDecoder cut("cut range");
  size_t seen = 0;
  cut.feed(range.first(x.index.chunks[2].offset + 100), [&](std::span<const uint8_t>) { ++seen; });
  EXPECT_EQ(seen, 2u);
  const Error e = error_of([&] { cut.finish(); });
  EXPECT_NE(std::string(e.what()).find("cut range: the range ends inside the chunk at byte " +
                                       std::to_string(x.index.chunks[2].offset) + " (100 of its bytes arrived)"),
            std::string::npos)
      << e.what();
  // A whole xorb is not a range: its footer is named.
  std::vector<uint8_t> o;
  const Error f = error_of([&] { decode_chunk_range(x.bytes, o, "whole"); });
  EXPECT_NE(std::string(f.what()).find("xorb footer"), std::string::npos) << f.what();
}

TEST(XetXorb, TruncatedXorbsAreRefused) {
  const BuiltXorb x = build({random_bytes(3000, 31), std::vector<uint8_t>(5000, 7), weight_like(4000, 32)},
                            XorbFooter::kWrite);
  for (size_t n = 0; n < x.bytes.size(); ++n) {
    const std::span<const uint8_t> cut = std::span(x.bytes).first(n);
    if (n == x.index.chunks_end) {  // the xorb without its footer: the same xorb
      EXPECT_FALSE(parse_xorb(cut, "cut.xorb", &x.index.hash).has_footer);
      continue;
    }
    try {
      parse_xorb(cut, "cut.xorb", &x.index.hash);
      ADD_FAILURE() << "a xorb cut to " << n << " bytes was accepted";
    } catch (const Error& e) {
      EXPECT_TRUE(e.kind() == ErrorKind::kInvalidInput || e.kind() == ErrorKind::kIntegrity) << e.what();
      EXPECT_EQ(std::string(e.what()).rfind("cut.xorb: ", 0), 0u) << e.what();
    }
  }
}

TEST(XetXorb, HostileFootersAndChunksAreNamed) {
  const BuiltXorb x = build({random_bytes(3000, 41), weight_like(4000, 42)}, XorbFooter::kWrite);
  const size_t f = x.index.chunks_end;
  struct Case {
    size_t at;
    uint8_t value;
    const char* says;
  };
  const std::vector<Case> cases = {
      {f + 7, 2, "footer version 2"},
      {f + 8, 0, "the footer's xorb hash does not match"},
      {f + 40, 'Y', "expected the hash section identifier"},
      {f + 48, 3, "hash section chunk count is 3, the xorb has 2 chunks"},
      {f + 52 + 32, 0, "the footer's hash of chunk 1 does not match"},
      {f + 52 + 64 + 7, 0, "boundary section version 0"},
      {f + 52 + 64 + 12, 0, "the footer's end of chunk 0 does not match"},
      {f + 52 + 64 + 12 + 8 + 4, 0, "uncompressed end of chunk 1"},
      {f + 52 + 64 + 12 + 16 + 4, 0, "hash section offset"},
      {x.bytes.size() - 4, 0, "its trailing length says"},
      {1, 0xFF, "stored bytes"},
      {x.index.chunks[1].offset + kChunkHeaderBytes + 2, 0x5A, ""},  // inside the LZ4 frame
  };
  for (const Case& c : cases) {
    auto bytes = x.bytes;
    bytes[c.at] = c.value == bytes[c.at] ? static_cast<uint8_t>(c.value + 1) : c.value;
    const Error e = error_of([&] { parse_xorb(bytes, "hostile.xorb"); });
    EXPECT_NE(std::string(e.what()).find(c.says), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).rfind("hostile.xorb: ", 0), 0u) << e.what();
  }
  auto trailing = x.bytes;
  trailing.push_back(0);
  EXPECT_NE(std::string(error_of([&] { parse_xorb(trailing, "t"); }).what()).find("1 bytes follow the footer"),
            std::string::npos);
  const Hash other = chunk_hash(std::vector<uint8_t>{1});
  const Error wrong = error_of([&] { parse_xorb(x.bytes, "w", &other); });
  EXPECT_EQ(wrong.kind(), ErrorKind::kIntegrity);
  EXPECT_NE(std::string(wrong.what()).find("expected " + other.to_hex()), std::string::npos);
  EXPECT_NE(std::string(error_of([&] { parse_xorb({}, "empty"); }).what()).find("a xorb without chunks"),
            std::string::npos);
  std::vector<uint8_t> huge(kXorbMaxBytes + 1);
  EXPECT_NE(std::string(error_of([&] { parse_xorb(huge, "huge"); }).what()).find("more than the 67108864 allowed"),
            std::string::npos);
}

}  // namespace xet_xorb_tests
