// Downloads through Xet storage against the local Hub and CAS stand-in
// (tests/hub/cas_standin.mjs, whose reconstructions huggingface.js reads):
// a stage fetch, select + materialize of an hf:// package and a streamed
// write-package read the xorbs (the request log shows xorb ranges, never the
// resolve URL's storage) and give the same bytes as the resolve path; a cut
// transfer resumes; the stand-in lying (wrong xorb bytes, a term's length,
// an expired token, multi-range refused, a failing CAS) each has its clear
// outcome; HF_HUB_DISABLE_XET=1 uses the resolve path. The reconstruction
// parser is checked on its own with hostile answers.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "hub/xet_reconstruction.h"
#include "hub_standin.h"
#include "skippy/error.h"
#include "skippy/source.h"
#include "skippy/hub.h"
#include "test_util.h"
#include "util/sha256.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::CliResult;
using test::HubStandin;
using test::PublishOptions;
using test::TempDir;

constexpr const char* kXetSplit[] = {"llama-tiny-q4_0-00001-of-00003.gguf", "llama-tiny-q4_0-00002-of-00003.gguf",
                                     "llama-tiny-q4_0-00003-of-00003.gguf"};

// What the stand-in served, and how.
struct XetServed {
  size_t xorb_gets = 0;         // storage GET /xorbs/... (Xet)
  size_t resolve_gets = 0;      // storage GET /repos/... (the resolve path's redirect)
  size_t reconstructions = 0;   // CAS GET /v{1,2}/reconstructions/...
  size_t multi_range = 0;       // xorb GETs asking for several ranges at once
  std::vector<std::string> reconstruction_ranges;
};

class XetDownload : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    hub_ = new HubStandin();
    hub_->configure({{"token", "hf_test"}, {"url_ttl_secs", 3600}});
    data_ = new TempDir();
    const auto w = test::write_pkg(test::data_path("llama-tiny-q8_0.gguf"), data_->path() / "pkg");
    ASSERT_EQ(w.exit_code, 0) << w.err;
    PublishOptions xet;
    xet.xet = true;
    pkg_commit_ = new std::string(hub_->publish("org/xet-layers", data_->path() / "pkg", xet));
    fs::create_directories(data_->path() / "split");
    for (const char* s : kXetSplit) fs::copy_file(test::data_path(s), data_->path() / "split" / s);
    model_commit_ = new std::string(hub_->publish("org/xet-split-GGUF", data_->path() / "split", xet));
  }
  static void TearDownTestSuite() {
    delete hub_;
    delete data_;
    delete pkg_commit_;
    delete model_commit_;
  }
  void SetUp() override {
    hub_->clear_faults();
    hub_->configure({{"xet_multi_range", true}, {"xet_token_ttl_secs", 3600}, {"url_max_uses", 0}});
    hub_->clear_log();
    hub_->clear_xet_stats();
  }

  std::vector<std::string> env(const std::string& cache, std::vector<std::string> extra = {}) const {
    std::vector<std::string> e = {"HF_ENDPOINT=" + hub_->endpoint(),
                                  "HF_HUB_CACHE=" + (tmp_.path() / cache / "hf").string(),
                                  "HF_HOME=" + (tmp_.path() / cache / "hfhome").string(),
                                  "SKIPPY_CACHE_DIR=" + (tmp_.path() / cache / "skippy").string(),
                                  "SKIPPY_HF_BACKOFF_MS=20",
                                  "HF_TOKEN=hf_test",
                                  "HF_HUB_OFFLINE=",
                                  "HF_HUB_DISABLE_XET=",
                                  // Small ranges over several connections: even these files come as many ranges.
                                  "SKIPPY_HF_CONNECTIONS=4",
                                  "SKIPPY_HF_MIN_RANGE=65536",
                                  "SOURCE_DATE_EPOCH=1700000000"};
    for (const auto& x : extra) {  // later settings replace earlier ones
      const auto name = x.substr(0, x.find('=') + 1);
      std::erase_if(e, [&](const std::string& y) { return y.starts_with(name); });
      e.push_back(x);
    }
    return e;
  }
  CliResult cli(const std::vector<std::string>& args, const std::string& cache, std::vector<std::string> extra = {}) const {
    return test::run_cli(args, env(cache, std::move(extra)));
  }
  fs::path hf_repo(const std::string& cache, const std::string& repo) const {
    std::string name = "models--" + repo;
    name.replace(name.find('/'), 1, "--");
    return tmp_.path() / cache / "hf" / name;
  }
  std::string pkg_ref() const { return "hf://org/xet-layers@" + *pkg_commit_; }

  static XetServed served() {
    XetServed s;
    for (const auto& e : hub_->log()) {
      if (e.listener == "storage" && e.method == "GET" && e.path.starts_with("/xorbs/")) {
        ++s.xorb_gets;
        if (e.range && e.range->find(',') != std::string::npos) ++s.multi_range;
      }
      if (e.listener == "storage" && e.method == "GET" && e.path.starts_with("/repos/")) ++s.resolve_gets;
      if (e.listener == "cas" && e.path.find("/reconstructions/") != std::string::npos) {
        ++s.reconstructions;
        s.reconstruction_ranges.push_back(e.range.value_or(""));
      }
    }
    return s;
  }

  // Every blob the cache holds under its final name has the bytes its name says.
  static void expect_only_right_blobs(const fs::path& repo_dir) {
    if (!fs::exists(repo_dir / "blobs")) return;
    for (const auto& b : fs::directory_iterator(repo_dir / "blobs")) {
      const std::string name = b.path().filename().string();
      if (name.find('.') != std::string::npos) continue;  // .incomplete, .incomplete.ranges
      if (name.size() == 64) {
        EXPECT_EQ(sha256_file(b.path()), name) << "a wrong blob was installed: " << b.path();
      }
    }
  }

  static HubStandin* hub_;
  static TempDir* data_;
  static std::string *pkg_commit_, *model_commit_;
  TempDir tmp_;
};
HubStandin* XetDownload::hub_ = nullptr;
TempDir* XetDownload::data_ = nullptr;
std::string* XetDownload::pkg_commit_ = nullptr;
std::string* XetDownload::model_commit_ = nullptr;

// The files a fetch put in the snapshot, which must be the package's own.
size_t expect_snapshot_is_package(const fs::path& snapshot, const fs::path& pkg) {
  const auto want = test::package_files(pkg);
  size_t n = 0;
  for (const auto& [rel, bytes] : test::package_files(snapshot)) {
    EXPECT_TRUE(want.count(rel) && want.at(rel) == bytes) << rel << " differs from the package's file";
    ++n;
  }
  return n;
}

TEST_F(XetDownload, FetchOfAStageReadsXorbRangesAndEqualsTheResolvePath) {
  const auto r = cli({"fetch", pkg_ref(), "--layers", "0..2", "--json"}, "xet");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["verified"], true) << r.out;
  const auto s = served();
  EXPECT_GT(s.xorb_gets, 0u);
  EXPECT_GT(s.reconstructions, 0u);
  EXPECT_EQ(s.resolve_gets, 0u) << "a Xet-backed part came through the resolve URL";
  EXPECT_EQ(s.multi_range, 0u);
  for (const auto& range : s.reconstruction_ranges) EXPECT_TRUE(range.starts_with("bytes=")) << range;
  EXPECT_EQ(r.err.find("not downloaded through Xet"), std::string::npos) << r.err;
  const auto snap = hf_repo("xet", "org/xet-layers") / "snapshots" / *pkg_commit_;
  EXPECT_GE(expect_snapshot_is_package(snap, data_->path() / "pkg"), 4u);

  // The same stage through the resolve path: the same files, and no Xet request.
  hub_->clear_log();
  const auto plain = cli({"fetch", pkg_ref(), "--layers", "0..2", "--json"}, "plain", {"HF_HUB_DISABLE_XET=1"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const auto p = served();
  EXPECT_EQ(p.xorb_gets, 0u);
  EXPECT_EQ(p.reconstructions, 0u);
  EXPECT_GT(p.resolve_gets, 0u);
  EXPECT_EQ(test::package_files(snap), test::package_files(hf_repo("plain", "org/xet-layers") / "snapshots" / *pkg_commit_));
}

TEST_F(XetDownload, SelectAndMaterializeOfAnHfPackageReadThroughXet) {
  const auto sel = cli({"select", pkg_ref(), "--layers", "1..3", "--json"}, "xet");
  ASSERT_EQ(sel.exit_code, 0) << sel.err;
  const auto mat = cli({"materialize", pkg_ref(), "--layers", "1..3", "--out", (tmp_.path() / "xet.gguf").string(), "--json"},
                       "xet");
  ASSERT_EQ(mat.exit_code, 0) << mat.err;
  const auto s = served();
  EXPECT_GT(s.xorb_gets, 0u);
  EXPECT_EQ(s.resolve_gets, 0u);
  const auto sel2 = cli({"select", pkg_ref(), "--layers", "1..3", "--json"}, "plain", {"HF_HUB_DISABLE_XET=1"});
  ASSERT_EQ(sel2.exit_code, 0) << sel2.err;
  const auto mat2 = cli({"materialize", pkg_ref(), "--layers", "1..3", "--out", (tmp_.path() / "plain.gguf").string(), "--json"},
                        "plain", {"HF_HUB_DISABLE_XET=1"});
  ASSERT_EQ(mat2.exit_code, 0) << mat2.err;
  // Paths differ (each its own cache); everything else is the same.
  json a = json::parse(sel.out), b = json::parse(sel2.out);
  EXPECT_EQ(a["parts"].size(), b["parts"].size());
  EXPECT_EQ(a["verified"], true);
  EXPECT_EQ(test::read_text(tmp_.path() / "xet.gguf"), test::read_text(tmp_.path() / "plain.gguf"));
  EXPECT_EQ(sha256_file(tmp_.path() / "xet.gguf"), sha256_file(tmp_.path() / "plain.gguf"));
}

TEST_F(XetDownload, StreamedWritePackageReadsTheSourceThroughXetByteForByte) {
  const auto r = cli({"write-package", "org/xet-split-GGUF:Q4_0", "--stream", "--out-dir", (tmp_.path() / "xet-out").string(),
                      "--json"},
                     "xet");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto s = served();
  EXPECT_GT(s.xorb_gets, 3u);
  EXPECT_GT(s.reconstructions, 3u) << "the 2.9 MB shard comes as several ranges, each its own reconstruction";
  EXPECT_EQ(s.resolve_gets, 0u);
  EXPECT_FALSE(fs::exists(tmp_.path() / "xet" / "hf" / "models--org--xet-split-GGUF" / "blobs"))
      << "the streamed source went through the cache";
  // Some range starts inside a chunk: the reconstruction's offset was skipped.
  EXPECT_TRUE(std::any_of(s.reconstruction_ranges.begin(), s.reconstruction_ranges.end(),
                          [](const std::string& x) { return !x.starts_with("bytes=0-"); }));

  const auto plain = cli({"write-package", "org/xet-split-GGUF:Q4_0", "--stream", "--out-dir",
                          (tmp_.path() / "plain-out").string(), "--json"},
                         "plain", {"HF_HUB_DISABLE_XET=1"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_EQ(json::parse(r.out)["manifest_sha256"], json::parse(plain.out)["manifest_sha256"]);
  EXPECT_EQ(test::package_files(tmp_.path() / "xet-out"), test::package_files(tmp_.path() / "plain-out"));

  // And without --stream: the source files land in the cache through Xet.
  hub_->clear_log();
  const auto cached = cli({"write-package", "org/xet-split-GGUF:Q4_0", "--out-dir", (tmp_.path() / "cached-out").string(),
                           "--json"},
                          "cached");
  ASSERT_EQ(cached.exit_code, 0) << cached.err;
  EXPECT_EQ(served().resolve_gets, 0u);
  EXPECT_EQ(json::parse(cached.out)["manifest_sha256"], json::parse(plain.out)["manifest_sha256"]);
  for (const char* f : kXetSplit) {
    EXPECT_EQ(sha256_file(hf_repo("cached", "org/xet-split-GGUF") / "snapshots" / *model_commit_ / f),
              sha256_file(test::data_path(f)))
        << f;
  }
}

TEST_F(XetDownload, ACutXorbTransferResumesWithinTheRunAndAcrossRuns) {
  // Within the run: the cut range asks for a reconstruction from where it stopped.
  hub_->fault({{"listener", "storage"}, {"match", "/xorbs/"}, {"kind", "cut"}, {"after_bytes", 20000}, {"times", 2}});
  const auto r = cli({"write-package", "org/xet-split-GGUF:Q4_0", "--out-dir", (tmp_.path() / "out1").string(), "--json"},
                     "cut");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("retry: "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("not downloaded through Xet"), std::string::npos) << r.err;
  EXPECT_EQ(served().resolve_gets, 0u);
  const auto snap = hf_repo("cut", "org/xet-split-GGUF") / "snapshots" / *model_commit_;
  EXPECT_EQ(sha256_file(snap / kXetSplit[0]), sha256_file(test::data_path(kXetSplit[0])));

  // Across runs: both paths cut every time, one attempt each; the partial
  // file stays, and the next run asks Xet only for what is missing.
  hub_->clear_log();
  hub_->fault({{"listener", "storage"}, {"match", "/xorbs/"}, {"kind", "cut"}, {"after_bytes", 50000}, {"times", -1}});
  hub_->fault({{"listener", "storage"}, {"match", "/repos/"}, {"kind", "cut"}, {"after_bytes", 1000}, {"times", -1}});
  const std::vector<std::string> once = {"SKIPPY_HF_MAX_ATTEMPTS=1", "SKIPPY_HF_CONNECTIONS=1"};
  const auto failed = cli({"fetch", pkg_ref(), "--json"}, "resume", once);
  EXPECT_NE(failed.exit_code, 0) << failed.out;
  EXPECT_NE(failed.err.find("not downloaded through Xet"), std::string::npos) << failed.err;
  const auto blobs = hf_repo("resume", "org/xet-layers") / "blobs";
  uint64_t kept = 0;
  for (const auto& b : fs::directory_iterator(blobs)) {
    if (b.path().extension() == ".incomplete") kept += fs::file_size(b.path());
  }
  EXPECT_GT(kept, 0u) << "nothing was kept for the next run";
  hub_->clear_faults();
  hub_->clear_log();
  const auto again = cli({"fetch", pkg_ref(), "--json"}, "resume");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  const auto s = served();
  EXPECT_EQ(s.resolve_gets, 0u);
  EXPECT_TRUE(std::any_of(s.reconstruction_ranges.begin(), s.reconstruction_ranges.end(),
                          [](const std::string& x) { return !x.starts_with("bytes=0-"); }))
      << "no range resumed where the partial file stopped";
  expect_snapshot_is_package(hf_repo("resume", "org/xet-layers") / "snapshots" / *pkg_commit_, data_->path() / "pkg");
}

TEST_F(XetDownload, WrongXorbBytesAreAnIntegrityErrorAndNothingIsInstalled) {
  hub_->fault({{"listener", "storage"}, {"kind", "xet_wrong_bytes"}, {"times", -1}});
  const auto r = cli({"fetch", pkg_ref(), "--layers", "0..2", "--json"}, "wrong");
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.err.find("hf://org/xet-layers@" + *pkg_commit_ + ": "), std::string::npos) << r.err;
  EXPECT_TRUE(r.err.find("not the xorb's chunks") != std::string::npos ||
              r.err.find("nothing was placed in the cache") != std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("not downloaded through Xet"), std::string::npos) << "an integrity failure fell back: " << r.err;
  EXPECT_EQ(served().resolve_gets, 0u);
  expect_only_right_blobs(hf_repo("wrong", "org/xet-layers"));
}

TEST_F(XetDownload, ATermThatLiesAboutItsLengthIsAnIntegrityError) {
  hub_->fault({{"listener", "cas"}, {"kind", "xet_bad_terms"}, {"mode", "unpacked_length"}, {"times", -1}});
  const auto r = cli({"fetch", pkg_ref(), "--layers", "0..2", "--json"}, "lie");
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.err.find("of the Xet reconstruction (xorb "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("bytes, not the "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("hf://org/xet-layers@" + *pkg_commit_ + ": "), std::string::npos) << r.err;
  EXPECT_EQ(served().resolve_gets, 0u);
  expect_only_right_blobs(hf_repo("lie", "org/xet-layers"));

  // A term no fetch range covers, and an offset past the first term: the same.
  for (const char* mode : {"missing_fetch", "offset"}) {
    hub_->clear_faults();
    hub_->fault({{"listener", "cas"}, {"kind", "xet_bad_terms"}, {"mode", mode}, {"times", -1}});
    const auto m = cli({"fetch", pkg_ref(), "--layers", "0..2", "--json"}, std::string("lie-") + mode);
    EXPECT_NE(m.exit_code, 0) << mode;
    EXPECT_NE(m.err.find("the Xet CAS's reconstruction"), std::string::npos) << mode << ": " << m.err;
  }
}

TEST_F(XetDownload, AnExpiredTokenIsRenewedOnceAndARefusingCasFallsBackSayingSoOnce) {
  hub_->fault({{"listener", "cas"}, {"kind", "xet_expired_token"}, {"times", 1}});
  const auto r = cli({"fetch", pkg_ref(), "--layers", "0..2", "--json"}, "renew");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(served().resolve_gets, 0u);
  EXPECT_EQ(r.err.find("not downloaded through Xet"), std::string::npos) << r.err;
  const auto st = hub_->xet_stats();
  EXPECT_GT(st.raw["tokens_issued"]["read"].get<int>(), 1) << "no fresh read token after the 401";

  // A CAS that refuses every token: the resolve path, said once.
  hub_->clear_log();
  hub_->fault({{"listener", "cas"}, {"kind", "xet_expired_token"}, {"times", -1}});
  const auto f = cli({"fetch", pkg_ref(), "--layers", "0..2", "--json"}, "refused");
  ASSERT_EQ(f.exit_code, 0) << f.err;
  const auto s = served();
  EXPECT_EQ(s.xorb_gets, 0u);
  EXPECT_GT(s.resolve_gets, 0u);
  const auto first = f.err.find("not downloaded through Xet storage (the Xet CAS answered HTTP 401 even for a fresh token");
  EXPECT_NE(first, std::string::npos) << f.err;
  EXPECT_EQ(f.err.find("not downloaded through Xet", first + 1), std::string::npos) << "said more than once: " << f.err;
  expect_snapshot_is_package(hf_repo("refused", "org/xet-layers") / "snapshots" / *pkg_commit_, data_->path() / "pkg");
}

TEST_F(XetDownload, AReconstructionFailingWithServerErrorsIsRetriedThenFallsBack) {
  // Once: retried, still through Xet.
  hub_->fault({{"listener", "cas"}, {"match", "/reconstructions/"}, {"kind", "status"}, {"status", 503}, {"times", 1}});
  const auto r = cli({"fetch", pkg_ref(), "--layers", "0..2", "--json"}, "once");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("retry: "), std::string::npos) << r.err;
  EXPECT_EQ(served().resolve_gets, 0u);
  // Always: the resolve path serves, and says so once.
  hub_->clear_log();
  hub_->fault({{"listener", "cas"}, {"match", "/reconstructions/"}, {"kind", "status"}, {"status", 503}, {"times", -1}});
  const auto f = cli({"fetch", pkg_ref(), "--json"}, "always", {"SKIPPY_HF_MAX_ATTEMPTS=2"});
  ASSERT_EQ(f.exit_code, 0) << f.err;
  const auto note = f.err.find("not downloaded through Xet storage");
  ASSERT_NE(note, std::string::npos) << f.err;
  EXPECT_NE(f.err.find("503", note), std::string::npos) << f.err;
  EXPECT_EQ(f.err.find("not downloaded through Xet", note + 1), std::string::npos) << f.err;
  EXPECT_GT(served().resolve_gets, 0u);
  expect_snapshot_is_package(hf_repo("always", "org/xet-layers") / "snapshots" / *pkg_commit_, data_->path() / "pkg");
}

TEST_F(XetDownload, HfHubDisableXetUsesTheResolvePathOnly) {
  // Without it, the same fetch reads xorbs.
  ASSERT_EQ(cli({"fetch", pkg_ref(), "--json"}, "on").exit_code, 0);
  EXPECT_GT(served().xorb_gets, 0u);
  EXPECT_GT(hub_->xet_stats().raw["tokens_issued"]["read"].get<int>(), 0);
  hub_->clear_log();
  hub_->clear_xet_stats();
  const auto r = cli({"fetch", pkg_ref(), "--json"}, "off", {"HF_HUB_DISABLE_XET=1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto s = served();
  EXPECT_EQ(s.xorb_gets, 0u);
  EXPECT_EQ(s.reconstructions, 0u);
  EXPECT_GT(s.resolve_gets, 0u);
  EXPECT_EQ(hub_->xet_stats().raw["tokens_issued"]["read"].get<int>(), 0);
  expect_snapshot_is_package(hf_repo("off", "org/xet-layers") / "snapshots" / *pkg_commit_, data_->path() / "pkg");
}

// A file whose chunks sit apart in an earlier file's xorb: its
// reconstruction hands out several ranges under one URL. Storage that
// refuses multi-range requests still serves it (one range per request).
TEST_F(XetDownload, StorageRefusingMultiRangeRequestsStillServesEveryRange) {
  TempDir files;
  std::mt19937_64 rng(42);
  auto block = [&](size_t n) {
    std::vector<uint8_t> b(n);
    for (auto& x : b) x = static_cast<uint8_t>(rng());
    return b;
  };
  const auto p = block(3u << 20), q = block(1u << 20), r = block(3u << 20);
  std::vector<uint8_t> a = p, b = p;
  a.insert(a.end(), q.begin(), q.end());
  a.insert(a.end(), r.begin(), r.end());
  b.insert(b.end(), r.begin(), r.end());
  fs::create_directories(files.path() / "src");
  test::write_file(files.path() / "src" / "a.bin", a);
  test::write_file(files.path() / "src" / "b.bin", b);
  PublishOptions xet;
  xet.xet = true;
  const std::string commit = hub_->publish("org/xet-multi", files.path() / "src", xet);
  hub_->fault({{"listener", "storage"}, {"kind", "xet_refuse_multirange"}, {"times", -1}});

  // The stand-in's v2 answer for one of them lists several ranges under one URL.
  const auto tok = HubStandin::http("GET", hub_->endpoint() + "/api/models/org/xet-multi/xet-read-token/" + commit,
                                    {"Authorization: Bearer hf_test"});
  ASSERT_EQ(tok.status, 200) << tok.body;
  const auto tj = json::parse(tok.body);
  bool multi = false;
  const json store = hub_->xet_store();
  for (const auto& f : store["files"]) {
    const auto rec = HubStandin::http("GET", tj["casUrl"].get<std::string>() + "/v2/reconstructions/" + f["hash"].get<std::string>(),
                                      {"Authorization: Bearer " + tj["accessToken"].get<std::string>()});
    ASSERT_EQ(rec.status, 200) << rec.body;
    const auto parsed = detail::parse_xet_reconstruction(rec.body, 2, "f");
    EXPECT_FALSE(detail::plan_xet_fetches(parsed, f["size"].get<uint64_t>(), "f").empty());
    const json answer = json::parse(rec.body);
    for (const auto& [xorb, list] : answer["xorbs"].items()) {
      for (const auto& entry : list) multi = multi || entry["ranges"].size() > 1;
    }
  }
  EXPECT_TRUE(multi) << "no reconstruction with several ranges under one URL";
  hub_->clear_log();

  HubConfig cfg;
  cfg.endpoint = hub_->endpoint();
  cfg.token = "hf_test";
  cfg.backoff_ms = 20;
  cfg.connections = 2;
  cfg.min_range_bytes = 1 << 20;
  auto remote = make_hub_remote(cfg);
  HfRepoCache cache(files.path() / "hf", "org/xet-multi");
  std::vector<RemoteFile> want(2);
  for (size_t i = 0; i < 2; ++i) {
    const auto& bytes = i == 0 ? a : b;
    want[i].path = i == 0 ? "a.bin" : "b.bin";
    want[i].sha256 = sha256_hex(std::span<const uint8_t>(bytes));
    want[i].size = bytes.size();
  }
  const auto out = remote->fetch(cache, commit, want, nullptr);
  ASSERT_EQ(out.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(out[i].delivered) << (out[i].error ? out[i].error->what() : "");
    EXPECT_TRUE(out[i].verified);
    EXPECT_EQ(sha256_file(cache.snapshot_dir(commit) / want[i].path), want[i].sha256);
  }
  const auto s = served();
  EXPECT_EQ(s.multi_range, 0u) << "a request asked for several ranges";
  EXPECT_GT(s.xorb_gets, 0u);
  EXPECT_EQ(s.resolve_gets, 0u);
}

// ------------------------------------------------ the reconstruction parser

const std::string kX1(64, 'a');
const std::string kX2(64, 'b');

json v2_answer() {
  return {{"offset_into_first_range", 10},
          {"terms", {{{"hash", kX1}, {"unpacked_length", 200000}, {"range", {{"start", 0}, {"end", 3}}}},
                     {{"hash", kX1}, {"unpacked_length", 70000}, {"range", {{"start", 3}, {"end", 4}}}},
                     {{"hash", kX2}, {"unpacked_length", 5000}, {"range", {{"start", 1}, {"end", 2}}}},
                     {{"hash", kX1}, {"unpacked_length", 100}, {"range", {{"start", 0}, {"end", 1}}}}}},
          {"xorbs",
           {{kX1, {{{"url", "http://127.0.0.1:1/x1?sig=1"},
                    {"ranges", {{{"chunks", {{"start", 0}, {"end", 4}}}, {"bytes", {{"start", 0}, {"end", 270099}}}}}}}}},
            {kX2, {{{"url", "https://s.example/x2"},
                    {"ranges", {{{"chunks", {{"start", 1}, {"end", 2}}}, {"bytes", {{"start", 500}, {"end", 5507}}}}}}}}}}}};
}

TEST(XetReconstruction, ParsesBothVersionsAndPlansOneRequestPerContiguousRun) {
  const auto r = detail::parse_xet_reconstruction(v2_answer().dump(), 2, "f");
  EXPECT_EQ(r.offset_into_first_range, 10u);
  ASSERT_EQ(r.terms.size(), 4u);
  const auto plan = detail::plan_xet_fetches(r, 275000, "f");
  // Terms 0 and 1 share the x1 range; x2; then x1 again (chunks go back).
  ASSERT_EQ(plan.size(), 3u);
  EXPECT_EQ(plan[0].first_term, 0u);
  EXPECT_EQ(plan[0].last_term, 2u);
  EXPECT_EQ(plan[1].range->url, "https://s.example/x2");
  EXPECT_EQ(plan[2].first_term, 3u);
  EXPECT_EQ(plan[2].range->byte_last, 270099u);

  const json v1 = {{"offset_into_first_range", 0},
                   {"terms", {{{"hash", kX2}, {"unpacked_length", 5000}, {"range", {{"start", 1}, {"end", 2}}}}}},
                   {"fetch_info", {{kX2, {{{"range", {{"start", 0}, {"end", 2}}}, {"url", "http://h/x"},
                                           {"url_range", {{"start", 0}, {"end", 9000}}}}}}}}};
  const auto r1 = detail::parse_xet_reconstruction(v1.dump(), 1, "f");
  ASSERT_EQ(detail::plan_xet_fetches(r1, 5000, "f").size(), 1u);
}

TEST(XetReconstruction, HostileAnswersAreRefusedNamingTheField) {
  auto refused = [](const std::string& body, const std::string& needle) {
    try {
      detail::parse_xet_reconstruction(body, 2, "hf://o/r@c: f");
      ADD_FAILURE() << "accepted: " << body.substr(0, 200);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_TRUE(std::string(e.what()).starts_with("hf://o/r@c: f: ")) << e.what();
    }
  };
  auto with = [](const std::function<void(json&)>& change) {
    json j = v2_answer();
    change(j);
    return j.dump();
  };
  refused("", "not a JSON object");
  refused("[1,2]", "not a JSON object");
  refused("{\"terms\": []", "not a JSON object");
  refused(with([](json& j) { j.erase("offset_into_first_range"); }), "offset_into_first_range");
  refused(with([](json& j) { j["offset_into_first_range"] = -1; }), "not a non-negative integer");
  refused(with([](json& j) { j["offset_into_first_range"] = 1.5; }), "not a non-negative integer");
  refused(with([](json& j) { j["terms"] = json::object(); }), "\"terms\" array");
  refused(with([](json& j) { j["terms"][0]["hash"] = "ABC"; }), "terms[0] has no xorb hash");
  refused(with([](json& j) { j["terms"][1]["range"]["end"] = 3; }), "empty chunk range");
  refused(with([](json& j) { j["terms"][1]["range"]["end"] = 5000000000ull; }), "out of range");
  refused(with([](json& j) { j["terms"][2]["unpacked_length"] = 0; }), "cannot hold that");
  refused(with([](json& j) { j["terms"][2]["unpacked_length"] = 131073; }), "cannot hold that");
  refused(with([](json& j) { j.erase("xorbs"); }), "\"xorbs\" object");
  refused(with([](json& j) { j["xorbs"]["zz"] = json::array(); }), "not a xorb hash");
  refused(with([](json& j) { j["xorbs"][kX2][0]["url"] = "file:///etc/passwd"; }), "unusable url");
  refused(with([](json& j) { j["xorbs"][kX2][0]["url"] = "http://a b"; }), "unusable url");
  refused(with([](json& j) { j["xorbs"][kX2][0]["ranges"][0]["bytes"]["end"] = 500; }), "cannot hold them");
  refused(with([](json& j) { j["xorbs"][kX2][0]["ranges"][0]["bytes"]["end"] = 499; }), "cannot hold them");
  refused(with([](json& j) { j["xorbs"][kX2][0]["ranges"][0]["bytes"]["end"] = 5000000; }), "cannot hold them");
  refused(with([](json& j) { j["xorbs"][kX2][0]["ranges"][0].erase("chunks"); }), "has no chunks and bytes");
  refused(with([](json& j) { j["xorbs"][kX2][0] = 7; }), "is not an object");
  // Deep nesting is only JSON, refused by shape.
  refused(std::string(10000, '[') + std::string(10000, ']'), "not a JSON object");
}

TEST(XetReconstruction, AReconstructionThatCannotBeTheFileIsAnIntegrityError) {
  auto lie = [](const json& j, uint64_t want, const std::string& needle) {
    const auto r = detail::parse_xet_reconstruction(j.dump(), 2, "f");
    try {
      detail::plan_xet_fetches(r, want, "f");
      ADD_FAILURE() << "planned: " << j.dump();
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kIntegrity);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  json j = v2_answer();
  j["terms"] = json::array();
  lie(j, 1, "has no terms");
  j = v2_answer();
  j["offset_into_first_range"] = 200000;
  lie(j, 1, "starts 200000 bytes into a first term of 200000 bytes");
  j = v2_answer();
  j["xorbs"].erase(kX2);
  lie(j, 1, "gives no fetch range for term 2");
  j = v2_answer();
  j["terms"][1]["range"]["end"] = 5;  // past the x1 range's chunks
  j["terms"][1]["unpacked_length"] = 140000;
  lie(j, 1, "gives no fetch range for term 1");
  lie(v2_answer(), 275091, "holds 275090 bytes, fewer than the 275091 asked for");
}

}  // namespace
}  // namespace skippy
