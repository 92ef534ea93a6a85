// Reads through a mapping of a file that shrinks under us must fail cleanly
// (SIGBUS caught and reported), never kill the process.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

#include "skippy/error.h"
#include "skippy/file.h"
#include "skippy/sha256.h"
#include "test_util.h"
#include "publish/split_stream.h"
#include "util/mapped_read.h"

namespace skippy {
namespace {

TEST(MappedRead, ATruncatedMappingIsAFalseReturnNotACrash) {
  test::TempDir t;
  const auto path = t / "shrinks.bin";
  test::write_file(path, std::vector<uint8_t>(1 << 20, 0x5A));
  const auto f = MappedFile::open(path);
  const auto bytes = f->bytes();
  Sha256 before;
  EXPECT_TRUE(detail::guarded([&] { before.update(bytes); }));
  EXPECT_EQ(before.hex_digest(), sha256_file(path));

  // Another process truncates the file while we hold the mapping.
  ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
  detail::release_mapped(bytes, 0, bytes.size());  // force the pages to be faulted again
  Sha256 after;
  EXPECT_FALSE(detail::guarded([&] { after.update(bytes); })) << "the pages past the new end are gone: SIGBUS";
  int first = -1;
  EXPECT_TRUE(detail::guarded([&] { first = bytes[0]; })) << "the guard is reusable and the first page still exists";
  EXPECT_EQ(first, 0x5A);
}

TEST(MappedRead, ReleasingPagesKeepsTheBytes) {
  test::TempDir t;
  const auto path = t / "data.bin";
  std::vector<uint8_t> data(3 * 4096 + 100);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7);
  test::write_file(path, data);
  const auto f = MappedFile::open(path);
  const auto bytes = f->bytes();
  detail::prefetch_mapped(bytes, 0, bytes.size());
  EXPECT_TRUE(detail::release_mapped(bytes, 100, 5000)) << "an unaligned start is rounded to its page";
  EXPECT_TRUE(detail::release_mapped(bytes, 3 * 4096, 1u << 30)) << "a length past the end stops at the file's end";
  EXPECT_TRUE(detail::release_mapped(bytes, bytes.size(), 10)) << "nothing to do past the end";
  EXPECT_EQ(std::memcmp(bytes.data(), data.data(), data.size()), 0);
}

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

}  // namespace
}  // namespace skippy
