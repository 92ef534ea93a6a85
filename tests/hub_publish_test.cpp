// Publishing to the Hub: the real CLI (publish, write-package --push) against
// the local Hub stand-in's upload side, asserting on its request log, on what
// our fetch and the official JS client download afterwards, and on the
// output directory's size while write-package --push --max-disk runs.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "hub_standin.h"
#include "skippy/hub_publish.h"
#include "util/sha256.h"
#include "test_util.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::CliResult;
using test::HubRequest;
using test::HubStandin;
using test::run_cli;
using test::TempDir;

constexpr const char* kEpoch = "SOURCE_DATE_EPOCH=1700000000";

class HubPublish : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    hub_ = new HubStandin();
    pkg_dir_ = new TempDir();
    const auto r = test::write_pkg(test::data_path("llama-tiny-q8_0.gguf"), pkg(), {}, {kEpoch});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void TearDownTestSuite() {
    delete hub_;
    delete pkg_dir_;
  }
  void SetUp() override {
    hub_->clear_faults();
    hub_->configure({{"token", "hf_test"}, {"read_token", "hf_read"}, {"url_ttl_secs", 3600},
                     {"multipart_threshold", 16 << 20}, {"multipart_chunk_size", 8 << 20},
                     // These tests pin down the LFS path (publish's fallback when the Hub offers no
                     // Xet); tests/xet_publish_test.cpp covers Xet.
                     {"xet_enabled", false}});
    hub_->clear_log();
  }
  static fs::path pkg() { return pkg_dir_->path() / "pkg"; }

  std::vector<std::string> env(std::vector<std::string> extra = {}) const {
    std::vector<std::string> e = {"HF_ENDPOINT=" + hub_->endpoint(),
                                  "HF_HUB_CACHE=" + (tmp_ / "hf").string(),
                                  "HF_HOME=" + (tmp_ / "hfhome").string(),
                                  "SKIPPY_CACHE_DIR=" + (tmp_ / "skippy").string(),
                                  "SKIPPY_HF_BACKOFF_MS=20",
                                  "HF_TOKEN=hf_test",
                                  kEpoch,
                                  "HF_HUB_OFFLINE="};
    for (const auto& x : extra) {
      const auto name = x.substr(0, x.find('=') + 1);
      std::erase_if(e, [&](const std::string& y) { return y.starts_with(name); });
      e.push_back(x);
    }
    return e;
  }
  CliResult cli(std::vector<std::string> args, std::vector<std::string> extra_env = {}) const {
    return run_cli(args, env(std::move(extra_env)));
  }
  static uint64_t storage_bytes_received(const std::vector<HubRequest>& log, const json& raw) {
    (void)log;
    uint64_t n = 0;
    for (const auto& e : raw) {
      if (e["listener"] == "storage") n += e["bytes_received"].get<uint64_t>();
    }
    return n;
  }
  json raw_log() const {
    const auto r = HubStandin::http("GET", hub_->endpoint() + "/_admin/log");
    return json::parse(r.body);
  }
  // sha256 of every storage PUT that the stand-in accepted (200), and of every one it saw.
  static std::set<std::string> put_oids(const json& raw, bool accepted_only) {
    std::set<std::string> out;
    for (const auto& e : raw) {
      if (e["listener"] != "storage" || e["method"] != "PUT") continue;
      if (accepted_only && e["status"] != 200) continue;
      const std::string p = e["path"];  // /upload/ns/name/<oid>[/part/N]
      size_t at = 0;
      for (int k = 0; k < 4; ++k) at = p.find('/', at) + 1;
      out.insert(p.substr(at, 64));
    }
    return out;
  }
  std::string head(const std::string& repo) const {
    const auto r = HubStandin::http("GET", hub_->endpoint() + "/_admin/repos");
    return json::parse(r.body)[repo]["branches"]["main"];
  }

  static HubStandin* hub_;
  static TempDir* pkg_dir_;
  TempDir tmp_;
};
HubStandin* HubPublish::hub_ = nullptr;
TempDir* HubPublish::pkg_dir_ = nullptr;

TEST_F(HubPublish, PublishedPackageFetchesByteIdenticalWithOursAndTheOfficialClient) {
  const auto r = cli({"publish", pkg().string(), "hf://org/pub-identical", "--create", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["committed"], true);
  EXPECT_EQ(j["created_repo"], true);
  EXPECT_EQ(j["files"], 13);  // 11 fragments + model-package.json + README.md
  EXPECT_EQ(j["lfs_uploaded"], 11);
  const std::string commit = j["commit"];
  EXPECT_EQ(head("org/pub-identical"), commit);

  const auto raw = raw_log();
  size_t commits = 0;
  for (const auto& e : raw) {
    if (e["listener"] == "storage") {
      EXPECT_TRUE(e["authorization"].is_null()) << "the token never goes to storage";
    }
    if (e["method"] == "POST" && std::string(e["path"]).find("/commit/") != std::string::npos) ++commits;
  }
  EXPECT_EQ(commits, 1u) << "one atomic commit";

  const auto want = test::package_files(pkg());
  const auto f = cli({"fetch", "hf://org/pub-identical@" + commit, "--json"});
  ASSERT_EQ(f.exit_code, 0) << f.err;
  const auto snap = fs::path(json::parse(f.out)["snapshot_dir"].get<std::string>());
  auto got = test::package_files(snap);
  got.erase(".gitattributes");
  got.erase("README.md");  // fetch brings what the manifest declares; compare README through the JS client
  auto want_no_readme = want;
  want_no_readme.erase("README.md");
  EXPECT_EQ(got, want_no_readme) << "our fetch gives back the bytes that were published";

  const fs::path js = fs::path(SKIPPY_SOURCE_DIR) / "tests" / "js";
  if (!fs::exists(js / "node_modules/@huggingface/hub")) GTEST_SKIP() << "run scripts/install-deps.sh for @huggingface/hub";
  TempDir cache;
  const auto d = test::run_program("node", {(js / "hub_interop.mjs").string(), "download", "--endpoint", hub_->endpoint(),
                                            "--cache-dir", cache.path().string(), "--repo", "org/pub-identical",
                                            "--revision", commit, "--token", "hf_test"});
  ASSERT_EQ(d.exit_code, 0) << d.err;
  auto theirs = test::package_files(cache.path() / "models--org--pub-identical" / "snapshots" / commit);
  theirs.erase(".gitattributes");
  EXPECT_EQ(theirs, want) << "@huggingface/hub downloads the same package, README included";
}

TEST_F(HubPublish, SecondPublishSendsNoLfsByteAndMakesNoCommit) {
  ASSERT_EQ(cli({"publish", pkg().string(), "hf://org/pub-twice", "--create"}).exit_code, 0);
  const std::string first = head("org/pub-twice");
  hub_->clear_log();
  const auto r = cli({"publish", pkg().string(), "hf://org/pub-twice", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["lfs_uploaded"], 0);
  EXPECT_EQ(j["lfs_already_on_hub"], 11);
  EXPECT_EQ(j["committed"], false) << "the branch already holds exactly this package";
  EXPECT_EQ(j["commit"], first);
  const auto raw = raw_log();
  EXPECT_EQ(storage_bytes_received({}, raw), 0u);
  EXPECT_TRUE(put_oids(raw, false).empty()) << raw.dump();
  EXPECT_EQ(head("org/pub-twice"), first);
}

TEST_F(HubPublish, KilledMidUploadThenRerunSendsOnlyWhatIsMissing) {
  const auto manifest = json::parse(test::read_text(pkg() / "model-package.json"));
  const std::string slow_oid = manifest["layers"][3]["sha256"];
  hub_->fault({{"match", slow_oid}, {"listener", "storage"}, {"method", "PUT"}, {"kind", "slow"},
               {"bytes_per_sec", 4000}, {"times", -1}});  // a ~40 KB layer: 10 s
  std::vector<std::string> args = {"-s", "KILL", "4", SKIPPY_CLI_PATH,
                                   "publish", pkg().string(), "hf://org/pub-killed", "--create"};
  const auto killed = test::run_program("timeout", args, env());
  EXPECT_NE(killed.exit_code, 0) << "the first run is killed mid-upload";
  hub_->clear_faults();
  const auto first = raw_log();
  const auto stored_first = put_oids(first, true);
  EXPECT_FALSE(stored_first.count(slow_oid));
  EXPECT_GE(stored_first.size(), 5u) << "the other fragments reached storage before the kill";
  for (const auto& e : first) EXPECT_NE(e["method"] == "POST" && std::string(e["path"]).find("/commit/") != std::string::npos, true);

  hub_->clear_log();
  const auto r = cli({"publish", pkg().string(), "hf://org/pub-killed", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["committed"], true);
  const auto second = put_oids(raw_log(), false);
  EXPECT_TRUE(second.count(slow_oid)) << "what was missing is sent";
  for (const auto& oid : second) EXPECT_FALSE(stored_first.count(oid)) << oid << " was sent again";
  EXPECT_EQ(j["lfs_uploaded"].get<size_t>() + j["lfs_already_on_hub"].get<size_t>(), 11u);
  const auto f = cli({"fetch", "hf://org/pub-killed@" + j["commit"].get<std::string>(), "--json"});
  EXPECT_EQ(f.exit_code, 0) << f.err;
}

TEST_F(HubPublish, ACommitThatRacedTheUploadIsRefusedNotOverwritten) {
  // Slow uploads: a racing commit lands meanwhile.
  TempDir other;
  fs::copy(pkg(), other.path() / "pkg", fs::copy_options::recursive);
  hub_->fault({{"listener", "storage"}, {"method", "PUT"}, {"kind", "slow"}, {"bytes_per_sec", 400000}, {"times", -1}});
  auto fut = std::async(std::launch::async, [&] {
    return cli({"publish", (other.path() / "pkg").string(), "hf://org/pub-race2", "--create", "--json"});
  });
  // Wait for the first storage PUT, then commit to the branch behind its back.
  for (int i = 0; i < 400; ++i) {
    bool started = false;
    for (const auto& e : raw_log()) started = started || e["listener"] == "storage";
    if (started) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  TempDir racer;
  test::write_file(racer.path() / "notes.txt", {'h', 'i', '\n'});
  const std::string racing = hub_->publish("org/pub-race2", racer.path());
  const auto r = fut.get();
  hub_->clear_faults();
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  test::expect_json_error(r, "invalid_input", "the branch moved while this package was uploading");
  EXPECT_NE(r.out.find(racing), std::string::npos) << "the message names the new head";
  EXPECT_EQ(head("org/pub-race2"), racing) << "the other commit is not overwritten";
}

TEST_F(HubPublish, ATokenWithoutWriteAccessFailsBeforeAnyUpload) {
  for (const std::string token : {"hf_read", ""}) {
    hub_->clear_log();
    const auto r = cli({"publish", pkg().string(), "hf://org/pub-denied", "--create", "--json"}, {"HF_TOKEN=" + token});
    EXPECT_EQ(r.exit_code, 1);
    test::expect_json_error(r, "unauthorized", token.empty() ? "needs a token with write access" : "read-only");
    for (const auto& e : raw_log()) {
      EXPECT_EQ(e["path"], "/api/whoami-v2") << "nothing but the token check: " << e.dump();
    }
  }
  // And a package that fails its own checks is never uploaded.
  TempDir bad;
  fs::copy(pkg(), bad.path() / "pkg", fs::copy_options::recursive);
  {
    auto bytes = test::read_file(bad.path() / "pkg" / "layers" / "layer-00001.gguf");
    bytes[bytes.size() / 2] ^= 0x5a;
    test::write_file(bad.path() / "pkg" / "layers" / "layer-00001.gguf", bytes);
  }
  hub_->clear_log();
  const auto r = cli({"publish", (bad.path() / "pkg").string(), "hf://org/pub-bad", "--create", "--json"});
  EXPECT_EQ(r.exit_code, 1);
  test::expect_json_error(r, "integrity", "layers/layer-00001.gguf");
  EXPECT_TRUE(raw_log().empty()) << "no request at all for a package that fails verification";
}

TEST_F(HubPublish, AManifestWithALocalPathIsRefused) {
  // Our writer records the file's name in its repository; a package written
  // elsewhere (the reference writer records the absolute path it read) is
  // refused rather than published with a local directory in it.
  TempDir t;
  ASSERT_EQ(test::write_pkg(test::data_path("llama-tiny-q8_0.gguf"), t.path() / "pkg").exit_code, 0);
  auto m = json::parse(test::read_text(t.path() / "pkg" / "model-package.json"));
  m["source_model"]["path"] = "/home/publisher/models/llama-tiny-q8_0.gguf";
  const auto text = m.dump(2) + "\n";
  test::write_file(t.path() / "pkg" / "model-package.json", {text.begin(), text.end()});
  const auto r = cli({"publish", (t.path() / "pkg").string(), "hf://org/pub-private", "--create", "--json"});
  EXPECT_EQ(r.exit_code, 1);
  test::expect_json_error(r, "invalid_input", "source_model.path records a local path");
}

TEST_F(HubPublish, MultipartUploadsAndRetriesOn503AndDroppedConnections) {
  hub_->configure({{"multipart_threshold", 30000}, {"multipart_chunk_size", 15000}});  // layers are ~40 KB
  hub_->fault({{"listener", "storage"}, {"method", "PUT"}, {"match", "/part/2"}, {"kind", "status"}, {"status", 503},
               {"headers", {{"Retry-After", "0"}}}, {"times", 1}});
  hub_->fault({{"listener", "storage"}, {"method", "PUT"}, {"match", "/part/1"}, {"kind", "cut"}, {"after_bytes", 1000},
               {"times", 1}});
  const auto r = cli({"publish", pkg().string(), "hf://org/pub-multipart", "--create", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto raw = raw_log();
  size_t parts = 0, completions = 0, s503 = 0;
  for (const auto& e : raw) {
    const std::string p = e["path"];
    if (p.find("/part/") != std::string::npos && e["status"] == 200) ++parts;
    if (p == "/api/complete_multipart" && e["status"] == 200) ++completions;
    if (e["status"] == 503) ++s503;
  }
  EXPECT_GE(completions, 10u) << "the fragments above the threshold went multipart";
  EXPECT_GE(parts, 2 * completions);
  EXPECT_EQ(s503, 1u);
  const auto f = cli({"fetch", "hf://org/pub-multipart@" + json::parse(r.out)["commit"].get<std::string>(), "--json"});
  EXPECT_EQ(f.exit_code, 0) << f.err;
}

TEST_F(HubPublish, WritePackagePushWithMaxDiskNeverExceedsTheLimit) {
  // Uploads throttled so the writer must wait for them: the sampled size of
  // the output directory must stay within --max-disk the whole time.
  hub_->fault({{"listener", "storage"}, {"method", "PUT"}, {"kind", "slow"}, {"bytes_per_sec", 2 << 20}, {"times", -1}});
  const fs::path out = tmp_ / "pushed";
  const uint64_t limit = 100000;  // two ~40 KB layers fit; the embeddings (2.8 MiB) are larger, so alone
  test::DiskSampler sampler({out});
  const auto r = cli({"write-package", test::data_path("llama-tiny-q8_0.gguf").string(), "--out-dir", out.string(),
                      "--model-id", "org/tiny:Q8_0", "--source-revision", "0123abc", "--source-file",
                      "llama-tiny-q8_0.gguf", "--push", "hf://org/pub-pushed", "--create", "--max-disk", "100000", "--json"});
  sampler.stop();
  hub_->clear_faults();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["publish"]["committed"], true);
  EXPECT_GT(sampler.samples(), 20u);
  const uint64_t largest = 2900128;  // shared/embeddings.gguf
  EXPECT_LE(sampler.peak(), std::max(limit, largest) + 64 * 1024) << "sampled peak " << sampler.peak();
  EXPECT_LE(j["disk_peak"].get<uint64_t>(), std::max(limit, largest));
  // Only the manifest and README stay; the Hub has the fragments.
  EXPECT_FALSE(fs::exists(out / "layers" / "layer-00000.gguf"));
  EXPECT_TRUE(fs::exists(out / "model-package.json"));
  const auto m = json::parse(test::read_text(out / "model-package.json"));
  EXPECT_EQ(m["source_model"]["path"], "llama-tiny-q8_0.gguf") << "the repository file name, no local path";
  const auto f = cli({"fetch", "hf://org/pub-pushed@" + j["publish"]["commit"].get<std::string>(), "--json"});
  ASSERT_EQ(f.exit_code, 0) << f.err;
  EXPECT_EQ(json::parse(f.out)["manifest_sha256"], j["manifest_sha256"]);
  // The same package as write-package alone (then the same fragments, byte for byte).
  const auto alone = test::write_pkg(test::data_path("llama-tiny-q8_0.gguf"), tmp_ / "alone", {}, {kEpoch});
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  EXPECT_EQ(json::parse(alone.out)["manifest_sha256"], j["manifest_sha256"]);
}

TEST_F(HubPublish, AnUploadThatKeepsFailingStopsWritePackagePushWithItsReason) {
  hub_->fault({{"listener", "storage"}, {"method", "PUT"}, {"kind", "status"}, {"status", 400}, {"times", -1},
               {"body", "<Error><Code>InvalidRequest</Code><Message>nope</Message></Error>"}});
  const fs::path out = tmp_ / "failing";
  const auto r = cli({"write-package", test::data_path("llama-tiny-q8_0.gguf").string(), "--out-dir", out.string(),
                      "--model-id", "org/tiny:Q8_0", "--source-revision", "0123abc", "--source-file",
                      "llama-tiny-q8_0.gguf", "--push", "hf://org/pub-failing", "--create", "--max-disk", "2M", "--json"});
  hub_->clear_faults();
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  test::expect_json_error(r, "transport", "nothing was committed");
  EXPECT_NE(r.out.find("HTTP 400"), std::string::npos) << r.out;
  for (const auto& e : raw_log()) {
    EXPECT_EQ(std::string(e["path"]).find("/commit/"), std::string::npos) << "no commit after a failed upload";
  }
  EXPECT_FALSE(fs::exists(out / "model-package.json")) << "the write stopped";
}

// A failed upload is told once, as it happens, to whoever feeds the
// publisher (write-package --push --max-disk cancels its disk budget with
// it): no polling, and no commit afterwards.
TEST_F(HubPublish, TheFirstFailedUploadIsToldOnceThroughOnFailure) {
  hub_->fault({{"listener", "storage"}, {"method", "PUT"}, {"kind", "status"}, {"status", 400}, {"times", -1},
               {"body", "<Error><Code>InvalidRequest</Code><Message>nope</Message></Error>"}});
  HubConfig cfg;
  cfg.endpoint = hub_->endpoint();
  cfg.token = "hf_test";
  cfg.max_attempts = 2;
  cfg.backoff_ms = 1;
  PublishSettings settings;
  settings.create = true;
  std::atomic<int> told{0};
  std::string first;
  settings.on_failure = [&](const Error& e) {
    if (told++ == 0) first = e.what();
  };
  HubPublisher pub(cfg, parse_push_target("hf://org/pub-on-failure"), settings);
  pub.begin();
  for (const char* rel : {"layers/layer-00000.gguf", "layers/layer-00001.gguf"}) {
    const fs::path file = pkg() / rel;
    pub.add(rel, file, fs::file_size(file), sha256_file(file));
  }
  EXPECT_THROW((void)pub.commit("never"), Error);
  hub_->clear_faults();
  EXPECT_TRUE(pub.failed());
  EXPECT_EQ(told.load(), 1) << "once, however many uploads failed";
  EXPECT_NE(first.find("HTTP 400"), std::string::npos) << first;
}

}  // namespace
}  // namespace skippy
