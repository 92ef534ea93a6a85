// write-package's memory on a hostile KV section. A GGUF
// whose KV section holds a huge array of empty strings (or of empty arrays)
// once cost a copy of the whole KV section per fragment writer and another
// per fragment header: 2^25 empty strings (272 MB) took 5.5 GB with
// --schema 2. The real CLI runs on a synthetic file made under /tmp from a
// real fixture; its peak RSS must stay within 2 x the KV section's bytes +
// 100 MiB, for both schemas. The peak comes from /usr/bin/time (%M): a
// child spawned straight from this test inherits the test's own high-water
// mark into its ru_maxrss (posix_spawn's vfork shares our mm until exec).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <regex>
#include <string>
#include <vector>

#include "util/file.h"
#include "skippy/gguf.h"
#include "gguf/gguf_writer.h"
#include "test_util.h"

namespace skippy {
namespace kv_memory_test {

namespace fs = std::filesystem;

// An array value of `count` elements of `element`, each one empty: a string
// of length 0 (8 bytes), or an array of no u8 (12 bytes).
std::vector<uint8_t> empty_elements(GgufType element, uint64_t count) {
  const size_t each = element == GgufType::kString ? 8 : 12;
  std::vector<uint8_t> out(12 + static_cast<size_t>(count) * each, 0);  // zeros: length 0 / u8, count 0
  const auto t = static_cast<uint32_t>(element);
  std::memcpy(out.data(), &t, 4);
  std::memcpy(out.data() + 4, &count, 8);
  return out;
}

// The tiny Q8_0 fixture with one more KV, `hostile.empty`; returns the KV
// section's size in bytes (after the 24-byte preamble, before the tensor infos).
uint64_t make_hostile(const fs::path& out, GgufType element, uint64_t count) {
  const auto src = GgufFile::open(test::data_path("llama-tiny-q8_0.gguf"));
  GgufWriter w(src.alignment());
  for (const auto& kv : src.kvs()) w.add_kv(std::string(kv.key), kv.value);
  w.add_kv("hostile.empty", GgufType::kArray, empty_elements(element, count));
  for (const auto& t : src.tensors()) w.add_tensor_from(src, t);
  AtomicFile f(out);
  (void)w.write(f);
  f.commit();
  const auto made = GgufFile::open(out);
  EXPECT_EQ(made.find_kv("hostile.empty")->value.array_size(), count);
  return made.tensors().front().info_offset - 24;
}

constexpr const char* kTime = "/usr/bin/time";

// write-package SRC --schema SCHEMA under /usr/bin/time: the peak RSS in KiB.
uint64_t write_package_peak_kib(const fs::path& src, const fs::path& out, const std::string& schema) {
  const auto r = test::run_program(kTime, {"-f", "peak-rss-kib=%M", SKIPPY_CLI_PATH, "write-package", src.string(),
                                           "--out-dir", out.string(), "--model-id", "org/tiny:Q8_0",
                                           "--source-revision", "0123abc", "--source-file", src.filename().string(),
                                           "--schema", schema, "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  std::smatch m;
  static const std::regex kPeak(R"(peak-rss-kib=(\d+))");
  if (!std::regex_search(r.err, m, kPeak)) {
    ADD_FAILURE() << "no peak RSS from " << kTime << ": " << r.err;
    return 0;
  }
  return std::stoull(m[1].str());
}

void expect_bounded(GgufType element, uint64_t count, std::vector<std::string> schemas = {"1", "2"}) {
  if (!fs::exists(kTime)) GTEST_SKIP() << kTime << " (Debian package time) is needed to measure peak RSS";
  test::TempDir dir;
  const fs::path src = dir / "hostile.gguf";
  const uint64_t kv_bytes = make_hostile(src, element, count);
  const uint64_t bound_kib = (2 * kv_bytes + (100ull << 20)) / 1024;
  for (const auto& schema : schemas) {
    SCOPED_TRACE("--schema " + schema);
    const uint64_t peak = write_package_peak_kib(src, dir / (std::string("pkg") + schema), schema);
    if (!test::kSanitizedBuild) {
      EXPECT_LE(peak, bound_kib) << "peak RSS " << peak << " KiB for a KV section of " << kv_bytes / 1024 << " KiB";
    }
    std::printf("[ peak RSS ] --schema %s: %llu KiB, KV section %llu KiB, bound %llu KiB\n", schema.c_str(),
                static_cast<unsigned long long>(peak), static_cast<unsigned long long>(kv_bytes / 1024),
                static_cast<unsigned long long>(bound_kib));
  }
}

TEST(KvMemory, AnArrayOfEmptyStringsCostsAtMostTwiceTheKvSection) {
  expect_bounded(GgufType::kString, uint64_t{1} << 22);
}

TEST(KvMemory, AnArrayOfEmptyArraysCostsAtMostTwiceTheKvSection) {
  // Schema 2 refuses nested arrays outright (the reference's catalog has no form for them).
  expect_bounded(GgufType::kArray, uint64_t{1} << 21, {"1"});
  test::TempDir dir;
  (void)make_hostile(dir / "hostile.gguf", GgufType::kArray, 16);
  const auto r = test::write_pkg(dir / "hostile.gguf", dir / "pkg2", {"--schema", "2"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  test::expect_json_error(r, "invalid_input", "hostile.empty is an array of arrays");
}

}  // namespace kv_memory_test
}  // namespace skippy
