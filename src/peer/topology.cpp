#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "format/json_output.h"
#include "format/manifest_json.h"
#include "skippy/stage.h"
#include "util/control_chars.h"
#include "skippy/error.h"
#include "util/file.h"
#include "skippy/source.h"
#include "skippy/peer_identity.h"
#include "skippy/peer_topology.h"
#include "util/sha256.h"
#include "util/text.h"

namespace skippy::peer {
namespace {

using json = nlohmann::json;

constexpr uint64_t kMaxTopologyBytes = 4 << 20;
constexpr size_t kMaxIdBytes = 256;  // as the wire's cap (src/peer/protocol.h)

class Fields {
 public:
  explicit Fields(std::string origin) : origin_(std::move(origin)) {}
  [[noreturn]] void fail(const std::string& field, const std::string& problem) const {
    throw_invalid(origin_ + ": " + field + ": " + problem);
  }
  const json& member(const json& obj, const char* key, const std::string& field) const {
    const auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) fail(field, "missing");
    return *it;
  }
  std::string text(const json& obj, const char* key, const std::string& parent) const {
    const std::string field = parent.empty() ? key : parent + "." + key;
    const json& v = member(obj, key, field);
    if (!v.is_string()) fail(field, "not a string");
    const auto s = v.get<std::string>();
    if (s.empty()) fail(field, "empty");
    if (s.size() > kMaxIdBytes && std::string_view(key) != "package_ref") fail(field, "longer than 256 bytes");
    if (const auto why = control_character_problem(s)) fail(field, *why);
    return s;
  }
  uint32_t u32(const json& obj, const char* key, const std::string& parent) const {
    const std::string field = parent + "." + key;
    const json& v = member(obj, key, field);
    if (!v.is_number_unsigned() || v.get<uint64_t>() > UINT32_MAX) fail(field, "not an integer in 0..4294967295");
    return static_cast<uint32_t>(v.get<uint64_t>());
  }

 private:
  std::string origin_;
};

}  // namespace

const TopologyStage* Topology::find_stage(std::string_view stage_id) const noexcept {
  for (const auto& s : stages) {
    if (s.stage_id == stage_id) return &s;
  }
  return nullptr;
}
TopologyStage* Topology::find_stage(std::string_view stage_id) noexcept {
  return const_cast<TopologyStage*>(std::as_const(*this).find_stage(stage_id));
}

Topology parse_topology(std::string_view json_text, std::string_view origin) {
  const Fields f{std::string(origin)};
  // The strict JSON rule of the manifests: a duplicate key (the DOM would
  // keep the last one silently) is refused.
  const json doc = manifest_detail::parse_strict_json(json_text, manifest_detail::FieldReader(std::string(origin)));
  if (!doc.is_object()) f.fail("(top level)", "not a JSON object");
  Topology t;
  t.topology_id = f.text(doc, "topology_id", "");
  t.run_id = f.text(doc, "run_id", "");
  t.package_ref = f.text(doc, "package_ref", "");
  if (t.package_ref.size() > 1024) f.fail("package_ref", "longer than 1024 bytes");
  if (!is_hf_ref(t.package_ref)) f.fail("package_ref", "not an hf://ns/repo@<commit> reference");
  try {
    (void)parse_hf_ref(t.package_ref);
  } catch (const Error& e) {
    f.fail("package_ref", e.what());
  }
  t.manifest_sha256 = skippy::detail::ascii_lower(f.text(doc, "manifest_sha256", ""));
  if (!is_sha256_hex(t.manifest_sha256)) f.fail("manifest_sha256", "not 64 hex digits");
  const json& stages = f.member(doc, "stages", "stages");
  if (!stages.is_array() || stages.empty()) f.fail("stages", "not a non-empty array");
  std::set<std::string> ids;
  std::set<uint32_t> indexes;
  for (size_t i = 0; i < stages.size(); ++i) {
    const std::string p = "stages[" + std::to_string(i) + "]";
    const json& s = stages[i];
    if (!s.is_object()) f.fail(p, "not an object");
    TopologyStage st;
    st.stage_id = f.text(s, "stage_id", p);
    st.stage_index = f.u32(s, "stage_index", p);
    st.node_id = skippy::detail::ascii_lower(f.text(s, "node_id", p));
    if (!is_peer_id(st.node_id)) f.fail(p + ".node_id", "not a node id (64 hex digits)");
    st.layers.start = f.u32(s, "layer_start", p);
    st.layers.end = f.u32(s, "layer_end", p);
    if (st.layers.empty()) {
      f.fail(p, "layer range " + format_layer_range(st.layers) + " is empty (ranges are half-open START..END)");
    }
    if (!ids.insert(st.stage_id).second) f.fail(p + ".stage_id", "\"" + st.stage_id + "\" appears twice");
    if (!indexes.insert(st.stage_index).second) f.fail(p + ".stage_index", std::to_string(st.stage_index) + " appears twice");
    t.stages.push_back(std::move(st));
  }
  // The ranges are one contiguous run: no layer in two stages, none in no
  // stage between the first stage's start and the last stage's end. (A
  // topology may list only some stages, e.g. the ones a worker serves, so
  // layers before the first listed stage are not refused.)
  std::vector<const TopologyStage*> by_start;
  for (const auto& st : t.stages) by_start.push_back(&st);
  std::sort(by_start.begin(), by_start.end(),
            [](const TopologyStage* a, const TopologyStage* b) { return a->layers.start < b->layers.start; });
  auto named = [](const TopologyStage& st) { return "stage \"" + st.stage_id + "\" (" + format_layer_range(st.layers) + ")"; };
  for (size_t i = 1; i < by_start.size(); ++i) {
    const auto& prev = *by_start[i - 1];
    const auto& cur = *by_start[i];
    if (cur.layers.start < prev.layers.end) {
      f.fail("stages", named(prev) + " and " + named(cur) + " overlap: layers " +
                           format_layer_range({cur.layers.start, std::min(prev.layers.end, cur.layers.end)}) +
                           " would be in both");
    }
    if (cur.layers.start > prev.layers.end) {
      f.fail("stages", "layers " + format_layer_range({prev.layers.end, cur.layers.start}) + " are in no stage (between " +
                           named(prev) + " and " + named(cur) + ")");
    }
  }
  return t;
}

Topology load_topology(const std::filesystem::path& file) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) throw_not_found(file.string() + ": no such topology file");
  return parse_topology(read_small_file(file, kMaxTopologyBytes), file.string());
}

std::string format_topology(const Topology& topology) {
  auto text = [](const std::string& s) { return json_output(json(s)); };
  std::string out = "{\n";
  out += "  \"topology_id\": " + text(topology.topology_id) + ",\n";
  out += "  \"run_id\": " + text(topology.run_id) + ",\n";
  out += "  \"package_ref\": " + text(topology.package_ref) + ",\n";
  out += "  \"manifest_sha256\": " + text(skippy::detail::ascii_lower(topology.manifest_sha256)) + ",\n";
  out += "  \"stages\": [";
  for (size_t i = 0; i < topology.stages.size(); ++i) {
    const auto& s = topology.stages[i];
    out += std::string(i == 0 ? "" : ",") + "\n    {\"stage_id\": " + text(s.stage_id) +
           ", \"stage_index\": " + std::to_string(s.stage_index) +
           ", \"node_id\": " + text(skippy::detail::ascii_lower(s.node_id)) +
           ", \"layer_start\": " + std::to_string(s.layers.start) + ", \"layer_end\": " + std::to_string(s.layers.end) +
           "}";
  }
  out += "\n  ]\n}\n";
  (void)parse_topology(out, "topology");  // refuses what a reader would
  return out;
}

std::optional<std::string> pinned_commit(std::string_view package_ref) {
  if (!is_hf_ref(package_ref)) return std::nullopt;
  try {
    const HfRef r = parse_hf_ref(package_ref);
    if (r.revision_given && is_commit_hash(r.revision)) return r.revision;
  } catch (const Error&) {
  }
  return std::nullopt;
}

const PeerArtifact* StageArtifacts::find(std::string_view rel_path) const noexcept {
  for (const auto& a : artifacts) {
    if (a.rel_path == rel_path) return &a;
  }
  return nullptr;
}

void check_stage_layers(const TopologyStage& stage, uint32_t layer_count) {
  if (stage.admission) return;  // its descriptor defines it, not its range
  check_stage_range("stage " + stage.stage_id, stage.layers, layer_count);
}

namespace {

// A schema 2 stage defined by its admission descriptor: exactly the
// descriptor's required artifacts (stage_admission_artifacts), in
// stage_artifacts' entry order (the carrier, the payload parts by part
// index, the sidecars). owns_output: it names output_norm; owns_input: it
// names token_embd for the input.
StageArtifacts admitted_stage_artifacts(const TopologyStage& stage, const PackageCatalog& catalog) {
  const StageAdmission& admission = *stage.admission;
  check_stage_admission(admission, catalog, "stage " + stage.stage_id + "'s admission descriptor");
  StageArtifacts s;
  s.range = stage.layers;
  const auto& ids = admission.resident_tensor_ids;
  auto names = [&](std::string_view n) { return std::binary_search(ids.begin(), ids.end(), n); };
  s.owns_output = names("output_norm.weight");
  s.output_tied = s.owns_output && catalog.find_tensor("output.weight") == nullptr;
  // (a tied final stage names token_embd for its output: then the range says)
  s.owns_input = names("token_embd.weight") && (!s.output_tied || stage.layers.start == 0);
  std::vector<size_t> required = stage_admission_artifacts(admission, catalog);
  auto rank = [&](size_t i) {
    const CatalogArtifact& a = catalog.artifacts[i];
    const int kind = a.kind == CatalogArtifactKind::kCarrier ? 0 : a.kind == CatalogArtifactKind::kPayload ? 1 : 2;
    return std::tuple(kind, a.part_index.value_or(0), a.id);
  };
  std::sort(required.begin(), required.end(), [&](size_t x, size_t y) { return rank(x) < rank(y); });
  for (const size_t i : required) {
    const CatalogArtifact& a = catalog.artifacts[i];
    PartRole role = PartRole::kLayer;
    std::string reason = "holds tensors the stage's admission descriptor names";
    if (a.kind == CatalogArtifactKind::kCarrier) {
      role = PartRole::kMetadata;
      reason = "every stage reads the metadata carrier";
    } else if (a.kind == CatalogArtifactKind::kSidecar) {
      role = PartRole::kProjector;
      reason = "a sidecar the stage's admission descriptor names";
    }
    s.artifacts.push_back({a.path, role, a.layer, a.bytes, a.sha256, std::move(reason)});
  }
  return s;
}

}  // namespace

StageArtifacts stage_artifacts(const TopologyStage& stage, const PackageCatalog& catalog) {
  if (stage.admission) return admitted_stage_artifacts(stage, catalog);
  check_stage_layers(stage, catalog.layer_count);
  StageArtifacts s;
  s.range = stage.layers;
  s.owns_input = stage.layers.start == 0;
  s.owns_output = stage.layers.end == catalog.layer_count;
  auto add = [&](const CatalogArtifact& a, std::optional<PartRole> role, std::string reason) {
    if (s.find(a.path)) return;
    // (a schema 2 payload part without a layer, shared/common.gguf, is listed as a layer part)
    s.artifacts.push_back({a.path, role.value_or(PartRole::kLayer), a.layer, a.bytes, a.sha256, std::move(reason)});
  };
  add(catalog.artifacts.at(catalog.carrier), PartRole::kMetadata, "every stage reads the metadata carrier");
  // The consumer's selection (select_stage: the spec's rule, the tied
  // output's embeddings included). A catalog of whole parts that has not
  // read the output's header cannot say whether the output is tied: a final
  // stage's set is then chosen as if it were (the embeddings in it).
  const CatalogArtifact* output = nullptr;
  for (const auto& a : catalog.artifacts) {
    if (catalog.selects_whole_parts && a.role == PartRole::kOutput) output = &a;
  }
  s.output_tie_known = !(s.owns_output && output && !output->tensors_listed);
  StageSelection selected;
  if (s.output_tie_known) {
    selected = select_stage(catalog, stage.layers, /*artifacts_only=*/true);
  } else {
    PackageCatalog assumed = catalog;  // artifacts only: no tensor, so no output.weight
    assumed.artifacts[static_cast<size_t>(output - catalog.artifacts.data())].tensors_listed = true;
    selected = select_stage(assumed, stage.layers, /*artifacts_only=*/true);
  }
  s.output_tied = s.owns_output && catalog.find_tensor("output.weight") == nullptr;
  for (const auto& p : selected.parts) {
    const CatalogArtifact& a = catalog.artifacts.at(catalog.artifact_index.at(p.artifact_id));
    add(a, p.role, p.reason);
  }
  if (s.owns_input) {
    for (const auto& a : catalog.artifacts) {
      if (a.kind == CatalogArtifactKind::kSidecar) add(a, PartRole::kProjector, "stage 0 may use the package's sidecars");
      if (a.kind == CatalogArtifactKind::kPublisherMetadata) {
        add(a, PartRole::kMetadata, "stage 0 carries the package's publisher metadata (" + a.publisher_role + ")");
      }
    }
  }
  return s;
}

}  // namespace skippy::peer
