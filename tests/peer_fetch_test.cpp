// `fetch --peer` end to end: the real CLI as the worker, a real
// serve-artifacts process (or, for faults the real server never commits, a
// misbehaving TLS peer in this process with a real node identity) as the
// coordinator, and the local Hub stand-in as the fallback, all on 127.0.0.1.
// Asserts on `fetch --json` (`sources`, `source_notes`), the server's and
// the stand-in's request logs, and the Hugging Face cache left behind.
//
// PeerClient-level behaviour (each authorization rule, each mode, limits)
// is in peer_transfer_test.cpp; this file checks what the worker does with it.
#include <gtest/gtest.h>
#include <openssl/ssl.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>
#include <set>

#include "hub_standin.h"
#include "peer/protocol.h"
#include "peer/tls.h"
#include "peer_test_util.h"
#include "peer_world.h"
#include "util/file.h"
#include "skippy/manifest.h"
#include "skippy/peer.h"
#include "skippy/peer_identity.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::CliResult;
using test::HubStandin;
using test::TempDir;
using test::peer::FaultyPeer;
using test::peer::ServerProcess;
using test::peer::StageSpec;

constexpr const char* kRepo = "org/peer-layers";
using test::peer::kBigLayer;  // replaced by 4 MiB of noise
using test::peer::World;
constexpr uint64_t kBigBytes = 4ull << 20;
constexpr uint64_t kMiB = 1ull << 20;

// ------------------------------------------------------------------ fixture


class PeerFetch : public test::peer::WorldSuite<PeerFetch> {
 public:
  static test::peer::WorldSpec spec() { return {.repo = kRepo, .big_bytes = kBigBytes, .seed = 0x2545f4914f6cdd1dull}; }

 protected:

  void SetUp() override {
    w().hub->clear_faults();
    w().hub->configure({{"token", "hf_test"}, {"url_ttl_secs", 3600}, {"reject_unknown_tokens", false},
                        {"resolve_cache_redirect", false}});
    w().hub->clear_log();
  }

  // A real serve-artifacts of the coordinator's cache.
  std::unique_ptr<ServerProcess> serve(const std::string& mode = "trusted", const fs::path& topology = {},
                                       const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"--listen", "127.0.0.1:0", "--topology",
                                     (topology.empty() ? w().topology : topology).string(), "--identity",
                                     w().coord.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    const int n = ++servers_;
    return std::make_unique<ServerProcess>(
        args,
        std::vector<std::string>{"HF_HUB_CACHE=" + w().hf.string(),
                                 "SKIPPY_CACHE_DIR=" + (tmp_ / ("server-vc-" + std::to_string(n))).string(),
                                 "MESH_LLM_ARTIFACT_TRANSFER=" + mode, "HF_HUB_OFFLINE=1", "HF_ENDPOINT=http://127.0.0.1:9"},
        tmp_ / ("server-" + std::to_string(n) + ".log"));
  }

  // The worker's environment: its own empty caches, the stand-in as the Hub.
  std::vector<std::string> worker_env(const std::string& cache, std::vector<std::string> extra = {}) const {
    std::vector<std::string> e = {"HF_ENDPOINT=" + w().hub->endpoint(),
                                  "HF_HUB_CACHE=" + (tmp_ / cache / "hf").string(),
                                  "HF_HOME=" + (tmp_ / cache / "hfhome").string(),
                                  "SKIPPY_CACHE_DIR=" + (tmp_ / cache / "skippy").string(),
                                  "SKIPPY_HF_BACKOFF_MS=20",
                                  "HF_TOKEN=",
                                  "HF_HUB_OFFLINE=",
                                  "MESH_LLM_ARTIFACT_TRANSFER="};
    for (const auto& x : extra) {
      const auto name = x.substr(0, x.find('=') + 1);
      std::erase_if(e, [&](const std::string& y) { return y.starts_with(name); });
      e.push_back(x);
    }
    return e;
  }
  fs::path worker_repo(const std::string& cache) const { return test::peer::repo_dir(tmp_ / cache / "hf", kRepo); }
  fs::path worker_snapshot(const std::string& cache) const { return worker_repo(cache) / "snapshots" / w().commit; }

  // `fetch REF --peer ENDPOINT --topology T --stage S --identity NODE --json`.
  CliResult fetch(const std::string& endpoint, const std::string& stage, const fs::path& node, const std::string& cache,
                  std::vector<std::string> extra_args = {}, std::vector<std::string> extra_env = {},
                  const fs::path& topology = {}) const {
    std::vector<std::string> args = {"fetch",      w().ref,
                                     "--peer",     endpoint,
                                     "--topology", (topology.empty() ? w().topology : topology).string(),
                                     "--stage",    stage,
                                     "--identity", node.string(),
                                     "--json"};
    // Short timeouts, so a test that goes wrong fails fast.
    for (const std::string flag : {"--peer-connect-timeout", "--peer-idle-timeout"}) {
      if (std::find(extra_args.begin(), extra_args.end(), flag) == extra_args.end()) args.insert(args.end(), {flag, "10"});
    }
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    return test::run_cli(args, worker_env(cache, std::move(extra_env)));
  }

  // Every part in `parts` is in the worker's snapshot with the package's bytes.
  void expect_installed(const std::string& cache, const std::set<std::string>& parts) const {
    for (const auto& rel : parts) {
      const fs::path link = worker_snapshot(cache) / rel;
      ASSERT_TRUE(fs::is_symlink(link)) << rel;
      EXPECT_EQ(fs::canonical(link), fs::canonical(worker_repo(cache) / "blobs" / sha256_hex(std::span<const uint8_t>(*w().file(rel)))))
          << rel;
      EXPECT_TRUE(test::peer::slurp(link) == *w().file(rel)) << rel;
    }
  }
  // The parts the stand-in served bytes of (resolve GETs by path, storage
  // GETs by SHA-256), and the Range headers it saw per part.
  std::multiset<std::string> hub_served(std::map<std::string, std::vector<std::string>>* ranges = nullptr) const {
    std::map<std::string, std::string> by_sha;
    for (const auto& rel : w().file_paths()) by_sha[w().sha_of(rel)] = rel;
    std::multiset<std::string> out;
    for (const auto& r : w().hub->log()) {
      if (r.method != "GET" || (r.status != 200 && r.status != 206)) continue;
      std::string rel;
      if (r.listener == "storage") {
        const auto sha = r.path.substr(r.path.rfind('/') + 1);
        rel = by_sha.count(sha) ? by_sha[sha] : sha;
      } else {
        const auto pos = r.path.find("/resolve/");
        if (pos == std::string::npos) continue;
        const auto rest = r.path.substr(pos + 9);
        rel = rest.substr(rest.find('/') + 1);
      }
      if (ranges && r.range) (*ranges)[rel].push_back(*r.range);
      if (r.bytes_sent > 0) out.insert(rel);
    }
    return out;
  }
  static std::string notes_of(const json& j) {
    std::string s;
    for (const auto& n : j["source_notes"]) s += n.get<std::string>() + "\n";
    return s;
  }
  // The note the source layer kept for `rel`.
  static std::string note_for(const json& j, const std::string& rel) {
    for (const auto& n : j["source_notes"]) {
      const auto s = n.get<std::string>();
      if (s.starts_with(rel + ": ")) return s;
    }
    return {};
  }

  TempDir tmp_;
  int servers_ = 0;
};

// ------------------------------------------------------------------- tests

TEST_F(PeerFetch, AStageComesWholeFromThePeer) {
  auto s = serve();
  const auto r = fetch(s->endpoint(), "s1", w().w1, "a", {"--layers", "4..8"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["source"], "peer");
  EXPECT_EQ(j["commit"], w().commit);
  EXPECT_EQ(j["verified"], true);
  std::set<std::string> parts;
  for (const auto& [rel, from] : j["sources"].items()) {
    parts.insert(rel);
    EXPECT_EQ(from, "peer") << rel;
  }
  EXPECT_EQ(parts, World::s1_parts());
  auto downloaded = parts;
  downloaded.insert("model-package.json");  // the manifest came from the peer too
  EXPECT_EQ(std::set<std::string>(j["downloaded"].begin(), j["downloaded"].end()), downloaded);
  EXPECT_TRUE(j["source_notes"].empty()) << j.dump();
  expect_installed("a", downloaded);
  EXPECT_TRUE(hub_served().empty()) << "nothing was asked of the Hub";
  EXPECT_TRUE(s->wait_for_log("stage s1, " + std::string(kBigLayer) + " from byte 0: accepted")) << s->log();
  for (const auto& e : fs::directory_iterator(worker_repo("a") / "blobs")) {
    EXPECT_FALSE(e.path().string().ends_with(".incomplete")) << e.path();
  }

  // Stage 0 in human form: one line per part from the peer, then a summary;
  // without --layers the stage's range is used.
  const auto h = test::run_cli({"fetch", w().ref, "--peer", s->endpoint(), "--topology", w().topology.string(), "--stage",
                                "s0", "--identity", w().w0.string()},
                               worker_env("b"));
  ASSERT_EQ(h.exit_code, 0) << h.err;
  EXPECT_EQ(h.out, worker_snapshot("b").string() + "\n");
  EXPECT_NE(h.err.find("--layers 0..4, stage s0's range"), std::string::npos) << h.err;
  for (const auto& rel : {"shared/metadata.gguf", "shared/embeddings.gguf", "layers/layer-00000.gguf", "layers/layer-00003.gguf"}) {
    EXPECT_NE(h.err.find("from the peer " + s->endpoint() + ": " + std::string(rel) + " ("), std::string::npos) << h.err;
  }
  EXPECT_NE(h.err.find("parts: 6 from the peer, 0 from the Hub, 0 already in the cache"), std::string::npos) << h.err;

  // Again: all from the cache, the peer is not even called.
  const std::string log_before = s->log();
  const auto again = fetch(s->endpoint(), "s1", w().w1, "a", {"--layers", "4..8"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  const auto ja = json::parse(again.out);
  EXPECT_EQ(ja["source"], "cache");
  for (const auto& [rel, from] : ja["sources"].items()) EXPECT_EQ(from, "cache") << rel;
  EXPECT_EQ(s->stop(), 0);
  EXPECT_EQ(s->log().find("accepted", log_before.size()), std::string::npos) << s->log();
}

// The mode as a flag: --mode trusted serves with the variable unset; with
// neither, serve-artifacts does not start (it would serve nothing).
TEST_F(PeerFetch, TheModeIsAFlagAndNoModeIsNoStart) {
  const std::vector<std::string> server_env = {"HF_HUB_CACHE=" + w().hf.string(), "MESH_LLM_ARTIFACT_TRANSFER=",
                                               "HF_HUB_OFFLINE=1"};
  auto r = test::run_cli({"serve-artifacts", "--listen", "127.0.0.1:0", "--topology", w().topology.string(), "--identity",
                    w().coord.string()},
                   server_env);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("no transfer mode: give --mode trusted"), std::string::npos) << r.err;
  r = test::run_cli({"serve-artifacts", "--listen", "127.0.0.1:0", "--topology", w().topology.string(), "--identity",
                     w().coord.string(), "--mode", "sometimes"},
              server_env);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  auto s = serve("", {}, {"--mode", "trusted"});
  const auto f = fetch(s->endpoint(), "s1", w().w1, "m", {"--layers", "4..8"});
  ASSERT_EQ(f.exit_code, 0) << f.err;
  EXPECT_EQ(json::parse(f.out)["source"], "peer");
}

TEST_F(PeerFetch, RefusalsFallBackToTheHubAndSayWhy) {
  {
    // Transfer off on the coordinator: nothing is offered; the manifest and
    // every part come from the Hub, and each note says why.
    auto s = serve("off");
    const auto r = fetch(s->endpoint(), "s1", w().w1, "off", {"--layers", "4..8"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = json::parse(r.out);
    EXPECT_EQ(j["source"], "hub");
    for (const auto& [rel, from] : j["sources"].items()) EXPECT_EQ(from, "hub") << rel;
    const auto manifest_note = note_for(j, "model-package.json");
    EXPECT_NE(manifest_note.find("does not offer artifact-transfer"), std::string::npos) << notes_of(j);
    EXPECT_NE(manifest_note.find("asking the hub"), std::string::npos) << manifest_note;
    for (const auto& rel : World::s1_parts()) {
      // Known unusable: not asked again, with the same reason.
      EXPECT_NE(note_for(j, rel).find("not asked after model-package.json: the peer does not offer artifact-transfer"),
                std::string::npos)
          << notes_of(j);
    }
    expect_installed("off", World::s1_parts());
    EXPECT_NE(r.err.find("note: model-package.json: the peer could not deliver it (peer " + s->endpoint()), std::string::npos)
        << r.err;
  }
  w().hub->clear_log();
  {
    // The coordinator's topology gives s1 only layers 6..8: it refuses 4 and
    // 5 ("artifact unavailable", nothing more), which come from the Hub; the
    // rest still comes from the peer.
    const fs::path narrow = tmp_ / "narrow.json";
    test::peer::write_topology(narrow, w().ref, w().manifest_sha, {{"s0", 0, w().w0_id, 0, 6}, {"s1", 1, w().w1_id, 6, 8}});
    auto s = serve("trusted", narrow);
    const auto r = fetch(s->endpoint(), "s1", w().w1, "narrow", {"--layers", "4..8"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = json::parse(r.out);
    EXPECT_EQ(j["source"], "hub");
    for (const auto& rel : World::s1_parts()) {
      const bool refused = rel == "layers/layer-00004.gguf" || rel == kBigLayer;
      EXPECT_EQ(j["sources"][rel], refused ? "hub" : "peer") << rel;
      if (refused) {
        EXPECT_NE(note_for(j, rel).find("refused: artifact unavailable); asking the hub"), std::string::npos) << notes_of(j);
      }
    }
    EXPECT_EQ(j["source_notes"].size(), 2u) << notes_of(j);
    const auto got = hub_served();
    EXPECT_EQ(std::set<std::string>(got.begin(), got.end()),
              (std::set<std::string>{"layers/layer-00004.gguf", kBigLayer}));
    expect_installed("narrow", World::s1_parts());
    // The refusal said nothing about the server's cache.
    EXPECT_EQ(r.out.find(w().hf.string()), std::string::npos);
    EXPECT_TRUE(s->wait_for_log("layers/layer-00004.gguf from byte 0: refused")) << s->log();
  }
  w().hub->clear_log();
  {
    // --layers beyond the stage: what the stage may not have is not even
    // asked of the peer.
    auto s = serve();
    const auto r = fetch(s->endpoint(), "s1", w().w1, "wide", {"--layers", "3..8"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("warning: --layers 3..8 reaches outside stage s1's range 4..8"), std::string::npos) << r.err;
    const auto j = json::parse(r.out);
    EXPECT_EQ(j["sources"]["layers/layer-00003.gguf"], "hub");
    EXPECT_EQ(j["sources"]["layers/layer-00004.gguf"], "peer");
    EXPECT_NE(note_for(j, "layers/layer-00003.gguf").find("not asked: not among the parts stage s1 (layers 4..8) may fetch"),
              std::string::npos)
        << notes_of(j);
    EXPECT_EQ(hub_served(), (std::multiset<std::string>{"layers/layer-00003.gguf"}));
    EXPECT_EQ(s->stop(), 0);
    EXPECT_EQ(s->log().find("layer-00003"), std::string::npos) << s->log();
  }
}

TEST_F(PeerFetch, WrongBytesFromThePeerAreNeverInstalled) {
  FaultyPeer bad(w().coord, [&](const std::string& rel) { return w().file(rel); },
                 {{"layers/layer-00006.gguf", {FaultyPeer::Act::kCorrupt, 0}}});
  const std::string rel = "layers/layer-00006.gguf";
  const std::string sha = sha256_hex(std::span<const uint8_t>(*w().file(rel)));
  {
    // Offline: the peer is the only source, so its wrong bytes are the
    // command's failure, and nothing of them is left in the cache.
    const auto r = fetch(bad.endpoint(), "s1", w().w1, "offline", {"--layers", "4..8"}, {"HF_HUB_OFFLINE=1"});
    test::expect_json_error(r, "integrity", rel);
    EXPECT_NE(r.out.find("peer " + bad.endpoint()), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("nothing was placed in the cache"), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(worker_repo("offline") / "blobs" / sha));
    EXPECT_FALSE(fs::exists(worker_repo("offline") / "blobs" / (sha + ".incomplete")));
    EXPECT_FALSE(fs::is_symlink(worker_snapshot("offline") / rel));
    EXPECT_TRUE(hub_served().empty());
  }
  // With the Hub: that part comes from the Hub, the others from the peer.
  const auto r = fetch(bad.endpoint(), "s1", w().w1, "online", {"--layers", "4..8"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  for (const auto& p : World::s1_parts()) EXPECT_EQ(j["sources"][p], p == rel ? "hub" : "peer") << p;
  const auto note = note_for(j, rel);
  EXPECT_NE(note.find("the bytes have SHA-256"), std::string::npos) << notes_of(j);
  EXPECT_NE(note.find("the manifest says " + sha), std::string::npos) << note;
  EXPECT_EQ(hub_served(), (std::multiset<std::string>{rel}));
  expect_installed("online", World::s1_parts());
}

TEST_F(PeerFetch, ACutConnectionIsResumedFromThePartialsLength) {
  const uint64_t cut = kMiB + kMiB / 2;
  {
    // Within one run: the connection drops after 1.5 MiB; the next request
    // asks from exactly there, and the part is the peer's.
    FaultyPeer flaky(w().coord, [&](const std::string& rel) { return w().file(rel); },
                     {{kBigLayer, {FaultyPeer::Act::kCutOnce, cut}}});
    const auto r = fetch(flaky.endpoint(), "s1", w().w1, "once", {"--layers", "4..8"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = json::parse(r.out);
    for (const auto& p : World::s1_parts()) EXPECT_EQ(j["sources"][p], "peer") << p;
    EXPECT_EQ(flaky.offsets_of(kBigLayer), (std::vector<uint64_t>{0, cut}));
    EXPECT_TRUE(hub_served().empty());
    expect_installed("once", World::s1_parts());
  }
  // Across runs: a peer that drops every connection at 1 MiB, and no Hub:
  // the run fails and keeps what arrived; the next run, against the real
  // server, resumes from the partial file's length.
  const std::string sha = sha256_hex(std::span<const uint8_t>(*w().file(kBigLayer)));
  {
    FaultyPeer flaky(w().coord, [&](const std::string& rel) { return w().file(rel); },
                     {{kBigLayer, {FaultyPeer::Act::kCutAlways, kMiB}}});
    const auto r = fetch(flaky.endpoint(), "s1", w().w1, "later", {"--layers", "4..8"}, {"HF_HUB_OFFLINE=1"});
    test::expect_json_error(r, "transport", kBigLayer);
    EXPECT_EQ(flaky.offsets_of(kBigLayer), (std::vector<uint64_t>{0, kMiB}));  // one more try, no progress: given up
    EXPECT_EQ(fs::file_size(worker_repo("later") / "blobs" / (sha + ".incomplete")), kMiB);
    EXPECT_FALSE(fs::exists(worker_snapshot("later") / kBigLayer));
  }
  auto s = serve();
  const auto r = fetch(s->endpoint(), "s1", w().w1, "later", {"--layers", "4..8"}, {"HF_HUB_OFFLINE=1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["sources"][kBigLayer], "peer");
  EXPECT_TRUE(s->wait_for_log("stage s1, " + std::string(kBigLayer) + " from byte " + std::to_string(kMiB) + ": accepted"))
      << s->log();
  expect_installed("later", World::s1_parts());
  EXPECT_FALSE(fs::exists(worker_repo("later") / "blobs" / (sha + ".incomplete")));
}

TEST_F(PeerFetch, APeerThatStopsSendingIsGivenUpForTheHub) {
  FaultyPeer frozen(w().coord, [&](const std::string& rel) { return w().file(rel); },
                    {{kBigLayer, {FaultyPeer::Act::kStall, kMiB}}});
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = fetch(frozen.endpoint(), "s1", w().w1, "stall", {"--layers", "4..8", "--peer-idle-timeout", "0.5"});
  const auto took = std::chrono::steady_clock::now() - t0;
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LT(took, std::chrono::seconds(10));
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["sources"][kBigLayer], "hub");
  EXPECT_NE(note_for(j, kBigLayer).find("timed out: no progress for 500 ms"), std::string::npos) << notes_of(j);
  // The Hub continued the peer's partial file (the one blob writer for both).
  std::map<std::string, std::vector<std::string>> ranges;
  const auto got = hub_served(&ranges);
  EXPECT_EQ(got.count(kBigLayer), 1u);
  EXPECT_EQ(ranges[kBigLayer], (std::vector<std::string>{"bytes=" + std::to_string(kMiB) + "-"}));
  expect_installed("stall", World::s1_parts());
}

TEST_F(PeerFetch, EightWorkersAtOnce) {
  // Eight stages of one layer each, eight nodes, one coordinator.
  std::vector<fs::path> nodes;
  std::vector<StageSpec> stages;
  for (uint32_t i = 0; i < 8; ++i) {
    nodes.push_back(tmp_ / ("n" + std::to_string(i)));
    stages.push_back({"s" + std::to_string(i), i, peer::issue_node(w().owner_a, nodes.back()).node_id, i, i + 1});
  }
  const fs::path topo = tmp_ / "eight.json";
  test::peer::write_topology(topo, w().ref, w().manifest_sha, stages);
  auto s = serve("trusted", topo);
  std::atomic<int> ready{0};
  std::vector<std::future<CliResult>> runs;
  for (uint32_t i = 0; i < 8; ++i) {
    runs.push_back(std::async(std::launch::async, [&, i] {
      ready.fetch_add(1);
      while (ready.load() < 8) std::this_thread::yield();
      return fetch(s->endpoint(), "s" + std::to_string(i), nodes[i], "w" + std::to_string(i), {}, {}, topo);
    }));
  }
  for (uint32_t i = 0; i < 8; ++i) {
    const auto r = runs[i].get();
    ASSERT_EQ(r.exit_code, 0) << "worker " << i << ": " << r.err;
    const auto j = json::parse(r.out);
    std::set<std::string> parts = {"shared/metadata.gguf", layer_artifact_path(i)};
    if (i == 0) parts.insert("shared/embeddings.gguf");
    if (i == 7) parts.insert({"shared/output.gguf", "shared/embeddings.gguf"});
    std::set<std::string> listed;
    for (const auto& [rel, from] : j["sources"].items()) {
      listed.insert(rel);
      EXPECT_EQ(from, "peer") << "worker " << i << " " << rel;
    }
    EXPECT_EQ(listed, parts) << "worker " << i;
    expect_installed("w" + std::to_string(i), parts);
  }
  EXPECT_TRUE(hub_served().empty());
  EXPECT_EQ(s->log().find("refused"), std::string::npos) << s->log();
  EXPECT_EQ(s->stop(), 0) << s->log();
}

TEST_F(PeerFetch, AnotherOwnersNodesNeedTrustOnBothSides) {
  // s1 is b1's, a node of owner B; the coordinator is owner A's.
  const fs::path topo = tmp_ / "owners.json";
  test::peer::write_topology(topo, w().ref, w().manifest_sha, {{"s0", 0, w().w0_id, 0, 4}, {"s1", 1, w().b1_id, 4, 8}});
  const std::string owner_a_crt = (w().owner_a / "owner.crt").string();
  const std::string owner_b_crt = (w().owner_b / "owner.crt").string();
  auto all_from = [&](const CliResult& r, const std::string& want) {
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const auto j = json::parse(r.out);
    for (const auto& [rel, from] : j["sources"].items()) EXPECT_EQ(from, want) << rel;
    return j;
  };
  {
    // The coordinator does not trust owner B: nothing offered, Hub.
    auto s = serve("trusted", topo);
    const auto j = all_from(fetch(s->endpoint(), "s1", w().b1, "b-1", {"--trust-owner", owner_a_crt}, {}, topo), "hub");
    EXPECT_NE(notes_of(j).find("does not offer artifact-transfer to this node"), std::string::npos) << notes_of(j);
  }
  auto s = serve("trusted", topo, {"--trust-owner", owner_b_crt});
  {
    // It does now, but the worker does not trust owner A: the worker refuses the server.
    const auto j = all_from(fetch(s->endpoint(), "s1", w().b1, "b-2", {}, {}, topo), "hub");
    EXPECT_NE(notes_of(j).find("is not trusted in mode trusted"), std::string::npos) << notes_of(j);
    // (MESH_LLM_ARTIFACT_TRANSFER=open on the worker accepts any authenticated server.)
    all_from(fetch(s->endpoint(), "s1", w().b1, "b-3", {}, {"MESH_LLM_ARTIFACT_TRANSFER=open"}, topo), "peer");
  }
  // Both sides trust each other's owner: the peer.
  all_from(fetch(s->endpoint(), "s1", w().b1, "b-4", {"--trust-owner", owner_a_crt}, {}, topo), "peer");
  expect_installed("b-4", World::s1_parts());
}

TEST_F(PeerFetch, FlagAndIdentityMistakesAreClearErrors) {
  const std::string ep = "127.0.0.1:9";  // never reached: every case fails before
  auto run = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"fetch", w().ref});
    args.push_back("--json");
    return test::run_cli(args, worker_env("errors"));
  };
  const std::string topo = w().topology.string(), node = w().w1.string();
  test::expect_json_error(run({"--peer", ep, "--stage", "s1", "--identity", node}), "usage", "also needs --topology FILE");
  test::expect_json_error(run({"--peer", ep, "--topology", topo}), "usage", "also needs --stage STAGE_ID --identity NODE_DIR");
  test::expect_json_error(run({"--topology", topo, "--stage", "s1"}), "usage", "go with --peer HOST:PORT");
  test::expect_json_error(run({"--peer", "localhost", "--topology", topo, "--stage", "s1", "--identity", node}), "usage",
                          "expected HOST:PORT");
  test::expect_json_error(run({"--peer", ep, "--topology", topo, "--stage", "s9", "--identity", node}), "usage",
                          "--stage s9: not a stage of " + topo + " (its stages: s0, s1)");
  test::expect_json_error(run({"--peer", ep, "--topology", topo, "--stage", "s0", "--identity", node}), "usage",
                          "stage s0 of the topology is assigned to node " + w().w0_id);
  {
    const auto r = test::run_cli({"fetch", "hf://org/other@" + w().commit, "--peer", ep, "--topology", topo, "--stage", "s1",
                                  "--identity", node, "--json"},
                                 worker_env("errors"));
    test::expect_json_error(r, "usage", "is not the topology's package");
  }
  // A client without a certificate: an identity directory with the key only.
  const fs::path no_cert = tmp_ / "no-cert";
  fs::create_directories(no_cert);
  fs::copy_file(w().w1 / "node.key", no_cert / "node.key");
  fs::permissions(no_cert / "node.key", fs::perms::owner_read | fs::perms::owner_write);
  const auto r = run({"--peer", ep, "--topology", topo, "--stage", "s1", "--identity", no_cert.string()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find((no_cert / "node.crt").string()), std::string::npos) << r.err;
  EXPECT_TRUE(hub_served().empty());
  EXPECT_FALSE(fs::exists(worker_repo("errors")));
}

}  // namespace
}  // namespace skippy
