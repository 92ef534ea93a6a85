// Shards (src/xet/shard.h): the upload shard byte for byte against the
// layout in hub-docs shard.md, dedupe shards with their footer, the
// builder's size accounting, and hostile bytes.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "skippy/error.h"
#include "util/sha256.h"
#include "xet/bytes.h"
#include "xet/hash.h"
#include "xet/shard.h"
#include "xet/xorb.h"

namespace xet_shard_tests {

using namespace skippy::xet;
using skippy::Error;
using skippy::ErrorKind;

Hash h_of(uint8_t seed) {
  Hash h;
  for (size_t i = 0; i < 32; ++i) h.bytes[i] = static_cast<uint8_t>(seed * 31 + i);
  return h;
}

template <class F>
std::string error_text(F&& f, ErrorKind kind = ErrorKind::kInvalidInput) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error thrown";
  return "";
}

std::array<uint8_t, 32> digest_of(const std::string& s) {
  const std::string hex = skippy::sha256_hex(s);
  std::array<uint8_t, 32> d;
  for (size_t i = 0; i < 32; ++i) d[i] = static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return d;
}

ShardFile sample_file() {
  ShardFile f;
  f.file_hash = h_of(1);
  f.terms = {{h_of(2), 0, 1000, 0, 2}, {h_of(3), 0, 500, 7, 8}};
  f.verification = {h_of(4), h_of(5)};
  f.sha256 = digest_of("some data");
  return f;
}

ShardXorb sample_xorb() {
  ShardXorb x;
  x.hash = h_of(2);
  x.unpacked_bytes = 1000;
  x.serialized_bytes = 1016;
  x.chunks = {{h_of(6), 0, 400, 0}, {h_of(7), 400, 600, 0}};
  return x;
}

TEST(XetShard, UploadShardIsTheSpecsLayoutByteForByte) {
  ShardBuilder b;
  b.add_file(sample_file());
  b.add_xorb(sample_xorb());
  const size_t promised = b.bytes();
  const std::vector<uint8_t> got = b.finish();
  EXPECT_EQ(got.size(), promised);
  EXPECT_TRUE(b.empty());

  // Written out here from hub-docs shard.md, independently of serialize_shard.
  std::vector<uint8_t> want;
  const char tag[] = "HFRepoMetaData";
  want.insert(want.end(), tag, tag + 14);
  for (int v : {0, 85, 105, 103, 69, 106, 123, 129, 87, 131, 165, 189, 217, 92, 205, 209, 74, 169}) {
    want.push_back(static_cast<uint8_t>(v));
  }
  put_u64(want, 2);  // version
  put_u64(want, 0);  // no footer
  put_hash(want, h_of(1));
  put_u32(want, 0xC0000000u);  // verification + metadata extension
  put_u32(want, 2);
  put_zeros(want, 8);
  for (auto [x, bytes, a, z] : {std::tuple{2, 1000, 0, 2}, std::tuple{3, 500, 7, 8}}) {
    put_hash(want, h_of(static_cast<uint8_t>(x)));
    put_u32(want, 0);
    put_u32(want, static_cast<uint32_t>(bytes));
    put_u32(want, static_cast<uint32_t>(a));
    put_u32(want, static_cast<uint32_t>(z));
  }
  for (uint8_t v : {uint8_t{4}, uint8_t{5}}) {
    put_hash(want, h_of(v));
    put_zeros(want, 16);
  }
  // SHA-256("some data") = 1307990e6ba5ca14 5eb35e99182a9bec 46531bc54ddf656a 602c780fa0240dee,
  // stored word by word as little-endian u64 (xet-core's DataHash::from_be_bytes).
  for (uint64_t w : {0x1307990e6ba5ca14ull, 0x5eb35e99182a9becull, 0x46531bc54ddf656aull, 0x602c780fa0240deeull}) {
    put_u64(want, w);
  }
  put_zeros(want, 16);
  want.insert(want.end(), 32, 0xFF);  // bookend
  put_zeros(want, 16);
  put_hash(want, h_of(2));
  put_u32(want, 0);
  put_u32(want, 2);
  put_u32(want, 1000);
  put_u32(want, 1016);
  for (auto [c, off, n] : {std::tuple{6, 0, 400}, std::tuple{7, 400, 600}}) {
    put_hash(want, h_of(static_cast<uint8_t>(c)));
    put_u32(want, static_cast<uint32_t>(off));
    put_u32(want, static_cast<uint32_t>(n));
    put_zeros(want, 8);
  }
  want.insert(want.end(), 32, 0xFF);
  put_zeros(want, 16);
  EXPECT_EQ(got, want);

  // The stored SHA-256 prints as the usual hex through Xet's hash form.
  Hash stored;
  std::copy(got.begin() + 48 + 5 * 48, got.begin() + 48 + 5 * 48 + 32, stored.bytes.begin());
  EXPECT_EQ(stored.to_hex(), skippy::sha256_hex(std::string("some data")));
  EXPECT_EQ(stored, sha256_digest_as_hash(*sample_file().sha256));

  const Shard back = parse_shard(got, "upload.shard");
  ASSERT_EQ(back.files.size(), 1u);
  EXPECT_EQ(back.files[0].sha256, sample_file().sha256);
  EXPECT_EQ(back.files[0].verification, sample_file().verification);
  EXPECT_EQ(back.files[0].size(), 1500u);
  ASSERT_EQ(back.xorbs.size(), 1u);
  EXPECT_EQ(back.xorbs[0].chunks[1].unpacked_offset, 400u);
  EXPECT_FALSE(back.footer.has_value());
}

TEST(XetShard, DedupeShardsKeepTheirFooter) {
  Shard s;
  s.xorbs = {sample_xorb(), sample_xorb()};
  s.xorbs[1].hash = h_of(9);
  s.xorbs[1].chunks[0].flags = kShardChunkGlobalDedupe;
  ShardFooter footer;
  footer.chunk_hash_key = h_of(10);
  footer.created = 1700000000;
  footer.key_expiry = 1700600000;
  s.footer = footer;
  const auto bytes = serialize_shard(s);
  ASSERT_EQ(bytes.size(), 48 + 48 + 2 * 3 * 48 + 48 + kShardFooterBytes);
  EXPECT_EQ(get_u64(bytes.data() + 40), kShardFooterBytes);
  const uint8_t* f = bytes.data() + bytes.size() - kShardFooterBytes;
  EXPECT_EQ(get_u64(f), 1u);                            // version
  EXPECT_EQ(get_u64(f + 8), 48u);                       // file section
  EXPECT_EQ(get_u64(f + 16), 96u);                      // xorb section
  EXPECT_EQ(get_u64(f + 192), bytes.size() - 200);      // the footer's own offset
  EXPECT_EQ(std::memcmp(f + 72, h_of(10).bytes.data(), 32), 0);  // the HMAC key
  EXPECT_EQ(get_u64(f + 168), 2 * 1016u);               // stored bytes on disk
  EXPECT_EQ(get_u64(f + 184), 2 * 1000u);               // stored bytes

  const Shard back = parse_shard(bytes, "dedupe.shard");
  ASSERT_TRUE(back.footer.has_value());
  EXPECT_EQ(back.footer->chunk_hash_key, h_of(10));
  EXPECT_EQ(back.footer->created, 1700000000u);
  EXPECT_EQ(back.footer->key_expiry, 1700600000u);
  EXPECT_EQ(back.footer->stored_bytes_on_disk, 2032u);
  ASSERT_EQ(back.xorbs.size(), 2u);
  EXPECT_EQ(back.xorbs[1].chunks[0].flags, kShardChunkGlobalDedupe);
  EXPECT_EQ(serialize_shard(back), bytes) << "a parsed shard serializes back to the same bytes";
}

TEST(XetShard, BuilderAccountsForEveryEntryAndRefusesWhatDoesNotFit) {
  ShardBuilder small(48 + 96 + 6 * 48 + 3 * 48);  // header, bookends, one file, one xorb
  EXPECT_TRUE(small.empty());
  EXPECT_EQ(small.bytes(), 144u);
  EXPECT_EQ(shard_file_bytes(sample_file()), 6 * 48u);
  EXPECT_EQ(shard_xorb_bytes(sample_xorb()), 3 * 48u);
  small.add_file(sample_file());
  EXPECT_TRUE(small.fits_xorb(sample_xorb()));
  EXPECT_FALSE(small.fits_file(sample_file()));
  EXPECT_THROW(small.add_file(sample_file()), Error);
  small.add_xorb(sample_xorb());
  EXPECT_FALSE(small.fits_xorb(sample_xorb()));
  EXPECT_EQ(small.finish().size(), 48 + 96 + 9 * 48u);

  ShardBuilder b;
  ShardFile no_verification = sample_file();
  no_verification.verification.clear();
  EXPECT_NE(error_text([&] { b.add_file(no_verification); }, ErrorKind::kUsage).find("0 verification hashes for 2 terms"),
            std::string::npos);
  ShardFile empty_term = sample_file();
  empty_term.terms[1].chunk_end = 7;
  EXPECT_THROW(b.add_file(empty_term), Error);
  ShardFile no_sha = sample_file();
  no_sha.sha256.reset();
  b.add_file(no_sha);
  const auto bytes = b.finish();
  EXPECT_EQ(get_u32(bytes.data() + 48 + 32), 0x80000000u) << "verification only";
  EXPECT_FALSE(parse_shard(bytes, "x").files[0].sha256.has_value());
}

TEST(XetShard, ShardXorbFromABuiltXorb) {
  XorbBuilder xb;
  const std::vector<uint8_t> a(5000, 1), b(7000, 2);
  xb.add(chunk_hash(a), a);
  xb.add(chunk_hash(b), b);
  const BuiltXorb x = xb.finish();
  const ShardXorb s = shard_xorb(x);
  EXPECT_EQ(s.hash, x.index.hash);
  EXPECT_EQ(s.unpacked_bytes, 12000u);
  EXPECT_EQ(s.serialized_bytes, x.bytes.size());
  ASSERT_EQ(s.chunks.size(), 2u);
  EXPECT_EQ(s.chunks[1].hash, chunk_hash(b));
  EXPECT_EQ(s.chunks[1].unpacked_offset, 5000u);
  EXPECT_EQ(s.chunks[1].size, 7000u);
}

TEST(XetShard, TruncatedShardsAreRefused) {
  Shard s;
  s.files = {sample_file()};
  s.xorbs = {sample_xorb()};
  for (bool footer : {false, true}) {
    if (footer) s.footer = ShardFooter{};
    const auto bytes = serialize_shard(s);
    for (size_t n = 0; n < bytes.size(); ++n) {
      try {
        parse_shard(std::span(bytes).first(n), "cut.shard");
        ADD_FAILURE() << "a shard cut to " << n << " bytes was accepted";
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
        EXPECT_EQ(std::string(e.what()).rfind("cut.shard: ", 0), 0u) << e.what();
      }
    }
  }
}

TEST(XetShard, HostileShardsAreNamed) {
  Shard s;
  s.files = {sample_file()};
  s.xorbs = {sample_xorb()};
  const auto upload = serialize_shard(s);
  s.footer = ShardFooter{};
  const auto dedupe = serialize_shard(s);
  const size_t file = 48, term1 = 144, xorb = 48 + 7 * 48, chunk1 = xorb + 96;
  const size_t footer = dedupe.size() - 200;
  struct Case {
    const std::vector<uint8_t>* base;
    size_t at;
    std::vector<uint8_t> bytes;
    const char* says;
  };
  const std::vector<Case> cases = {
      {&upload, 0, {'h'}, "not a shard"},
      {&upload, 32, {3}, "shard header version 3"},
      {&upload, 40, {100}, "footer size 100"},
      {&upload, file + 32, {1}, "unknown file flags 1"},
      {&upload, file + 36, {0xFF, 0xFF, 0xFF, 0xFF}, "8589934591 entries declared"},
      {&upload, term1 + 40, {9}, "term 1: empty chunk range [9, 8)"},
      {&upload, term1 + 36, {0, 0, 0, 0}, "term 1: no bytes"},
      {&upload, term1 + 36, {0xFF, 0xFF, 0xFF, 0xFF}, "4294967295 bytes in 1 chunks"},
      {&upload, xorb + 36, {0, 0, 0, 0}, "no chunks"},
      {&upload, xorb + 36, {0, 0, 0, 1}, "16777216 entries declared"},
      {&upload, xorb + 40, {0xE9}, "declares 1001 bytes, its chunks hold 1000"},
      {&upload, chunk1 + 32, {0x91}, "chunk 1 starts at 401, the chunks before it end at 400"},
      {&upload, chunk1 + 36, {0, 0, 0, 0}, "chunk 1 of 0 bytes"},
      {&dedupe, footer, {2}, "footer version 2"},
      {&dedupe, footer + 8, {47}, "file section offset is 47"},
      {&dedupe, footer + 16, {0}, "xorb section offset"},
      {&dedupe, footer + 32, {1}, "file lookup table"},
      {&dedupe, footer + 192, {0}, "footer offset"},
  };
  for (const Case& c : cases) {
    auto bytes = *c.base;
    std::copy(c.bytes.begin(), c.bytes.end(), bytes.begin() + static_cast<std::ptrdiff_t>(c.at));
    const std::string e = error_text([&] { parse_shard(bytes, "hostile.shard"); });
    EXPECT_NE(e.find(c.says), std::string::npos) << e;
    EXPECT_EQ(e.rfind("hostile.shard: ", 0), 0u) << e;
  }
  auto trailing = upload;
  trailing.push_back(0);
  EXPECT_NE(error_text([&] { parse_shard(trailing, "t"); }).find("1 bytes follow the xorb section"), std::string::npos);
  std::vector<uint8_t> huge(kShardMaxBytes + 1);
  EXPECT_NE(error_text([&] { parse_shard(huge, "h"); }).find("more than the 67108864 allowed"), std::string::npos);
  auto no_bookend = upload;
  no_bookend.resize(upload.size() - 48);
  EXPECT_NE(error_text([&] { parse_shard(no_bookend, "b"); }).find("xorb hash at byte"), std::string::npos);
}

}  // namespace xet_shard_tests
