// Reads through a mapping of a file that shrinks under us must fail cleanly
// (SIGBUS caught and reported), never kill the process.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "skippy/error.h"
#include "util/file.h"
#include "util/sha256.h"
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
  EXPECT_TRUE(detail::release_mapped(bytes, 100, 5000)) << "an unaligned start is rounded to its page";
  EXPECT_TRUE(detail::release_mapped(bytes, 3 * 4096, 1u << 30)) << "a length past the end stops at the file's end";
  EXPECT_TRUE(detail::release_mapped(bytes, bytes.size(), 10)) << "nothing to do past the end";
  EXPECT_EQ(std::memcmp(bytes.data(), data.data(), data.size()), 0);
}

// Resident bytes of the mapping that starts at `addr` (/proc/self/smaps).
uint64_t mapping_rss(const void* addr) {
  std::ifstream smaps("/proc/self/smaps");
  char want[32];
  std::snprintf(want, sizeof want, "%lx-", reinterpret_cast<unsigned long>(addr));
  bool in = false;
  for (std::string line; std::getline(smaps, line);) {
    if (line.find('-') != std::string::npos && std::isxdigit(static_cast<unsigned char>(line[0])) &&
        line.find(' ') > line.find('-')) {
      in = line.starts_with(want);
    } else if (in && line.starts_with("Rss:")) {
      return std::stoull(line.substr(4)) * 1024;
    }
  }
  return 0;
}

TEST(MappedRead, ReadingInPiecesAndReleasingKeepsTheMappingSmall) {
  // Pieces that start anywhere (a source model's tensors): each touch may map
  // a whole large folio of the page cache around it, reaching back into the
  // piece released before (validate-package's RSS grew with the model).
  test::TempDir t;
  const auto path = t / "big.bin";
  {
    std::vector<uint8_t> block(1 << 20);
    for (size_t i = 0; i < block.size(); ++i) block[i] = static_cast<uint8_t>(i * 13);
    std::ofstream out(path, std::ios::binary);
    for (int i = 0; i < 256; ++i) out.write(reinterpret_cast<const char*>(block.data()), static_cast<std::streamsize>(block.size()));
  }
  const auto f = MappedFile::open(path);
  const auto bytes = f->bytes();
  uint64_t sum = 0, peak = 0;
  const uint64_t piece = (3u << 20) + 12345;  // never on a page, let alone a folio, boundary
  for (uint64_t pos = 777; pos < bytes.size(); pos += piece) {
    const uint64_t n = std::min<uint64_t>(piece, bytes.size() - pos);
    for (uint64_t i = pos; i < pos + n; i += 4096) sum += bytes[i];
    detail::release_mapped(bytes, pos, n);
    peak = std::max(peak, mapping_rss(bytes.data()));
  }
  EXPECT_GT(sum, 0u);
  EXPECT_LT(peak, 16u << 20) << "resident pages of a 256 MiB mapping read in 3 MiB pieces, each released after use";
}

}  // namespace
}  // namespace skippy
