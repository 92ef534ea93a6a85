// inspect for package schema 2 (see schema_v2_cli.h).
#include "schema_v2_cli.h"

#include <filesystem>
#include <iostream>

#include "cli.h"
#include "skippy/abi.h"
#include "skippy/catalog_stage.h"
#include "util/env.h"
#include "skippy/error.h"
#include "util/file.h"
#include "skippy/manifest.h"
#include "skippy/manifest_v2.h"
#include "skippy/verify.h"

namespace skippy::cli {
namespace {

nlohmann::json v2_optional(const std::optional<uint32_t>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

}  // namespace

int inspect_schema_v2(const OpenedCatalog& pkg, bool json) {
  const auto& cat = pkg.catalog;
  const auto& root = *cat.root_v2;
  std::vector<uint64_t> counts(cat.artifacts.size(), 0), bytes(cat.artifacts.size(), 0);
  uint64_t tensor_bytes = 0, artifact_bytes = 0;
  for (const auto& t : cat.tensors) {
    ++counts[t.artifact];
    bytes[t.artifact] = checked_add(bytes[t.artifact], t.stored_bytes, pkg.ref + ": the tensor directory");
    tensor_bytes = checked_add(tensor_bytes, t.stored_bytes, pkg.ref + ": the tensor directory");
  }
  nlohmann::json artifacts = nlohmann::json::array();
  for (size_t i = 0; i < cat.artifacts.size(); ++i) {
    const auto& a = cat.artifacts[i];
    artifact_bytes = checked_add(artifact_bytes, a.bytes, pkg.ref + ": artifact_catalog");
    artifacts.push_back({{"id", a.id},
                         {"path", a.path},
                         {"kind", catalog_artifact_kind_name(a.kind)},
                         {"part_index", v2_optional(a.part_index)},
                         {"layer_index", v2_optional(a.layer)},
                         {"bytes", a.bytes},
                         {"sha256", a.sha256},
                         {"tensor_count", counts[i]},
                         {"tensor_bytes", bytes[i]}});
  }
  nlohmann::json sidecars = nlohmann::json::array();
  for (const auto& s : root.sidecars) {
    sidecars.push_back({{"kind", s.kind}, {"artifact_id", s.artifact_id},
                        {"name", s.name ? nlohmann::json(*s.name) : nlohmann::json(nullptr)}});
  }
  const auto& sm = root.source_model;
  auto opt = [](const std::optional<std::string>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  if (json) {
    print_json({{"kind", "package"},
                {"package", pkg.ref},
                {"schema_version", cat.schema_version},
                {"package_id", cat.package_id},
                {"model_id", cat.model_id},
                {"manifest_sha256", pkg.manifest_sha256},
                {"format", root.format},
                {"architecture", cat.architecture},
                {"layer_count", cat.layer_count},
                {"tensor_count", cat.tensors.size()},
                {"tensor_bytes", tensor_bytes},
                {"artifact_bytes", artifact_bytes},
                {"native_abi_version", root.native_abi_version},
                // mesh-llm's rule: admitted only by a runtime at exactly this ABI.
                {"abi", {{"declared", root.native_abi_version},
                         {"rule", "exact"},
                         {"writer_default", format_abi_version(kDefaultNativeAbiV2)}}},
                {"generator_version", root.generator_version},
                {"source_model", {{"sha256", sm.sha256}, {"repo", opt(sm.repo)}, {"revision", opt(sm.revision)},
                                  {"primary_file", opt(sm.primary_file)}, {"files", sm.files.size()},
                                  {"metadata_artifact_id", sm.metadata_artifact_id}}},
                {"artifacts", artifacts},
                {"sidecars", sidecars},
                {"generation", root.generation.has_value()},
                {"request_defaults", request_defaults_json(root)},
                {"publisher_metadata", root_member_json(root, "publisher_metadata", nlohmann::json::array())},
                {"publisher_defaults", root_member_json(root, "publisher_defaults", nullptr)},
                {"commit", pkg.commit ? nlohmann::json(*pkg.commit) : nlohmann::json()},
                {"warnings", pkg.warnings}});
    return kExitOk;
  }
  auto& o = std::cout;
  o << pkg.ref << " (layer package, schema 2)\n";
  o << "  package id        " << cat.package_id << "\n";
  o << "  model             " << cat.model_id << "\n";
  o << "  architecture      " << cat.architecture << "\n";
  o << "  layers            " << cat.layer_count << "\n";
  o << "  tensors           " << cat.tensors.size() << " (" << human_bytes(tensor_bytes) << "), "
    << human_bytes(artifact_bytes) << " in " << cat.artifacts.size() << " artifacts\n";
  o << "  native ABI        " << root.native_abi_version << " (generator " << root.generator_version
    << "; admitted only by a runtime at exactly this ABI, restamp-package moves it; writers' default "
    << format_abi_version(kDefaultNativeAbiV2) << ")\n";
  for (const auto& s : root.sidecars) o << "  sidecar           " << s.kind << " " << s.artifact_id << "\n";
  for (const auto& l : request_defaults_lines(root)) o << "  request defaults  " << l << "\n";
  for (const auto& p : root.publisher_metadata) {
    const auto* a = cat.find_artifact(p.artifact_id);
    o << "  publisher file    " << p.role << " " << (a ? a->path : p.artifact_id) << " (" << p.source_repo << "@"
      << p.source_revision.substr(0, 7) << " " << p.source_path << ")\n";
  }
  if (root.publisher_defaults) {
    for (const auto& [name, d] : {std::pair<const char*, const std::optional<V2DtypeDeclaration>*>{
                                      "compute dtype", &root.publisher_defaults->compute_dtype},
                                  {"KV cache dtype", &root.publisher_defaults->kv_cache_dtype}}) {
      if (*d) o << "  publisher default " << name << " " << (*d)->dtype << " (" << (*d)->artifact_id << " " << (*d)->json_path << ")\n";
    }
  }
  return kExitOk;
}

nlohmann::json root_member_json(const PackageRootV2& root, const char* member, nlohmann::json absent) {
  const auto j = nlohmann::json::parse(package_root_v2_json(root));
  return j.contains(member) ? j[member] : absent;
}

nlohmann::json request_defaults_json(const PackageRootV2& root) {
  if (!root.generation || !root.generation->request_defaults) return nullptr;
  return nlohmann::json::parse(package_root_v2_json(root))["generation"]["request_defaults"];
}

std::vector<std::string> request_defaults_lines(const PackageRootV2& root) {
  std::vector<std::string> out;
  const auto j = request_defaults_json(root);
  if (j.is_null()) return out;
  const auto& sel = j["selection"];
  for (const auto& [name, p] : j["profiles"].items()) {
    std::vector<std::string> roles;
    if (sel["default"] == name) roles.emplace_back("default");
    if (sel.value("reasoning_enabled", "") == name) roles.emplace_back("reasoning on");
    if (sel.value("reasoning_disabled", "") == name) roles.emplace_back("reasoning off");
    std::string line = name;
    if (!roles.empty()) {
      line += " (";
      for (size_t i = 0; i < roles.size(); ++i) line += (i ? ", " : "") + roles[i];
      line += ")";
    }
    std::string values;
    for (const auto& [k, v] : p.items()) {
      if (k == "provenance") continue;
      values += (values.empty() ? ": " : ", ") + k + " " + (v.is_string() ? v.get<std::string>() : v.dump());
    }
    const auto& pv = p["provenance"];
    const std::string rev = pv["revision"].get<std::string>();
    out.push_back(line + values + " (" + pv["source_repo"].get<std::string>() + "@" + rev.substr(0, 7) + " " +
                  pv["file"].get<std::string>() + ")");
  }
  return out;
}

}  // namespace skippy::cli
