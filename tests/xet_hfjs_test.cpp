// What huggingface.js uploads through Xet (tests/js/xet_hfjs_upload.mjs runs
// its commit() against an in-process fake Hub and CAS): our parsers read its
// xorbs (its own LZ4 frames and byte grouping) and its shard, every file is
// rebuilt from the shard's terms and the xorbs, every verification entry and
// SHA-256 checks out, and our shard builder writes its shard again byte for
// byte (without the footer, which uploads must omit).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "test_util.h"
#include "util/sha256.h"
#include "xet/bytes.h"
#include "xet/hash.h"
#include "xet/shard.h"
#include "xet/xorb.h"

namespace xet_hfjs_tests {

namespace fs = std::filesystem;
using namespace skippy::xet;
using skippy::test::TempDir;

std::array<uint8_t, 32> sha256_of(const std::vector<uint8_t>& data) {
  const std::string hex = skippy::sha256_hex(std::span<const uint8_t>(data));
  std::array<uint8_t, 32> d;
  for (size_t i = 0; i < 32; ++i) d[i] = static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return d;
}

TEST(XetHuggingfaceJs, OurParsersReadItsUploadAndOurBuilderWritesItsShard) {
  const fs::path js = fs::path(SKIPPY_SOURCE_DIR) / "tests" / "js";
  if (!fs::exists(js / "node_modules/@huggingface/hub")) GTEST_SKIP() << "run scripts/install-deps.sh for @huggingface/hub";
  TempDir tmp;
  std::vector<fs::path> inputs = {skippy::test::data_path("llama-tiny-f16.gguf"),
                                  skippy::test::data_path("ggml-vocab-llama-spm.gguf"), tmp / "zeros.bin",
                                  tmp / "small.bin"};
  skippy::test::write_file(inputs[2], std::vector<uint8_t>(200000, 0));
  skippy::test::write_file(inputs[3], std::vector<uint8_t>{'h', 'i', '\n'});
  std::vector<std::string> args = {(js / "xet_hfjs_upload.mjs").string(), (tmp / "out").string()};
  for (const auto& p : inputs) args.push_back(p.string());
  const auto run = skippy::test::run_program("node", args);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto manifest = nlohmann::json::parse(run.out);

  struct Parsed {
    std::vector<uint8_t> bytes;
    XorbIndex index;
  };
  std::map<std::string, Parsed> xorbs;  // by hex hash
  std::map<ChunkScheme, int> schemes;
  for (const auto& x : manifest["xorbs"]) {
    const auto hash = Hash::from_hex(x["hash"].get<std::string>());
    ASSERT_TRUE(hash.has_value());
    Parsed p{skippy::test::read_file(x["path"].get<std::string>()), {}};
    p.index = parse_xorb(p.bytes, x["path"].get<std::string>(), &*hash);
    EXPECT_FALSE(p.index.has_footer) << "huggingface.js uploads xorbs without footer";
    for (const XorbChunk& c : p.index.chunks) ++schemes[c.scheme];
    xorbs.emplace(hash->to_hex(), std::move(p));
  }
  EXPECT_GT(schemes[ChunkScheme::kNone], 0);
  EXPECT_GT(schemes[ChunkScheme::kLz4], 0);
  EXPECT_GT(schemes[ChunkScheme::kBg4Lz4], 0) << "the f16 weights group well";

  ASSERT_EQ(manifest["shards"].size(), 1u);
  const auto shard_bytes = skippy::test::read_file(manifest["shards"][0].get<std::string>());
  const Shard shard = parse_shard(shard_bytes, "huggingface.js shard");
  ASSERT_TRUE(shard.footer.has_value()) << "huggingface.js writes a footer";
  ASSERT_EQ(shard.files.size(), inputs.size());
  ASSERT_EQ(shard.xorbs.size(), xorbs.size());

  for (const ShardFile& f : shard.files) {
    ASSERT_TRUE(f.sha256.has_value());
    const fs::path* input = nullptr;
    std::vector<uint8_t> content;
    for (const auto& p : inputs) {
      content = skippy::test::read_file(p);
      if (sha256_of(content) == *f.sha256) {
        input = &p;
        break;
      }
    }
    ASSERT_NE(input, nullptr) << "the shard's SHA-256 " << Hash{*f.sha256}.to_hex() << " is one of the inputs'";
    ASSERT_EQ(f.verification.size(), f.terms.size());
    std::vector<uint8_t> rebuilt;
    std::vector<ChunkRef> chunks;
    for (size_t i = 0; i < f.terms.size(); ++i) {
      const ShardTerm& t = f.terms[i];
      const auto it = xorbs.find(t.xorb_hash.to_hex());
      ASSERT_NE(it, xorbs.end()) << "term " << i << " names a xorb that was uploaded";
      const size_t before = rebuilt.size();
      extract_chunks(it->second.bytes, it->second.index, t.chunk_start, t.chunk_end, rebuilt, "term");
      EXPECT_EQ(rebuilt.size() - before, t.unpacked_bytes);
      std::vector<Hash> range;
      for (uint32_t c = t.chunk_start; c < t.chunk_end; ++c) {
        range.push_back(it->second.index.chunks[c].hash);
        chunks.push_back({it->second.index.chunks[c].hash, it->second.index.chunks[c].size});
      }
      EXPECT_EQ(f.verification[i], verification_hash(range)) << "term " << i;
    }
    EXPECT_EQ(rebuilt, content) << input->filename();
    EXPECT_EQ(f.file_hash, file_hash(chunks)) << input->filename();
  }

  ShardBuilder ours;
  for (const ShardFile& f : shard.files) ours.add_file(f);
  for (const ShardXorb& x : shard.xorbs) {
    const Parsed& p = xorbs.at(x.hash.to_hex());
    const ShardXorb mine = shard_xorb(p.index, p.bytes.size());
    EXPECT_EQ(mine.unpacked_bytes, x.unpacked_bytes);
    EXPECT_EQ(mine.serialized_bytes, x.serialized_bytes);
    ASSERT_EQ(mine.chunks.size(), x.chunks.size());
    for (size_t i = 0; i < x.chunks.size(); ++i) {
      EXPECT_EQ(mine.chunks[i].hash, x.chunks[i].hash);
      EXPECT_EQ(mine.chunks[i].unpacked_offset, x.chunks[i].unpacked_offset);
      EXPECT_EQ(mine.chunks[i].size, x.chunks[i].size);
    }
    ours.add_xorb(mine);
  }
  std::vector<uint8_t> theirs(shard_bytes.begin(), shard_bytes.end() - kShardFooterBytes);
  std::fill(theirs.begin() + 40, theirs.begin() + 48, uint8_t{0});  // footer size: none
  EXPECT_EQ(ours.finish(), theirs);
}

}  // namespace xet_hfjs_tests
