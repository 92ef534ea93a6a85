// Memory on hostile sizes: a stage admission descriptor of millions of ids
// and a per-layer KV array far longer than the model's layers each cost at
// most 2 x the input + 100 MiB (the rule the KV section keeps), measured
// as the real CLI's peak RSS by /usr/bin/time (%M: a child spawned straight
// from this test would inherit the test's own high-water mark).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "gguf/gguf_writer.h"
#include "skippy/gguf.h"
#include "test_util.h"
#include "util/file.h"

namespace skippy {
namespace hostile_size_memory_test {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr uint64_t kMiBytes = uint64_t{1} << 20;
constexpr const char* kTimeProgram = "/usr/bin/time";

// The CLI with `args` under /usr/bin/time; `rss` gets its peak RSS in bytes.
test::CliResult timed_cli(const std::vector<std::string>& args, uint64_t* rss) {
  std::vector<std::string> t = {"-f", "peak-rss-kib=%M", test::cli_path()};
  t.insert(t.end(), args.begin(), args.end());
  auto r = test::run_program(kTimeProgram, t);
  std::smatch m;
  static const std::regex kPeak(R"(peak-rss-kib=(\d+))");
  *rss = std::regex_search(r.err, m, kPeak) ? std::stoull(m[1].str()) * 1024 : 0;
  return r;
}

TEST(HostileSizeMemory, AnAdmissionDescriptorOfMillionsOfIdsCostsAtMostTwiceItsSize) {
  if (!fs::exists(kTimeProgram)) GTEST_SKIP() << kTimeProgram << " (Debian package time) is needed to measure peak RSS";
  test::TempDir dir;
  const fs::path pkg = dir / "pkg";
  const auto w = test::run_cli({"write-package", test::data_path("llama-tiny-q8_0.gguf").string(), "--schema", "2",
                                "--out-dir", pkg.string(), "--model-id", "org/tiny:Q8_0", "--source-revision", "0123abc",
                                "--source-file", "llama-tiny-q8_0.gguf", "--json"});
  ASSERT_EQ(w.exit_code, 0) << w.err;
  const std::string package_id = json::parse(w.out)["package_id"];
  // 6 M ids, strictly sorted (7 digits), for this very package: 60 MB. The
  // size is for the memory bound; the sanitizer trees, which cannot measure
  // it, check the refusal on a tenth (the same code, ten times faster).
  const int ids = test::kSanitizedBuild ? 600000 : 6000000;
  const fs::path desc = dir / "admission.json";
  {
    std::ofstream o(desc, std::ios::binary);
    o << "{\"package_id\":\"" << package_id << "\",\"resident_tensor_ids\":[";
    char id[16];
    for (int i = 0; i < ids; ++i) {
      std::snprintf(id, sizeof id, "%s\"%07d\"", i ? "," : "", i);
      o << id;
    }
    o << "],\"sidecars\":[]}";
  }
  const uint64_t size = fs::file_size(desc);
  uint64_t rss = 0;
  const auto r = timed_cli({"select", pkg.string(), "--admission", desc.string(), "--json"}, &rss);
  std::printf("[ admission of 6 M ids ] exit %d, %llu bytes, peak RSS %llu bytes\n", r.exit_code,
              static_cast<unsigned long long>(size), static_cast<unsigned long long>(rss));
  EXPECT_EQ(r.exit_code, 1) << r.err << r.out;
  test::expect_json_error(r, "invalid_input", "resident_tensor_ids");
  ASSERT_GT(rss, 0u) << r.err;
  if (!test::kSanitizedBuild) {
    EXPECT_LE(rss, 2 * size + 100 * kMiBytes);
  }
}

TEST(HostileSizeMemory, APerLayerArrayLongerThanTheLayersIsRefusedBeforeItIsWidened) {
  if (!fs::exists(kTimeProgram)) GTEST_SKIP() << kTimeProgram << " (Debian package time) is needed to measure peak RSS";
  test::TempDir dir;
  // The tiny model with attention.head_count an i8 array of 100 M entries (it
  // has 8 layers); a tenth in the sanitizer trees, which cannot measure the bound.
  constexpr uint64_t kEntries = test::kSanitizedBuild ? 10000000 : 100000000;
  const fs::path src = dir / "hostile.gguf";
  {
    const auto f = GgufFile::open(test::data_path("llama-tiny-q8_0.gguf"));
    const std::string key = std::string(f.architecture()) + ".attention.head_count";
    ASSERT_NE(f.find_kv(key), nullptr);
    GgufWriter gw(f.alignment());
    for (const auto& kv : f.kvs()) {
      if (kv.key != key) {
        gw.add_kv(std::string(kv.key), kv.value);
        continue;
      }
      std::vector<uint8_t> arr(12 + kEntries, 4);  // every entry 4 heads
      const auto et = static_cast<uint32_t>(GgufType::kInt8);
      std::memcpy(arr.data(), &et, 4);
      std::memcpy(arr.data() + 4, &kEntries, 8);
      gw.add_kv(key, GgufType::kArray, std::move(arr));
    }
    for (const auto& t : f.tensors()) gw.add_tensor_from(f, t);
    AtomicFile out(src);
    (void)gw.write(out);
    out.commit();
  }
  const fs::path pkg = dir / "pkg";
  const auto w = test::write_pkg(src, pkg);
  ASSERT_EQ(w.exit_code, 0) << w.err;
  uint64_t rss = 0;
  const auto r = timed_cli({"plan", pkg.string(), "--context", "4096", "--stages", "2", "--json"}, &rss);
  std::printf("[ plan --context, head_count of 100 M i8 ] exit %d, peak RSS %llu bytes\n", r.exit_code,
              static_cast<unsigned long long>(rss));
  EXPECT_EQ(r.exit_code, 1) << r.err << r.out;
  test::expect_json_error(r, "invalid_input", "has " + std::to_string(kEntries) + " entries for 8 layers");
  ASSERT_GT(rss, 0u) << r.err;
  if (!test::kSanitizedBuild) {
    EXPECT_LE(rss, 2 * kEntries + 100 * kMiBytes);
  }
}

}  // namespace hostile_size_memory_test
}  // namespace skippy
