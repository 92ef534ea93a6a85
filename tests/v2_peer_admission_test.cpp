// serve-artifacts --admission STAGE_ID=FILE: a package schema 2 stage
// defined by a stage admission descriptor (as `select --json` prints it)
// instead of its layer range. A real serve-artifacts on 127.0.0.1 serves a
// package written by the test-side reference-layout writer; a worker fetches
// its stage with the same descriptor (fetch --peer --admission) offline; the
// server hands out exactly the descriptor's required artifacts, and refuses
// before listening a descriptor of another package or one naming what the
// package lacks.
#include <gtest/gtest.h>

#include <set>

#include "peer_test_util.h"
#include "peer_world.h"
#include "schema_v2_package.h"
#include "skippy/peer.h"
#include "skippy/peer_identity.h"
#include "skippy/peer_topology.h"

namespace v2peeradm_test {

namespace fs = std::filesystem;

constexpr const char* kRepo_adm = "org/v2-peer-admission";

// The descriptor `select --layers A..B --json` prints for the package.
std::string select_descriptor(const fs::path& pkg, const std::string& layers) {
  const auto r = skippy::test::run_cli({"select", pkg.string(), "--layers", layers, "--json"});
  if (r.exit_code != 0) throw std::runtime_error("select failed: " + r.err);
  return nlohmann::json::parse(r.out)["stage_admission"].dump();
}

// The artifact paths a descriptor requires, from the test writer's own map
// (tensor -> artifact id -> path), not from the library: the carrier and
// each artifact holding a named tensor.
std::set<std::string> required_paths(const skippy::test::SchemaV2Package& written, const nlohmann::json& descriptor) {
  std::set<std::string> out = {"shared/metadata.gguf"};
  for (const auto& id : descriptor["resident_tensor_ids"]) {
    out.insert(written.artifact_path.at(written.tensors.at(id.get<std::string>()).artifact_id));
  }
  return out;
}

}  // namespace v2peeradm_test

namespace skippy {
namespace {

namespace fs = std::filesystem;
using v2peeradm_test::kRepo_adm;
using v2peeradm_test::required_paths;
using v2peeradm_test::select_descriptor;
using nlohmann::json;
using test::peer::ServerProcess;

class V2PeerAdmission : public test::peer::WorldSuite<V2PeerAdmission> {
 public:
  static test::peer::WorldSpec spec() {
    return {.repo = kRepo_adm, .package = test::peer::WorldSpec::Package::kSchemaV2, .hub = false};
  }

 protected:
  std::vector<std::string> server_env(const fs::path& hf, const std::string& tag) const {
    return {"HF_HUB_CACHE=" + hf.string(), "SKIPPY_CACHE_DIR=" + (tmp_ / ("server-vc-" + tag)).string(),
            "MESH_LLM_ARTIFACT_TRANSFER=trusted", "HF_HUB_OFFLINE=1", "HF_ENDPOINT=http://127.0.0.1:9"};
  }
  std::vector<std::string> server_args(const std::vector<std::string>& extra) const {
    std::vector<std::string> args = {"--listen", "127.0.0.1:0", "--topology", w().topology.string(), "--identity",
                                     w().coord.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
  std::unique_ptr<ServerProcess> serve(const std::vector<std::string>& extra, const std::string& tag) {
    return std::make_unique<ServerProcess>(server_args(extra), server_env(w().hf, tag), tmp_ / ("server-" + tag + ".log"));
  }
  // serve-artifacts that must not start: the real CLI, its exit and stderr.
  test::CliResult serve_refused(const std::vector<std::string>& extra, const fs::path& hf, const std::string& tag) const {
    auto args = server_args(extra);
    args.insert(args.begin(), "serve-artifacts");
    return test::run_cli(args, server_env(hf, tag));
  }
  test::CliResult fetch(const std::string& endpoint, const std::string& stage, const fs::path& node,
                        const std::string& cache, std::vector<std::string> extra = {}) const {
    std::vector<std::string> args = {"fetch",   w().ref,     "--peer",     endpoint, "--topology",
                                     w().topology.string(), "--stage", stage, "--identity", node.string(),
                                     "--json",  "--peer-connect-timeout", "10", "--peer-idle-timeout", "10"};
    args.insert(args.end(), extra.begin(), extra.end());
    return test::run_cli(args, {"HF_HUB_CACHE=" + (tmp_ / cache / "hf").string(), "HF_HOME=" + (tmp_ / cache / "home").string(),
                                "SKIPPY_CACHE_DIR=" + (tmp_ / cache / "skippy").string(), "HF_HUB_OFFLINE=1",
                                "HF_ENDPOINT=http://127.0.0.1:9", "HF_TOKEN=", "SKIPPY_HF_BACKOFF_MS=20",
                                "MESH_LLM_ARTIFACT_TRANSFER="});
  }
  fs::path worker_snapshot(const std::string& cache) const {
    return test::peer::snapshot_dir(tmp_ / cache / "hf", kRepo_adm, w().commit);
  }
  fs::path write_descriptor(const std::string& name, const std::string& text) const {
    const fs::path p = tmp_ / name;
    test::write_file(p, std::vector<uint8_t>(text.begin(), text.end()));
    return p;
  }

  test::TempDir tmp_;
};

TEST_F(V2PeerAdmission, AStageDefinedByItsDescriptorGetsExactlyItsArtifacts) {
  // Stage s1 is layers 4..8 in the topology; its descriptor (select's, for
  // layers 5..7) defines it instead: no layer 4, no layer 7, no output.
  const std::string text = select_descriptor(w().pkg, "5..7");
  const json descriptor = json::parse(text);
  const fs::path file = write_descriptor("s1.json", text);
  const std::set<std::string> want = required_paths(w().written, descriptor);
  ASSERT_EQ(want, (std::set<std::string>{"shared/metadata.gguf", "layers/layer-00005.gguf", "layers/layer-00006.gguf"}));

  auto s = serve({"--admission", "s1=" + file.string()}, "exact");
  const auto r = fetch(s->endpoint(), "s1", w().w1, "s1", {"--admission", file.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err << "\nserver:\n" << s->log();
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["verified"], true);
  EXPECT_EQ(j["source"], "peer");
  EXPECT_FALSE(j.contains("layer_start")) << "the stage is the descriptor's, not a range";
  std::set<std::string> parts;
  for (const auto& p : j["parts"]) parts.insert(p.get<std::string>());
  EXPECT_EQ(parts, want);
  for (const auto& rel : want) {
    EXPECT_EQ(j["sources"][rel], "peer") << rel;
    EXPECT_EQ(test::peer::slurp(worker_snapshot("s1") / rel), test::peer::slurp(w().pkg / rel)) << rel;
  }
  for (const char* outside : {"layers/layer-00004.gguf", "layers/layer-00007.gguf", "shared/common.gguf"}) {
    EXPECT_FALSE(fs::exists(worker_snapshot("s1") / outside)) << outside;
  }

  // The server enforces it: layer 4 is in s1's layer range but not in its
  // descriptor, so it is refused to s1's node.
  const auto topology = peer::load_topology(w().topology);
  peer::ClientOptions o;
  o.connect_timeout = std::chrono::seconds(10);
  o.idle_timeout = std::chrono::seconds(10);
  const peer::PeerClient c(peer::NodeIdentity::load(w().w1), peer::PeerTrust{peer::TransferMode::kTrusted, {}}, o);
  auto get = [&](const std::string& rel) {
    const peer::PeerArtifact a{rel, PartRole::kLayer, std::nullopt, w().bytes_of(rel).size(), w().sha_of(rel), ""};
    std::vector<uint8_t> got;
    peer::TransferSink sink;
    sink.on_bytes = [&](std::span<const uint8_t> b) { got.insert(got.end(), b.begin(), b.end()); };
    c.fetch(s->endpoint(), peer::transfer_request(topology, *topology.find_stage("s1"), a), sink);
    return got;
  };
  EXPECT_EQ(get("layers/layer-00006.gguf"), w().bytes_of("layers/layer-00006.gguf"));
  try {
    (void)get("layers/layer-00004.gguf");
    ADD_FAILURE() << "layer 4 was served to a stage whose descriptor does not name it";
  } catch (const peer::PeerError& e) {
    EXPECT_EQ(e.refusal(), peer::Refusal::kUnavailable) << e.what();
  }
  EXPECT_TRUE(s->wait_for_log("(layers/layer-00004.gguf) is not part of stage s1 (its admission descriptor's")) << s->log();

  // A worker asking by its range while the server binds the descriptor is
  // refused what the descriptor does not name (offline: the fetch fails).
  const auto by_range = fetch(s->endpoint(), "s1", w().w1, "s1-range");
  EXPECT_EQ(by_range.exit_code, 1) << by_range.out;
  EXPECT_NE(by_range.err.find("refused: artifact unavailable"), std::string::npos) << by_range.err;

  // Stage s0 has no descriptor: its layer range still defines it.
  const auto s0 = fetch(s->endpoint(), "s0", w().w0, "s0");
  ASSERT_EQ(s0.exit_code, 0) << s0.err << "\nserver:\n" << s->log();
  EXPECT_EQ(json::parse(s0.out)["layer_end"], 4);
  EXPECT_TRUE(fs::exists(worker_snapshot("s0") / "layers/layer-00000.gguf"));
}

TEST_F(V2PeerAdmission, ADescriptorOfAnotherPackageIsRefusedBeforeServing) {
  // The same model written again with another model id: another package_id.
  test::SchemaV2Options other_options;
  other_options.model_id = "org/Other-GGUF:Q8_0";
  const fs::path other = tmp_ / "other-pkg";
  (void)test::write_schema_v2_package(test::data_path("llama-tiny-q8_0.gguf"), other, other_options);
  const fs::path foreign = write_descriptor("foreign.json", select_descriptor(other, "4..8"));
  const std::string foreign_id = json::parse(test::read_text(foreign))["package_id"];
  const std::string ours = w().written.root["package_id"];
  ASSERT_NE(foreign_id, ours);

  const auto r = serve_refused({"--admission", "s1=" + foreign.string()}, w().hf, "foreign");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.out.find("listening"), std::string::npos) << "it started: " << r.out;
  EXPECT_NE(r.err.find("stage s1's admission descriptor"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(foreign_id), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(ours), std::string::npos) << r.err;

  // A descriptor of this package naming a tensor it does not have.
  json bad = json::parse(select_descriptor(w().pkg, "4..8"));
  bad["resident_tensor_ids"].push_back("zzz.not_a_tensor.weight");
  const auto unknown = serve_refused({"--admission", "s1=" + write_descriptor("unknown.json", bad.dump()).string()},
                                     w().hf, "unknown");
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_NE(unknown.err.find("unknown tensor \"zzz.not_a_tensor.weight\""), std::string::npos) << unknown.err;

  // Without the package in the cache, a descriptor cannot be checked: no start.
  const fs::path good = write_descriptor("good.json", select_descriptor(w().pkg, "4..8"));
  const auto empty = serve_refused({"--admission", "s1=" + good.string()}, tmp_ / "empty-hf", "empty");
  EXPECT_NE(empty.exit_code, 0);
  EXPECT_NE(empty.err.find("fetch it first"), std::string::npos) << empty.err;

  // Binding errors: a stage the topology lacks, a stage bound twice, no '='.
  const auto nostage = serve_refused({"--admission", "s9=" + good.string()}, w().hf, "nostage");
  EXPECT_EQ(nostage.exit_code, 2) << nostage.err;
  EXPECT_NE(nostage.err.find("no stage \"s9\""), std::string::npos) << nostage.err;
  const auto twice =
      serve_refused({"--admission", "s1=" + good.string(), "--admission", "s1=" + good.string()}, w().hf, "twice");
  EXPECT_EQ(twice.exit_code, 2) << twice.err;
  EXPECT_NE(twice.err.find("two descriptors"), std::string::npos) << twice.err;
  const auto shape = serve_refused({"--admission", good.string()}, w().hf, "shape");
  EXPECT_EQ(shape.exit_code, 2) << shape.err;
  EXPECT_NE(shape.err.find("expected STAGE_ID=FILE"), std::string::npos) << shape.err;

  // The same descriptor, well bound, starts.
  auto s = serve({"--admission", "s1=" + good.string()}, "good");
  EXPECT_FALSE(s->endpoint().empty());
}

}  // namespace
}  // namespace skippy
