// SplitStream: write-package's one pass over a (split) source model that
// writes every fragment, hashing the shards and the outputs on the way, in
// one lane or two; a source that shrinks under it is an error, and no output
// gets its final name unless it is complete.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "skippy/error.h"
#include "skippy/package_writer.h"
#include "util/file.h"
#include "util/sha256.h"
#include "test_util.h"
#include "publish/split_stream.h"
#include "util/mapped_read.h"
#include "xet/file_hasher.h"

namespace skippy {
namespace {

TEST(SplitStream, AnEmptyFirstShardNeitherHangsNorBreaksTheHashes) {
  // Regression: a zero-byte shard yielded a chunk that no job would take.
  test::TempDir t;
  test::write_file(t / "a.bin", {});
  std::vector<uint8_t> data(10000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i);
  test::write_file(t / "b.bin", data);
  const std::vector<std::shared_ptr<const MappedFile>> shards = {MappedFile::open(t / "a.bin"), MappedFile::open(t / "b.bin")};
  detail::StreamOutput out;
  out.final_path = t / "out.bin";
  out.header = {'H', 'D'};
  out.total_size = 2 + 5000;
  out.pieces.push_back({1, 1000, 5000, 2, 0});
  const auto r = detail::stream_split(shards, {out}, {});
  ASSERT_EQ(r.shard_sha256.size(), 2u);
  EXPECT_EQ(r.shard_sha256[0], sha256_hex(std::string_view()));
  EXPECT_EQ(r.shard_sha256[1], sha256_hex(std::span<const uint8_t>(data)));
  auto expect = std::vector<uint8_t>{'H', 'D'};
  expect.insert(expect.end(), data.begin() + 1000, data.begin() + 6000);
  EXPECT_EQ(test::read_file(t / "out.bin"), expect);
  EXPECT_EQ(r.output_sha256[0], sha256_hex(std::span<const uint8_t>(expect)));
}

// An output hashed after it is written (a name-ordered part): its pieces
// arrive in source order and land at decreasing offsets, with zero gaps
// between them; its digest is that of the finished file, in one pass and
// with on_output_complete (which sees it complete, under its final name).
TEST(SplitStream, AnOutputHashedAfterItIsWrittenTakesPiecesAtAnyOffset) {
  test::TempDir t;
  std::vector<uint8_t> data(30u << 20);  // several chunks
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + (i >> 13));
  test::write_file(t / "src.bin", data);
  const std::vector<std::shared_ptr<const MappedFile>> shards = {MappedFile::open(t / "src.bin")};
  // Source [0, 10 MiB) goes last in the output, [20 MiB, 30 MiB) first,
  // [12 MiB + 5, 12 MiB + 5 + 1000) in the middle after a gap.
  const uint64_t M = 1u << 20;
  auto make = [&](const std::filesystem::path& p, bool after) {
    detail::StreamOutput o;
    o.final_path = p;
    o.header = {'H', 'D', 'R'};
    o.hash_after_write = after;
    o.pieces.push_back({0, 0, 10 * M, 3 + 10 * M + 1000 + 29, 0});
    o.pieces.push_back({0, 12 * M + 5, 1000, 3 + 10 * M + 13, 0});
    o.pieces.push_back({0, 20 * M, 10 * M, 3, 0});
    o.total_size = 3 + 20 * M + 1000 + 29;
    return o;
  };
  std::vector<uint8_t> expect(3 + 20 * M + 1000 + 29, 0);
  expect[0] = 'H', expect[1] = 'D', expect[2] = 'R';
  std::copy(data.begin() + 20 * M, data.end(), expect.begin() + 3);
  std::copy(data.begin() + 12 * M + 5, data.begin() + 12 * M + 1005, expect.begin() + 3 + 10 * M + 13);
  std::copy(data.begin(), data.begin() + 10 * M, expect.begin() + 3 + 10 * M + 1000 + 29);
  const std::string want = sha256_hex(std::span<const uint8_t>(expect));

  // One pass, two outputs (one hashed as it streams, for contrast: its pieces
  // in source order), renamed at the end.
  detail::StreamOutput plain;
  plain.final_path = t / "plain.bin";
  plain.total_size = 4096;
  plain.pieces.push_back({0, 11 * M, 4096, 0, 0});
  const auto r = detail::stream_split(shards, {make(t / "a.bin", true), plain}, {});
  EXPECT_EQ(test::read_file(t / "a.bin"), expect);
  EXPECT_EQ(r.output_sha256[0], want);
  EXPECT_EQ(r.output_sha256[1], sha256_hex(std::span<const uint8_t>(data.data() + 11 * M, 4096)));

  // Streaming hand-off: announced once, complete and hashed, under its name.
  detail::StreamOptions o;
  std::vector<std::string> announced;
  o.on_output_complete = [&](size_t i, const detail::OutputDigest& d) {
    EXPECT_EQ(i, 0u);
    EXPECT_EQ(test::read_file(t / "b.bin"), expect) << "complete when announced";
    EXPECT_EQ(d.xet_chunks, nullptr) << "not asked for";
    announced.push_back(d.sha256);
  };
  o.before_create = [](uint64_t, uint64_t) {};
  const auto r2 = detail::stream_split(shards, {make(t / "b.bin", true)}, o);
  ASSERT_EQ(announced.size(), 1u);
  EXPECT_EQ(announced[0], want);
  EXPECT_EQ(r2.output_sha256[0], want);

  // Without hash_after_write the same layout would hash in arrival order: a different (wrong) digest.
  const auto r3 = detail::stream_split(shards, {make(t / "c.bin", false)}, {});
  EXPECT_EQ(test::read_file(t / "c.bin"), expect);
  EXPECT_NE(r3.output_sha256[0], want);
}

// With xet_chunks each announced output carries its Xet chunks, cut in the
// pass from the bytes it hashes (one chain per output, lanes or not, padding
// and headers included) or, for a hash_after_write output, on its read-back:
// exactly the chunks of the file's bytes.
TEST(SplitStream, XetChunksOfEachOutputAreTheChunksOfItsBytes) {
  test::TempDir t;
  const uint64_t M = 1u << 20;
  const auto data = test::splitmix64_data(12 * M, 7);
  test::write_file(t / "src.bin", data);
  const std::vector<std::shared_ptr<const MappedFile>> shards = {MappedFile::open(t / "src.bin")};
  std::vector<detail::StreamOutput> outs(3);
  for (size_t k = 0; k < 3; ++k) {
    outs[k].final_path = t / ("out" + std::to_string(k) + ".bin");
    outs[k].header = {'G', 'G', 'U', 'F', static_cast<uint8_t>(k)};
    outs[k].pieces.push_back({0, k * 4 * M, 3 * M + 17, 5, 11});          // padded
    outs[k].pieces.push_back({0, k * 4 * M + 3 * M + 17, M - 17, 5 + 3 * M + 28, 0});
    outs[k].total_size = 5 + 4 * M + 11;
  }
  outs[2].hash_after_write = true;  // read back, not hashed in the chain
  for (const unsigned lanes : {1u, 2u}) {
    detail::StreamOptions o;
    o.threads = 2;
    o.lanes = lanes;
    o.known_shard_sha256 = {sha256_hex(std::span<const uint8_t>(data))};
    o.xet_chunks = true;
    std::map<size_t, detail::OutputDigest> got;
    o.on_output_complete = [&](size_t i, const detail::OutputDigest& d) { got[i] = d; };
    (void)detail::stream_split(shards, outs, o);
    ASSERT_EQ(got.size(), 3u);
    for (size_t k = 0; k < 3; ++k) {
      const auto bytes = test::read_file(outs[k].final_path);
      const auto want = xet::hash_bytes(bytes);
      ASSERT_NE(got[k].xet_chunks, nullptr) << k;
      const auto& chunks = *got[k].xet_chunks;
      ASSERT_EQ(chunks.size(), want.chunks.size()) << k << " lanes " << lanes;
      ASSERT_GT(chunks.size(), 40u);
      for (size_t c = 0; c < chunks.size(); ++c) {
        ASSERT_EQ(chunks[c].length, want.chunks[c].length) << k << " chunk " << c;
        ASSERT_EQ(chunks[c].hash, want.chunks[c].hash.bytes) << k << " chunk " << c;
      }
      EXPECT_EQ(got[k].sha256, sha256_hex(std::span<const uint8_t>(bytes)));
      std::filesystem::remove(outs[k].final_path);
    }
  }
}

// observe_source sees every source byte once, in file order, before any
// output is hashed over it (an output's chunks may be looked up in what was
// observed as soon as it is announced).
TEST(SplitStream, TheObserverSeesTheSourceInOrderBeforeAnyOutputIsComplete) {
  test::TempDir t;
  const uint64_t M = 1u << 20;
  const auto a = test::splitmix64_data(5 * M + 123, 1), b = test::splitmix64_data(3 * M, 2);
  test::write_file(t / "a.bin", a);
  test::write_file(t / "b.bin", b);
  const std::vector<std::shared_ptr<const MappedFile>> shards = {MappedFile::open(t / "a.bin"), MappedFile::open(t / "b.bin")};
  std::vector<detail::StreamOutput> outs(2);
  outs[0].final_path = t / "o0.bin";
  outs[0].pieces.push_back({0, 0, 5 * M + 123, 0, 0});
  outs[0].total_size = 5 * M + 123;
  outs[1].final_path = t / "o1.bin";
  outs[1].pieces.push_back({1, M, 2 * M, 0, 0});
  outs[1].total_size = 2 * M;
  detail::StreamOptions o;
  o.threads = 2;
  o.known_shard_sha256 = {sha256_hex(std::span<const uint8_t>(a)), sha256_hex(std::span<const uint8_t>(b))};
  std::mutex mu;
  std::vector<std::vector<uint8_t>> seen(2);
  std::map<size_t, size_t> seen_when_complete;  // output -> bytes of its shard observed then
  o.observe_source = [&](size_t shard, uint64_t offset, std::span<const uint8_t> bytes) {
    std::lock_guard g(mu);
    ASSERT_EQ(offset, seen[shard].size()) << "in order, nothing skipped or repeated";
    if (shard == 1) {
      ASSERT_EQ(seen[0].size(), a.size()) << "shard after shard";
    }
    seen[shard].insert(seen[shard].end(), bytes.begin(), bytes.end());
  };
  o.on_output_complete = [&](size_t i, const detail::OutputDigest&) {
    std::lock_guard g(mu);
    seen_when_complete[i] = seen[i].size();
  };
  (void)detail::stream_split(shards, outs, o);
  EXPECT_TRUE(seen[0] == a);
  EXPECT_TRUE(seen[1] == b);
  ASSERT_EQ(seen_when_complete.size(), 2u);
  EXPECT_GE(seen_when_complete[0], a.size()) << "output 0's bytes were all observed before it was announced";
  EXPECT_GE(seen_when_complete[1], 3 * M) << "output 1's bytes were all observed before it was announced";
}

TEST(SplitStream, ASourceTruncatedMidStreamIsAnErrorNotACrash) {
  // 96 MiB: more 8 MiB chunks than the pipeline keeps in flight, so the
  // chunks after the first ones are read only after the truncation below.
  test::TempDir t;
  const auto src = t / "src.bin";
  test::write_file(src, std::vector<uint8_t>(96u << 20, 0x11));
  const std::vector<std::shared_ptr<const MappedFile>> shards = {MappedFile::open(src)};
  detail::StreamOutput out;
  out.final_path = t / "out.bin";
  out.total_size = 96u << 20;
  out.pieces.push_back({0, 0, 96u << 20, 0, 0});
  detail::StreamOptions o;
  bool truncated = false;
  o.on_bytes = [&](uint64_t) {  // called under the pipeline's lock
    if (!truncated) {
      EXPECT_EQ(::truncate(src.c_str(), 4096), 0);  // another process cuts the file
      truncated = true;
    }
  };
  try {
    (void)detail::stream_split(shards, {out}, o);
    ADD_FAILURE() << "a source that shrank mid-stream was accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_TRUE(what.find("shrank") != std::string::npos || what.find("write failed") != std::string::npos) << what;
  }
  EXPECT_FALSE(std::filesystem::exists(t / "out.bin")) << "nothing under the final name";
}

// A split source whose digests are known (verified before), cut in outputs
// the way a package is: one without pieces, pieces with padding, one that
// crosses from the first shard into the second.
struct LaneCase {
  std::vector<std::shared_ptr<const MappedFile>> shards;
  std::vector<std::vector<uint8_t>> data;
  std::vector<detail::StreamOutput> outputs;
  detail::StreamOptions options;

  static constexpr uint64_t kSourceBytes = 2 * 24 * (256u << 10);

  explicit LaneCase(const std::filesystem::path& dir) {
    options.chunk_bytes = 1u << 20;  // several chunks per output, as with real fragments
    constexpr uint64_t M = 256u << 10, kShard = 24 * M;  // units small enough for -O0 and ASan
    for (int s = 0; s < 2; ++s) {
      std::vector<uint8_t> d(kShard);
      for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<uint8_t>((i * 131 + s * 17) >> 3);
      const auto path = dir / ("shard-" + std::to_string(s) + ".bin");
      test::write_file(path, d);
      shards.push_back(MappedFile::open(path));
      options.known_shard_sha256.emplace_back(sha256_hex(std::span<const uint8_t>(d)));
      data.push_back(std::move(d));
    }
    // {shard, src, bytes, pad} per piece; destinations follow the header.
    const std::vector<std::vector<std::array<uint64_t, 4>>> layout = {
        {},
        {{0, 0, 8 * M, 32}},
        {{0, 8 * M, 5 * M, 7}, {0, 13 * M, 7 * M, 0}},
        {{0, 20 * M, 4 * M, 0}, {1, 0, 4 * M, 1}},
        {{1, 4 * M, 12 * M, 0}},
        {{1, 16 * M, 8 * M - 3, 3}},
    };
    for (size_t o = 0; o < layout.size(); ++o) {
      detail::StreamOutput out;
      out.header = {'H', static_cast<uint8_t>('0' + o)};
      uint64_t dst = out.header.size();
      for (const auto& [shard, src, bytes, pad] : layout[o]) {
        out.pieces.push_back({shard, src, bytes, dst, pad});
        dst += bytes + pad;
      }
      out.total_size = dst;
      outputs.push_back(std::move(out));
    }
  }
  void place(const std::filesystem::path& dir) {
    for (size_t o = 0; o < outputs.size(); ++o) outputs[o].final_path = dir / ("out-" + std::to_string(o) + ".bin");
  }
  std::vector<uint8_t> expected(size_t o) const {
    std::vector<uint8_t> b = outputs[o].header.flatten();
    for (const auto& pc : outputs[o].pieces) {
      const auto& d = data[pc.shard];
      b.insert(b.end(), d.begin() + static_cast<ptrdiff_t>(pc.src_offset),
               d.begin() + static_cast<ptrdiff_t>(pc.src_offset + pc.bytes));
      b.insert(b.end(), pc.pad_after, 0);
    }
    return b;
  }
};

TEST(SplitStream, LanesWriteExactlyWhatOnePassWrites) {
  test::TempDir t;
  LaneCase c(t.path());
  EXPECT_EQ(detail::stream_lanes(c.shards, c.outputs, c.options), 2u) << "known digests, two threads: two lanes";
  for (const unsigned lanes : {1u, 2u}) {
    const auto dir = t / ("lanes-" + std::to_string(lanes));
    std::filesystem::create_directories(dir);
    c.place(dir);
    auto o = c.options;
    o.lanes = lanes;
    uint64_t reported = 0;
    o.on_bytes = [&](uint64_t n) { reported += n; };
    const auto r = detail::stream_split(c.shards, c.outputs, o);
    EXPECT_EQ(reported, LaneCase::kSourceBytes) << "progress ends at the whole source with " << lanes << " lane(s)";
    ASSERT_EQ(r.output_sha256.size(), c.outputs.size());
    EXPECT_EQ(r.shard_sha256[0], *c.options.known_shard_sha256[0]);
    for (size_t k = 0; k < c.outputs.size(); ++k) {
      const auto want = c.expected(k);
      EXPECT_EQ(test::read_file(c.outputs[k].final_path), want) << "output " << k << " with " << lanes << " lane(s)";
      EXPECT_EQ(r.output_sha256[k], sha256_hex(std::span<const uint8_t>(want))) << "output " << k;
    }
  }
  // One pass when a shard must still be hashed in order, or a disk budget
  // wants one output at a time, or one thread was asked for.
  auto unknown = c.options;
  unknown.known_shard_sha256[1].reset();
  EXPECT_EQ(detail::stream_lanes(c.shards, c.outputs, unknown), 1u);
  auto budget = c.options;
  budget.before_create = [](uint64_t, uint64_t) {};
  EXPECT_EQ(detail::stream_lanes(c.shards, c.outputs, budget), 1u);
  auto one = c.options;
  one.threads = 1;
  EXPECT_EQ(detail::stream_lanes(c.shards, c.outputs, one), 1u);
}

TEST(SplitStream, OutputsThatInterleaveInTheSourceStayInOneLane) {
  // Output 1's pieces surround output 2's: no cut keeps each output whole.
  test::TempDir t;
  LaneCase c(t.path());
  constexpr uint64_t M = 256u << 10;
  c.outputs[1].pieces.push_back({1, 20 * M, M, c.outputs[1].total_size, 0});
  c.outputs[1].total_size += M;
  c.outputs[5].pieces.back().bytes -= 4 * M;  // no overlap with output 1's new piece
  c.outputs[5].total_size -= 4 * M;
  EXPECT_EQ(detail::stream_lanes(c.shards, c.outputs, c.options), 1u);
  c.place(t.path());
  const auto r = detail::stream_split(c.shards, c.outputs, c.options);
  for (size_t k = 0; k < c.outputs.size(); ++k) {
    EXPECT_EQ(r.output_sha256[k], sha256_hex(std::span<const uint8_t>(c.expected(k)))) << "output " << k;
  }
}

TEST(SplitStream, ALaneThatFailsStopsTheOtherAndNothingGetsItsName) {
  test::TempDir t;
  LaneCase c(t.path());
  c.place(t.path());
  auto o = c.options;
  // Two buffers per lane: the second lane cannot have read its whole range
  // (five chunks) ahead before the first chunk anywhere is done.
  o.buffers = 4;
  bool cut = false;
  o.on_bytes = [&](uint64_t) {
    if (!cut) {
      EXPECT_EQ(::truncate(c.shards[1]->path().c_str(), 4096), 0);  // the second lane's shard
      cut = true;
    }
  };
  try {
    (void)detail::stream_split(c.shards, c.outputs, o);
    ADD_FAILURE() << "a shard that shrank mid-stream was accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_TRUE(what.find("shrank") != std::string::npos || what.find("write failed") != std::string::npos) << what;
  }
  for (const auto& out : c.outputs) EXPECT_FALSE(std::filesystem::exists(out.final_path)) << out.final_path;
}


// The reader waits in before_create for room that only announced outputs
// free (write-package --push --max-disk). When the announcement fails
// instead (an upload or --validate check), nothing will ever free that
// room: the pass must wake the reader through on_failure and end with the
// announcement's error, not wait forever (ctest's timeout would be the
// only way out).
TEST(SplitStream, AFailureWhileTheReaderWaitsForRoomEndsThePass) {
  test::TempDir t;
  const uint64_t M = 1u << 20;
  std::vector<uint8_t> data(2 * M);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 13);
  test::write_file(t / "src.bin", data);
  const std::vector<std::shared_ptr<const MappedFile>> shards = {MappedFile::open(t / "src.bin")};
  std::vector<detail::StreamOutput> outs(2);
  for (size_t k = 0; k < 2; ++k) {
    outs[k].final_path = t / ("out" + std::to_string(k) + ".bin");
    outs[k].total_size = M;
    outs[k].pieces.push_back({0, k * M, M, 0, 0});
  }
  DiskBudget budget(M + M / 2);  // one output at a time
  std::atomic<bool> reader_waits{false};
  detail::StreamOptions o;
  o.threads = 2;
  o.before_create = [&](uint64_t bytes, uint64_t stuck) {
    if (budget.used() > 0) reader_waits = true;  // the second output: this acquire blocks
    budget.acquire(bytes, stuck);
  };
  o.on_failure = [&] { budget.cancel("the pass failed"); };
  o.on_output_complete = [&](size_t i, const detail::OutputDigest&) {
    ASSERT_EQ(i, 0u);
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!reader_waits && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // into the wait itself
    throw Error(ErrorKind::kTransport, "the upload of out0.bin failed");
  };
  try {
    (void)detail::stream_split(shards, outs, o);
    ADD_FAILURE() << "the failed announcement was ignored";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "the upload of out0.bin failed") << "the first failure is the one reported";
  }
  EXPECT_TRUE(reader_waits) << "the reader never reached the second output: the case was not exercised";
  EXPECT_FALSE(std::filesystem::exists(outs[1].final_path));
}

}  // namespace
}  // namespace skippy
