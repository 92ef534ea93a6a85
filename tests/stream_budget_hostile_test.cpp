// write-package --stream against a Hub that lies about sizes or serves
// hostile headers: every cap and the --max-disk budget apply before a byte
// is reserved or written, a shard's first bytes that refuse it end it, and
// one shard's header is in memory at a time. The real CLI against the Hub
// stand-in (127.0.0.1); disk measured by sampling the blocks the run's
// directories hold (st_blocks), memory by /usr/bin/time's peak RSS (%M),
// bytes by the stand-in's log.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "gguf/gguf_writer.h"
#include "hub_standin.h"
#include "skippy/error.h"
#include "skippy/gguf.h"
#include "test_util.h"
#include "util/file.h"

namespace skippy {
namespace stream_budget_hostile_test {

namespace fs = std::filesystem;
using nlohmann::json;
using test::CliResult;
using test::HubStandin;
using test::TempDir;

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kBudget = 16 * kMiB;  // --max-disk 16M
constexpr uint64_t kClaimed = uint64_t{1} << 30;  // what the lying listing claims
// The hostile header array in each big shard; under a sanitizer (whose RSS
// is its own, so the memory bounds are not checked there) 24 MiB, still
// beyond the budget.
constexpr uint64_t kPad = (test::kSanitizedBuild ? 24 : 100) * kMiB;
constexpr const char* kTimeBin = "/usr/bin/time";
constexpr const char* kSplit[] = {"llama-tiny-q4_0-00001-of-00003.gguf", "llama-tiny-q4_0-00002-of-00003.gguf",
                                  "llama-tiny-q4_0-00003-of-00003.gguf"};

void put_bytes(const fs::path& p, const std::string& text) {
  test::write_file(p, std::vector<uint8_t>(text.begin(), text.end()));
}

// A copy of `src` with one more KV, a u8 array of `pad` zero bytes, before
// its tensors: a shard whose header is `pad` bytes longer.
void padded_shard(const fs::path& src, const fs::path& out, uint64_t pad) {
  const auto f = GgufFile::open(src);
  GgufWriter w(f.alignment());
  for (const auto& kv : f.kvs()) w.add_kv(std::string(kv.key), kv.value);
  std::vector<uint8_t> arr(12 + static_cast<size_t>(pad), 0);  // element type u8 (0), then the count
  std::memcpy(arr.data() + 4, &pad, 8);
  w.add_kv("hostile.pad", GgufType::kArray, std::move(arr));
  for (const auto& t : f.tensors()) w.add_tensor_from(f, t);
  AtomicFile file(out);
  (void)w.write(file);
  file.commit();
}

// What GgufFile::parse_prefix (the streamed header's reader) decides from
// a file's first bytes: the header once they hold it, how many bytes it
// needs while they do not, and a refusal as soon as they refuse the file.
TEST(GgufPrefix, DecidesFromTheFirstBytesWhatTheWholeFileWould) {
  const auto bytes = test::read_file(test::data_path(kSplit[0]));
  const auto whole = GgufFile::open(test::data_path(kSplit[0]));
  const std::span<const uint8_t> all(bytes);
  uint64_t have = 0;
  int rounds = 0;
  for (uint64_t want = 16;; ++rounds) {
    const auto p = GgufFile::parse_prefix(all.first(static_cast<size_t>(want)), bytes.size(), "shard");
    if (p.file) {
      EXPECT_EQ(p.file->header_end(), whole.header_end());
      EXPECT_EQ(p.file->kvs().size(), whole.kvs().size());
      EXPECT_EQ(p.file->tensors().size(), whole.tensors().size());
      break;
    }
    ASSERT_GT(p.needed, want);
    ASSERT_LE(p.needed, whole.header_end()) << "never more than the header";
    have = want;
    want = std::min<uint64_t>(bytes.size(), std::max(p.needed, want + want / 2));  // as the stream grows it
  }
  EXPECT_GT(have, 0u);
  EXPECT_GT(rounds, 3) << "each answer names the next bytes needed";
  // A bad magic, a bad version, a count no file of this size can hold: refused from those bytes.
  auto refused = [&](std::vector<uint8_t> head, const std::string& why) {
    try {
      (void)GgufFile::parse_prefix(head, uint64_t{300} << 20, "head");
      ADD_FAILURE() << "accepted: " << why;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  };
  refused({'N', 'O', 'P', 'E'}, "bad magic");
  refused({'G', 'G', 'U', 'F', 9, 0, 0, 0}, "unsupported GGUF version 9");
  std::vector<uint8_t> many(all.begin(), all.begin() + 24);
  const uint64_t kv_count = uint64_t{1} << 40;
  std::memcpy(many.data() + 16, &kv_count, 8);
  refused(many, "cannot fit in the file");
}

class StreamBudgetHostile : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { hub_ = new HubStandin(); }
  static void TearDownTestSuite() {
    delete hub_;
    hub_ = nullptr;
  }
  void SetUp() override {
    hub_->clear_faults();
    hub_->clear_log();
  }
  void TearDown() override { hub_->clear_faults(); }

  std::vector<std::string> env() const {
    return {"HF_ENDPOINT=" + hub_->endpoint(), "HF_HUB_CACHE=" + (tmp_.path() / "hf").string(),
            "HF_HOME=" + (tmp_.path() / "hfhome").string(), "SKIPPY_CACHE_DIR=" + (tmp_.path() / "skippy").string(),
            "HF_TOKEN=hf_test", "SKIPPY_HF_BACKOFF_MS=20", "SKIPPY_HF_CONNECTIONS=4", "SKIPPY_HF_MIN_RANGE=65536",
            // A silent HEAD gives up after 2 s, once: long enough for the sampler to see what a run
            // reserved before asking, short enough for the test.
            "HF_HUB_ETAG_TIMEOUT=2", "SKIPPY_HF_MAX_ATTEMPTS=1", "SOURCE_DATE_EPOCH=1700000000", "HF_HUB_OFFLINE="};
  }

  // A repository holding the tiny split model plus `extra` (name -> bytes).
  std::string publish_split(const std::string& repo, const std::vector<std::pair<std::string, std::string>>& extra) {
    const fs::path dir = tmp_.path() / ("repo-" + std::to_string(++repos_));
    fs::create_directories(dir);
    for (const char* s : kSplit) fs::copy_file(test::data_path(s), dir / s);
    for (const auto& [name, bytes] : extra) put_bytes(dir / name, bytes);
    return hub_->publish(repo, dir);
  }

  // The Hub's listing of `repo` claims `size` bytes for `path` (the
  // sibling's size and its LFS size): what a hostile Hub answers.
  void listing_claims(const std::string& repo, const std::string& path, uint64_t size) {
    const auto r = HubStandin::http("GET", hub_->endpoint() + "/api/models/" + repo + "/revision/main?blobs=true",
                                    {"Authorization: Bearer hf_test"});
    ASSERT_EQ(r.status, 200) << r.body;
    auto j = json::parse(r.body);
    bool found = false;
    for (auto& s : j["siblings"]) {
      if (s["rfilename"] != path) continue;
      s["size"] = size;
      if (s.contains("lfs")) s["lfs"]["size"] = size;
      found = true;
    }
    ASSERT_TRUE(found) << path << " is not in " << repo;
    hub_->fault({{"listener", "hub"}, {"method", "GET"}, {"match", "/api/models/" + repo + "/revision/"},
                 {"kind", "status"}, {"status", 200}, {"body", j.dump()}, {"times", -1}});
  }

  // `path`'s HEAD on the Hub never answers (storage stalling after the
  // listing): a run that reserved disk before asking holds it meanwhile.
  void head_stalls(const std::string& path) {
    hub_->fault({{"listener", "hub"}, {"method", "HEAD"}, {"match", "/" + path}, {"kind", "hang"}, {"times", -1}});
  }

  std::vector<std::string> pushed(const std::string& source, const fs::path& out, std::vector<std::string> more = {}) {
    std::vector<std::string> args = {"write-package", source, "--stream", "--out-dir", out.string(), "--push",
                                     "hf://org/budget-target", "--create", "--max-disk", "16M", "--json"};
    args.insert(args.end(), more.begin(), more.end());
    return args;
  }

  // The CLI with `args` under the disk sampler (the output directory and
  // its stream-headers directory beside it).
  CliResult sampled(const std::vector<std::string>& args, const fs::path& out, uint64_t* disk_peak) {
    test::DiskSampler sampler({out, out.parent_path() / ("." + out.filename().string() + ".stream-headers")});
    auto r = test::run_cli(args, env());
    sampler.stop();
    *disk_peak = sampler.peak();
    return r;
  }

  // The CLI with `args` under /usr/bin/time: the result, and the peak RSS in bytes (0 when unmeasured).
  CliResult timed(const std::vector<std::string>& args, uint64_t* rss) {
    std::vector<std::string> t = {"-f", "peak-rss-kib=%M", test::cli_path()};
    t.insert(t.end(), args.begin(), args.end());
    auto r = test::run_program(kTimeBin, t, env());
    std::smatch m;
    static const std::regex kPeak(R"(peak-rss-kib=(\d+))");
    *rss = std::regex_search(r.err, m, kPeak) ? std::stoull(m[1].str()) * 1024 : 0;
    return r;
  }

  // Requests for `needle` (a path or an LFS sha256) the stand-in answered.
  std::vector<test::HubRequest> requests_for(const std::string& needle) {
    std::vector<test::HubRequest> out;
    for (const auto& e : hub_->log()) {
      if (e.path.find(needle) != std::string::npos) out.push_back(e);
    }
    return out;
  }

  static HubStandin* hub_;
  TempDir tmp_;
  int repos_ = 0;
};
HubStandin* StreamBudgetHostile::hub_ = nullptr;

TEST_F(StreamBudgetHostile, APublisherFileListedOverItsCapIsRefusedBeforeAByteIsReserved) {
  publish_split("org/lying-pub-GGUF", {{"generation_config.json", R"({"temperature": 0.6})"}});
  listing_claims("org/lying-pub-GGUF", "generation_config.json", kClaimed);
  head_stalls("generation_config.json");
  const fs::path out = tmp_.path() / "pub";
  uint64_t disk = 0;
  const auto r = sampled(pushed("org/lying-pub-GGUF:Q4_0", out, {"--schema", "2", "--hub-publisher-metadata"}), out, &disk);
  std::printf("[ lying publisher file ] exit %d, disk peak %llu bytes\n", r.exit_code, static_cast<unsigned long long>(disk));
  EXPECT_EQ(r.exit_code, 1) << r.err << r.out;
  test::expect_json_error(r, "invalid_input", "over the 16777216-byte cap");
  EXPECT_LE(disk, kBudget) << "reserved on the Hub's word before the cap";
  EXPECT_TRUE(requests_for("generation_config.json").empty()) << "refused from the listing, before any request for it";
}

TEST_F(StreamBudgetHostile, AProjectorListedOverTheBudgetIsRefusedBeforeAnythingIsFetched) {
  const fs::path proj = tmp_.path() / "mmproj-tiny-f16.gguf";
  test::make_projector(proj, 3);
  publish_split("org/lying-mm-GGUF", {{"mmproj-tiny-f16.gguf", test::read_text(proj)}});
  listing_claims("org/lying-mm-GGUF", "mmproj-tiny-f16.gguf", kClaimed);
  head_stalls("mmproj-tiny-f16.gguf");
  const fs::path out = tmp_.path() / "mm";
  uint64_t disk = 0;
  const auto r = sampled(pushed("org/lying-mm-GGUF:Q4_0", out), out, &disk);
  std::printf("[ lying projector ] exit %d, disk peak %llu bytes\n", r.exit_code, static_cast<unsigned long long>(disk));
  EXPECT_EQ(r.exit_code, 2) << r.err << r.out;
  test::expect_json_error(r, "usage", "cannot hold the repository's projectors");
  EXPECT_LE(disk, kBudget) << "reserved on the Hub's word before the budget";
  for (const auto& e : hub_->log()) {
    EXPECT_NE(e.listener, "storage") << "fetched before the refusal: " << e.path;
    EXPECT_EQ(e.path.find("mmproj"), std::string::npos) << "asked for before the refusal: " << e.method << " " << e.path;
  }
}

TEST_F(StreamBudgetHostile, PublisherFilesTheBudgetCannotHoldAreRefusedBeforeTheirDownload) {
  // 16 MiB exactly: within its cap, but not beside the headers in 16M.
  std::string big = "{\"pad\": \"";
  big += std::string(static_cast<size_t>(kBudget) - big.size() - 2, 'x');
  big += "\"}";
  ASSERT_EQ(big.size(), kBudget);
  publish_split("org/big-config-GGUF", {{"config.json", big}});
  const fs::path out = tmp_.path() / "cfg";
  uint64_t disk = 0;
  const auto r = sampled(pushed("org/big-config-GGUF:Q4_0", out, {"--schema", "2", "--hub-publisher-metadata"}), out, &disk);
  std::printf("[ 16 MiB config.json ] exit %d, disk peak %llu bytes\n", r.exit_code, static_cast<unsigned long long>(disk));
  EXPECT_EQ(r.exit_code, 2) << r.err << r.out;
  test::expect_json_error(r, "usage", "cannot hold");
  EXPECT_LE(disk, kBudget);
  EXPECT_TRUE(requests_for("config.json").empty()) << "refused from the listing, before any request for it";
}

// Four shards: three whose headers hold a kPad array, then one whose
// first bytes are not GGUF.
class BigHeaders : public StreamBudgetHostile {
 protected:
  void publish_big() {
    const fs::path dir = tmp_.path() / "big-repo";
    fs::create_directories(dir);
    for (int i = 0; i < 3; ++i) {
      char name[64];
      std::snprintf(name, sizeof name, "big-Q4_0-%05d-of-00004.gguf", i + 1);
      padded_shard(test::data_path(kSplit[i]), dir / name, kPad);
      header_ = std::max(header_, GgufFile::open(dir / name).header_end());
    }
    put_bytes(dir / "big-Q4_0-00004-of-00004.gguf", "NOPE" + std::string(4096, '\0'));
    hub_->publish("org/big-headers-GGUF", dir);
  }
  uint64_t header_ = 0;
};

TEST_F(BigHeaders, HeadersTheBudgetCannotHoldAreRefusedFromTheirFirstBytes) {
  publish_big();
  const fs::path out = tmp_.path() / "big";
  test::DiskSampler sampler({out, tmp_.path() / ".big.stream-headers"});
  uint64_t rss = 0;
  const auto r = timed(pushed("org/big-headers-GGUF:Q4_0", out), &rss);
  sampler.stop();
  uint64_t served = 0;
  for (const auto& e : hub_->log()) {
    if (e.listener == "storage") served += e.bytes_sent;
  }
  std::printf("[ 3 x %llu MiB headers, --max-disk 16M ] exit %d, disk peak %llu, peak RSS %llu, served %llu bytes\n",
              static_cast<unsigned long long>(kPad / kMiB), r.exit_code, static_cast<unsigned long long>(sampler.peak()), static_cast<unsigned long long>(rss),
              static_cast<unsigned long long>(served));
  EXPECT_EQ(r.exit_code, 2) << r.err << r.out;
  test::expect_json_error(r, "usage", "cannot hold even the source's GGUF headers");
  EXPECT_LE(sampler.peak(), kBudget);
  EXPECT_LE(served, 2 * kMiB) << "the first bytes said the header cannot fit";
  if (!test::kSanitizedBuild && rss) {
    EXPECT_LE(rss, 2 * kBudget + 100 * kMiB);
  }
}

TEST_F(BigHeaders, OneShardsHeaderIsInMemoryAtATime) {
  publish_big();
  const fs::path out = tmp_.path() / "big-nobudget";
  uint64_t rss = 0;
  const auto r = timed({"write-package", "org/big-headers-GGUF:Q4_0", "--stream", "--out-dir", out.string(), "--json"}, &rss);
  std::printf("[ 3 x %llu MiB headers, then a bad shard ] exit %d, peak RSS %llu bytes, largest header %llu\n",
              static_cast<unsigned long long>(kPad / kMiB), r.exit_code, static_cast<unsigned long long>(rss),
              static_cast<unsigned long long>(header_));
  EXPECT_EQ(r.exit_code, 1) << r.err << r.out;
  test::expect_json_error(r, "invalid_input", "big-Q4_0-00004-of-00004.gguf");
  if (!fs::exists(kTimeBin)) GTEST_SKIP() << kTimeBin << " (Debian package time) is needed to measure peak RSS";
  ASSERT_GT(rss, 0u) << r.err;
  if (!test::kSanitizedBuild) {
    EXPECT_LE(rss, header_ + 100 * kMiB) << "more than one shard's header held at once";
  }
  EXPECT_FALSE(fs::exists(tmp_.path() / ".big-nobudget.stream-headers")) << "the placeholders are removed";
}

TEST_F(StreamBudgetHostile, AFileWhoseFirstBytesAreNotGgufIsRefusedWithoutFetchingTheRest) {
  const fs::path dir = tmp_.path() / "bad-repo";
  fs::create_directories(dir);
  const fs::path bad = dir / "bad-Q4_0.gguf";
  put_bytes(bad, "NOPE");
  fs::resize_file(bad, 64 * kMiB);  // sparse: 64 MiB whose first 4 bytes refuse it
  const auto j = hub_->publish_json("org/bad-magic-GGUF", dir);
  const std::string sha = j["files"][0]["sha256"];
  uint64_t rss = 0;
  const auto r = timed({"write-package", "org/bad-magic-GGUF:Q4_0", "--stream", "--out-dir",
                        (tmp_.path() / "bad").string(), "--json"},
                       &rss);
  uint64_t served = 0;
  for (const auto& e : requests_for(sha)) served += e.bytes_sent;
  std::printf("[ 64 MiB with a bad magic ] exit %d, served %llu bytes, peak RSS %llu bytes\n", r.exit_code,
              static_cast<unsigned long long>(served), static_cast<unsigned long long>(rss));
  EXPECT_EQ(r.exit_code, 1) << r.err << r.out;
  test::expect_json_error(r, "invalid_input", "bad magic");
  EXPECT_LE(served, kMiB) << "fetched past the first bytes that refuse the file";
  if (!test::kSanitizedBuild && rss) {
    EXPECT_LE(rss, 100 * kMiB);
  }
}

}  // namespace stream_budget_hostile_test
}  // namespace skippy
