// The gearhash chunker (src/xet/chunker.h) against xet-core's own test
// vectors (xet_data/src/deduplication/chunking.rs at af1a3ff9: the 1 MB
// splitmix64 data, 1 MB of one constant byte, and its "triggering" pattern
// that puts a would-be cut at every distance from the 8 KiB minimum), and the
// rules every stream must keep: bounds, the last chunk, any split of the
// input giving the same cuts. The byte-for-byte comparison with xet-core's
// wasm build on other data is in xet_oracle_test.cpp.
#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <vector>

#include "xet/chunker.h"

namespace skippy::xet {
namespace {

// xet-core's get_triggering_base_data: a 128-byte pattern known to cut,
// `padding` zero bytes after it, the whole repeated to n bytes.
std::vector<uint8_t> triggering_data(size_t n, size_t padding) {
  std::vector<uint8_t> d = {
      154, 52,  42,  34,  159, 75,  126, 224, 70,  236, 12,  196, 79,  236, 178, 124, 127, 50,  99,  178, 44,  176,
      174, 126, 250, 235, 205, 174, 252, 122, 35,  10,  20,  101, 214, 69,  193, 8,   115, 105, 158, 228, 120, 111,
      136, 162, 198, 251, 211, 183, 253, 252, 164, 147, 63,  16,  186, 162, 117, 23,  170, 36,  205, 187, 174, 76,
      210, 174, 211, 175, 12,  173, 145, 59,  2,   70,  222, 181, 159, 227, 182, 156, 189, 51,  226, 106, 24,  50,
      183, 157, 140, 10,  8,   23,  212, 70,  10,  234, 23,  33,  219, 254, 39,  236, 70,  49,  191, 116, 9,   115,
      15,  101, 26,  159, 165, 220, 15,  170, 56,  125, 92,  163, 94,  235, 38,  40,  49,  81,
  };
  d.resize(d.size() + padding, 0);
  while (d.size() < n) {
    const size_t take = std::min(n - d.size(), d.size());
    d.insert(d.end(), d.begin(), d.begin() + static_cast<ptrdiff_t>(take));
  }
  return d;
}

// The cuts when the stream arrives in pieces of the given sizes (cycled).
std::vector<uint64_t> boundaries_fed(const std::vector<uint8_t>& data, const std::vector<size_t>& pieces) {
  std::vector<uint64_t> ends;
  Chunker c;
  uint64_t chunk_start = 0;
  size_t pos = 0;
  for (size_t k = 0; pos < data.size(); ++k) {
    const size_t take = std::min(pieces[k % pieces.size()], data.size() - pos);
    size_t off = 0;
    while (off < take) {
      const auto cut = c.next_cut({data.data() + pos + off, take - off});
      if (!cut) break;
      off += *cut;
      chunk_start = pos + off;
      ends.push_back(chunk_start);
    }
    pos += take;
  }
  if (const size_t last = c.finish(); last > 0) {
    EXPECT_EQ(chunk_start + last, data.size());
    ends.push_back(data.size());
  }
  return ends;
}

TEST(XetChunker, XetCoreOneMegabyteSplitmixVector) {
  const auto data = test::splitmix64_data(1'000'000, 0);
  ASSERT_EQ(data[0], 175);
  ASSERT_EQ(data[127], 132);
  ASSERT_EQ(data[111111], 118);
  const std::vector<uint64_t> expected = {84493,  134421, 144853, 243318, 271793, 336457, 467529,
                                          494581, 582000, 596735, 616815, 653164, 678202, 724510,
                                          815591, 827760, 958832, 991092, 1000000};
  EXPECT_EQ(chunk_boundaries(data), expected);
}

TEST(XetChunker, XetCoreConstantDataVectorCutsAtTheMaximum) {
  const std::vector<uint8_t> data(1'000'000, 59);
  const std::vector<uint64_t> expected = {131072, 262144, 393216, 524288, 655360, 786432, 917504, 1000000};
  EXPECT_EQ(chunk_boundaries(data), expected);
  EXPECT_EQ(chunk_boundaries(std::vector<uint8_t>(8 * kMaxChunkSize, 0)).size(), 8u);
}

TEST(XetChunker, XetCoreTriggeringDataAtTheMinimumBoundary) {
  // A few of xet-core's 128 reference rows (test_correctness_100kb_hitting_data);
  // xet_oracle_test.cpp compares all 128 with xet-core's wasm build.
  struct Row {
    size_t padding;
    uint8_t at_11111;
    std::vector<uint64_t> cuts;
  };
  const Row rows[] = {
      {0, 236, {8256, 16448, 24640, 32832, 41024, 49216, 57408, 65536}},
      {1, 50, {8320, 16576, 24832, 33088, 41344, 49600, 57856, 65536}},
      {2, 36, {8254, 16574, 24894, 33214, 41534, 49854, 58174, 65536}},
      {11, 0, {8265, 16466, 24667, 32868, 41069, 49270, 57471, 65536}},
      {38, 0, {8198, 16498, 24798, 33098, 41398, 49698, 57998, 65536}},
      {45, 105, {8195, 16499, 24803, 33107, 41411, 49715, 58019, 65536}},
      {111, 170, {8429, 16794, 25159, 33524, 41889, 50254, 58619, 65536}},
      {126, 0, {8192, 16574, 24956, 33338, 41720, 50102, 58484, 65536}},
      {127, 0, {8224, 16639, 25054, 33469, 41884, 50299, 58714, 65536}},
  };
  for (const auto& r : rows) {
    SCOPED_TRACE(r.padding);
    const auto data = triggering_data(65536, r.padding);
    ASSERT_EQ(data[11111], r.at_11111);
    EXPECT_EQ(chunk_boundaries(data), r.cuts);
    EXPECT_EQ(boundaries_fed(data, {1, 37, 255}), r.cuts);
  }
}

TEST(XetChunker, ShortStreamsAndTheLastChunk) {
  EXPECT_TRUE(chunk_boundaries({}).empty());  // no bytes, no chunk
  for (size_t n : {size_t{1}, size_t{100}, kMinChunkSize - 1, kMinChunkSize}) {
    const auto data = test::splitmix64_data(n, n);
    EXPECT_EQ(chunk_boundaries(data), std::vector<uint64_t>{n}) << n;
  }
  // The last chunk may be shorter than the minimum.
  const auto data = test::splitmix64_data(kMaxChunkSize + 5, 3);
  const auto cuts = chunk_boundaries(data);
  ASSERT_GE(cuts.size(), 2u);
  EXPECT_EQ(cuts.back(), data.size());
  Chunker c;
  EXPECT_EQ(c.finish(), 0u);
  EXPECT_FALSE(c.next_cut({data.data(), 100}).has_value());
  EXPECT_EQ(c.open_length(), 100u);
  EXPECT_EQ(c.finish(), 100u);
  EXPECT_EQ(c.open_length(), 0u);
}

TEST(XetChunker, EveryChunkButTheLastIsWithinTheBoundsAndAnySplitCutsAlike) {
  std::mt19937 rng(5);
  for (int round = 0; round < 6; ++round) {
    // Random bytes, then long runs of one byte (cuts at the maximum) inside.
    auto data = test::splitmix64_data(3'000'000 + rng() % 100'000, round);
    if (round % 2 == 1) std::fill(data.begin() + 500'000, data.begin() + 900'000, static_cast<uint8_t>(round));
    const auto cuts = chunk_boundaries(data);
    uint64_t prev = 0;
    for (size_t i = 0; i < cuts.size(); ++i) {
      const uint64_t len = cuts[i] - prev;
      if (i + 1 < cuts.size()) {
        EXPECT_GE(len, kMinChunkSize);
      }
      EXPECT_LE(len, kMaxChunkSize);
      EXPECT_GT(len, 0u);
      prev = cuts[i];
    }
    EXPECT_EQ(cuts.back(), data.size());
    // xet-core's test_chunk_boundaries feeds 1, 37 and 255 bytes at a time.
    EXPECT_EQ(boundaries_fed(data, {1, 37, 255}), cuts) << round;
    EXPECT_EQ(boundaries_fed(data, {kMinChunkSize - 65, 64, 1, kMaxChunkSize + 3}), cuts) << round;
    std::vector<size_t> random_pieces(50);
    for (auto& p : random_pieces) p = 1 + rng() % 300'000;
    EXPECT_EQ(boundaries_fed(data, random_pieces), cuts) << round;
  }
}

TEST(XetChunker, AverageChunkIsNearTheTarget) {
  const auto data = test::splitmix64_data(64 << 20, 9);
  const auto cuts = chunk_boundaries(data);
  const double mean = static_cast<double>(data.size()) / static_cast<double>(cuts.size());
  // A 16-bit mask after an 8 KiB minimum: about 8 + 64 KiB, capped at 128.
  EXPECT_GT(mean, 55'000.0);
  EXPECT_LT(mean, 75'000.0);
}

}  // namespace
}  // namespace skippy::xet
