// The stage admission message as nodes exchange it (skippy/stage_admission.h):
// its JSON form, the reference's validation rules in their order, and the
// message this tool derives for a stage.
#include "skippy/stage_admission.h"

#include <algorithm>
#include <set>
#include <tuple>

#include "format/json_output.h"
#include "format/manifest_json.h"
#include "format/stage_admission_json.h"
#include "skippy/error.h"

namespace skippy {
namespace {

using manifest_detail::FieldReader;
using manifest_detail::index_path;
using manifest_detail::json;
using manifest_detail::quote;

bool lower_hex_digest(std::string_view s, std::string_view prefix) {
  if (!s.starts_with(prefix) || s.size() != prefix.size() + 64) return false;
  return std::all_of(s.begin() + static_cast<std::ptrdiff_t>(prefix.size()), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

void refuse_unknown(const json& obj, const std::string& path, std::initializer_list<std::string_view> known,
                    const FieldReader& r) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (!manifest_detail::is_one_of(it.key(), known)) {
      r.fail(manifest_detail::field_path(path, it.key()), "not a stage admission message field");
    }
  }
}

std::vector<std::string> strings(const FieldReader& r, const json& obj, std::string_view key, const std::string& parent) {
  const std::string path = manifest_detail::field_path(parent, key);
  const json& a = r.require(obj, key, parent);
  r.expect_array(a, path);
  std::vector<std::string> out;
  for (size_t i = 0; i < a.size(); ++i) out.push_back(r.string(a[i], index_path(path, i)));
  return out;
}

bool unique_nonempty(const std::vector<std::string>& v) {
  std::set<std::string> seen;
  for (const auto& s : v) {
    if (s.empty() || !seen.insert(s).second) return false;
  }
  return true;
}

}  // namespace

namespace {

// Finds a top-level "version" key without building the document: the input
// may be a descriptor of millions of ids, parsed once afterwards by the
// reader it turns out to be. Parsing stops at the answer.
struct VersionKeySniffer : nlohmann::json_sax<json> {
  int depth = 0;
  bool top_object = false;
  bool found = false;
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    if (depth++ == 0) top_object = true;
    return true;
  }
  bool end_object() override { return --depth > 0; }
  bool start_array(std::size_t) override { return ++depth > 1; }
  bool end_array() override {
    --depth;
    return true;
  }
  bool key(string_t& k) override {
    if (depth == 1 && k == "version") found = true;
    return !found;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override { return false; }
};

}  // namespace

bool is_stage_admission_message(std::string_view json_text) {
  VersionKeySniffer sniff;
  (void)json::sax_parse(json_text.begin(), json_text.end(), &sniff);
  return sniff.top_object && sniff.found;
}

StageAdmissionMessage parse_stage_admission_message(std::string_view json_text, std::string_view origin) {
  const FieldReader r{std::string(origin)};
  const json j = manifest_detail::parse_strict_json(json_text, r);
  r.expect_object(j, "");
  refuse_unknown(j, "",
                 {"version", "package_id", "plan_id", "execution_contract", "layer_start", "layer_end",
                  "resident_tensor_ids", "sidecars", "profiles"},
                 r);
  StageAdmissionMessage m;
  // Every member read first (types), then the reference's rules in its order.
  m.version = r.u32(r.require(j, "version", ""), "version");
  m.descriptor.package_id = r.string(r.require(j, "package_id", ""), "package_id");
  const std::string plan_id = r.string(r.require(j, "plan_id", ""), "plan_id");
  m.plan_id = plan_id;
  if (const json* c = FieldReader::find(j, "execution_contract")) m.execution_contract = r.string(*c, "execution_contract");
  else m.execution_contract = std::string();
  m.layer_start = r.u32(r.require(j, "layer_start", ""), "layer_start");
  m.layer_end = r.u32(r.require(j, "layer_end", ""), "layer_end");
  m.descriptor.resident_tensor_ids = strings(r, j, "resident_tensor_ids", "");
  std::vector<int> sidecar_kinds;  // as the enum: mmproj 1
  if (const json* sc = FieldReader::find(j, "sidecars")) {
    r.expect_array(*sc, "sidecars");
    for (size_t i = 0; i < sc->size(); ++i) {
      const std::string path = index_path("sidecars", i);
      const json& e = (*sc)[i];
      r.expect_object(e, path);
      refuse_unknown(e, path, {"kind", "artifact_id", "name"}, r);
      const json& k = r.require(e, "kind", path);
      int kind = 0;
      if (k.is_string()) kind = k.get<std::string>() == kSidecarKindMmproj ? 1 : 0;
      else if (k.is_number_unsigned()) kind = k.get<uint64_t>() == 1 ? 1 : 0;
      sidecar_kinds.push_back(kind);
      V2Sidecar s;
      s.kind = kind == 1 ? std::string(kSidecarKindMmproj) : std::string();
      s.artifact_id = FieldReader::find(e, "artifact_id") ? r.string(e["artifact_id"], path + ".artifact_id") : std::string();
      s.name = r.opt_text(e, "name", path);
      m.descriptor.sidecars.push_back(std::move(s));
    }
  }
  std::vector<StageAdmissionProfile> profiles;
  {
    const json& ps = r.require(j, "profiles", "");
    r.expect_array(ps, "profiles");
    for (size_t i = 0; i < ps.size(); ++i) {
      const std::string path = index_path("profiles", i);
      const json& e = ps[i];
      r.expect_object(e, path);
      refuse_unknown(e, path,
                     {"profile_id", "graph_identity", "profile_identity", "slice_identity", "source_snapshot_identity",
                      "graph_configuration_id", "backend_id", "activation_imports", "activation_exports",
                      "activation_import_bindings", "activation_export_bindings"},
                     r);
      StageAdmissionProfile p;
      auto str = [&](const char* k) { return r.string(r.require(e, k, path), path + "." + k); };
      p.profile_id = str("profile_id");
      p.graph_identity = str("graph_identity");
      p.profile_identity = str("profile_identity");
      p.slice_identity = str("slice_identity");
      p.source_snapshot_identity = str("source_snapshot_identity");
      p.graph_configuration_id = str("graph_configuration_id");
      p.backend_id = str("backend_id");
      p.activation_imports = strings(r, e, "activation_imports", path);
      p.activation_exports = strings(r, e, "activation_exports", path);
      p.activation_import_bindings = strings(r, e, "activation_import_bindings", path);
      p.activation_export_bindings = strings(r, e, "activation_export_bindings", path);
      profiles.push_back(std::move(p));
    }
  }
  // The reference's order (validate_stage_admission_descriptor).
  if (m.version != kStageAdmissionMessageVersion) {
    r.fail("version", std::to_string(m.version) + ": unsupported descriptor version (this reader speaks 1)");
  }
  if (!lower_hex_digest(m.descriptor.package_id, "sha256:")) {
    r.fail("package_id", quote(m.descriptor.package_id) + ": package_id must be a canonical sha256 digest");
  }
  if (!lower_hex_digest(plan_id, "skippy-plan:v1:")) {
    r.fail("plan_id", quote(plan_id) + ": plan_id must be a canonical native semantic digest (\"skippy-plan:v1:\" and 64 "
                                       "lowercase hex digits)");
  }
  if (m.layer_start >= m.layer_end) {
    r.fail("layer_start", std::to_string(m.layer_start) + ".." + std::to_string(m.layer_end) + ": layer range must be non-empty");
  }
  const auto& ids = m.descriptor.resident_tensor_ids;
  if (ids.empty()) r.fail("resident_tensor_ids", "resident tensor ids must be non-empty, strictly sorted, and unique");
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i].empty() || (i > 0 && !(ids[i - 1] < ids[i]))) {
      r.fail(index_path("resident_tensor_ids", i), "resident tensor ids must be non-empty, strictly sorted, and unique");
    }
  }
  if (profiles.empty()) r.fail("profiles", "profiles must be non-empty, strictly sorted by profile_id, and unique");
  for (size_t i = 0; i < profiles.size(); ++i) {
    if (profiles[i].profile_id.empty() || (i > 0 && !(profiles[i - 1].profile_id < profiles[i].profile_id))) {
      r.fail(index_path("profiles", i), "profiles must be non-empty, strictly sorted by profile_id, and unique");
    }
  }
  for (size_t i = 0; i < profiles.size(); ++i) {
    const auto& p = profiles[i];
    for (const std::string* id : {&p.graph_identity, &p.profile_identity, &p.slice_identity, &p.source_snapshot_identity,
                                  &p.graph_configuration_id, &p.backend_id}) {
      if (id->empty()) r.fail(index_path("profiles", i), "profile identities are required");
    }
    if (!unique_nonempty(p.activation_imports) || !unique_nonempty(p.activation_exports) ||
        !unique_nonempty(p.activation_import_bindings) || !unique_nonempty(p.activation_export_bindings) ||
        p.activation_imports.size() != p.activation_import_bindings.size() ||
        p.activation_exports.size() != p.activation_export_bindings.size()) {
      r.fail(index_path("profiles", i),
             "activation frontier identities and bindings must be paired, non-empty, and unique within each edge");
    }
  }
  for (size_t i = 0; i < m.descriptor.sidecars.size(); ++i) {
    const auto& s = m.descriptor.sidecars[i];
    if (s.artifact_id.empty() || sidecar_kinds[i] != 1) {
      r.fail(index_path("sidecars", i), "sidecar kind and artifact_id are required");
    }
    if (i > 0) {
      const auto& p = m.descriptor.sidecars[i - 1];
      if (!(std::tie(p.name, p.artifact_id) < std::tie(s.name, s.artifact_id))) {
        r.fail(index_path("sidecars", i), "sidecars must be strictly sorted and unique");
      }
    }
  }
  m.profiles = std::move(profiles);
  return m;
}

std::string stage_admission_message_json(const StageAdmissionMessage& m) {
  auto opt = [](const std::optional<std::string>& v) { return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(); };
  nlohmann::ordered_json doc;
  doc["version"] = m.version;
  doc["package_id"] = m.descriptor.package_id;
  doc["plan_id"] = opt(m.plan_id);
  doc["execution_contract"] = opt(m.execution_contract);
  doc["layer_start"] = m.layer_start;
  doc["layer_end"] = m.layer_end;
  doc["resident_tensor_ids"] = m.descriptor.resident_tensor_ids;
  doc["sidecars"] = detail::admission_sidecars_json(m.descriptor);
  if (m.profiles) {
    nlohmann::ordered_json ps = nlohmann::ordered_json::array();
    for (const auto& p : *m.profiles) {
      ps.push_back({{"profile_id", p.profile_id},
                    {"graph_identity", p.graph_identity},
                    {"profile_identity", p.profile_identity},
                    {"slice_identity", p.slice_identity},
                    {"source_snapshot_identity", p.source_snapshot_identity},
                    {"graph_configuration_id", p.graph_configuration_id},
                    {"backend_id", p.backend_id},
                    {"activation_imports", p.activation_imports},
                    {"activation_exports", p.activation_exports},
                    {"activation_import_bindings", p.activation_import_bindings},
                    {"activation_export_bindings", p.activation_export_bindings}});
    }
    doc["profiles"] = std::move(ps);
  } else {
    doc["profiles"] = nullptr;
  }
  return json_output(doc);
}

StageAdmissionMessage make_stage_admission_message(const PackageCatalog& cat, const StageAdmission& admission,
                                                   std::optional<LayerRange> range) {
  StageAdmissionMessage m;
  m.descriptor = admission;
  if (range) {
    m.layer_start = range->start;
    m.layer_end = range->end;
  } else {
    // Chosen by tensors: the layers its blk.N tensors span.
    std::optional<uint32_t> lo, hi;
    for (const auto& id : admission.resident_tensor_ids) {
      const CatalogTensor* t = cat.find_tensor(id);
      if (t == nullptr || !t->layer) continue;
      lo = lo ? std::min(*lo, *t->layer) : *t->layer;
      hi = hi ? std::max(*hi, *t->layer + 1) : *t->layer + 1;
    }
    m.layer_start = lo.value_or(0);
    m.layer_end = hi.value_or(0);
  }
  return m;
}

std::vector<std::pair<std::string, std::string>> stage_admission_message_underived() {
  const std::string why = "derived by the reference's native planner (its patched llama.cpp builds the graph from the "
                          "carrier); this tool builds no graph";
  return {{"plan_id", why + ": a digest of the native semantic plan"},
          {"execution_contract", why},
          {"profiles", why + ": per execution profile, graph, slice and snapshot identities and the activation frontier"}};
}

}  // namespace skippy
