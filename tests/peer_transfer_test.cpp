// Peer cache transfer end to end: real
// serve-artifacts processes on 127.0.0.1 with keys and certificates made by
// the identity commands, a package in a temporary Hugging Face cache at a
// commit, and the client library in this process.
#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <future>
#include <map>
#include <mutex>

#include "peer/client_detail.h"
#include "peer/protocol.h"
#include "peer_test_util.h"
#include "peer_world.h"
#include "util/file.h"
#include "skippy/manifest.h"
#include "skippy/peer.h"

namespace skippy {
// Named: the unity build compiles this file with others that have their
// own kRepo, expect_refused...
namespace peer_transfer_test {
namespace {

namespace fs = std::filesystem;
using peer::PeerClient;
using peer::PeerError;
using peer::PeerErrorKind;
using peer::Refusal;
using peer::TransferMode;
using peer::TransferRequest;
using test::TempDir;
using test::peer::ServerProcess;
using test::peer::StageSpec;

constexpr const char* kRepo = "org/tiny-layers";
constexpr const char* kCommit = "0123456789abcdef0123456789abcdef01234567";
using test::peer::kBigLayer;  // replaced by 32 MiB of noise
using test::peer::World;
constexpr uint64_t kBigBytes = 32ull << 20;

std::string ref_at(const std::string& repo, const std::string& commit) { return "hf://" + repo + "@" + commit; }


// What a test changes about its serve-artifacts process.
struct ServerArgs {
  std::string mode_ = "trusted";
  fs::path topology_, hf_, identity_, verify_cache_;
  std::vector<std::string> extra_;
  ServerArgs& mode(std::string v) { mode_ = std::move(v); return *this; }
  ServerArgs& topology(fs::path v) { topology_ = std::move(v); return *this; }
  ServerArgs& hf(fs::path v) { hf_ = std::move(v); return *this; }
  ServerArgs& identity(fs::path v) { identity_ = std::move(v); return *this; }
  ServerArgs& verify_cache(fs::path v) { verify_cache_ = std::move(v); return *this; }
  ServerArgs& extra(std::vector<std::string> v) { extra_ = std::move(v); return *this; }
};

class PeerTransfer : public test::peer::WorldSuite<PeerTransfer> {
 public:
  static test::peer::WorldSpec spec() { return {.repo = kRepo, .big_bytes = kBigBytes, .seed = 0x9e3779b97f4a7c15ull, .hub = false, .commit = kCommit}; }

 protected:

  std::unique_ptr<ServerProcess> serve() { return serve(ServerArgs()); }
  std::unique_ptr<ServerProcess> serve(ServerArgs a) {
    if (a.topology_.empty()) a.topology_ = w().topology;
    if (a.hf_.empty()) a.hf_ = w().hf;
    if (a.identity_.empty()) a.identity_ = w().coord;
    if (a.verify_cache_.empty()) a.verify_cache_ = w().verify_cache;
    std::vector<std::string> args = {"--listen", "127.0.0.1:0", "--topology", a.topology_.string(), "--identity",
                                     a.identity_.string()};
    args.insert(args.end(), a.extra_.begin(), a.extra_.end());
    const fs::path log = tmp_ / ("server-" + std::to_string(++servers_) + ".log");
    return std::make_unique<ServerProcess>(
        args,
        std::vector<std::string>{"HF_HUB_CACHE=" + a.hf_.string(), "SKIPPY_CACHE_DIR=" + a.verify_cache_.string(),
                                 "MESH_LLM_ARTIFACT_TRANSFER=" + a.mode_, "HF_HUB_OFFLINE=1", "HF_ENDPOINT=http://127.0.0.1:9"},
        log);
  }

  static PeerClient client(const fs::path& node, TransferMode mode = TransferMode::kTrusted,
                           std::vector<std::string> trusted = {}, peer::ClientOptions o = {}) {
    if (o.connect_timeout == std::chrono::milliseconds(30'000)) o.connect_timeout = std::chrono::seconds(10);
    if (o.idle_timeout == std::chrono::milliseconds(30'000)) o.idle_timeout = std::chrono::seconds(10);
    return PeerClient(peer::NodeIdentity::load(node), peer::PeerTrust{mode, std::move(trusted)}, o);
  }

  // A request for `rel` by `stage`, with the manifest's expectations.
  static TransferRequest request(const std::string& stage, const std::string& rel, uint64_t offset = 0) {
    TransferRequest r;
    r.topology_id = "t-1";
    r.run_id = "r-1";
    r.stage_id = stage;
    r.package_ref = ref_at(kRepo, kCommit);
    r.manifest_sha256 = w().manifest_sha;
    r.rel_path = rel;
    r.offset = offset;
    r.expected_size = w().bytes_of(rel).size();
    r.expected_sha256 = w().sha_of(rel);
    return r;
  }

  struct Got {
    peer::TransferAnswer answer;
    std::vector<uint8_t> bytes;
  };
  static Got fetch(const PeerClient& c, const std::string& endpoint, const TransferRequest& r) {
    Got g;
    bool accepted = false;
    peer::TransferSink sink;
    sink.on_accept = [&](const peer::TransferAnswer&) { accepted = true; };
    sink.on_bytes = [&](std::span<const uint8_t> b) {
      EXPECT_TRUE(accepted) << "bytes before the answer";
      g.bytes.insert(g.bytes.end(), b.begin(), b.end());
    };
    g.answer = c.fetch(endpoint, r, sink);
    return g;
  }

  // The transfer fails with `kind` (and `refusal`), gives the sink nothing,
  // and says nothing about paths or caches.
  static PeerError expect_failure(const PeerClient& c, const std::string& endpoint, const TransferRequest& r,
                                  PeerErrorKind kind, std::optional<Refusal> refusal = std::nullopt) {
    size_t delivered = 0;
    peer::TransferSink sink;
    sink.on_bytes = [&](std::span<const uint8_t> b) { delivered += b.size(); };
    try {
      c.fetch(endpoint, r, sink);
    } catch (const PeerError& e) {
      EXPECT_EQ(e.peer_kind(), kind) << e.what();
      if (refusal) {
        EXPECT_EQ(e.refusal(), refusal) << e.what();
      }
      EXPECT_EQ(delivered, 0u);
      const std::string msg = e.what();
      EXPECT_EQ(msg.find("/tmp"), std::string::npos) << msg;
      EXPECT_EQ(msg.find("models--"), std::string::npos) << msg;
      EXPECT_EQ(msg.find("blobs"), std::string::npos) << msg;
      return e;
    }
    ADD_FAILURE() << "the transfer of " << r.rel_path << " succeeded";
    return PeerError(PeerErrorKind::kProtocol, "none");
  }
  static void expect_refused(const PeerClient& c, const ServerProcess& s, const TransferRequest& r, Refusal refusal,
                             const std::string& log_reason) {
    const auto e = expect_failure(c, s.endpoint(), r, PeerErrorKind::kRefused, refusal);
    EXPECT_NE(std::string(e.what()).find(std::string(peer::refusal_text(refusal))), std::string::npos) << e.what();
    EXPECT_TRUE(s.wait_for_log(log_reason)) << "the log lacks \"" << log_reason << "\":\n" << s.log();
  }

  TempDir tmp_;
  int servers_ = 0;
};

// ---------------------------------------------------------------- happy path

TEST_F(PeerTransfer, EachStageGetsItsPartsByteIdentical) {
  auto s = serve();
  const auto c0 = client(w().w0);
  const auto c1 = client(w().w1);
  // Stage 0 (layers 0..4): manifest, metadata, embeddings, its layers.
  std::vector<std::string> s0 = {"model-package.json", "shared/metadata.gguf", "shared/embeddings.gguf"};
  for (int l = 0; l < 4; ++l) s0.push_back(layer_artifact_path(static_cast<uint32_t>(l)));
  for (const auto& rel : s0) {
    const auto g = fetch(c0, s->endpoint(), request("s0", rel));
    EXPECT_EQ(g.bytes, w().bytes_of(rel)) << rel;
    EXPECT_EQ(g.answer.total_size, w().bytes_of(rel).size());
    EXPECT_EQ(g.answer.sha256, w().sha_of(rel));
    EXPECT_EQ(g.answer.server.node_id, w().coord_id);
    EXPECT_TRUE(g.answer.server.owner_verified);
  }
  // The final stage (4..8): its layers (one of 32 MiB), output, and the
  // embeddings, because this model's output projection is tied to them.
  for (const std::string rel : {"shared/metadata.gguf", "layers/layer-00004.gguf", kBigLayer, "layers/layer-00007.gguf",
                                "shared/output.gguf", "shared/embeddings.gguf"}) {
    const auto g = fetch(c1, s->endpoint(), request("s1", rel));
    EXPECT_EQ(g.bytes.size(), w().bytes_of(rel).size()) << rel;
    EXPECT_TRUE(g.bytes == w().bytes_of(rel)) << rel;
  }
  EXPECT_TRUE(s->wait_for_log("stage s1, shared/embeddings.gguf from byte 0: accepted")) << s->log();
  EXPECT_EQ(s->log().find("refused"), std::string::npos) << s->log();
  // SIGTERM stops it cleanly (exit 0; under the sanitizers: no report, no leak).
  EXPECT_EQ(s->stop(), 0) << s->log();
  EXPECT_NE(s->log().find("serve-artifacts: stopped"), std::string::npos) << s->log();
}

// The set stage_artifacts() computes is exactly what the server serves:
// every declared artifact of the package, asked for by each stage.
TEST_F(PeerTransfer, ServerAndClientAgreeOnEachStagesSet) {
  auto s = serve();
  const auto topo = peer::load_topology(w().topology);
  const auto& m = w().manifest;
  std::vector<const ArtifactEntry*> declared = {&m.shared.metadata, &m.shared.embeddings, &m.shared.output};
  for (const auto& l : m.layers) declared.push_back(&l);
  for (const auto& stage : topo.stages) {
    const auto c = client(stage.stage_id == "s0" ? w().w0 : w().w1);
    // This model's output is tied to its embeddings (llama-tiny has no
    // output.weight): the set from the manifest's artifacts holds them.
    const auto allowed = peer::stage_artifacts(stage, catalog_artifacts_v1(m));
    EXPECT_EQ(fetch(c, s->endpoint(), peer::manifest_request(topo, stage)).bytes, w().bytes_of("model-package.json"));
    size_t served = 0;
    for (const auto* e : declared) {
      const peer::PeerArtifact* a = allowed.find(e->path);
      if (a) {
        EXPECT_TRUE(fetch(c, s->endpoint(), peer::transfer_request(topo, stage, *a)).bytes == w().bytes_of(e->path))
            << stage.stage_id << " " << e->path;
        ++served;
      } else {
        TransferRequest r = peer::transfer_request(topo, stage, {e->path, PartRole::kLayer, std::nullopt, e->artifact_bytes, e->sha256, ""});
        expect_failure(c, s->endpoint(), r, PeerErrorKind::kRefused, Refusal::kUnavailable);
      }
    }
    EXPECT_EQ(served, allowed.artifacts.size()) << stage.stage_id;
  }
  // s0: metadata, embeddings, 4 layers; s1: metadata, 4 layers, output, embeddings (tied).
  EXPECT_EQ(peer::stage_artifacts(topo.stages[0], catalog_artifacts_v1(m)).artifacts.size(), 6u);
  EXPECT_EQ(peer::stage_artifacts(topo.stages[1], catalog_artifacts_v1(m)).artifacts.size(), 7u);
}

TEST_F(PeerTransfer, ResumesFromAnOffset) {
  auto s = serve();
  const auto c = client(w().w1);
  const auto full = w().bytes_of(kBigLayer);
  const uint64_t offset = full.size() / 3 + 17;
  const auto g = fetch(c, s->endpoint(), request("s1", kBigLayer, offset));
  EXPECT_EQ(g.answer.offset, offset);
  EXPECT_EQ(g.answer.total_size, full.size());
  ASSERT_EQ(g.bytes.size(), full.size() - offset);
  EXPECT_TRUE(std::equal(g.bytes.begin(), g.bytes.end(), full.begin() + static_cast<std::ptrdiff_t>(offset)));
  // An offset at the end: accepted, nothing to send.
  const auto end = fetch(c, s->endpoint(), request("s1", "shared/output.gguf", w().bytes_of("shared/output.gguf").size()));
  EXPECT_TRUE(end.bytes.empty());
  // Beyond the end: the one refusal that says what is wrong with the request.
  auto beyond = request("s1", "shared/output.gguf");
  beyond.offset = w().bytes_of("shared/output.gguf").size() + 1;
  beyond.expected_size.reset();  // (with it, the request would be malformed)
  expect_refused(c, *s, beyond, Refusal::kInvalidOffset, "is beyond");
}

// ------------------------------------------------------------ authorization

TEST_F(PeerTransfer, RefusesAnotherStagesLayer) {
  auto s = serve();
  expect_refused(client(w().w1), *s, request("s1", "layers/layer-00000.gguf"), Refusal::kUnavailable,
                 "layer 0 (layers/layer-00000.gguf) is not part of stage s1 (layers 4..8");
  // Stage 0 owns the input boundary, not the output.
  expect_refused(client(w().w0), *s, request("s0", "shared/output.gguf"), Refusal::kUnavailable,
                 "output (shared/output.gguf) is not part of stage s0");
  // A node may not claim another node's stage either.
  expect_refused(client(w().w1), *s, request("s0", "layers/layer-00000.gguf"), Refusal::kUnavailable,
                 "stage s0 is assigned to node " + w().w0_id.substr(0, 16));
}

TEST_F(PeerTransfer, RefusesAnUnlistedNode) {
  auto s = serve();
  // Same owner, valid certificate, but no stage of the topology is its.
  expect_refused(client(w().stranger), *s, request("s1", "layers/layer-00004.gguf"), Refusal::kUnavailable,
                 "stage s1 is assigned to node " + w().w1_id.substr(0, 16));
  auto other = request("s9", "shared/metadata.gguf");
  expect_refused(client(w().stranger), *s, other, Refusal::kUnavailable, "no stage \"s9\" in the topology");
}

TEST_F(PeerTransfer, RefusesAMutableRevision) {
  // Even a branch that the cache resolves to the very commit is refused.
  const fs::path refs = test::peer::repo_dir(w().hf, kRepo) / "refs";
  fs::create_directories(refs);
  write_file_atomic(refs / "main", kCommit);
  auto s = serve();
  auto r = request("s1", "layers/layer-00004.gguf");
  r.package_ref = std::string("hf://") + kRepo + "@main";
  expect_refused(client(w().w1), *s, r, Refusal::kUnavailable, "does not pin a 40-hex commit");
  r.package_ref = std::string("hf://") + kRepo + "@" + std::string(kCommit).substr(0, 12);
  expect_refused(client(w().w1), *s, r, Refusal::kUnavailable, "does not pin a 40-hex commit");
  // And a topology naming a branch is not served at all.
  const fs::path topo = tmp_ / "branch-topology.json";
  test::peer::write_topology(topo, std::string("hf://") + kRepo + "@main", w().manifest_sha, {{"s1", 1, w().w1_id, 4, 8}});
  try {
    serve(ServerArgs().topology(topo));
    ADD_FAILURE() << "serve-artifacts started with a branch ref";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("40-hex commit"), std::string::npos) << e.what();
  }
}

TEST_F(PeerTransfer, RefusesAWrongManifestSha) {
  auto s = serve();
  auto r = request("s1", "layers/layer-00004.gguf");
  r.manifest_sha256 = std::string(64, 'a');
  expect_refused(client(w().w1), *s, r, Refusal::kUnavailable, "is not the topology's");
  // The topology's SHA, but the cache holds another manifest at that commit.
  const fs::path topo = tmp_ / "other-sha.json";
  const std::string other = sha256_hex(std::string_view("another manifest"));
  test::peer::write_topology(topo, ref_at(kRepo, kCommit), other, {{"s1", 1, w().w1_id, 4, 8}});
  auto s2 = serve(ServerArgs().topology(topo));
  auto r2 = request("s1", "model-package.json");
  r2.manifest_sha256 = other;
  r2.expected_sha256.reset();
  expect_refused(client(w().w1), *s2, r2, Refusal::kUnavailable, "hashes to " + w().manifest_sha);
  // Expectations that disagree with the manifest.
  auto r3 = request("s1", "layers/layer-00004.gguf");
  r3.expected_size = *r3.expected_size + 1;
  expect_refused(client(w().w1), *s, r3, Refusal::kUnavailable, "the request expects");
}

TEST_F(PeerTransfer, RefusesAnOversizedManifest) {
  // 16 MiB + 1 byte of manifest at another commit; the topology pins exactly it.
  const std::string commit(40, 'e');
  const fs::path big = tmp_ / "huge";
  fs::create_directories(big);
  std::string text = "{" + std::string((16u << 20) - 1, ' ') + "}";
  write_file_atomic(big / "model-package.json", text);
  const fs::path hf = tmp_ / "hf";
  test::peer::place_in_hf_cache(big, hf, "org/huge-layers", commit);
  const fs::path topo = tmp_ / "huge.json";
  const std::string sha = sha256_hex(text);
  test::peer::write_topology(topo, ref_at("org/huge-layers", commit), sha, {{"s1", 1, w().w1_id, 4, 8}});
  auto s = serve(ServerArgs().topology(topo).hf(hf));
  TransferRequest r;
  r.topology_id = "t-1";
  r.run_id = "r-1";
  r.stage_id = "s1";
  r.package_ref = ref_at("org/huge-layers", commit);
  r.manifest_sha256 = sha;
  r.rel_path = "model-package.json";
  expect_refused(client(w().w1), *s, r, Refusal::kUnavailable, "over the 16 MiB cap");
}

TEST_F(PeerTransfer, RefusesAnUndeclaredPathWithTheSameWordsAsAMissingOne) {
  auto s = serve();
  // README.md is in the snapshot but not declared in the manifest.
  ASSERT_TRUE(fs::exists(test::peer::snapshot_dir(w().hf, kRepo, kCommit) / "README.md"));
  auto r = request("s1", "layers/layer-00004.gguf");
  r.rel_path = "README.md";
  r.expected_size.reset();
  r.expected_sha256.reset();
  const auto present = expect_failure(client(w().w1), s->endpoint(), r, PeerErrorKind::kRefused, Refusal::kUnavailable);
  EXPECT_TRUE(s->wait_for_log("README.md is not declared in the manifest")) << s->log();
  r.rel_path = "layers/layer-00099.gguf";
  const auto absent = expect_failure(client(w().w1), s->endpoint(), r, PeerErrorKind::kRefused, Refusal::kUnavailable);
  // Whether a file exists is not told.
  EXPECT_EQ(std::string(present.what()).substr(std::string(present.what()).find(':')),
            std::string(absent.what()).substr(std::string(absent.what()).find(':')));
}

TEST_F(PeerTransfer, DropsAPathEscapeAndRefusesASymlinkOutOfTheRepo) {
  auto s = serve();
  namespace wire = peer::wire;
  // A raw client sends "../" in the path: the request is dropped, unanswered.
  wire::Request req;
  req.requester = wire::digest_from_hex(w().w1_id, "id");
  req.topology_id = "t-1";
  req.run_id = "r-1";
  req.stage_id = "s1";
  req.package_ref = ref_at(kRepo, kCommit);
  req.manifest_sha256 = wire::digest_from_hex(w().manifest_sha, "sha");
  req.rel_path = "layers/layer-00004.gguf";
  auto payload = wire::encode(req);
  const std::string good = "layers/layer-00004.gguf", bad = "../../../../../etc/pass";
  ASSERT_EQ(good.size(), bad.size());
  auto at = std::search(payload.begin(), payload.end(), good.begin(), good.end());
  ASSERT_NE(at, payload.end());
  std::copy(bad.begin(), bad.end(), at);
  wire::Open open;
  open.features = {"artifact-transfer"};
  std::vector<uint8_t> bytes = {wire::kStreamTypeSubprotocol};
  const auto fo = wire::frame(wire::encode(open));
  bytes.insert(bytes.end(), fo.begin(), fo.end());
  bytes.push_back(wire::kKindArtifactTransfer);
  const auto fr = wire::frame(payload);
  bytes.insert(bytes.end(), fr.begin(), fr.end());
  {
    test::peer::RawTlsClient raw(s->endpoint(), w().w1);
    ASSERT_TRUE(raw.handshake_ok());
    ASSERT_TRUE(raw.write(bytes));
    const auto got = raw.read_all();
    // Only the open acknowledgement: no answer to the request.
    ASSERT_GE(got.size(), 4u);
    const uint32_t n = got[0] | got[1] << 8 | got[2] << 16 | static_cast<uint32_t>(got[3]) << 24;
    EXPECT_EQ(got.size(), 4u + n);
    EXPECT_TRUE(wire::decode_open_ack({got.data() + 4, n}).has_feature("artifact-transfer"));
  }
  EXPECT_TRUE(s->wait_for_log("dropped a malformed message: request.rel_path: not a safe relative path")) << s->log();

  // A declared path whose snapshot link leads outside the repo folder (to a
  // copy with the right bytes, even) is refused.
  const fs::path hf = tmp_ / "hf-escape";
  test::peer::place_in_hf_cache(w().pkg, hf, kRepo, kCommit);
  const fs::path outside = tmp_ / "outside.gguf";
  fs::copy_file(w().pkg / "layers/layer-00004.gguf", outside);
  const fs::path link = test::peer::snapshot_dir(hf, kRepo, kCommit) / "layers/layer-00004.gguf";
  fs::remove(link);
  fs::create_symlink(outside, link);
  auto s2 = serve(ServerArgs().hf(hf).verify_cache(tmp_ / "vc"));
  expect_refused(client(w().w1), *s2, request("s1", "layers/layer-00004.gguf"), Refusal::kUnavailable,
                 "outside the repo folder");
}

TEST_F(PeerTransfer, DropsARequesterThatIsNotTheTlsPeer) {
  auto s = serve();
  // w1 is authenticated by TLS but claims to be w0 (whose stage is s0).
  const auto c = client(w().w1);
  namespace wire = peer::wire;
  wire::Request req;
  req.requester = wire::digest_from_hex(w().w0_id, "id");
  req.topology_id = "t-1";
  req.run_id = "r-1";
  req.stage_id = "s0";
  req.package_ref = ref_at(kRepo, kCommit);
  req.manifest_sha256 = wire::digest_from_hex(w().manifest_sha, "sha");
  req.rel_path = "layers/layer-00000.gguf";
  size_t delivered = 0;
  try {
    peer::detail::fetch_wire(c, s->endpoint(), req, {nullptr, [&](std::span<const uint8_t> b) { delivered += b.size(); }});
    ADD_FAILURE() << "a lying requester was served";
  } catch (const PeerError& e) {
    EXPECT_EQ(e.peer_kind(), PeerErrorKind::kTransport) << e.what();  // no answer at all
  }
  EXPECT_EQ(delivered, 0u);
  EXPECT_TRUE(s->wait_for_log("dropped: the request names requester " + w().w0_id.substr(0, 16))) << s->log();
}

// A topology whose stage names layers the package does not have is a
// mistake: nothing of that stage is served, not even the metadata, and the
// log names both layer counts.
TEST_F(PeerTransfer, AStagePastThePackagesLayersIsRefused) {
  const fs::path topo = tmp_ / "past.json";
  test::peer::write_topology(topo, ref_at(kRepo, kCommit), w().manifest_sha,
                             {{"s0", 0, w().w0_id, 0, 4}, {"s1", 1, w().w1_id, 4, 9}});
  auto s = serve(ServerArgs().topology(topo));
  const auto c1 = client(w().w1);
  for (const char* rel : {"shared/metadata.gguf", "layers/layer-00004.gguf", "shared/output.gguf"}) {
    expect_refused(c1, *s, request("s1", rel), Refusal::kUnavailable,
                   "stage s1: layer range 4..9 is outside the package's 8 layers (0..8)");
  }
  // The manifest is still served (it is what tells the stage what it is),
  // and so is the well-formed stage.
  EXPECT_EQ(fetch(c1, s->endpoint(), request("s1", "model-package.json")).bytes, w().bytes_of("model-package.json"));
  EXPECT_EQ(fetch(client(w().w0), s->endpoint(), request("s0", "layers/layer-00000.gguf")).bytes,
            w().bytes_of("layers/layer-00000.gguf"));
}

TEST_F(PeerTransfer, FinalStageOfAnUntiedModelDoesNotGetTheEmbeddings) {
  // qwen3moe-tiny has an output.weight: its final stage needs no embeddings.
  const fs::path pkg = tmp_ / "qwen";
  ASSERT_EQ(test::write_pkg(test::data_path("qwen3moe-tiny.gguf"), pkg).exit_code, 0);
  const std::string commit(40, 'c');
  const fs::path hf = tmp_ / "hf-qwen";
  test::peer::place_in_hf_cache(pkg, hf, "org/qwen-layers", commit);
  const std::string sha = sha256_hex(test::read_text(pkg / "model-package.json"));
  const fs::path topo = tmp_ / "qwen.json";
  test::peer::write_topology(topo, ref_at("org/qwen-layers", commit), sha, {{"s0", 0, w().w0_id, 0, 2}, {"s1", 1, w().w1_id, 2, 4}});
  auto s = serve(ServerArgs().topology(topo).hf(hf).verify_cache(tmp_ / "vc"));
  auto req = [&](const std::string& stage, const std::string& rel) {
    TransferRequest r;
    r.topology_id = "t-1";
    r.run_id = "r-1";
    r.stage_id = stage;
    r.package_ref = ref_at("org/qwen-layers", commit);
    r.manifest_sha256 = sha;
    r.rel_path = rel;
    return r;
  };
  const auto c1 = client(w().w1);
  expect_refused(c1, *s, req("s1", "shared/embeddings.gguf"), Refusal::kUnavailable, "output not tied");
  EXPECT_EQ(fetch(c1, s->endpoint(), req("s1", "shared/output.gguf")).bytes, test::peer::slurp(pkg / "shared/output.gguf"));
  EXPECT_EQ(fetch(client(w().w0), s->endpoint(), req("s0", "shared/embeddings.gguf")).bytes,
            test::peer::slurp(pkg / "shared/embeddings.gguf"));
}

// ---------------------------------------------------------------- modes

TEST_F(PeerTransfer, ModeOffOffersAndServesNothing) {
  for (const std::string mode : {"off", "bogus"}) {  // unset: no start (PeerFetch.TheModeIsAFlagAndNoModeIsNoStart)
    auto s = serve(ServerArgs().mode(mode));
    const auto c = client(w().w1);
    EXPECT_TRUE(c.features(s->endpoint()).empty());
    expect_failure(c, s->endpoint(), request("s1", "layers/layer-00004.gguf"), PeerErrorKind::kFeatureUnavailable);
    // A client that asks anyway is refused with "artifact transfer disabled".
    namespace wire = peer::wire;
    wire::Request req;
    req.requester = wire::digest_from_hex(w().w1_id, "id");
    req.topology_id = "t-1";
    req.run_id = "r-1";
    req.stage_id = "s1";
    req.package_ref = ref_at(kRepo, kCommit);
    req.manifest_sha256 = wire::digest_from_hex(w().manifest_sha, "sha");
    req.rel_path = "layers/layer-00004.gguf";
    std::vector<uint8_t> bytes = {wire::kStreamTypeSubprotocol};
    const auto fo = wire::frame(wire::encode(wire::Open{}));
    bytes.insert(bytes.end(), fo.begin(), fo.end());
    bytes.push_back(wire::kKindArtifactTransfer);
    const auto fr = wire::frame(wire::encode(req));
    bytes.insert(bytes.end(), fr.begin(), fr.end());
    test::peer::RawTlsClient raw(s->endpoint(), w().w1);
    ASSERT_TRUE(raw.write(bytes));
    const auto got = raw.read_all();
    ASSERT_GE(got.size(), 4u);
    const uint32_t n = got[0] | got[1] << 8 | got[2] << 16 | static_cast<uint32_t>(got[3]) << 24;
    ASSERT_GE(got.size(), 8u + n);
    EXPECT_TRUE(wire::decode_open_ack({got.data() + 4, n}).features.empty());
    const uint8_t* r = got.data() + 4 + n;
    const uint32_t m = r[0] | r[1] << 8 | r[2] << 16 | static_cast<uint32_t>(r[3]) << 24;
    ASSERT_EQ(got.size(), 8u + n + m);
    const auto resp = wire::decode_response({r + 4, m});
    EXPECT_FALSE(resp.accepted);
    EXPECT_EQ(resp.refusal, Refusal::kDisabled);
    EXPECT_TRUE(s->wait_for_log("refused (artifact transfer disabled): MESH_LLM_ARTIFACT_TRANSFER is off")) << s->log();
  }
}

TEST_F(PeerTransfer, TrustedModeServesAnotherOwnerOnlyWhenTrusted) {
  // b1 (owner B) runs stage s1.
  const fs::path topo = tmp_ / "b1.json";
  test::peer::write_topology(topo, ref_at(kRepo, kCommit), w().manifest_sha, {{"s1", 1, w().b1_id, 4, 8}});
  // b1 trusts owner A (the server's), so only the server's choice matters.
  const auto cb = client(w().b1, TransferMode::kTrusted, {w().owner_a_id});
  {
    auto s = serve(ServerArgs().topology(topo));
    EXPECT_TRUE(cb.features(s->endpoint()).empty());
    expect_failure(cb, s->endpoint(), request("s1", "layers/layer-00004.gguf"), PeerErrorKind::kFeatureUnavailable);
    EXPECT_TRUE(s->wait_for_log("(artifact-transfer not offered)")) << s->log();
  }
  {
    auto s = serve(ServerArgs().topology(topo).extra({"--trust-owner", (w().owner_b / "owner.crt").string()}));
    EXPECT_EQ(cb.features(s->endpoint()), std::vector<std::string>{"artifact-transfer"});
    EXPECT_EQ(fetch(cb, s->endpoint(), request("s1", "layers/layer-00004.gguf")).bytes,
              w().bytes_of("layers/layer-00004.gguf"));
  }
}

TEST_F(PeerTransfer, OpenModeServesAnyAuthenticatedPeer) {
  const fs::path topo = tmp_ / "b1.json";
  test::peer::write_topology(topo, ref_at(kRepo, kCommit), w().manifest_sha, {{"s1", 1, w().b1_id, 4, 8}});
  auto s = serve(ServerArgs().mode("open").topology(topo));
  const auto cb = client(w().b1, TransferMode::kOpen);
  EXPECT_EQ(fetch(cb, s->endpoint(), request("s1", "shared/output.gguf")).bytes, w().bytes_of("shared/output.gguf"));
}

TEST_F(PeerTransfer, ClientRefusesAServerItDoesNotTrust) {
  // A server run by owner B's node; w1 (owner A, mode trusted) will not talk to it.
  auto s = serve(ServerArgs().mode("open").identity(w().b1));
  expect_failure(client(w().w1), s->endpoint(), request("s1", "layers/layer-00004.gguf"), PeerErrorKind::kUntrusted);
  // Pinned to a node id, the client refuses any other node.
  auto s2 = serve();
  peer::ClientOptions o;
  o.expected_server_node_id = w().w0_id;
  expect_failure(client(w().w1, TransferMode::kTrusted, {}, o), s2->endpoint(), request("s1", "layers/layer-00004.gguf"),
                 PeerErrorKind::kUntrusted);
  // Mode off on the client: no client at all.
  EXPECT_THROW(client(w().w1, TransferMode::kOff), Error);
}

// ---------------------------------------------------------------- damage and faults

TEST_F(PeerTransfer, ACorruptedCachedBlobIsNeverServed) {
  const fs::path hf = tmp_ / "hf-corrupt";
  test::peer::place_in_hf_cache(w().pkg, hf, kRepo, kCommit);
  auto s = serve(ServerArgs().hf(hf).verify_cache(tmp_ / "vc"));
  const auto c = client(w().w1);
  const std::string rel = "layers/layer-00006.gguf";
  EXPECT_EQ(fetch(c, s->endpoint(), request("s1", rel)).bytes, w().bytes_of(rel));  // verified and recorded
  const fs::path blob = fs::canonical(test::peer::snapshot_dir(hf, kRepo, kCommit) / rel);
  {
    // One byte flipped in place: same size, so only the hash can tell.
    std::fstream f(blob, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(1000);
    f.put(static_cast<char>(w().bytes_of(rel)[1000] ^ 0x5a));
  }
  expect_refused(c, *s, request("s1", rel), Refusal::kUnavailable, "damaged, never served: " + rel + ": SHA-256 is");
  // Truncated.
  fs::resize_file(blob, 4096);
  expect_refused(c, *s, request("s1", rel), Refusal::kUnavailable, rel + " is 4096 bytes, the manifest says");
  EXPECT_EQ(s->stop(), 0) << s->log();
}

TEST_F(PeerTransfer, ACutConnectionResumesFromWhatArrived) {
  auto s = serve();
  const auto c = client(w().w1);
  std::vector<uint8_t> got;
  bool killed = false;
  peer::TransferSink sink;
  sink.on_bytes = [&](std::span<const uint8_t> b) {
    got.insert(got.end(), b.begin(), b.end());
    if (!killed && got.size() >= (4u << 20)) {
      s->kill_hard();  // the peer vanishes mid-file
      killed = true;
    }
  };
  try {
    c.fetch(s->endpoint(), request("s1", kBigLayer), sink);
    ADD_FAILURE() << "the transfer survived its server";
  } catch (const PeerError& e) {
    EXPECT_EQ(e.peer_kind(), PeerErrorKind::kTransport) << e.what();
  }
  ASSERT_TRUE(killed);
  ASSERT_GT(got.size(), 0u);
  ASSERT_LT(got.size(), kBigBytes);
  // Another server process, the same cache: resume from what arrived.
  auto s2 = serve();
  const auto rest = fetch(c, s2->endpoint(), request("s1", kBigLayer, got.size()));
  EXPECT_EQ(rest.answer.offset, got.size());
  got.insert(got.end(), rest.bytes.begin(), rest.bytes.end());
  EXPECT_EQ(got.size(), kBigBytes);
  EXPECT_EQ(sha256_hex(std::span<const uint8_t>(got)), w().sha_of(kBigLayer));
  EXPECT_EQ(s2->stop(), 0) << s2->log();
}

TEST_F(PeerTransfer, APeerThatStopsSendingTimesOut) {
  auto s = serve();
  peer::ClientOptions o;
  o.idle_timeout = std::chrono::milliseconds(500);
  const auto c = client(w().w1, TransferMode::kTrusted, {}, o);
  bool stopped = false;
  uint64_t got = 0;
  peer::TransferSink sink;
  sink.on_bytes = [&](std::span<const uint8_t> b) {
    got += b.size();
    if (!stopped) {
      s->signal(SIGSTOP);  // the server process freezes mid-file
      stopped = true;
    }
  };
  const auto t0 = std::chrono::steady_clock::now();
  try {
    c.fetch(s->endpoint(), request("s1", kBigLayer), sink);
    ADD_FAILURE() << "a frozen peer finished the transfer";
  } catch (const PeerError& e) {
    EXPECT_EQ(e.peer_kind(), PeerErrorKind::kTimeout) << e.what();
    EXPECT_NE(std::string(e.what()).find("500 ms"), std::string::npos) << e.what();
  }
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(took, std::chrono::seconds(5));
  EXPECT_GT(got, 0u);
  EXPECT_LT(got, kBigBytes);
  s->signal(SIGCONT);
  // A peer that never answers the connection's opening times out too.
  s->signal(SIGSTOP);
  peer::ClientOptions quick;
  quick.connect_timeout = std::chrono::milliseconds(500);
  const auto c2 = client(w().w1, TransferMode::kTrusted, {}, quick);
  const auto t1 = std::chrono::steady_clock::now();
  try {
    c2.features(s->endpoint());  // the kernel accepts, the frozen process never handshakes
    ADD_FAILURE() << "a frozen peer answered";
  } catch (const PeerError& e) {
    EXPECT_EQ(e.peer_kind(), PeerErrorKind::kTimeout) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t1, std::chrono::seconds(5));
  s->signal(SIGCONT);
}

TEST_F(PeerTransfer, TheSinkRunsInOrderSlowlyOrThrowing) {
  auto s = serve();
  struct DiskFull : std::runtime_error {
    using std::runtime_error::runtime_error;
  };
  for (const bool helper : {true, false}) {
    peer::ClientOptions o;
    o.sink_on_helper_thread = helper;
    o.idle_timeout = std::chrono::milliseconds(300);
    const auto c = client(w().w1, TransferMode::kTrusted, {}, o);
    // A sink slower than the idle timeout is not an idle peer.
    std::vector<uint8_t> got;
    peer::TransferSink slow;
    slow.on_bytes = [&](std::span<const uint8_t> b) {
      // Slower than the idle timeout, once the receiver has filled what it may.
      if (got.size() >= (6u << 20) && got.size() < (7u << 20)) std::this_thread::sleep_for(std::chrono::milliseconds(700));
      got.insert(got.end(), b.begin(), b.end());
    };
    c.fetch(s->endpoint(), request("s1", kBigLayer), slow);
    EXPECT_TRUE(got == w().bytes_of(kBigLayer)) << "helper thread: " << helper;
    // What the sink throws comes out of fetch() as it was thrown.
    peer::TransferSink full;
    full.on_bytes = [&](std::span<const uint8_t>) { throw DiskFull("disk full"); };
    EXPECT_THROW(c.fetch(s->endpoint(), request("s1", kBigLayer), full), DiskFull);
    peer::TransferSink refuse;
    refuse.on_accept = [&](const peer::TransferAnswer&) { throw DiskFull("no room for it"); };
    EXPECT_THROW(c.fetch(s->endpoint(), request("s1", kBigLayer), refuse), DiskFull);
  }
}

TEST_F(PeerTransfer, EightClientsAtOnce) {
  auto s = serve();
  struct Job {
    fs::path node;
    std::string stage, rel;
  };
  const std::vector<Job> jobs = {
      {w().w0, "s0", "shared/metadata.gguf"},     {w().w0, "s0", "shared/embeddings.gguf"},
      {w().w0, "s0", "layers/layer-00001.gguf"},  {w().w0, "s0", "layers/layer-00002.gguf"},
      {w().w1, "s1", kBigLayer},                  {w().w1, "s1", "layers/layer-00006.gguf"},
      {w().w1, "s1", "shared/output.gguf"},       {w().w1, "s1", "layers/layer-00007.gguf"}};
  std::atomic<int> ready{0};
  std::vector<std::future<std::vector<uint8_t>>> results;
  for (const auto& j : jobs) {
    results.push_back(std::async(std::launch::async, [&, j] {
      const auto c = client(j.node);
      ready.fetch_add(1);
      while (ready.load() < static_cast<int>(jobs.size())) std::this_thread::yield();
      return fetch(c, s->endpoint(), request(j.stage, j.rel)).bytes;
    }));
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_TRUE(results[i].get() == w().bytes_of(jobs[i].rel)) << jobs[i].rel;
  }
  EXPECT_TRUE(s->wait_for_log("stage s1, " + std::string(kBigLayer) + " from byte 0: accepted")) << s->log();
}

TEST_F(PeerTransfer, AClientWithoutACertificateIsRefusedByTls) {
  auto s = serve();
  {
    test::peer::RawTlsClient raw(s->endpoint(), fs::path());
    std::vector<uint8_t> open = {peer::wire::kStreamTypeSubprotocol};
    const auto f = peer::wire::frame(peer::wire::encode(peer::wire::Open{}));
    open.insert(open.end(), f.begin(), f.end());
    raw.write(open);
    EXPECT_TRUE(raw.read_all().empty());  // not even the open acknowledgement
  }
  EXPECT_TRUE(s->wait_for_log("TLS handshake failed")) << s->log();
  EXPECT_NE(s->log().find("certificate"), std::string::npos) << s->log();
}

TEST_F(PeerTransfer, LimitsKeepIdleConnectionsFromStarvingOthers) {
  // Unauthenticated connections have their own caps and a
  // short handshake deadline; authenticated ones have the rest.
  auto s = serve(ServerArgs().extra({"--max-unauthenticated-per-address", "3", "--max-connections", "1",
                                     "--handshake-timeout", "1", "--request-timeout", "2"}));
  const auto c = client(w().w1);
  // Two connections that never say anything leave room for a real one.
  int idle1 = test::peer::connect_tcp(s->endpoint());
  int idle2 = test::peer::connect_tcp(s->endpoint());
  EXPECT_EQ(fetch(c, s->endpoint(), request("s1", "layers/layer-00004.gguf")).bytes, w().bytes_of("layers/layer-00004.gguf"));
  ASSERT_TRUE(s->wait_for_log(": accepted (")) << s->log();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // its slot is released just after the log line
  // Three silent ones from this address fill its share: the next
  // connection from it takes the slot of the oldest (same host, same NAT),
  // which the server closes at once.
  int idle3 = test::peer::connect_tcp(s->endpoint());
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(fetch(c, s->endpoint(), request("s1", "layers/layer-00004.gguf")).bytes, w().bytes_of("layers/layer-00004.gguf"));
  {
    char b;
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_LE(::read(idle1, &b, 1), 0);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500));
    ::close(idle1);
  }
  EXPECT_TRUE(s->wait_for_log("its unauthenticated slot went to a newer connection")) << s->log();
  // The handshake deadline frees the others: each read sees the server's close.
  for (const int fd : {idle2, idle3}) {
    char b;
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_LE(::read(fd, &b, 1), 0);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(2500));
    ::close(fd);
  }
  EXPECT_TRUE(s->wait_for_log("timed out: the handshake deadline (1000 ms from accept) passed while in the TLS handshake"))
      << s->log();
  EXPECT_EQ(fetch(c, s->endpoint(), request("s1", "layers/layer-00004.gguf")).bytes, w().bytes_of("layers/layer-00004.gguf"));
  {
    // The one authenticated slot taken (a peer that says nothing after its
    // handshake): a real request is answered "server busy", not dropped.
    test::peer::RawTlsClient holder(s->endpoint(), w().w0);
    ASSERT_TRUE(holder.handshake_ok());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    expect_refused(c, *s, request("s1", "layers/layer-00004.gguf"), Refusal::kBusy,
                   "refused (server busy): 1 authenticated connections open (limit 1)");
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  // A peer that keeps making progress, one byte at a time, is still cut off
  // when the handshake timeout has passed since accept.
  test::peer::RawTlsClient drip(s->endpoint(), w().w1);
  ASSERT_TRUE(drip.handshake_ok());
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<uint8_t> open = {peer::wire::kStreamTypeSubprotocol};
  const auto f = peer::wire::frame(peer::wire::encode(peer::wire::Open{}));
  open.insert(open.end(), f.begin(), f.end());
  for (const uint8_t b : open) {
    if (!drip.write({b})) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(4)) break;
  }
  EXPECT_TRUE(drip.read_all().empty());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  EXPECT_TRUE(s->wait_for_log("time limit passed while reading the subprotocol open")) << s->log();
  EXPECT_EQ(s->stop(), 0) << s->log();
}

}  // namespace
}  // namespace peer_transfer_test
}  // namespace skippy
