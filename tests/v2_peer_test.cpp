// Package schema 2 over peer transfer: a real
// serve-artifacts on 127.0.0.1 serving a schema 2 package (written by the
// test-side reference-layout writer) from its Hugging Face cache, workers
// fetching their stages from it offline with the real CLI, the stage's
// artifact set enforced by the server, and a damaged payload never served.
#include <gtest/gtest.h>

#include <set>

#include "hub_standin.h"
#include "peer_test_util.h"
#include "peer_world.h"
#include "schema_v2_package.h"
#include "skippy/stage.h"
#include "skippy/peer.h"
#include "skippy/peer_identity.h"
#include "skippy/peer_topology.h"

namespace v2peer_test {

namespace fs = std::filesystem;
using skippy::test::TempDir;

constexpr const char* kRepo = "org/v2-peer";

// The stage's artifacts as the consumer selects them.
std::set<std::string> stage_paths(const skippy::test::peer::World& w, uint32_t a, uint32_t b) {
  const auto opened = skippy::test::local_catalog(w.pkg);
  std::set<std::string> out;
  for (const auto& p : skippy::select_stage(opened.catalog, {a, b}).parts) out.insert(p.rel_path);
  return out;
}
std::string id_of(const skippy::test::peer::World& w, const std::string& path) {
  for (const auto& [id, p] : w.written.artifact_path) {
    if (p == path) return id;
  }
  return {};
}

}  // namespace v2peer_test

namespace skippy {
namespace {

using namespace v2peer_test;
using nlohmann::json;
using test::peer::ServerProcess;

class V2Peer : public test::peer::WorldSuite<V2Peer> {
 public:
  static test::peer::WorldSpec spec() { return {.repo = kRepo, .package = test::peer::WorldSpec::Package::kSchemaV2}; }

 protected:

  std::unique_ptr<ServerProcess> serve(const fs::path& hf) {
    const int n = ++servers_;
    return std::make_unique<ServerProcess>(
        std::vector<std::string>{"--listen", "127.0.0.1:0", "--topology", w().topology.string(), "--identity",
                                 w().coord.string()},
        std::vector<std::string>{"HF_HUB_CACHE=" + hf.string(),
                                 "SKIPPY_CACHE_DIR=" + (tmp_ / ("server-vc-" + std::to_string(n))).string(),
                                 "MESH_LLM_ARTIFACT_TRANSFER=trusted", "HF_HUB_OFFLINE=1", "HF_ENDPOINT=http://127.0.0.1:9"},
        tmp_ / ("server-" + std::to_string(n) + ".log"));
  }
  // `fetch REF --peer ... --json` as `node` for `stage`, offline: the peer is the only remote.
  test::CliResult fetch(const std::string& endpoint, const std::string& stage, const fs::path& node,
                        const std::string& cache, std::vector<std::string> extra = {}, bool with_hub = false) const {
    std::vector<std::string> args = {"fetch",   w().ref,     "--peer",     endpoint, "--topology",
                                     w().topology.string(), "--stage", stage, "--identity", node.string(),
                                     "--json",  "--peer-connect-timeout", "10", "--peer-idle-timeout", "10"};
    args.insert(args.end(), extra.begin(), extra.end());
    return test::run_cli(args, {"HF_HUB_CACHE=" + (tmp_ / cache / "hf").string(), "HF_HOME=" + (tmp_ / cache / "home").string(),
                                "SKIPPY_CACHE_DIR=" + (tmp_ / cache / "skippy").string(),
                                with_hub ? "HF_HUB_OFFLINE=" : "HF_HUB_OFFLINE=1",
                                "HF_ENDPOINT=" + (with_hub ? w().hub->endpoint() : std::string("http://127.0.0.1:9")),
                                "HF_TOKEN=", "SKIPPY_HF_BACKOFF_MS=20", "MESH_LLM_ARTIFACT_TRANSFER="});
  }
  fs::path worker_snapshot(const std::string& cache) const {
    return test::peer::snapshot_dir(tmp_ / cache / "hf", kRepo, w().commit);
  }

  test::TempDir tmp_;
  int servers_ = 0;
};

TEST_F(V2Peer, EachWorkerFetchesItsStageFromThePeerOffline) {
  auto s = serve(w().hf);
  for (const auto& [stage, node, a, b] : {std::tuple{"s0", w().w0, 0u, 4u}, std::tuple{"s1", w().w1, 4u, 8u}}) {
    SCOPED_TRACE(stage);
    const auto r = fetch(s->endpoint(), stage, node, stage);
    ASSERT_EQ(r.exit_code, 0) << r.err << "\nserver:\n" << s->log();
    const auto j = json::parse(r.out);
    EXPECT_EQ(j["schema_version"], 2);
    EXPECT_EQ(j["verified"], true);
    EXPECT_EQ(j["source"], "peer");
    EXPECT_EQ(j["layer_start"], a);
    EXPECT_EQ(j["layer_end"], b);
    const auto want = stage_paths(w(), a, b);
    std::set<std::string> parts;
    for (const auto& p : j["parts"]) parts.insert(p.get<std::string>());
    EXPECT_EQ(parts, want);
    for (const auto& rel : want) {
      EXPECT_EQ(j["sources"][rel], "peer") << rel;
      EXPECT_EQ(test::peer::slurp(worker_snapshot(stage) / rel), test::peer::slurp(w().pkg / rel)) << rel;
    }
    // Nothing of the other stage came along.
    const std::string other = a == 0 ? "layers/layer-00004.gguf" : "layers/layer-00000.gguf";
    EXPECT_FALSE(fs::exists(worker_snapshot(stage) / other)) << other;
  }
  EXPECT_TRUE(stage_paths(w(), 4, 8).contains("shared/common.gguf")) << "the final stage reads output and the tied embeddings";
}

TEST_F(V2Peer, AnArtifactOutsideTheStagesSetIsRefused) {
  auto s = serve(w().hf);
  const auto topology = peer::load_topology(w().topology);
  const auto& s1 = *topology.find_stage("s1");
  peer::ClientOptions o;
  o.connect_timeout = std::chrono::seconds(10);
  o.idle_timeout = std::chrono::seconds(10);
  const peer::PeerClient c(peer::NodeIdentity::load(w().w1), peer::PeerTrust{peer::TransferMode::kTrusted, {}}, o);
  auto get = [&](const std::string& rel) {
    const auto& e = *std::find_if(w().written.root["artifact_catalog"]["entries"].begin(),
                                  w().written.root["artifact_catalog"]["entries"].end(),
                                  [&](const json& x) { return x["path"] == rel; });
    const peer::PeerArtifact a{rel, PartRole::kLayer, std::nullopt, e["byte_size"].get<uint64_t>(),
                               e["sha256"].get<std::string>(), ""};
    std::vector<uint8_t> got;
    peer::TransferSink sink;
    sink.on_bytes = [&](std::span<const uint8_t> b) { got.insert(got.end(), b.begin(), b.end()); };
    c.fetch(s->endpoint(), peer::transfer_request(topology, s1, a), sink);
    return got;
  };
  // In the set: served, byte-identical.
  EXPECT_EQ(get("layers/layer-00005.gguf"), test::peer::slurp(w().pkg / "layers/layer-00005.gguf"));
  EXPECT_EQ(get("shared/metadata.gguf"), test::peer::slurp(w().pkg / "shared/metadata.gguf"));
  // Layer 1 belongs to s0: refused "artifact unavailable", the reason in the server's log only.
  try {
    (void)get("layers/layer-00001.gguf");
    ADD_FAILURE() << "layer 1 was served to stage s1";
  } catch (const peer::PeerError& e) {
    EXPECT_EQ(e.peer_kind(), peer::PeerErrorKind::kRefused) << e.what();
    EXPECT_EQ(e.refusal(), peer::Refusal::kUnavailable) << e.what();
  }
  EXPECT_TRUE(s->wait_for_log("artifact " + id_of(w(), "layers/layer-00001.gguf") +
                              " (layers/layer-00001.gguf) is not part of stage s1"))
      << s->log();

  // The client computes the same set: asked for layers outside its stage, the
  // worker does not ask the peer and, offline, says so.
  const auto r = fetch(s->endpoint(), "s1", w().w1, "wide", {"--layers", "3..8"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.err.find("layers/layer-00003.gguf"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not among the parts stage s1"), std::string::npos) << r.err;
}

TEST_F(V2Peer, ADamagedPayloadOnThePeerIsNeverServed) {
  // The coordinator's cache with one byte of layer 5's blob flipped (same size).
  const fs::path hf = tmp_ / "damaged-hf";
  test::peer::place_in_hf_cache(w().pkg, hf, kRepo, w().commit);
  const fs::path blob = fs::canonical(test::peer::snapshot_dir(hf, kRepo, w().commit) / "layers/layer-00005.gguf");
  auto bytes = test::peer::slurp(blob);
  bytes[bytes.size() / 2] ^= 0x01;
  fs::remove(blob);
  test::write_file(blob, bytes);
  auto s = serve(hf);
  const auto r = fetch(s->endpoint(), "s1", w().w1, "s1");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.err.find("layers/layer-00005.gguf"), std::string::npos) << r.err;
  EXPECT_TRUE(s->wait_for_log("damaged, never served")) << s->log();
  EXPECT_FALSE(fs::exists(worker_snapshot("s1") / "layers/layer-00005.gguf"));
  // What was intact arrived and is kept for the next attempt.
  EXPECT_TRUE(fs::exists(worker_snapshot("s1") / "shared/metadata.gguf"));

  // With the Hub as the next remote, the damaged part comes from there and
  // the rest from the peer.
  w().hub->clear_log();
  const auto h = fetch(s->endpoint(), "s1", w().w1, "s1-hub", {}, /*with_hub=*/true);
  ASSERT_EQ(h.exit_code, 0) << h.err;
  const auto j = json::parse(h.out);
  EXPECT_EQ(j["sources"]["layers/layer-00005.gguf"], "hub");
  EXPECT_EQ(j["sources"]["layers/layer-00004.gguf"], "peer");
  EXPECT_EQ(j["sources"]["shared/metadata.gguf"], "peer");
  EXPECT_EQ(j["verified"], true);
  EXPECT_EQ(test::peer::slurp(worker_snapshot("s1-hub") / "layers/layer-00005.gguf"),
            test::peer::slurp(w().pkg / "layers/layer-00005.gguf"));
  bool noted = false;
  for (const auto& n : j["source_notes"]) noted = noted || n.get<std::string>().find("layers/layer-00005.gguf") != std::string::npos;
  EXPECT_TRUE(noted) << j["source_notes"];
}

}  // namespace
}  // namespace skippy
