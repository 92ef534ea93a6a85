// hf:// packages end to end: the real CLI against the local Hub stand-in
// (tests/hub/hub_standin.mjs on 127.0.0.1), asserting on its request log and
// on the Hugging Face cache left behind.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "hub_standin.h"
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

// One stand-in and one published package for the whole suite (starting Node
// and writing the package once keeps the suite fast); each test gets its own
// empty Hugging Face cache and skippy cache.
class HubFetch : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    hub_ = new HubStandin();
    pkg_dir_ = new TempDir();
    const auto r = test::write_pkg(test::data_path("llama-tiny-q8_0.gguf"), pkg_dir_->path() / "pkg");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    commit_ = new std::string(hub_->publish("org/tiny-layers", pkg_dir_->path() / "pkg"));
    manifest_ = new json(json::parse(test::read_text(pkg_dir_->path() / "pkg" / "model-package.json")));
  }
  static void TearDownTestSuite() {
    delete hub_;
    delete pkg_dir_;
    delete commit_;
    delete manifest_;
  }
  void SetUp() override {
    hub_->clear_faults();
    hub_->configure({{"token", "hf_test"}, {"url_ttl_secs", 3600}, {"reject_unknown_tokens", false},
                     {"resolve_cache_redirect", false}});
    hub_->clear_log();
  }

  std::vector<std::string> env(std::vector<std::string> extra = {}) const {
    std::vector<std::string> e = {"HF_ENDPOINT=" + hub_->endpoint(),
                                  "HF_HUB_CACHE=" + (tmp_ / "hf").string(),
                                  "HF_HOME=" + (tmp_ / "hfhome").string(),
                                  "SKIPPY_CACHE_DIR=" + (tmp_ / "skippy").string(),
                                  "SKIPPY_HF_BACKOFF_MS=20",
                                  "HF_TOKEN=",
                                  "HF_HUB_OFFLINE="};
    for (const auto& x : extra) {  // later settings replace earlier ones
      const auto name = x.substr(0, x.find('=') + 1);
      std::erase_if(e, [&](const std::string& y) { return y.starts_with(name); });
      e.push_back(x);
    }
    return e;
  }
  CliResult cli(std::vector<std::string> args, std::vector<std::string> extra_env = {}) const {
    return run_cli(args, env(std::move(extra_env)));
  }
  fs::path repo_dir(const std::string& repo = "org/tiny-layers") const {
    std::string name = "models--" + repo;
    name.replace(name.find('/'), 1, "--");
    return tmp_ / "hf" / name;
  }
  fs::path snapshot() const { return repo_dir() / "snapshots" / *commit_; }
  static std::string sha_of(const std::string& rel) {
    const auto& m = *manifest_;
    if (rel == "shared/metadata.gguf") return m["shared"]["metadata"]["sha256"];
    if (rel == "shared/embeddings.gguf") return m["shared"]["embeddings"]["sha256"];
    if (rel == "shared/output.gguf") return m["shared"]["output"]["sha256"];
    for (const auto& l : m["layers"]) {
      if (l["path"] == rel) return l["sha256"];
    }
    ADD_FAILURE() << "no artifact " << rel;
    return {};
  }
  // Files whose bytes were served (a GET that sent a body), by repo path:
  // resolve GETs name the path; storage GETs name the SHA-256.
  std::multiset<std::string> served(const std::vector<HubRequest>& log) const {
    std::map<std::string, std::string> by_sha;
    for (const auto& rel : {"shared/metadata.gguf", "shared/embeddings.gguf", "shared/output.gguf"}) by_sha[sha_of(rel)] = rel;
    for (const auto& l : (*manifest_)["layers"]) by_sha[l["sha256"]] = l["path"];
    std::multiset<std::string> out;
    for (const auto& r : log) {
      if (r.method != "GET" || r.bytes_sent == 0 || (r.status != 200 && r.status != 206)) continue;
      if (r.listener == "storage") {
        const auto sha = r.path.substr(r.path.rfind('/') + 1);
        out.insert(by_sha.count(sha) ? by_sha[sha] : sha);
      } else {
        const auto pos = r.path.find("/resolve/");
        if (pos == std::string::npos) continue;  // API calls serve no file
        const auto rest = r.path.substr(pos + 9);
        out.insert(rest.substr(rest.find('/') + 1));
      }
    }
    return out;
  }

  static HubStandin* hub_;
  static TempDir* pkg_dir_;
  static std::string* commit_;
  static json* manifest_;
  TempDir tmp_;
};
HubStandin* HubFetch::hub_ = nullptr;
TempDir* HubFetch::pkg_dir_ = nullptr;
std::string* HubFetch::commit_ = nullptr;
json* HubFetch::manifest_ = nullptr;

TEST_F(HubFetch, StageDownloadsExactlyItsPartsIntoTheRealCacheLayout) {
  const auto r = cli({"fetch", "hf://org/tiny-layers", "--layers", "2..4", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["source"], "hub");
  EXPECT_EQ(j["commit"], *commit_);
  EXPECT_EQ(fs::path(j["snapshot_dir"].get<std::string>()), snapshot());
  EXPECT_EQ(j["verified"], true);
  const std::set<std::string> want = {"model-package.json", "shared/metadata.gguf", "layers/layer-00002.gguf",
                                      "layers/layer-00003.gguf"};
  EXPECT_EQ(std::set<std::string>(j["downloaded"].begin(), j["downloaded"].end()), want);

  const auto log = hub_->log();
  const auto got = served(log);
  EXPECT_EQ(std::set<std::string>(got.begin(), got.end()), want) << "nothing beyond the stage's parts";
  EXPECT_EQ(got.size(), want.size()) << "each file once";
  for (const auto& q : log) {
    if (q.listener == "storage") {
      EXPECT_FALSE(q.authorization) << "the token never goes to the storage host";
    }
    EXPECT_FALSE(q.range) << "a fresh download asks for the whole file";
  }

  // huggingface_hub's layout: refs without a newline, relative symlinks into blobs named by SHA-256.
  EXPECT_EQ(test::read_text(repo_dir() / "refs" / "main"), *commit_);
  for (const auto& rel : {"shared/metadata.gguf", "layers/layer-00002.gguf", "layers/layer-00003.gguf"}) {
    const auto link = snapshot() / rel;
    ASSERT_TRUE(fs::is_symlink(link)) << rel;
    const auto target = fs::read_symlink(link);
    EXPECT_TRUE(target.is_relative()) << target;
    EXPECT_EQ(target.filename().string(), sha_of(rel));
    EXPECT_EQ(fs::canonical(link), fs::canonical(repo_dir() / "blobs" / sha_of(rel)));
    EXPECT_EQ(test::read_file(link), test::read_file(pkg_dir_->path() / "pkg" / rel));
  }
  EXPECT_TRUE(fs::is_symlink(snapshot() / "model-package.json"));
  EXPECT_FALSE(fs::exists(snapshot() / "layers" / "layer-00004.gguf"));
  EXPECT_FALSE(fs::exists(snapshot() / "shared" / "embeddings.gguf"));
  for (const auto& e : fs::directory_iterator(repo_dir() / "blobs")) {
    EXPECT_FALSE(e.path().string().ends_with(".incomplete")) << e.path();
  }
  EXPECT_TRUE(fs::is_directory(tmp_ / "hf" / ".locks" / "models--org--tiny-layers"));
}

// fetch --local-dir: the stage's files as plain files, verified; a rerun
// keeps what is there and verified, and puts back what was damaged.
TEST_F(HubFetch, ALocalDirGetsTheStagesFilesAsPlainVerifiedFiles) {
  const fs::path local = tmp_ / "stage";
  auto r = cli({"fetch", "hf://org/tiny-layers", "--layers", "2..4", "--local-dir", local.string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = json::parse(r.out);
  const std::set<std::string> want = {"model-package.json", "shared/metadata.gguf", "layers/layer-00002.gguf",
                                      "layers/layer-00003.gguf"};
  EXPECT_EQ(std::set<std::string>(j["local_dir"]["copied"].begin(), j["local_dir"]["copied"].end()), want);
  EXPECT_TRUE(j["local_dir"]["kept"].empty());
  EXPECT_EQ(j["local_dir"]["verified"], true);
  for (const auto& rel : want) {
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(local / rel))) << rel << ": a plain file, not a link";
    EXPECT_EQ(test::read_file(local / rel), test::read_file(pkg_dir_->path() / "pkg" / rel)) << rel;
  }
  EXPECT_FALSE(fs::exists(local / "layers" / "layer-00004.gguf"));
  size_t entries = 0;
  for (const auto& e : fs::recursive_directory_iterator(local)) entries += e.is_regular_file() ? 1 : 0;
  EXPECT_EQ(entries, want.size()) << "no temporary file left";

  // A rerun, offline: everything kept.
  r = cli({"fetch", "hf://org/tiny-layers", "--layers", "2..4", "--local-dir", local.string(), "--json"},
          {"HF_HUB_OFFLINE=1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = json::parse(r.out);
  EXPECT_TRUE(j["local_dir"]["copied"].empty()) << j["local_dir"].dump();
  EXPECT_EQ(j["local_dir"]["kept"].size(), want.size());

  // A damaged copy (same size) is put back from the verified part.
  auto bytes = test::read_file(local / "layers/layer-00002.gguf");
  bytes[bytes.size() / 2] ^= 1;
  test::write_file(local / "layers/layer-00002.gguf", bytes);
  r = cli({"fetch", "hf://org/tiny-layers", "--layers", "2..4", "--local-dir", local.string(), "--json"},
          {"HF_HUB_OFFLINE=1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = json::parse(r.out);
  EXPECT_EQ(j["local_dir"]["copied"], json::array({"layers/layer-00002.gguf"})) << r.out << r.err;
  EXPECT_EQ(test::read_file(local / "layers/layer-00002.gguf"),
            test::read_file(pkg_dir_->path() / "pkg" / "layers/layer-00002.gguf"));

  // Never into the cache's own snapshot.
  r = cli({"fetch", "hf://org/tiny-layers", "--layers", "2..4", "--local-dir", (snapshot() / "copy").string(), "--json"},
          {"HF_HUB_OFFLINE=1"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("snapshot in the Hugging Face cache"), std::string::npos) << r.err;
}

TEST_F(HubFetch, FollowsTheHubsResolveCacheRedirectForSmallFiles) {
  // huggingface.co answers non-LFS files with a relative 307 to
  // /api/resolve-cache/...: followed on the same host, token kept.
  hub_->configure({{"resolve_cache_redirect", true}});
  const auto r = cli({"fetch", "hf://org/tiny-layers", "--layers", "0..1", "--json"}, {"HF_TOKEN=hf_test"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["verified"], true);
  bool via_cache = false;
  for (const auto& q : hub_->log()) {
    if (q.path.find("/api/resolve-cache/") != std::string::npos) {
      via_cache = true;
      EXPECT_EQ(q.authorization, "Bearer hf_test");
    }
  }
  EXPECT_TRUE(via_cache);
  EXPECT_EQ(test::read_text(snapshot() / "model-package.json"), test::read_text(pkg_dir_->path() / "pkg" / "model-package.json"));
}

TEST_F(HubFetch, ProjectorsComeOnlyWithTheStagesThatUseThem) {
  TempDir work;
  test::make_projector(work / "mmproj-model-f16.gguf");
  ASSERT_EQ(test::write_pkg(test::data_path("llama-tiny-q8_0.gguf"), work / "pkg",
                            {"--projector", (work / "mmproj-model-f16.gguf").string()})
                .exit_code,
            0);
  const auto commit = hub_->publish("org/vision-layers", work / "pkg");
  const std::string ref = "hf://org/vision-layers@" + commit;
  auto fetched = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"fetch", ref, "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const auto j = json::parse(r.out);
    return std::set<std::string>(j["downloaded"].begin(), j["downloaded"].end());
  };
  EXPECT_FALSE(fetched({"--layers", "3..4"}).count("projectors/mmproj-model-f16.gguf")) << "a downstream stage";
  EXPECT_TRUE(fetched({"--layers", "0..2"}).count("projectors/mmproj-model-f16.gguf")) << "stage 0 uses the mmproj";
  EXPECT_FALSE(fs::exists(repo_dir("org/vision-layers") / "snapshots" / commit / "layers" / "layer-00005.gguf"));
  // An unknown explicit projector is refused before anything is fetched for it.
  const auto bad = cli({"fetch", ref, "--layers", "5..6", "--projector", "projectors/other.gguf"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("not declared in the manifest"), std::string::npos) << bad.err;
}

TEST_F(HubFetch, ACachedRevisionResolvesWithNoNetworkAndIsStillVerified) {
  ASSERT_EQ(cli({"fetch", "hf://org/tiny-layers", "--layers", "2..4"}).exit_code, 0);
  hub_->clear_log();
  const auto again = cli({"fetch", "hf://org/tiny-layers", "--layers", "2..4", "--json"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  auto j = json::parse(again.out);
  EXPECT_EQ(j["source"], "cache");
  EXPECT_TRUE(j["downloaded"].empty());
  EXPECT_EQ(j["verified"], true);
  // The first fetch hashed the parts as they arrived and recorded that: the
  // cache hit is verified through the verification cache, no byte re-read.
  EXPECT_EQ(j["cache_hits"], 3);
  EXPECT_EQ(j["hashed_bytes"], 0);
  EXPECT_EQ(hub_->log().size(), 0u) << "refs/main names the commit: no request at all";

  // Offline mode: the same, and a part that is not cached is a clear error, still with no request.
  const auto offline = cli({"select", "hf://org/tiny-layers@" + *commit_, "--layers", "2..4", "--json"}, {"HF_HUB_OFFLINE=1"});
  ASSERT_EQ(offline.exit_code, 0) << offline.err;
  EXPECT_EQ(json::parse(offline.out)["verified"], true);
  const auto missing = cli({"fetch", "hf://org/tiny-layers", "--layers", "4..5"}, {"HF_HUB_OFFLINE=1"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("HF_HUB_OFFLINE=1"), std::string::npos) << missing.err;
  EXPECT_NE(missing.err.find("layers/layer-00004.gguf"), std::string::npos) << missing.err;
  const auto unknown = cli({"fetch", "hf://org/tiny-layers@v9", "--layers", "2..4"}, {"HF_HUB_OFFLINE=1"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("not in the Hugging Face cache"), std::string::npos) << unknown.err;
  EXPECT_EQ(hub_->log().size(), 0u) << "offline mode touched the network";
}

TEST_F(HubFetch, CacheHitsAreVerifiedEveryTime) {
  ASSERT_EQ(cli({"fetch", "hf://org/tiny-layers", "--layers", "2..3"}).exit_code, 0);
  // Same size, different bytes: a blob damaged on disk after the download.
  const auto blob = repo_dir() / "blobs" / sha_of("layers/layer-00002.gguf");
  auto bytes = test::read_file(blob);
  bytes[bytes.size() / 2] ^= 0x40;
  test::write_file(blob, bytes);
  for (const auto& cmd : {"select", "fetch"}) {
    const auto r = cli({cmd, "hf://org/tiny-layers", "--layers", "2..3"});
    EXPECT_EQ(r.exit_code, 1) << cmd;
    EXPECT_NE(r.err.find("layers/layer-00002.gguf"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("SHA-256"), std::string::npos) << r.err;
  }
}

TEST_F(HubFetch, PinnedCommitNeedsNoRefAndMovingBranchWarns) {
  const auto pinned = cli({"fetch", "hf://org/tiny-layers@" + *commit_, "--layers", "7..8", "--json"});
  ASSERT_EQ(pinned.exit_code, 0) << pinned.err;
  EXPECT_EQ(pinned.err.find("warning"), std::string::npos) << pinned.err;
  EXPECT_TRUE(json::parse(pinned.out)["warnings"].empty());
  EXPECT_FALSE(fs::exists(repo_dir() / "refs" / "main"));
  // layers 7..8 end at layer_count: output, and the embeddings because this model's output is tied.
  const auto got = served(hub_->log());
  EXPECT_TRUE(got.count("shared/output.gguf"));
  EXPECT_TRUE(got.count("layers/layer-00007.gguf"));

  const auto moving = cli({"fetch", "hf://org/tiny-layers:main", "--layers", "7..8"});
  ASSERT_EQ(moving.exit_code, 0) << moving.err;
  EXPECT_NE(moving.err.find("warning: hf://org/tiny-layers@main"), std::string::npos) << moving.err;
  EXPECT_NE(moving.err.find("pin hf://org/tiny-layers@" + *commit_), std::string::npos) << moving.err;
}

TEST_F(HubFetch, RefreshFollowsABranchThatMoved) {
  TempDir work;
  ASSERT_EQ(test::write_pkg(test::data_path("llama-tiny-q8_0.gguf"), work / "v1").exit_code, 0);
  ASSERT_EQ(test::write_pkg(test::data_path("llama-tiny-f16.gguf"), work / "v2").exit_code, 0);
  const auto c1 = hub_->publish("org/moving-layers", work / "v1");
  ASSERT_EQ(cli({"fetch", "hf://org/moving-layers", "--layers", "0..1"}).exit_code, 0);
  const auto c2 = hub_->publish("org/moving-layers", work / "v2");  // main moves
  ASSERT_NE(c1, c2);
  auto commit_of = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"fetch", "hf://org/moving-layers", "--layers", "0..1", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return json::parse(r.out)["commit"].get<std::string>();
  };
  EXPECT_EQ(commit_of({}), c1) << "the cached ref answers, with no network";
  EXPECT_EQ(commit_of({"--refresh"}), c2) << "--refresh asks the Hub";
  EXPECT_EQ(test::read_text(repo_dir("org/moving-layers") / "refs" / "main"), c2);
  EXPECT_EQ(commit_of({}), c2) << "and the cache now says so";
}

TEST_F(HubFetch, SelectVerifyMaterializeAndInspectTakeHfRefs) {
  const std::string ref = "hf://org/tiny-layers@" + *commit_;
  const auto sel = cli({"select", ref, "--layers", "0..2", "--json"});
  ASSERT_EQ(sel.exit_code, 0) << sel.err;
  const auto sj = json::parse(sel.out);
  EXPECT_EQ(sj["verified"], true) << "hf:// stages always verify";
  ASSERT_EQ(sj["parts"].size(), 4u);
  for (const auto& p : sj["parts"]) {
    // Resolved through the snapshot's symlink to the blob it names.
    EXPECT_TRUE(p["path"].get<std::string>().starts_with(fs::canonical(repo_dir() / "blobs").string())) << p["path"];
  }
  const auto ver = cli({"verify", ref, "--layers", "0..2", "--json"});
  ASSERT_EQ(ver.exit_code, 0) << ver.err;
  EXPECT_EQ(json::parse(ver.out)["verified"], true);

  const auto out = tmp_ / "stage.gguf";
  const auto mat = cli({"materialize", ref, "--layers", "0..2", "--out", out.string(), "--json"});
  ASSERT_EQ(mat.exit_code, 0) << mat.err;
  const auto local_out = tmp_ / "local-stage.gguf";
  const auto local = run_cli({"materialize", (pkg_dir_->path() / "pkg").string(), "--layers", "0..2", "--out",
                              local_out.string(), "--json"},
                             env());
  ASSERT_EQ(local.exit_code, 0) << local.err;
  EXPECT_EQ(test::read_file(out), test::read_file(local_out)) << "same stage from the Hub as from the directory";

  const auto ins = cli({"inspect", ref, "--json"});
  ASSERT_EQ(ins.exit_code, 0) << ins.err;
  EXPECT_EQ(json::parse(ins.out)["layer_count"], 8);
  EXPECT_TRUE(json::parse(ins.out)["active_bytes_per_token"].is_number()) << ins.out;
  // inspect's bytes per token read the other fragments' headers (a ranged
  // request of their first 64 KiB at most each), not the fragments.
  auto log = hub_->log();
  std::erase_if(log, [](const HubRequest& r) {
    return r.listener == "storage" && r.range && r.range->starts_with("bytes=0-") && r.bytes_sent <= (64u << 10);
  });
  const auto got = served(log);
  EXPECT_EQ(std::set<std::string>(got.begin(), got.end()),
            (std::set<std::string>{"model-package.json", "shared/metadata.gguf", "shared/embeddings.gguf",
                                   "layers/layer-00000.gguf", "layers/layer-00001.gguf"}));
  EXPECT_EQ(got.size(), 5u) << "nothing fetched twice across four commands";
}

TEST_F(HubFetch, InterruptedDownloadResumesWithRange) {
  // The connection drops after 10000 bytes of layer 2, every time: the run
  // fails, keeping the partial blob (and nothing under a final name).
  const auto sha = sha_of("layers/layer-00002.gguf");
  hub_->fault({{"match", sha}, {"listener", "storage"}, {"kind", "cut"}, {"after_bytes", 10000}, {"times", 2}});
  const auto cut = cli({"fetch", "hf://org/tiny-layers", "--layers", "2..3"}, {"SKIPPY_HF_MAX_ATTEMPTS=2"});
  ASSERT_EQ(cut.exit_code, 1) << cut.err;
  EXPECT_NE(cut.err.find("layers/layer-00002.gguf"), std::string::npos) << cut.err;
  EXPECT_NE(cut.err.find("resumes"), std::string::npos) << cut.err;
  EXPECT_FALSE(fs::exists(repo_dir() / "blobs" / sha));
  EXPECT_FALSE(fs::exists(snapshot() / "layers" / "layer-00002.gguf"));
  ASSERT_TRUE(fs::exists(repo_dir() / "blobs" / (sha + ".incomplete")));
  // The second attempt already resumed from what the first kept.
  auto log = hub_->log();
  std::vector<std::optional<std::string>> ranges;
  for (const auto& q : log) {
    if (q.listener == "storage" && q.path.ends_with(sha)) ranges.push_back(q.range);
  }
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_FALSE(ranges[0]);
  EXPECT_EQ(ranges[1], "bytes=10000-");
  const auto kept = fs::file_size(repo_dir() / "blobs" / (sha + ".incomplete"));
  EXPECT_EQ(kept, 20000u);

  // The next run picks up from the partial file with a Range request.
  hub_->clear_log();
  const auto resumed = cli({"fetch", "hf://org/tiny-layers", "--layers", "2..3", "--json"});
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_EQ(json::parse(resumed.out)["verified"], true);
  log = hub_->log();
  bool saw = false;
  for (const auto& q : log) {
    if (q.listener == "storage" && q.path.ends_with(sha)) {
      EXPECT_EQ(q.range, "bytes=" + std::to_string(kept) + "-");
      EXPECT_EQ(q.status, 206);
      saw = true;
    }
  }
  EXPECT_TRUE(saw);
  EXPECT_EQ(sha256_file(repo_dir() / "blobs" / sha), sha);
  EXPECT_FALSE(fs::exists(repo_dir() / "blobs" / (sha + ".incomplete")));
}

TEST_F(HubFetch, ACutMidFileIsRetriedInTheSameRun) {
  const auto sha = sha_of("layers/layer-00003.gguf");
  hub_->fault({{"match", sha}, {"listener", "storage"}, {"kind", "cut"}, {"after_bytes", 4096}, {"times", 1}});
  const auto r = cli({"fetch", "hf://org/tiny-layers", "--layers", "3..4", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(sha256_file(repo_dir() / "blobs" / sha), sha);
}

TEST_F(HubFetch, WrongBytesNeverReachAFinalName) {
  const auto sha = sha_of("layers/layer-00005.gguf");
  hub_->fault({{"match", sha}, {"listener", "storage"}, {"kind", "corrupt"}, {"offset", 5000}, {"times", 10}});
  const auto r = cli({"fetch", "hf://org/tiny-layers", "--layers", "5..6"});
  ASSERT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("layers/layer-00005.gguf"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("manifest says " + sha), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(repo_dir() / "blobs" / sha));
  EXPECT_FALSE(fs::exists(repo_dir() / "blobs" / (sha + ".incomplete"))) << "bad bytes are not kept for resuming";
  EXPECT_FALSE(fs::exists(fs::symlink_status(snapshot() / "layers" / "layer-00005.gguf")));
  // Every file under a final name matches the manifest.
  for (const auto& e : fs::directory_iterator(repo_dir() / "blobs")) {
    const auto name = e.path().filename().string();
    if (name.size() == 64) {
      EXPECT_EQ(sha256_file(e.path()), name);
    }
  }
  hub_->clear_faults();
  EXPECT_EQ(cli({"fetch", "hf://org/tiny-layers", "--layers", "5..6"}).exit_code, 0);
}

TEST_F(HubFetch, TheManifestIsCheckedAgainstItsGitBlobId) {
  // The manifest is the trust root and has no SHA-256 to check against; its
  // ETag (the git blob id) catches bytes damaged on the way.
  hub_->fault({{"match", "model-package.json"}, {"listener", "hub"}, {"kind", "corrupt"}, {"offset", 100}, {"times", 10}});
  const auto r = cli({"fetch", "hf://org/tiny-layers", "--layers", "0..1"});
  ASSERT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("model-package.json"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("git blob id"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(fs::symlink_status(snapshot() / "model-package.json")));
  for (const auto& e : fs::directory_iterator(repo_dir() / "blobs")) ADD_FAILURE() << "left behind: " << e.path();
}

TEST_F(HubFetch, AnEtagThatCannotBeCheckedIsRefused) {
  // A short hex ETag names no digest: nothing could check the bytes.
  hub_->fault({{"match", "model-package.json"}, {"listener", "hub"}, {"kind", "status"}, {"status", 200},
               {"headers", {{"X-Repo-Commit", *commit_}, {"ETag", "\"abcd\""}}}, {"body", "{\"evil\": true}"},
               {"times", 2}});
  const auto r = cli({"fetch", "hf://org/tiny-layers@" + *commit_, "--layers", "0..1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("model-package.json has an unusable ETag \"abcd\""), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(fs::symlink_status(snapshot() / "model-package.json")));
  EXPECT_FALSE(fs::exists(repo_dir() / "blobs" / "abcd"));
}

TEST_F(HubFetch, ABlobNameIsNeverTakenOnTheServersWord) {
  // The Hub claims layer 2 is a git blob (40-hex etag, README's id): the
  // bytes it then serves match the manifest's SHA-256 but not that name, so
  // they must not become blobs/<that id> (huggingface_hub would link
  // README.md to them).
  const auto published = hub_->publish_json("org/etag-test", pkg_dir_->path() / "pkg");
  const std::string commit = published["commit"];
  std::string readme_oid;
  for (const auto& f : published["files"]) {
    if (f["path"] == "README.md") readme_oid = f["oid"];
  }
  ASSERT_EQ(readme_oid.size(), 40u);
  const auto size = fs::file_size(pkg_dir_->path() / "pkg" / "layers" / "layer-00002.gguf");
  hub_->fault({{"match", "layer-00002.gguf"}, {"listener", "hub"}, {"method", "HEAD"}, {"kind", "status"},
               {"status", 200}, {"headers", {{"X-Repo-Commit", commit}, {"ETag", "\"" + readme_oid + "\""}}},
               {"body", std::string(size, 'x')}, {"times", 1}});
  const auto r = cli({"fetch", "hf://org/etag-test@" + commit, "--layers", "2..3"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("git blob id"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(repo_dir("org/etag-test") / "blobs" / readme_oid));
}

TEST_F(HubFetch, ExpiredStorageUrlsAreRefreshedOnceAndExplainedWhenTheyStayExpired) {
  // One refusal (an expired link): ask the Hub for a fresh URL and finish.
  const auto sha = sha_of("layers/layer-00001.gguf");
  hub_->fault({{"match", sha}, {"listener", "storage"}, {"kind", "status"}, {"status", 403},
               {"body", "<Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>"}, {"times", 1}});
  const auto ok = cli({"fetch", "hf://org/tiny-layers", "--layers", "1..2"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  int heads = 0;
  for (const auto& q : hub_->log()) heads += q.method == "HEAD" && q.path.ends_with("layer-00001.gguf");
  EXPECT_EQ(heads, 2) << "one HEAD, then one more for a fresh URL";

  // Every URL already expired: a clear error naming the file and the storage's reason.
  hub_->configure({{"url_ttl_secs", 0}});
  const auto r = cli({"fetch", "hf://org/tiny-layers", "--layers", "3..4"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("layers/layer-00003.gguf"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("storage host"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("expired"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(repo_dir() / "blobs" / sha_of("layers/layer-00003.gguf")));
}

TEST_F(HubFetch, ADamagedPartialDownloadIsRedoneNotBlamedOnTheServer) {
  const auto sha = sha_of("layers/layer-00004.gguf");
  fs::create_directories(repo_dir() / "blobs");
  test::write_file(repo_dir() / "blobs" / (sha + ".incomplete"), std::vector<uint8_t>(1000, 0xAB));
  const auto r = cli({"fetch", "hf://org/tiny-layers", "--layers", "4..5"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::optional<std::string>> ranges;
  for (const auto& q : hub_->log()) {
    if (q.listener == "storage" && q.path.ends_with(sha)) ranges.push_back(q.range);
  }
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[0], "bytes=1000-") << "first it trusts the partial file";
  EXPECT_FALSE(ranges[1]) << "then, the digest wrong, it starts over";
  EXPECT_EQ(sha256_file(repo_dir() / "blobs" / sha), sha);
}

TEST_F(HubFetch, InspectAndPlanFetchLittleAndTrustNothingUnverified) {
  const std::string ref = "hf://org/tiny-layers@" + *commit_;
  const auto plan = cli({"plan", ref, "--stages", "2", "--json"});
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  auto got = served(hub_->log());
  EXPECT_EQ(std::set<std::string>(got.begin(), got.end()),
            (std::set<std::string>{"model-package.json", "shared/output.gguf"}))
      << "a plan needs the manifest, and output.gguf to know whether the output is tied";

  ASSERT_EQ(cli({"inspect", ref}).exit_code, 0);
  const auto blob = repo_dir() / "blobs" / sha_of("shared/metadata.gguf");
  auto bytes = test::read_file(blob);
  bytes[bytes.size() - 1] ^= 0x01;
  test::write_file(blob, bytes);
  const auto r = cli({"inspect", ref});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("shared/metadata.gguf"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("rm "), std::string::npos) << "names the damaged file to remove: " << r.err;
}

TEST_F(HubFetch, AnEndpointWithoutAnHttpSchemeIsAUsageError) {
  const auto r = cli({"fetch", "hf://org/tiny-layers", "--layers", "0..1"}, {"HF_ENDPOINT=huggingface.co"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("HF_ENDPOINT"), std::string::npos) << r.err;
}

TEST_F(HubFetch, RateLimitAndServerErrorsAreRetried) {
  hub_->fault({{"match", "layer-00006"}, {"listener", "hub"}, {"kind", "status"}, {"status", 429},
               {"headers", {{"Retry-After", "0"}}}, {"times", 1}});
  hub_->fault({{"match", sha_of("layers/layer-00006.gguf")}, {"listener", "storage"}, {"kind", "status"}, {"status", 503},
               {"times", 1}});
  const auto r = cli({"fetch", "hf://org/tiny-layers", "--layers", "6..7", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<int> statuses;
  for (const auto& q : hub_->log()) {
    if (q.path.find("layer-00006") != std::string::npos || q.path.ends_with(sha_of("layers/layer-00006.gguf"))) {
      statuses.push_back(q.status);
    }
  }
  EXPECT_EQ(statuses, (std::vector<int>{429, 302, 503, 200}));
}

TEST_F(HubFetch, ErrorsAPersonCanActOn) {
  TempDir other;
  test::write_file(other / "README.md", {'h', 'i'});
  hub_->publish("org/not-a-package", other.path());
  hub_->publish("org/gated-layers", pkg_dir_->path() / "pkg", {.gated = true});
  struct Case {
    std::string ref;
    std::vector<std::string> env;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {"hf://org/nope", {}, "repository not found"},
      {"hf://org/tiny-layers@v404", {}, "revision \"v404\" not found"},
      {"hf://org/not-a-package", {}, "is this a layer package repository?"},
      {"hf://org/gated-layers", {}, "gated repository"},
      {"hf://org/gated-layers", {"HF_TOKEN=hf_wrong"}, "has not been granted access"},
      {"hf://org/../etc", {}, "hf://org/../etc: "},
  };
  for (const auto& c : cases) {
    const auto r = cli({"fetch", c.ref, "--layers", "0..1"}, c.env);
    EXPECT_NE(r.exit_code, 0) << c.ref;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.ref << ": " << r.err;
    EXPECT_EQ(r.err.find("terminate"), std::string::npos) << r.err;
  }
}

TEST_F(HubFetch, GatedRepoWithATokenSendsItOnlyToTheHub) {
  hub_->publish("org/gated-layers", pkg_dir_->path() / "pkg", {.gated = true});
  hub_->clear_log();
  // The token from HF_HOME/token, as huggingface_hub stores it after `hf auth login`.
  fs::create_directories(tmp_ / "hfhome");
  test::write_file(tmp_ / "hfhome" / "token", {'h', 'f', '_', 't', 'e', 's', 't', '\n'});
  const auto r = cli({"fetch", "hf://org/gated-layers", "--layers", "0..1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  int hub_requests = 0, storage_requests = 0;
  for (const auto& q : hub_->log()) {
    if (q.listener == "hub") {
      ++hub_requests;
      EXPECT_EQ(q.authorization, "Bearer hf_test") << q.path;
    } else {
      ++storage_requests;
      EXPECT_FALSE(q.authorization) << q.path;
      EXPECT_EQ(q.status, 200);
    }
  }
  EXPECT_GT(hub_requests, 0);
  EXPECT_EQ(storage_requests, 3);  // metadata, embeddings, layer 0
}

TEST_F(HubFetch, ConcurrentFetchesDownloadEachBlobOnce) {
  // Every storage body trickles (about 0.4 s for a 760 KB layer), so the two
  // processes are downloading at the same time and meet on the blob locks.
  hub_->fault({{"listener", "storage"}, {"kind", "slow"}, {"bytes_per_sec", 2000000}, {"times", -1}});
  auto run = [&] { return cli({"fetch", "hf://org/tiny-layers", "--json"}); };
  auto a = std::async(std::launch::async, run);
  auto b = std::async(std::launch::async, run);
  const auto ra = a.get(), rb = b.get();
  ASSERT_EQ(ra.exit_code, 0) << ra.err;
  ASSERT_EQ(rb.exit_code, 0) << rb.err;
  std::map<std::string, int> storage_gets;
  for (const auto& q : hub_->log()) {
    if (q.listener == "storage" && q.method == "GET" && q.bytes_sent > 0) ++storage_gets[q.path];
  }
  EXPECT_EQ(storage_gets.size(), 11u) << "metadata, embeddings, output and 8 layers";
  for (const auto& [path, n] : storage_gets) EXPECT_EQ(n, 1) << path;
  // Both processes found every part (one downloaded it, the other waited on its lock).
  const auto ja = json::parse(ra.out), jb = json::parse(rb.out);
  EXPECT_EQ(ja["verified"], true);
  EXPECT_EQ(jb["verified"], true);
  EXPECT_EQ(ja["parts"].size(), 11u);
  std::set<std::string> all(ja["downloaded"].begin(), ja["downloaded"].end());
  all.insert(jb["downloaded"].begin(), jb["downloaded"].end());
  EXPECT_EQ(all.size(), 12u) << "the manifest and the 11 parts";
  EXPECT_EQ(ja["downloaded"].size() + jb["downloaded"].size(), 12u) << "each by exactly one of the two processes";
}

TEST_F(HubFetch, WritePackageFromAHubCoordinate) {
  // A model repository holding two quantizations, one split in three shards.
  TempDir model;
  fs::create_directories(model / "Q4_0");
  for (int i = 1; i <= 3; ++i) {
    const std::string name = "llama-tiny-q4_0-0000" + std::to_string(i) + "-of-00003.gguf";
    fs::copy_file(test::data_path(name), model / "Q4_0" / ("Tiny-Q4_0-0000" + std::to_string(i) + "-of-00003.gguf"));
  }
  fs::copy_file(test::data_path("llama-tiny-q8_0.gguf"), model / "Tiny-Q8_0.gguf");
  test::write_file(model / "README.md", {'#'});
  const auto commit = hub_->publish("org/Tiny-GGUF", model.path());
  hub_->clear_log();

  const auto out = tmp_ / "pkg";
  const auto r = cli({"write-package", "org/Tiny-GGUF:Q4_0", "--out-dir", out.string(), "--json"},
                     {"SOURCE_DATE_EPOCH=1700000000"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto m = json::parse(test::read_text(out / "model-package.json"));
  const auto& src = m["source_model"];
  EXPECT_EQ(m["model_id"], "org/Tiny-GGUF:Q4_0");
  EXPECT_EQ(src["repo"], "org/Tiny-GGUF");
  EXPECT_EQ(src["revision"], commit);
  EXPECT_EQ(src["primary_file"], "Q4_0/Tiny-Q4_0-00001-of-00003.gguf");
  ASSERT_EQ(src["files"].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const auto& f = src["files"][i];
    EXPECT_EQ(f["path"], "Q4_0/Tiny-Q4_0-0000" + std::to_string(i + 1) + "-of-00003.gguf");
    EXPECT_EQ(f["sha256"], sha256_file(test::data_path("llama-tiny-q4_0-0000" + std::to_string(i + 1) + "-of-00003.gguf")));
  }
  const auto got = served(hub_->log());
  EXPECT_EQ(got.size(), 3u) << "the three shards, not the Q8_0 file or the README";
  EXPECT_EQ(json::parse(r.out)["source_bytes_hashed"], 0) << "the shards were verified as they downloaded";

  // The cached shards validate the package, as a publisher would check it.
  const auto shard = repo_dir("org/Tiny-GGUF") / "snapshots" / commit / "Q4_0" / "Tiny-Q4_0-00002-of-00003.gguf";
  const auto v = cli({"validate-package", shard.string(), out.string(), "--json"});
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;

  // Offline, the cached snapshot is the listing: the same package, no request.
  hub_->clear_log();
  const auto again = cli({"write-package", "org/Tiny-GGUF:Q4_0", "--out-dir", (tmp_ / "pkg2").string(), "--json"},
                         {"HF_HUB_OFFLINE=1", "SOURCE_DATE_EPOCH=1700000000"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(test::read_text(tmp_ / "pkg2" / "model-package.json"), test::read_text(out / "model-package.json"))
      << "same source, same flags: same manifest";
  EXPECT_EQ(hub_->log().size(), 0u);
  EXPECT_EQ(json::parse(again.out)["source_bytes_hashed"], 0) << "the verification cache vouches for the cached shards";

  // Without the verification cache's records the shards are hashed again...
  uint64_t shard_bytes = 0;
  for (int i = 1; i <= 3; ++i) {
    shard_bytes += fs::file_size(test::data_path("llama-tiny-q4_0-0000" + std::to_string(i) + "-of-00003.gguf"));
  }
  const auto fresh = cli({"write-package", "org/Tiny-GGUF:Q4_0", "--out-dir", (tmp_ / "pkg3").string(), "--json"},
                         {"HF_HUB_OFFLINE=1", "SOURCE_DATE_EPOCH=1700000000", "SKIPPY_CACHE_DIR=" + (tmp_ / "empty").string()});
  ASSERT_EQ(fresh.exit_code, 0) << fresh.err;
  EXPECT_EQ(json::parse(fresh.out)["source_bytes_hashed"], shard_bytes);
  EXPECT_EQ(test::read_text(tmp_ / "pkg3" / "model-package.json"), test::read_text(out / "model-package.json"))
      << "one pass hashing the shards writes the package the lanes over verified shards wrote";
  // ...and a cached shard changed since it was verified is hashed and refused.
  const auto blob = fs::canonical(shard);
  auto bytes = test::read_file(blob);
  bytes[bytes.size() - 3] ^= 0x40;
  test::write_file(blob, bytes);
  const auto tampered = cli({"write-package", "org/Tiny-GGUF:Q4_0", "--out-dir", (tmp_ / "pkg4").string(), "--json"},
                            {"HF_HUB_OFFLINE=1"});
  test::expect_json_error(tampered, "integrity", "does not match");
  EXPECT_FALSE(fs::exists(tmp_ / "pkg4" / "model-package.json"));

  const auto amb = cli({"write-package", "org/Tiny-GGUF:Q5_K", "--out-dir", (tmp_ / "x").string()});
  EXPECT_EQ(amb.exit_code, 1);
  EXPECT_NE(amb.err.find("no GGUF file of distribution \"Q5_K\""), std::string::npos) << amb.err;
  EXPECT_FALSE(fs::exists(tmp_ / "x" / "model-package.json"));
}

// Interop with the official JavaScript client, @huggingface/hub.
class HubInterop : public HubFetch {
 protected:
  CliResult node(std::vector<std::string> args) const {
    args.insert(args.begin(), std::string(SKIPPY_SOURCE_DIR) + "/tests/js/hub_interop.mjs");
    return test::run_program("node", args, env());
  }
};

TEST_F(HubInterop, FilesWeFetchAreFoundOfflineByHuggingfaceHubJs) {
  ASSERT_EQ(cli({"fetch", "hf://org/tiny-layers", "--layers", "2..4"}).exit_code, 0);
  hub_->clear_log();
  const auto r = node({"find-offline", "--cache-dir", (tmp_ / "hf").string(), "--repo", "org/tiny-layers", "--revision",
                       *commit_, "--files", "model-package.json,shared/metadata.gguf,layers/layer-00002.gguf"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto j = json::parse(r.out);
  ASSERT_EQ(j["sha256"].size(), 3u);
  EXPECT_EQ(j["sha256"][1], sha_of("shared/metadata.gguf"));
  EXPECT_EQ(j["sha256"][2], sha_of("layers/layer-00002.gguf"));
  EXPECT_EQ(hub_->log().size(), 0u);
}

TEST_F(HubInterop, ASnapshotHuggingfaceHubJsDownloadedResolvesOfflineWithZeroRequests) {
  const auto d = node({"download", "--endpoint", hub_->endpoint(), "--cache-dir", (tmp_ / "hf").string(), "--repo",
                       "org/tiny-layers", "--revision", "main", "--files",
                       "model-package.json,shared/metadata.gguf,layers/layer-00004.gguf,layers/layer-00005.gguf"});
  ASSERT_EQ(d.exit_code, 0) << d.out << d.err;
  hub_->clear_log();
  const auto r = cli({"fetch", "hf://org/tiny-layers", "--layers", "4..6", "--json"}, {"HF_HUB_OFFLINE=1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["source"], "cache");
  EXPECT_EQ(j["verified"], true);
  EXPECT_EQ(j["commit"], *commit_);
  EXPECT_EQ(hub_->log().size(), 0u);
}

}  // namespace
}  // namespace skippy

namespace skippy {
namespace {

TEST_F(HubFetch, AResumedDownloadWhoseKeptBytesAreWrongIsRedoneFromByteZero) {
  // An earlier run left a partial file whose bytes are not the blob's (a
  // disk fault, another tool): the resumed download completes, fails its
  // check, and is received once more from byte 0 in the same run.
  const auto sha = sha_of("layers/layer-00004.gguf");
  fs::create_directories(repo_dir() / "blobs");
  test::write_file(repo_dir() / "blobs" / (sha + ".incomplete"), std::vector<uint8_t>(20000, 0x5a));
  const auto r = cli({"fetch", "hf://org/tiny-layers", "--layers", "4..5", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["verified"], true);
  EXPECT_EQ(sha256_file(repo_dir() / "blobs" / sha), sha);
  EXPECT_FALSE(fs::exists(repo_dir() / "blobs" / (sha + ".incomplete")));
  std::vector<std::optional<std::string>> ranges;
  for (const auto& q : hub_->log()) {
    if (q.listener == "storage" && q.path.ends_with(sha)) ranges.push_back(q.range);
  }
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[0], "bytes=20000-") << "first it trusted the partial file";
  EXPECT_FALSE(ranges[1]) << "then it started over from byte 0";
}

TEST_F(HubFetch, ErrorKindsReachTheJsonErrorDocument) {
  // Offline and missing: kind "offline"; a revision the Hub does not have: "not_found".
  const auto offline = cli({"fetch", "hf://org/tiny-layers", "--layers", "4..5", "--json"}, {"HF_HUB_OFFLINE=1"});
  test::expect_json_error(offline, "offline", "HF_HUB_OFFLINE=1");
  const auto missing = cli({"fetch", "hf://org/tiny-layers@no-such-branch", "--layers", "0..1", "--json"});
  test::expect_json_error(missing, "not_found", "no-such-branch");
}

}  // namespace
}  // namespace skippy

namespace skippy {
namespace {

TEST_F(HubFetch, ADroppedDownloadResumedInTheSameRunWithWrongBytesIsRedoneFromByteZero) {
  // The first request is cut after 10000 bytes; the resumed one (Range)
  // brings a damaged byte. The finished blob fails its check, and since it
  // was not received in one stream, it is received once more from byte 0
  // instead of failing the run.
  const auto sha = sha_of("layers/layer-00006.gguf");
  hub_->fault({{"match", sha}, {"listener", "storage"}, {"kind", "cut"}, {"after_bytes", 10000}, {"times", 1}});
  hub_->fault({{"match", sha}, {"listener", "storage"}, {"kind", "corrupt"}, {"offset", 10}, {"times", 1}});
  const auto r = cli({"fetch", "hf://org/tiny-layers", "--layers", "6..7", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(sha256_file(repo_dir() / "blobs" / sha), sha);
  std::vector<std::optional<std::string>> ranges;
  for (const auto& q : hub_->log()) {
    if (q.listener == "storage" && q.path.ends_with(sha)) ranges.push_back(q.range);
  }
  ASSERT_EQ(ranges.size(), 3u);
  EXPECT_FALSE(ranges[0]);
  EXPECT_EQ(ranges[1], "bytes=10000-");
  EXPECT_FALSE(ranges[2]) << "redone from byte 0";
}

}  // namespace
}  // namespace skippy
