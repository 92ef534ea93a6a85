// The topology file, transfer modes and the stage-allowed set that server
// authorization and the client share.
#include <gtest/gtest.h>

#include "skippy/error.h"
#include "skippy/package_catalog.h"
#include "skippy/package_layout.h"
#include "skippy/peer.h"
#include "skippy/peer_topology.h"

namespace skippy::peer {
namespace {

const std::string kNode(64, 'a');
const std::string kCommit = "0123456789abcdef0123456789abcdef01234567";

std::string topo_json(const std::string& stages, const std::string& ref = "hf://org/x@" + kCommit) {
  return R"({"topology_id": "t-1", "run_id": "r-1", "package_ref": ")" + ref + R"(", "manifest_sha256": ")" +
         std::string(64, 'B') + R"(", "stages": )" + stages + "}";
}

TEST(PeerTopology, ParsesTheDocumentedShape) {
  const auto t = parse_topology(topo_json(R"([{"stage_id": "s0", "stage_index": 0, "node_id": ")" + std::string(64, 'A') +
                                          R"(", "layer_start": 0, "layer_end": 3, "extra": 1},
                                              {"stage_id": "s1", "stage_index": 1, "node_id": ")" + kNode +
                                          R"(", "layer_start": 3, "layer_end": 5}])"),
                                "t.json");
  EXPECT_EQ(t.topology_id, "t-1");
  EXPECT_EQ(t.manifest_sha256, std::string(64, 'b'));  // normalized
  ASSERT_EQ(t.stages.size(), 2u);
  EXPECT_EQ(t.stages[0].node_id, std::string(64, 'a'));
  EXPECT_EQ(t.stages[1].layers, (LayerRange{3, 5}));
  EXPECT_EQ(t.find_stage("s1"), &t.stages[1]);
  EXPECT_EQ(t.find_stage("s2"), nullptr);
}

TEST(PeerTopology, RefusesBrokenTopologies) {
  const std::string s0 = R"({"stage_id": "s0", "stage_index": 0, "node_id": ")" + kNode + R"(", "layer_start": 0, "layer_end": 3})";
  auto bad = [](const std::string& text, const char* what) {
    try {
      (void)parse_topology(text, "t.json");
      ADD_FAILURE() << "accepted; expected " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).rfind("t.json: ", 0), 0u) << e.what();
    }
  };
  bad("{", "not valid UTF-8 JSON");
  bad("[]", "not a JSON object");
  bad(topo_json("[]"), "stages");
  bad(topo_json("[" + s0 + "]", "/local/pkg"), "package_ref");
  bad(topo_json("[" + s0 + "," + s0 + "]"), "appears twice");
  bad(topo_json(R"([{"stage_id": "s0", "stage_index": 0, "node_id": "abc", "layer_start": 0, "layer_end": 3}])"), "node_id");
  bad(topo_json(R"([{"stage_id": "s0", "stage_index": 0, "node_id": ")" + kNode + R"(", "layer_start": 3, "layer_end": 3}])"),
      "is empty");
  bad(topo_json(R"([{"stage_id": "s0", "stage_index": -1, "node_id": ")" + kNode + R"(", "layer_start": 0, "layer_end": 3}])"),
      "stage_index");
  bad(topo_json(R"([{"stage_id": "", "stage_index": 0, "node_id": ")" + kNode + R"(", "layer_start": 0, "layer_end": 3}])"),
      "stage_id: empty");
  bad(R"({"run_id": "r", "package_ref": "hf://a/b@c", "manifest_sha256": "x", "stages": []})", "topology_id: missing");
}

// A duplicate key (the DOM would keep the last one), stages
// whose ranges overlap and layers no stage covers are refused, naming the
// stages.
TEST(PeerTopology, RefusesDuplicateKeysOverlapsAndUncoveredLayers) {
  auto stage = [](const char* id, int index, int start, int end) {
    return std::string(R"({"stage_id": ")") + id + R"(", "stage_index": )" + std::to_string(index) +
           R"(, "node_id": ")" + kNode + R"(", "layer_start": )" + std::to_string(start) +
           R"(, "layer_end": )" + std::to_string(end) + "}";
  };
  auto refused = [](const std::string& text, const std::vector<std::string>& needles) {
    try {
      (void)parse_topology(text, "t.json");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
      for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << n << " in " << e.what();
    }
  };
  // The good shape first: two stages tiling 0..5.
  EXPECT_NO_THROW((void)parse_topology(topo_json("[" + stage("a", 0, 0, 3) + "," + stage("b", 1, 3, 5) + "]"), "t.json"));
  // Duplicate keys: in the top level (the last "run_id" would win) and in a stage.
  std::string dup = topo_json("[" + stage("a", 0, 0, 5) + "]");
  dup.insert(1, R"("run_id": "evil", )");
  refused(dup, {"duplicate key \"run_id\""});
  std::string dup_stage = stage("a", 0, 0, 5);
  dup_stage.insert(1, R"("layer_end": 1, )");
  refused(topo_json("[" + dup_stage + "]"), {"duplicate key \"layer_end\""});
  // Overlap: layers 2..3 in both.
  refused(topo_json("[" + stage("a", 0, 0, 3) + "," + stage("b", 1, 2, 5) + "]"),
          {"stage \"a\" (0..3)", "stage \"b\" (2..5)", "overlap"});
  // A gap: layers 3..4 in no stage (listed out of order, found all the same).
  refused(topo_json("[" + stage("b", 1, 4, 6) + "," + stage("a", 0, 0, 3) + "]"),
          {"layers 3..4 are in no stage", "stage \"a\" (0..3)", "stage \"b\" (4..6)"});
  // A topology listing only the stages a worker serves is not a gap.
  EXPECT_NO_THROW((void)parse_topology(topo_json("[" + stage("b", 1, 2, 6) + "]"), "t.json"));
}

TEST(PeerTopology, OnlyACommitIsPinned) {
  EXPECT_EQ(pinned_commit("hf://org/x@" + kCommit), kCommit);
  EXPECT_EQ(pinned_commit("hf://org/x:" + kCommit), kCommit);
  EXPECT_EQ(pinned_commit("hf://org/x@main"), std::nullopt);
  EXPECT_EQ(pinned_commit("hf://org/x"), std::nullopt);
  EXPECT_EQ(pinned_commit("hf://org/x@" + kCommit.substr(0, 12)), std::nullopt);
  EXPECT_EQ(pinned_commit("hf://org/x@" + std::string(40, 'A')), std::nullopt);  // commits are lowercase
  EXPECT_EQ(pinned_commit("/srv/package"), std::nullopt);
  EXPECT_EQ(pinned_commit("hf://../x@" + kCommit), std::nullopt);
}

TEST(PeerTopology, ModesAsTheReferenceSpellsThem) {
  for (const char* v : {"1", "true", "ON", "yes", "Open", "any", "public"}) EXPECT_EQ(parse_transfer_mode(v), TransferMode::kOpen) << v;
  for (const char* v : {"trusted", "TRUST", "owner", "owners", "same-owner", "allowlist"}) {
    EXPECT_EQ(parse_transfer_mode(v), TransferMode::kTrusted) << v;
  }
  for (const char* v : {"", "0", "off", "no", "false", "bogus", "trusted "}) EXPECT_EQ(parse_transfer_mode(v), TransferMode::kOff) << v;
}

PackageManifest manifest(uint32_t layers, bool projector) {
  PackageManifest m;
  m.layer_count = layers;
  auto entry = [](std::string path) {
    ArtifactEntry e;
    e.path = std::move(path);
    e.artifact_bytes = 10;
    e.sha256 = std::string(64, '0');
    return e;
  };
  m.shared.metadata = entry("shared/metadata.gguf");
  m.shared.embeddings = entry("shared/embeddings.gguf");
  m.shared.output = entry("shared/output.gguf");
  for (uint32_t i = 0; i < layers; ++i) {
    LayerEntry l;
    static_cast<ArtifactEntry&>(l) = entry(layer_artifact_path(i));
    l.layer_index = i;
    m.layers.push_back(l);
  }
  if (projector) {
    ProjectorEntry p;
    static_cast<ArtifactEntry&>(p) = entry("projectors/mmproj.gguf");
    p.kind = "mmproj";
    m.projectors.push_back(p);
  }
  return m;
}

// The catalog the peer computes a stage's set from: the manifest's artifacts
// (schema 1's reader, catalog_artifacts_v1), and, when `tied` is given,
// shared/output.gguf's tensors as the reader lists them once it has read that
// header (output.weight unless the output is tied to the embeddings).
PackageCatalog catalog(const PackageManifest& m, std::optional<bool> tied = std::nullopt) {
  PackageCatalog c = catalog_artifacts_v1(m);
  if (!tied) return c;
  for (size_t i = 0; i < c.artifacts.size(); ++i) {
    if (c.artifacts[i].role != PartRole::kOutput) continue;
    c.artifacts[i].tensors_listed = true;
    if (*tied) continue;
    CatalogTensor t;
    t.name = "output.weight";
    t.artifact = i;
    t.role = TensorRole::kOutput;
    c.tensor_index.emplace(t.name, c.tensors.size());
    c.tensors.push_back(t);
  }
  return c;
}

std::vector<std::string> paths(const StageArtifacts& s) {
  std::vector<std::string> out;
  for (const auto& a : s.artifacts) out.push_back(a.rel_path);
  return out;
}

TEST(PeerTopology, StageArtifactsFollowLayerSelection) {
  const auto m = manifest(6, true);
  const TopologyStage first{"s0", 0, kNode, {0, 2}};
  const TopologyStage middle{"s1", 1, kNode, {2, 4}};
  const TopologyStage last{"s2", 2, kNode, {4, 6}};
  const TopologyStage whole{"s", 0, kNode, {0, 6}};
  EXPECT_EQ(paths(stage_artifacts(first, catalog(m))),
            (std::vector<std::string>{"shared/metadata.gguf", "shared/embeddings.gguf", "layers/layer-00000.gguf",
                                      "layers/layer-00001.gguf", "projectors/mmproj.gguf"}));
  EXPECT_EQ(paths(stage_artifacts(middle, catalog(m))),
            (std::vector<std::string>{"shared/metadata.gguf", "layers/layer-00002.gguf", "layers/layer-00003.gguf"}));
  EXPECT_EQ(paths(stage_artifacts(last, catalog(m, false))),
            (std::vector<std::string>{"shared/metadata.gguf", "layers/layer-00004.gguf", "layers/layer-00005.gguf",
                                      "shared/output.gguf"}));
  // The reference's defect, fixed: a final stage whose output is tied to the
  // embeddings may fetch them.
  const auto tied = stage_artifacts(last, catalog(m, true));
  ASSERT_NE(tied.find("shared/embeddings.gguf"), nullptr);
  EXPECT_EQ(tied.find("shared/embeddings.gguf")->role, PartRole::kEmbeddings);
  EXPECT_EQ(tied.find("projectors/mmproj.gguf"), nullptr);
  EXPECT_TRUE(tied.output_tie_known);
  // Before the output's header is read, whether it is tied is not known: a
  // final stage's set holds the embeddings (the client's superset) and says so.
  const auto unknown = stage_artifacts(last, catalog(m));
  EXPECT_EQ(paths(unknown), paths(tied));
  EXPECT_FALSE(unknown.output_tie_known);
  // Single stage: everything, embeddings once.
  const auto all = stage_artifacts(whole, catalog(m));
  EXPECT_EQ(all.artifacts.size(), 1u + 1u + 6u + 1u + 1u);
  EXPECT_TRUE(all.owns_input && all.owns_output);
  // A stage naming layers past the package's is a mistake in the topology:
  // refused naming both counts (the consumer's rule for a range).
  const TopologyStage beyond{"x", 3, kNode, {5, 9}};
  try {
    (void)stage_artifacts(beyond, catalog(m));
    ADD_FAILURE() << "a stage past the package's layers was given a set";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_NE(std::string(e.what()).find("stage x: layer range 5..9 is outside the package's 6 layers"), std::string::npos)
        << e.what();
  }
  // Sizes and digests come from the manifest.
  EXPECT_EQ(stage_artifacts(first, catalog(m)).find("layers/layer-00001.gguf")->bytes, 10u);
  EXPECT_EQ(stage_artifacts(first, catalog(m)).find("layers/layer-00001.gguf")->layer_index, 1u);
}

}  // namespace
}  // namespace skippy::peer
