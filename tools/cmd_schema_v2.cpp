// select / inspect for package schema 2 (see schema_v2_cli.h).
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

nlohmann::json v2_part_json(const CatalogPart& p, const std::filesystem::path& path) {
  return {{"artifact_id", p.artifact_id},
          {"kind", catalog_artifact_kind_name(p.kind)},
          {"layer_index", v2_optional(p.layer)},
          {"path", path.string()},
          {"relative_path", p.rel_path},
          {"bytes", p.bytes},
          {"tensor_count", p.tensors.size()},
          {"sha256", p.sha256},
          {"reason", p.reason},
          {"tensors", p.tensors}};
}

}  // namespace

int select_schema_v2(const OpenedCatalog& pkg, const std::optional<LayerRange>& range, const TensorChoice& tensors,
                     bool json, const ProjectorChoice& projector) {
  const auto& cat = pkg.catalog;
  const auto s = catalog_stage_for(pkg, range, tensors, projector);
  // Consumer validation of each file (brought first through the package's
  // source, for hf://); SHA-256 too when the package demands it (hf://) or
  // SKIPPY_VERIFY_PACKAGE_SHA asks, through the verification cache.
  const auto paths = provide_catalog_parts(pkg, s.parts);
  const auto verified = verify_catalog_if_required(pkg, s.parts);
  nlohmann::json parts = nlohmann::json::array();
  uint64_t total = 0;
  for (size_t i = 0; i < s.parts.size(); ++i) {
    parts.push_back(v2_part_json(s.parts[i], paths[i]));
    total += s.parts[i].bytes;
  }
  if (json) {
    nlohmann::json tensor_list = nlohmann::json::array();
    for (const auto& t : s.tensors) {
      tensor_list.push_back({{"name", t.name}, {"artifact_id", t.artifact_id}, {"offset", t.offset}, {"stored_bytes", t.stored_bytes}});
    }
    nlohmann::json doc = {{"package", pkg.ref},
                          {"schema_version", cat.schema_version},
                          {"package_id", cat.package_id},
                          {"model_id", cat.model_id},
                          {"commit", pkg.commit ? nlohmann::json(*pkg.commit) : nlohmann::json()},
                          {"manifest_sha256", pkg.manifest_sha256},
                          {"layer_count", cat.layer_count},
                          {"selected_by", range ? "layers" : !tensors.admission.empty() ? "admission" : "tensors"},
                          {"stage_admission", nlohmann::json::parse(stage_admission_json(stage_admission_for(pkg, s, tensors)))},
                          {"parts", parts},
                          {"tensors", tensor_list},
                          {"total_bytes", total},
                          {"verified", verified.has_value()},
                          {"notes", s.notes},
                          {"warnings", pkg.warnings},
                          {"revision", pin_json(pkg)},  // as schema 1's select (#25)
                          {"signed_by", pkg.signature ? nlohmann::json(pkg.signature->owner_id) : nlohmann::json()}};
    if (range) {
      doc["layer_start"] = range->start;
      doc["layer_end"] = range->end;
    }
    print_json(doc);
  } else {
    std::cout << cat.model_id << " (package schema 2) "
              << (range ? "layers " + format_layer_range(*range) + " of " + std::to_string(cat.layer_count)
                        : std::to_string(s.tensors.size()) + " named tensors")
              << ": " << counted(s.parts.size(), "part") << ", " << counted(s.tensors.size(), "tensor") << ", " << human_bytes(total) << "\n";
    std::vector<std::vector<std::string>> rows;
    for (const auto& p : s.parts) {
      std::string kind(catalog_artifact_kind_name(p.kind));
      if (p.layer) kind += " " + std::to_string(*p.layer);
      rows.push_back({kind, p.rel_path, human_bytes(p.bytes), counted(p.tensors.size(), "tensor")});
    }
    std::cout << aligned_rows(rows, {2, 3});
    for (const auto& n : s.notes) std::cerr << "note: " << n << "\n";
  }
  return kExitOk;
}


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
