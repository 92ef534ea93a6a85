// Reads through a mapping of a file that shrinks under us must fail cleanly
// (SIGBUS caught and reported), never kill the process.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>

#include "skippy/file.h"
#include "skippy/sha256.h"
#include "test_util.h"
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
  detail::release_mapped(bytes, 100, 5000);
  detail::release_mapped(bytes, 3 * 4096, 100);
  EXPECT_EQ(std::memcmp(bytes.data(), data.data(), data.size()), 0);
}

}  // namespace
}  // namespace skippy
