// What inspect shows of a schema 2 package that only its root and its
// carrier's catalog know (skippy/package.h PackageDescription).
#include "format/schema2/reader.h"

#include "skippy/abi.h"
#include "skippy/error.h"

namespace skippy::schema2 {
namespace {

nlohmann::json optional_json(const std::optional<uint32_t>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

// A member of the root as its own JSON bytes hold it; `absent` when it is not there.
nlohmann::json root_member_json(const PackageRootV2& root, const char* member, nlohmann::json absent) {
  const auto j = nlohmann::json::parse(package_root_v2_json(root));
  return j.contains(member) ? j[member] : absent;
}

}  // namespace

PackageDescription describe_root(const PackageRootV2& root, const OpenedPlace& place, const PackageCatalog& cat) {
  PackageDescription r;
  std::vector<uint64_t> counts(cat.artifacts.size(), 0), bytes(cat.artifacts.size(), 0);
  for (const auto& t : cat.tensors) {
    ++counts[t.artifact];
    bytes[t.artifact] = checked_add(bytes[t.artifact], t.stored_bytes, place.ref + ": the tensor directory");
    r.tensor_bytes = checked_add(r.tensor_bytes, t.stored_bytes, place.ref + ": the tensor directory");
  }
  nlohmann::json artifacts = nlohmann::json::array();
  for (size_t i = 0; i < cat.artifacts.size(); ++i) {
    const auto& a = cat.artifacts[i];
    r.artifact_bytes = checked_add(r.artifact_bytes, a.bytes, place.ref + ": artifact_catalog");
    artifacts.push_back({{"id", a.id},
                         {"path", a.path},
                         {"kind", catalog_artifact_kind_name(a.kind)},
                         {"part_index", optional_json(a.part_index)},
                         {"layer_index", optional_json(a.layer)},
                         {"bytes", a.bytes},
                         {"sha256", a.sha256},
                         {"tensor_count", counts[i]},
                         {"tensor_bytes", bytes[i]}});
  }
  nlohmann::json sidecars = nlohmann::json::array();
  for (const auto& sc : root.sidecars) {
    sidecars.push_back({{"kind", sc.kind}, {"artifact_id", sc.artifact_id},
                        {"name", sc.name ? nlohmann::json(*sc.name) : nlohmann::json(nullptr)}});
  }
  const auto& sm = root.source_model;
  auto opt = [](const std::optional<std::string>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  nlohmann::json abi_rules = nlohmann::json::object();
  std::string exact, provenance;
  for (const auto& l : runtime_lines()) {
    abi_rules[std::string(l.id)] = std::string(abi_rule_name(l.abi_rule));
    auto& list = l.abi_rule == AbiRule::kProvenance ? provenance : exact;
    list += (list.empty() ? "" : ", ") + std::string(l.label);
  }
  const std::string rules_text = "exact ABI for " + exact + ", provenance for " + provenance;
  r.title = "layer package, schema 2";
  r.tensor_count = cat.tensors.size();
  r.artifacts = cat.artifacts.size();
  r.generation = root.generation.has_value();
  r.fields = {{"schema_version", cat.schema_version},
              {"package_id", cat.package_id},
              {"format", root.format},
              {"native_abi_version", root.native_abi_version},
              // Each mesh-llm line's rule for it (skippy/abi.h).
              {"abi", {{"declared", root.native_abi_version}, {"rules", abi_rules}, {"writer_default", format_abi_version(kDefaultNativeAbiV2)}}},
              {"generator_version", root.generator_version},
              {"source_model", {{"sha256", sm.sha256}, {"repo", opt(sm.repo)}, {"revision", opt(sm.revision)},
                                {"primary_file", opt(sm.primary_file)}, {"files", sm.files.size()},
                                {"metadata_artifact_id", sm.metadata_artifact_id}}},
              {"artifacts", artifacts},
              {"sidecars", sidecars},
              {"request_defaults", cat.request_defaults_document},
              {"publisher_metadata", root_member_json(root, "publisher_metadata", nlohmann::json::array())},
              {"publisher_defaults", root_member_json(root, "publisher_defaults", nullptr)},
              {"commit", place.commit ? nlohmann::json(*place.commit) : nlohmann::json()}};
  r.head.push_back({"package id", cat.package_id});
  r.abi = {"native ABI", root.native_abi_version + " (generator " + root.generator_version + "; " + rules_text +
                             ": runtime lines below; restamp-package moves it; writers' default " +
                             format_abi_version(kDefaultNativeAbiV2) + ")"};
  for (const auto& sc : root.sidecars) r.tail.push_back({"sidecar", sc.kind + " " + sc.artifact_id});
  for (const auto& l : request_defaults_lines(cat.request_defaults_document)) r.tail.push_back({"request defaults", l});
  for (const auto& p : root.publisher_metadata) {
    const auto* a = cat.find_artifact(p.artifact_id);
    r.tail.push_back({"publisher file", p.role + " " + (a ? a->path : p.artifact_id) + " (" + p.source_repo + "@" +
                                            p.source_revision.substr(0, 7) + " " + p.source_path + ")"});
  }
  if (root.publisher_defaults) {
    for (const auto& [name, d] : {std::pair<const char*, const std::optional<V2DtypeDeclaration>*>{
                                      "compute dtype", &root.publisher_defaults->compute_dtype},
                                  {"KV cache dtype", &root.publisher_defaults->kv_cache_dtype}}) {
      if (*d) {
        r.tail.push_back({"publisher default",
                          std::string(name) + " " + (*d)->dtype + " (" + (*d)->artifact_id + " " + (*d)->json_path + ")"});
      }
    }
  }
  return r;
}

}  // namespace skippy::schema2
