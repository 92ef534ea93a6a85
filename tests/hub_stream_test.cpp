// write-package --stream: a split model read once from the local Hub stand-in
// (ranges over several connections, never stored), split into the same
// fragments as write-package from the same files, with the disk sampled
// against --max-disk, a corrupted byte stopping the run before any commit,
// and a layout that cannot fit refused before anything moves.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <thread>

#include "hub_standin.h"
#include "test_util.h"
#include "util/sha256.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::CliResult;
using test::HubStandin;
using test::TempDir;

void stream_put_text(const fs::path& p, const std::string& text) {
  test::write_file(p, std::vector<uint8_t>(text.begin(), text.end()));
}

constexpr const char* kStreamEpoch = "SOURCE_DATE_EPOCH=1700000000";
constexpr const char* kShards[] = {"llama-tiny-q4_0-00001-of-00003.gguf", "llama-tiny-q4_0-00002-of-00003.gguf",
                                   "llama-tiny-q4_0-00003-of-00003.gguf"};

class HubStream : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    hub_ = new HubStandin();
    // The LFS upload path (tests/xet_publish_test.cpp covers Xet).
    hub_->configure({{"token", "hf_test"}, {"url_ttl_secs", 3600}, {"xet_enabled", false}});
    src_dir_ = new TempDir();
    // The split fixture: non-layer tensors first (llama-quantize's order),
    // layers 2 and 5 cut across shards.
    for (const char* s : kShards) fs::copy_file(test::data_path(s), src_dir_->path() / s);
    const auto j = hub_->publish_json("org/tiny-split-GGUF", src_dir_->path());
    commit_ = new std::string(j["commit"].get<std::string>());
    shard_sha_ = new std::map<std::string, std::string>();
    for (const auto& f : j["files"]) (*shard_sha_)[f["path"].get<std::string>()] = f["sha256"].get<std::string>();
    // The same files split locally, with the provenance the Hub gives.
    local_ = new TempDir();
    const auto r = test::run_cli({"write-package", (src_dir_->path() / kShards[0]).string(), "--out-dir",
                                  (local_->path() / "pkg").string(), "--model-id", "org/tiny-split-GGUF:Q4_0",
                                  "--source-revision", *commit_, "--source-file", kShards[0], "--json"},
                                 {kStreamEpoch});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    local_manifest_sha_ = new std::string(json::parse(r.out)["manifest_sha256"].get<std::string>());
  }
  static void TearDownTestSuite() {
    delete hub_;
    delete src_dir_;
    delete local_;
    delete commit_;
    delete shard_sha_;
    delete local_manifest_sha_;
  }
  void SetUp() override {
    hub_->clear_faults();
    hub_->clear_log();
  }

  std::vector<std::string> env() const {
    return {"HF_ENDPOINT=" + hub_->endpoint(),  "HF_HUB_CACHE=" + (tmp_.path() / "hf").string(),
            "HF_HOME=" + (tmp_.path() / "hfhome").string(), "SKIPPY_CACHE_DIR=" + (tmp_.path() / "skippy").string(),
            "SKIPPY_HF_BACKOFF_MS=20",  "HF_TOKEN=hf_test",
            // Small ranges over several connections, so even this model arrives as many ranges.
            "SKIPPY_HF_CONNECTIONS=4", "SKIPPY_HF_MIN_RANGE=65536", kStreamEpoch, "HF_HUB_OFFLINE="};
  }
  CliResult cli(const std::vector<std::string>& args) const { return test::run_cli(args, env()); }

  // Whether the stand-in saw a commit.
  bool committed_anything() const {
    for (const auto& e : hub_->log()) {
      if (e.path.find("/commit/") != std::string::npos) return true;
    }
    return false;
  }

  static HubStandin* hub_;
  static TempDir *src_dir_, *local_;
  static std::string *commit_, *local_manifest_sha_;
  static std::map<std::string, std::string>* shard_sha_;
  TempDir tmp_;
};
HubStandin* HubStream::hub_ = nullptr;
TempDir* HubStream::src_dir_ = nullptr;
TempDir* HubStream::local_ = nullptr;
std::string* HubStream::commit_ = nullptr;
std::string* HubStream::local_manifest_sha_ = nullptr;
std::map<std::string, std::string>* HubStream::shard_sha_ = nullptr;

TEST_F(HubStream, StreamedSplitIsByteIdenticalToWritePackageFromTheSameFilesAndStoresNoSource) {
  const fs::path out = tmp_.path() / "streamed";
  const auto r = cli({"write-package", "org/tiny-split-GGUF:Q4_0", "--stream", "--out-dir", out.string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  EXPECT_EQ(json::parse(r.out)["manifest_sha256"], *local_manifest_sha_);
  const auto streamed = test::package_files(out), local = test::package_files(local_->path() / "pkg");
  ASSERT_EQ(streamed.size(), local.size());
  for (const auto& [rel, bytes] : local) EXPECT_TRUE(streamed.at(rel) == bytes) << rel << " differs";
  // Nothing of the source stayed: no cache blob, no placeholder.
  EXPECT_FALSE(fs::exists(tmp_.path() / "hf")) << "the source went through the Hugging Face cache";
  EXPECT_FALSE(fs::exists(tmp_.path() / ".streamed.stream-headers"));
  // Shard 1 (2.9 MB) came as many ranges (over 4 connections), each asked for once.
  std::set<std::string> ranges;
  size_t shard1 = 0;
  for (const auto& e : hub_->log()) {
    if (e.listener != "storage" || e.method != "GET" || e.path.find(shard_sha_->at(kShards[0])) == std::string::npos) continue;
    ASSERT_TRUE(e.range.has_value());
    EXPECT_TRUE(ranges.insert(*e.range).second) << "asked twice: " << *e.range;
    ++shard1;
  }
  EXPECT_GE(shard1, 8u);
}

TEST_F(HubStream, PushUnderASmallMaxDiskNeverHoldsMoreThanItAndPublishesTheSamePackage) {
  const fs::path out = tmp_.path() / "pushed";
  // Learn the least budget the layout allows: a smaller one is refused up front.
  const auto refused = cli({"write-package", "org/tiny-split-GGUF:Q4_0", "--stream", "--out-dir", out.string(), "--push",
                            "hf://org/stream-budget", "--create", "--max-disk", "1M", "--json"});
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  test::expect_json_error(refused, "usage", "cannot hold this source's layout");
  EXPECT_FALSE(committed_anything());
  for (const auto& e : hub_->log()) {
    EXPECT_FALSE(e.listener == "storage" && e.method == "PUT") << "nothing uploaded before the refusal";
  }
  EXPECT_FALSE(fs::exists(out / "layers")) << "refused before the output directory was touched";
  std::smatch m;
  const std::string msg = json::parse(refused.out)["error"]["message"];
  ASSERT_TRUE(std::regex_search(msg, m, std::regex("give at least ([0-9]+) bytes"))) << msg;
  const uint64_t limit = std::stoull(m[1]) + 4096;  // the least the layout needs (headers included), a page to spare

  // Uploads throttled so the writer must wait for them.
  hub_->fault({{"listener", "storage"}, {"method", "PUT"}, {"kind", "slow"}, {"bytes_per_sec", 4 << 20}, {"times", -1}});
  // (The source placeholders are holes past their headers: they count their blocks.)
  test::DiskSampler sampler({out, tmp_.path() / ".pushed.stream-headers", tmp_.path() / "hf"});
  const auto r = cli({"write-package", "org/tiny-split-GGUF:Q4_0", "--stream", "--out-dir", out.string(), "--push",
                      "hf://org/stream-budget", "--create", "--max-disk", std::to_string(limit), "--json"});
  sampler.stop();
  hub_->clear_faults();
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["publish"]["committed"], true);
  EXPECT_EQ(j["manifest_sha256"], *local_manifest_sha_);
  EXPECT_GT(sampler.samples(), 10u);
  EXPECT_LE(sampler.peak(), limit) << "sampled peak " << sampler.peak();
  EXPECT_LE(j["disk_peak"].get<uint64_t>(), limit);
  // The summary: the whole source read once, both rates.
  uint64_t source = 0;
  for (const char* sh : kShards) source += fs::file_size(test::data_path(sh));
  EXPECT_EQ(j["stream"]["source_bytes"].get<uint64_t>(), source);
  EXPECT_EQ(j["stream"]["downloaded_bytes"].get<uint64_t>(), source);
  EXPECT_GT(j["stream"]["download_bytes_per_sec"].get<double>(), 0);
  EXPECT_EQ(j["stream"]["uploaded_bytes"], j["publish"]["bytes_uploaded"]);
  EXPECT_GT(j["stream"]["upload_bytes_per_sec"].get<double>(), 0);
  EXPECT_FALSE(fs::exists(out / "layers" / "layer-00000.gguf")) << "uploaded fragments leave the disk";
  // What the Hub holds fetches back to the same package.
  const auto f = cli({"fetch", "hf://org/stream-budget@" + j["publish"]["commit"].get<std::string>(), "--json"});
  ASSERT_EQ(f.exit_code, 0) << f.err;
  EXPECT_EQ(json::parse(f.out)["manifest_sha256"], *local_manifest_sha_);
}

TEST_F(HubStream, ACorruptedSourceByteStopsTheRunBeforeAnyCommit) {
  // Shard 3's storage answers carry one flipped byte (in its tensor data).
  const std::string sha = shard_sha_->at(kShards[2]);
  hub_->fault({{"listener", "storage"}, {"match", sha}, {"kind", "corrupt"}, {"offset", 30000}, {"times", -1}});
  const fs::path out = tmp_.path() / "corrupt";
  const auto r = cli({"write-package", "org/tiny-split-GGUF:Q4_0", "--stream", "--out-dir", out.string(), "--push",
                      "hf://org/stream-corrupt", "--create", "--max-disk", "8M", "--json"});
  hub_->clear_faults();
  EXPECT_NE(r.exit_code, 0) << r.out;
  test::expect_json_error(r, "integrity", "the Hub declares (LFS oid)");
  EXPECT_FALSE(committed_anything()) << "no commit after a source that does not match its digest";
  EXPECT_FALSE(fs::exists(out / "model-package.json"));
}

TEST_F(HubStream, SchemaTwoStreamsTheSamePackageWithTheCarrierAnnouncedLast) {
  const auto local = test::run_cli({"write-package", (src_dir_->path() / kShards[0]).string(), "--schema", "2",
                                    "--out-dir", (tmp_.path() / "local2").string(), "--model-id",
                                    "org/tiny-split-GGUF:Q4_0", "--source-revision", *commit_, "--source-file",
                                    kShards[0], "--json"},
                                   {kStreamEpoch});
  ASSERT_EQ(local.exit_code, 0) << local.err;
  const fs::path out = tmp_.path() / "pushed2";
  const auto r = cli({"write-package", "org/tiny-split-GGUF:Q4_0", "--stream", "--schema", "2", "--out-dir",
                      out.string(), "--push", "hf://org/stream-v2", "--create", "--max-disk", "16M", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["manifest_sha256"], json::parse(local.out)["manifest_sha256"]);
  EXPECT_EQ(j["package_id"], json::parse(local.out)["package_id"]);
  // The carrier's upload is the last one asked for: every part's LFS object
  // was handed to the uploader before it (the log lists PUTs as they end,
  // and the carrier is small, so compare with the first part's).
  const std::string carrier_sha = sha256_file(tmp_.path() / "local2" / "shared" / "metadata.gguf");
  std::vector<std::string> puts;
  for (const auto& e : hub_->log()) {
    if (e.listener == "storage" && e.method == "PUT" && e.status == 200) puts.push_back(e.path);
  }
  ASSERT_FALSE(puts.empty());
  const auto at = std::find_if(puts.begin(), puts.end(), [&](const std::string& p) { return p.find(carrier_sha) != std::string::npos; });
  ASSERT_NE(at, puts.end()) << "the carrier was uploaded";
  EXPECT_GT(at - puts.begin(), 0) << "the carrier went up before any part";
  const auto f = cli({"fetch", "hf://org/stream-v2@" + j["publish"]["commit"].get<std::string>(), "--json"});
  ASSERT_EQ(f.exit_code, 0) << f.err;
}

// --layout reference streams too: each part written at its name-ordered
// offsets as the bytes arrive, read back once complete to hash it, then
// uploaded: the same package as the local write of the same files.
TEST_F(HubStream, SchemaTwoReferenceLayoutStreamsTheSamePackageAsTheLocalWrite) {
  const auto local = test::run_cli({"write-package", (src_dir_->path() / kShards[0]).string(), "--schema", "2",
                                    "--layout", "reference", "--out-dir", (tmp_.path() / "local-ref").string(),
                                    "--model-id", "org/tiny-split-GGUF:Q4_0", "--source-revision", *commit_,
                                    "--source-file", kShards[0], "--json"},
                                   {kStreamEpoch});
  ASSERT_EQ(local.exit_code, 0) << local.err;
  const fs::path out = tmp_.path() / "pushed-ref";
  const auto r = cli({"write-package", "org/tiny-split-GGUF:Q4_0", "--stream", "--schema", "2", "--layout", "reference",
                      "--out-dir", out.string(), "--push", "hf://org/stream-v2-ref", "--create", "--max-disk", "16M",
                      "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["manifest_sha256"], json::parse(local.out)["manifest_sha256"]);
  EXPECT_EQ(j["package_id"], json::parse(local.out)["package_id"]);
  EXPECT_LE(j["disk_peak"].get<uint64_t>(), 16u << 20);
  const auto f = cli({"fetch", "hf://org/stream-v2-ref@" + j["publish"]["commit"].get<std::string>(), "--json"});
  ASSERT_EQ(f.exit_code, 0) << f.err;
  EXPECT_EQ(json::parse(f.out)["package_id"], j["package_id"]);
}

TEST_F(HubStream, AKilledRunRerunFinishesWithoutUploadingAgainWhatTheHubHas) {
  // Shard 1 arrives slowly, so the run is killed mid-stream once the Hub
  // holds its first fragment.
  hub_->fault({{"listener", "storage"}, {"method", "GET"}, {"match", shard_sha_->at(kShards[0])}, {"kind", "slow"},
               {"bytes_per_sec", 256 << 10}, {"times", -1}});
  const fs::path out = tmp_.path() / "killed";
  const fs::path pidfile = tmp_.path() / "pid";
  const std::vector<std::string> args = {"write-package", "org/tiny-split-GGUF:Q4_0", "--stream", "--out-dir", out.string(),
                                         "--push", "hf://org/stream-killed", "--create", "--max-disk", "16M", "--json"};
  std::vector<std::string> sh = {"-c", "echo $$ > " + pidfile.string() + "; exec \"$0\" \"$@\"", SKIPPY_CLI_PATH};
  sh.insert(sh.end(), args.begin(), args.end());
  std::atomic<bool> killed{false};
  std::thread killer([&] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      bool uploaded = false;
      for (const auto& e : hub_->log()) uploaded = uploaded || (e.listener == "storage" && e.method == "PUT" && e.status == 200);
      if (uploaded && fs::exists(pidfile)) {
        const pid_t pid = static_cast<pid_t>(std::stol(test::read_text(pidfile)));
        ::kill(pid, SIGKILL);
        killed = true;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  const auto first = test::run_program("sh", sh, env());
  killer.join();
  ASSERT_TRUE(killed.load()) << first.err;
  EXPECT_NE(first.exit_code, 0) << "killed before the end";
  EXPECT_FALSE(committed_anything());
  std::set<std::string> before;
  for (const auto& e : hub_->log()) {
    if (e.listener == "storage" && e.method == "PUT" && e.status == 200) before.insert(e.path);
  }
  ASSERT_FALSE(before.empty());
  hub_->clear_faults();
  hub_->clear_log();
  const auto again = cli(args);
  ASSERT_EQ(again.exit_code, 0) << again.err << again.out;
  const auto j = json::parse(again.out);
  EXPECT_EQ(j["manifest_sha256"], *local_manifest_sha_);
  EXPECT_GE(j["publish"]["lfs_already_on_hub"].get<uint64_t>(), before.size());
  for (const auto& e : hub_->log()) {
    if (e.listener == "storage" && e.method == "PUT") {
      EXPECT_EQ(before.count(e.path), 0u) << "uploaded again: " << e.path;
    }
  }
}

TEST_F(HubStream, SignTagAndTheRepositorysProjectorGoWithAStreamedPush) {
  // A repository with the split model and a projector beside it.
  const fs::path repo = tmp_.path() / "mm-repo";
  fs::create_directories(repo);
  for (const char* sh : kShards) fs::copy_file(test::data_path(sh), repo / sh);
  test::make_projector(repo / "mmproj-tiny-f16.gguf", 3);
  const std::string commit = hub_->publish("org/tiny-mm-GGUF", repo);
  ASSERT_EQ(test::run_cli({"identity", "init-owner", "--dir", (tmp_.path() / "owner").string()}).exit_code, 0);
  // The same package from the same files, the projector named by hand.
  const auto local = test::run_cli({"write-package", (repo / kShards[0]).string(), "--out-dir", (tmp_.path() / "local").string(),
                                    "--model-id", "org/tiny-mm-GGUF:Q4_0", "--source-revision", commit, "--source-file",
                                    kShards[0], "--projector", (repo / "mmproj-tiny-f16.gguf").string(), "--json"},
                                   {kStreamEpoch});
  ASSERT_EQ(local.exit_code, 0) << local.err;
  const fs::path out = tmp_.path() / "mm";
  const auto r = cli({"write-package", "org/tiny-mm-GGUF:Q4_0", "--stream", "--out-dir", out.string(), "--push",
                      "hf://org/stream-mm", "--create", "--max-disk", "16M", "--sign", (tmp_.path() / "owner").string(),
                      "--tag", "src-" + commit.substr(0, 12), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["manifest_sha256"], json::parse(local.out)["manifest_sha256"]) << "the projector came from the repository";
  EXPECT_EQ(j["stream"]["projectors_from_source"], json::array({"mmproj-tiny-f16.gguf"}));
  EXPECT_FALSE(j["publish"]["signed_by"].is_null());
  EXPECT_EQ(j["publish"]["tag_ref"], "hf://org/stream-mm@src-" + commit.substr(0, 12));
  const auto f = cli({"fetch", "hf://org/stream-mm@src-" + commit.substr(0, 12), "--json"});
  ASSERT_EQ(f.exit_code, 0) << f.err;
}

TEST_F(HubStream, ValidateFromTheStreamLeavesTheVerdictValidatePackageGivesOnThePublishedPackage) {
  // Streamed (the source never stored) and from the cache under --max-disk
  // (each fragment deleted once uploaded): every fragment is checked as it
  // is written, before its upload.
  for (const bool streamed : {true, false}) {
    SCOPED_TRACE(streamed ? "--stream" : "cached, --max-disk");
    const std::string repo = streamed ? "org/stream-validated" : "org/cached-validated";
    const fs::path out = tmp_.path() / (streamed ? "sv" : "cv");
    std::vector<std::string> args = {"write-package", "org/tiny-split-GGUF:Q4_0", "--validate", "--out-dir", out.string(),
                                     "--push", "hf://" + repo, "--create", "--max-disk", "16M", "--json"};
    if (streamed) args.push_back("--stream");
    const auto r = cli(args);
    ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
    const auto j = json::parse(r.out);
    EXPECT_EQ(j["validated"], true);
    EXPECT_EQ(j["manifest_sha256"], *local_manifest_sha_);
    EXPECT_FALSE(fs::exists(out / "layers" / "layer-00000.gguf")) << "fragments left the disk as they were uploaded";
    EXPECT_NE(test::read_text(out / "README.md").find("alidat"), std::string::npos);
    auto mine = json::parse(test::read_text(out / "validation.json"));
    EXPECT_EQ(mine["result"], "valid");
    // validate-package on what the Hub holds, against the source's files.
    const auto f = cli({"fetch", "hf://" + repo + "@" + j["publish"]["commit"].get<std::string>(), "--json"});
    ASSERT_EQ(f.exit_code, 0) << f.err;
    const fs::path copy = tmp_.path() / (streamed ? "sv-fetched" : "cv-fetched");
    fs::copy(json::parse(f.out)["snapshot_dir"].get<std::string>(), copy, fs::copy_options::recursive);
    EXPECT_EQ(j["publish"]["validation_json"], true) << "validation.json went up in the commit";
    const auto v = cli({"validate-package", (src_dir_->path() / kShards[0]).string(), copy.string(), "--write-result", "--json"});
    ASSERT_EQ(v.exit_code, 0) << v.err << v.out;
    auto theirs = json::parse(test::read_text(copy / "validation.json"));
    for (auto* doc : {&mine, &theirs}) {
      for (const char* k : {"command", "validated_at", "validated_at_unix_secs"}) doc->erase(k);
    }
    EXPECT_EQ(mine, theirs);
  }
  // Schema 2: each part certified as it is written; validate-package agrees on what the Hub holds.
  const auto r2 = cli({"write-package", "org/tiny-split-GGUF:Q4_0", "--stream", "--schema", "2", "--validate", "--out-dir",
                       (tmp_.path() / "sv2").string(), "--push", "hf://org/stream-validated-v2", "--create", "--max-disk",
                       "16M", "--json"});
  ASSERT_EQ(r2.exit_code, 0) << r2.err << r2.out;
  const auto j2 = json::parse(r2.out);
  EXPECT_EQ(j2["validated"], true);
  const auto f2 = cli({"fetch", "hf://org/stream-validated-v2@" + j2["publish"]["commit"].get<std::string>(), "--json"});
  ASSERT_EQ(f2.exit_code, 0) << f2.err;
  fs::copy(json::parse(f2.out)["snapshot_dir"].get<std::string>(), tmp_.path() / "sv2-fetched", fs::copy_options::recursive);
  const auto v2 = cli({"validate-package", (src_dir_->path() / kShards[0]).string(), (tmp_.path() / "sv2-fetched").string(),
                       "--json"});
  EXPECT_EQ(v2.exit_code, 0) << v2.err << v2.out;
  EXPECT_EQ(json::parse(v2.out)["valid"], true);
}

TEST_F(HubStream, TheRepositorysPublisherFilesComeOverTheSameTransport) {
  const fs::path repo = tmp_.path() / "pub-repo";
  fs::create_directories(repo);
  for (const char* sh : kShards) fs::copy_file(test::data_path(sh), repo / sh);
  stream_put_text(repo / "config.json", R"({"torch_dtype": "float16"})");
  stream_put_text(repo / "chat_template.jinja", "{{ messages }}");
  stream_put_text(repo / "README.md", "not a publisher file");
  (void)hub_->publish("org/tiny-pub-GGUF", repo);
  auto run = [&](const std::string& dir, bool stream) {
    std::vector<std::string> args = {"write-package", "org/tiny-pub-GGUF:Q4_0", "--schema", "2", "--hub-publisher-metadata",
                                     "--out-dir", (tmp_.path() / dir).string(), "--json"};
    if (stream) args.insert(args.end(), {"--stream", "--push", "hf://org/stream-pub", "--create", "--max-disk", "16M"});
    return cli(args);
  };
  const auto cached = run("cached-pub", false);
  ASSERT_EQ(cached.exit_code, 0) << cached.err;
  hub_->clear_log();
  const auto streamed = run("streamed-pub", true);
  ASSERT_EQ(streamed.exit_code, 0) << streamed.err << streamed.out;
  EXPECT_EQ(json::parse(streamed.out)["package_id"], json::parse(cached.out)["package_id"]);
  EXPECT_EQ(json::parse(streamed.out)["manifest_sha256"], json::parse(cached.out)["manifest_sha256"]);
  const auto root = json::parse(test::read_text(tmp_.path() / "streamed-pub" / "model-package.json"));
  EXPECT_EQ(root["publisher_metadata"].size(), 2u) << root.dump();
  for (const auto& e : hub_->log()) {
    EXPECT_EQ(e.path.find("README.md"), std::string::npos) << "only publisher files are fetched: " << e.path;
  }
}

TEST_F(HubStream, StorageThatIgnoresRangeIsAClearErrorBeforeAnythingIsWritten) {
  hub_->configure({{"storage_ignore_range", true}});
  const fs::path out = tmp_.path() / "norange";
  const auto r = cli({"write-package", "org/tiny-split-GGUF:Q4_0", "--stream", "--out-dir", out.string(), "--json"});
  hub_->configure({{"storage_ignore_range", false}});
  EXPECT_NE(r.exit_code, 0);
  test::expect_json_error(r, "transport", "ignores Range requests");
  EXPECT_FALSE(fs::exists(out / "model-package.json"));
  EXPECT_FALSE(fs::exists(tmp_.path() / ".norange.stream-headers")) << "the placeholders are removed";
}

TEST_F(HubStream, StreamNeedsAHubSource) {
  const auto r = cli({"write-package", test::data_path(kShards[0]).string(), "--stream", "--out-dir",
                      (tmp_.path() / "x").string(), "--model-id", "org/x:Q4_0", "--source-revision", "0123abc",
                      "--source-file", kShards[0], "--json"});
  EXPECT_EQ(r.exit_code, 2);
  test::expect_json_error(r, "usage", "--stream reads a Hub source");
}

}  // namespace
}  // namespace skippy
