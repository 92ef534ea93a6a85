// src/xet against xet-core itself, byte for byte: xet-core's wasm build as
// shipped in @huggingface/hub 2.17.5 (tests/js/xet_oracle.mjs runs it in node,
// offline). Chunk boundaries and chunk hashes, the xorb hash over a file's
// chunks, the file hash, term verification hashes and shard HMACs must be
// the same on random data of every size class, on all-zero data, on
// xet-core's own test data and on the real fixtures in tests/data.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "test_util.h"
#include "xet/file_hasher.h"
#include "xet/hash.h"

namespace skippy::xet {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path oracle_script() { return fs::path(SKIPPY_SOURCE_DIR) / "tests/js/xet_oracle.mjs"; }

bool oracle_available() {
  return fs::exists(fs::path(SKIPPY_SOURCE_DIR) / "tests/js/node_modules/@huggingface/hub/src/vendor/xet-chunk");
}

#define REQUIRE_ORACLE()                                                                     \
  if (!oracle_available()) {                                                                 \
    GTEST_SKIP() << "run scripts/install-deps.sh to install @huggingface/hub (tests/js)";    \
  }

json run_oracle(const std::vector<std::string>& args) {
  std::vector<std::string> all = {oracle_script().string()};
  all.insert(all.end(), args.begin(), args.end());
  const auto r = test::run_program("node", all);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json::parse(r.out);
}

std::vector<uint8_t> oracle_random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

// The oracle's verification ranges (xet_oracle.mjs ranges()).
std::vector<std::pair<size_t, size_t>> oracle_ranges(size_t n) {
  if (n == 0) return {};
  std::vector<std::pair<size_t, size_t>> r = {{0, n}, {0, 1}, {n - 1, n}};
  if (n > 2) r.emplace_back(n / 3, 2 * n / 3);
  return r;
}

const Hash& oracle_hmac_key() {
  static const Hash key = *Hash::from_hex("0f1e2d3c4b5a69788796a5b4c3d2e1f00112233445566778899aabbccddeeff0");
  return key;
}

// Compares our pass over each file with the oracle's document for it.
void expect_same_as_oracle(const std::vector<fs::path>& files, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = extra;
  args.insert(args.end(), {"--hmac-key", oracle_hmac_key().to_hex()});
  for (const auto& f : files) args.push_back(f.string());
  const json out = run_oracle(args);
  ASSERT_EQ(out["files"].size(), files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    const json& doc = out["files"][i];
    SCOPED_TRACE(files[i].string());
    const auto data = test::read_file(files[i]);
    const auto ours = hash_bytes(data);
    ASSERT_EQ(doc["size"].get<uint64_t>(), data.size());
    ASSERT_EQ(doc["chunks"].size(), ours.chunks.size());
    std::vector<ChunkRef> refs;
    std::vector<Hash> hashes;
    for (size_t k = 0; k < ours.chunks.size(); ++k) {
      ASSERT_EQ(doc["chunks"][k]["length"].get<uint32_t>(), ours.chunks[k].length) << "chunk " << k;
      ASSERT_EQ(doc["chunks"][k]["hash"].get<std::string>(), ours.chunks[k].hash.to_hex()) << "chunk " << k;
      ASSERT_EQ(doc["hmac"][k].get<std::string>(), keyed_hash(oracle_hmac_key(), ours.chunks[k].hash).to_hex());
      refs.push_back({ours.chunks[k].hash, ours.chunks[k].length});
      hashes.push_back(ours.chunks[k].hash);
    }
    EXPECT_EQ(doc["xorb_hash"].get<std::string>(), xorb_hash(refs).to_hex());
    EXPECT_EQ(doc["file_hash"].get<std::string>(), ours.result.file_hash.to_hex());
    const auto ranges = oracle_ranges(hashes.size());
    ASSERT_EQ(doc["verification"].size(), ranges.size());
    for (size_t r = 0; r < ranges.size(); ++r) {
      const auto [s, e] = ranges[r];
      EXPECT_EQ(doc["verification"][r]["start"].get<size_t>(), s);
      EXPECT_EQ(doc["verification"][r]["hash"].get<std::string>(),
                verification_hash(std::span(hashes).subspan(s, e - s)).to_hex());
    }
  }
}

TEST(XetOracle, RandomDataOfEverySizeClass) {
  REQUIRE_ORACLE();
  test::TempDir tmp;
  std::vector<fs::path> files;
  // Empty, under the minimum, at and around the minimum and maximum chunk
  // sizes and their multiples, and several megabytes.
  const size_t sizes[] = {0,      1,      100,    8191,   8192,    8193,    65535,     65536,    65537,
                          131071, 131072, 131073, 196608, 262144,  262145,  1'000'000, 5'000'003};
  for (size_t n : sizes) {
    files.push_back(tmp / ("random-" + std::to_string(n)));
    test::write_file(files.back(), oracle_random_bytes(n, static_cast<uint32_t>(n) + 1));
  }
  expect_same_as_oracle(files);
}

TEST(XetOracle, AllZeroAndRepetitiveData) {
  REQUIRE_ORACLE();
  test::TempDir tmp;
  std::vector<fs::path> files;
  for (size_t n : {size_t{8192}, size_t{200'000}, size_t{3u << 20}}) {
    files.push_back(tmp / ("zero-" + std::to_string(n)));
    test::write_file(files.back(), std::vector<uint8_t>(n, 0));
  }
  // A short pattern repeated: the hash sees the same window again and again.
  std::vector<uint8_t> pattern;
  for (size_t i = 0; i < 2'000'000; ++i) pattern.push_back(static_cast<uint8_t>((i * 7) % 13));
  files.push_back(tmp / "pattern");
  test::write_file(files.back(), pattern);
  // Random bytes with zero runs inside (weights with zero-padded tensors).
  auto mixed = oracle_random_bytes(3'000'000, 42);
  std::fill(mixed.begin() + 100'000, mixed.begin() + 400'000, 0);
  std::fill(mixed.begin() + 1'000'000, mixed.begin() + 1'008'000, 0);
  files.push_back(tmp / "mixed");
  test::write_file(files.back(), mixed);
  expect_same_as_oracle(files);
}

TEST(XetOracle, XetCoreTestDataAndStreamingFeeds) {
  REQUIRE_ORACLE();
  test::TempDir tmp;
  std::vector<fs::path> files;
  // xet-core's 1 MB splitmix64 vector (chunking.rs test_correctness_1mb_random_data).
  const auto sm = test::splitmix64_data(1'000'000, 0);
  files.push_back(tmp / "splitmix-1mb");
  test::write_file(files.back(), sm);
  // All 128 rows of its triggering-pattern test (a would-be cut at every
  // distance from the 8 KiB minimum).
  const std::vector<uint8_t> base = {
      154, 52,  42,  34,  159, 75,  126, 224, 70,  236, 12,  196, 79,  236, 178, 124, 127, 50,  99,  178, 44,  176,
      174, 126, 250, 235, 205, 174, 252, 122, 35,  10,  20,  101, 214, 69,  193, 8,   115, 105, 158, 228, 120, 111,
      136, 162, 198, 251, 211, 183, 253, 252, 164, 147, 63,  16,  186, 162, 117, 23,  170, 36,  205, 187, 174, 76,
      210, 174, 211, 175, 12,  173, 145, 59,  2,   70,  222, 181, 159, 227, 182, 156, 189, 51,  226, 106, 24,  50,
      183, 157, 140, 10,  8,   23,  212, 70,  10,  234, 23,  33,  219, 254, 39,  236, 70,  49,  191, 116, 9,   115,
      15,  101, 26,  159, 165, 220, 15,  170, 56,  125, 92,  163, 94,  235, 38,  40,  49,  81,
  };
  for (size_t padding = 0; padding < 128; ++padding) {
    auto d = base;
    d.resize(d.size() + padding, 0);
    while (d.size() < 65536) {
      const size_t take = std::min<size_t>(65536 - d.size(), d.size());
      d.insert(d.end(), d.begin(), d.begin() + static_cast<ptrdiff_t>(take));
    }
    files.push_back(tmp / ("trigger-" + std::to_string(padding)));
    test::write_file(files.back(), d);
  }
  expect_same_as_oracle(files);
  // The oracle fed 1000 bytes at a time cuts the same (and so do we: our
  // split-independence is tested in xet_chunker_test.cpp).
  expect_same_as_oracle({files[0], files[1]}, {"--feed", "1000"});
}

TEST(XetOracle, RealFixtures) {
  REQUIRE_ORACLE();
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(fs::path(SKIPPY_TEST_DATA_DIR))) {
    if (e.path().extension() == ".gguf") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 5u);
  expect_same_as_oracle(files);
}

TEST(XetOracle, MerkleTreesOfManyShapes) {
  REQUIRE_ORACLE();
  // Random chunk lists of 0..300 chunks (and one of 3000): every grouping of
  // the tree's levels, checked against xet-core's compute_xorb_hash and
  // compute_file_hash.
  std::mt19937_64 rng(17);
  json lists = json::array();
  std::vector<std::vector<ChunkRef>> ours;
  std::vector<size_t> lengths;
  for (size_t n = 0; n <= 300; n += (n < 40 ? 1 : 13)) lengths.push_back(n);
  lengths.push_back(3000);
  for (size_t n : lengths) {
    json list = json::array();
    std::vector<ChunkRef> refs;
    for (size_t i = 0; i < n; ++i) {
      Hash h;
      for (auto& b : h.bytes) b = static_cast<uint8_t>(rng());
      const uint64_t len = rng() % 131073;
      refs.push_back({h, len});
      list.push_back({{"hash", h.to_hex()}, {"length", len}});
    }
    lists.push_back(list);
    ours.push_back(std::move(refs));
  }
  test::TempDir tmp;
  const auto path = tmp / "lists.json";
  const std::string text = lists.dump();
  test::write_file(path, std::vector<uint8_t>(text.begin(), text.end()));
  const json out = run_oracle({"--merkle", path.string()});
  ASSERT_EQ(out.size(), ours.size());
  for (size_t i = 0; i < ours.size(); ++i) {
    SCOPED_TRACE(ours[i].size());
    EXPECT_EQ(out[i]["xorb_hash"].get<std::string>(), xorb_hash(ours[i]).to_hex());
    EXPECT_EQ(out[i]["file_hash"].get<std::string>(), file_hash(ours[i]).to_hex());
  }
}

}  // namespace
}  // namespace skippy::xet
