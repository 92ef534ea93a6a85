// verify and fetch for package schema 2 (from any source), and the
// --tensors choice shared with select (see schema_v2_cli.h).
#include <iostream>
#include <map>
#include <set>

#include "progress.h"
#include "schema_v2_cli.h"
#include "skippy/error.h"
#include "util/file.h"
#include "skippy/verify.h"

namespace skippy::cli {
namespace v2src_detail {

nlohmann::json optional_u32(const std::optional<uint32_t>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); }

// The names of --tensors and --tensors-file, in order.
std::vector<std::string> tensor_names(const TensorChoice& c) {
  std::vector<std::string> out = c.names;
  if (!c.file.empty()) {
    std::error_code ec;
    if (!std::filesystem::exists(c.file, ec)) throw_not_found("--tensors-file " + c.file + ": no such file");
    const std::string text = read_small_file(c.file, 64u << 20);
    size_t pos = 0;
    while (pos <= text.size()) {
      size_t end = text.find('\n', pos);
      if (end == std::string::npos) end = text.size();
      std::string line = text.substr(pos, end - pos);
      while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t')) line.pop_back();
      const size_t first = line.find_first_not_of(" \t");
      line = first == std::string::npos ? std::string() : line.substr(first);
      if (!line.empty() && line.front() != '#') out.push_back(line);
      pos = end + 1;
    }
  }
  if (out.empty()) throw Error(ErrorKind::kUsage, "--tensors / --tensors-file: no tensor names given");
  return out;
}

StageAdmission read_admission(const std::string& file) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) throw_not_found("--admission " + file + ": no such file");
  return parse_stage_admission(read_small_file(file, 64u << 20), "--admission " + file);
}

}  // namespace v2src_detail

StageAdmission read_admission_file(const std::string& file) { return v2src_detail::read_admission(file); }

std::vector<std::string> admission_tensors(const OpenedCatalog& pkg, const std::string& file,
                                           std::vector<CatalogPart>* sidecars) {
  const StageAdmission a = v2src_detail::read_admission(file);
  const CatalogStage s = select_catalog_admission(pkg.catalog, a, "--admission " + file);  // checks it
  if (sidecars) {
    for (const auto& p : s.parts) {
      if (p.kind == CatalogArtifactKind::kSidecar) sidecars->push_back(p);
    }
  }
  return a.resident_tensor_ids;
}

StageAdmission stage_admission_for(const OpenedCatalog& pkg, const CatalogStage& stage, const TensorChoice& tensors) {
  if (!tensors.admission.empty()) return v2src_detail::read_admission(tensors.admission);
  return catalog_stage_admission(pkg.catalog, stage);
}

void add_tensor_options(CLI::App* cmd, TensorChoice& choice) {
  cmd->add_option("--tensors", choice.names,
                  "Schema 2 packages: the stage is exactly these tensors (comma-separated names) instead of --layers")
      ->delimiter(',');
  path_option(cmd->add_option("--tensors-file", choice.file,
                  "Schema 2 packages: the same, one tensor name a line ('#' lines and blank lines skipped)"));
  path_option(cmd->add_option("--admission", choice.admission,
                  "Schema 2 packages: the stage is the one this stage admission descriptor (JSON, as `select --json` "
                  "prints under stage_admission) defines: its tensors and sidecars, for this package_id only"));
}

void check_tensor_choice(const TensorChoice& choice, bool has_range, bool schema_v2) {
  if (!choice.given()) return;
  if (has_range) {
    throw Error(ErrorKind::kUsage, "--tensors / --tensors-file / --admission and --layers choose a stage two ways: give one");
  }
  if (!choice.admission.empty() && (!choice.names.empty() || !choice.file.empty())) {
    throw Error(ErrorKind::kUsage, "--admission and --tensors / --tensors-file choose a stage two ways: give one");
  }
  if (!schema_v2) {
    throw Error(ErrorKind::kUsage, "--tensors / --tensors-file / --admission select from a package schema 2 catalog; this "
                                   "package is schema 1 (use --layers)");
  }
}

CatalogStage catalog_stage_for(const OpenedCatalog& pkg, const std::optional<LayerRange>& range,
                               const TensorChoice& tensors, const ProjectorChoice& projector) {
  if (projector.given() && !range) {
    throw Error(ErrorKind::kUsage, "--projector and --single-stage need --layers (an --admission descriptor names its "
                                   "sidecars itself)");
  }
  if (range) {
    CatalogStage s = select_catalog_range(pkg.catalog, *range);
    // The sidecar the stage loads, as schema 1's projector: select_catalog_projector's
    // default applies to a stage starting at layer 0, which --single-stage makes this one.
    const LayerRange rule{projector.single_stage ? 0 : range->start, range->end};
    if (auto part = select_catalog_projector(pkg, rule, projector.path)) s.parts.push_back(std::move(*part));
    return s;
  }
  if (!tensors.admission.empty()) {
    return select_catalog_admission(pkg.catalog, v2src_detail::read_admission(tensors.admission), "--admission " + tensors.admission);
  }
  if (tensors.given()) return select_catalog_tensors(pkg.catalog, v2src_detail::tensor_names(tensors));
  CatalogStage s;
  s.parts = all_catalog_parts(pkg.catalog);
  return s;
}

int verify_schema_v2(const OpenedCatalog& pkg, const std::optional<LayerRange>& range, const TensorChoice& tensors,
                     const VerifyV2Args& a) {
  const auto& cat = pkg.catalog;
  const auto s = catalog_stage_for(pkg, range, tensors, a.projector);
  // A repository package brings what the stage lacks first; on disk, every
  // file rule is a problem of the report.
  if (pkg.source) (void)provide_catalog_parts(pkg, s.parts);
  VerifyOptions o;
  o.threads = a.threads;
  o.use_cache = !a.no_cache;
  std::optional<Progress> progress;
  progress.emplace("verify");
  o.on_progress = [&](uint64_t d, uint64_t t) { progress->update(d, t); };
  auto r = verify_catalog_parts(pkg, s.parts, o);
  progress.reset();
  std::vector<std::string> notes = s.notes;
  notes.insert(notes.end(), r.notes.begin(), r.notes.end());
  std::map<std::string, const CatalogPart*> by_path;
  for (const auto& p : s.parts) by_path.emplace(p.rel_path, &p);
  nlohmann::json jparts = nlohmann::json::array();
  for (const auto& vp : r.parts) {
    const CatalogPart& p = *by_path.at(vp.rel_path);
    jparts.push_back({{"artifact_id", p.artifact_id},
                      {"kind", catalog_artifact_kind_name(p.kind)},
                      {"layer_index", v2src_detail::optional_u32(p.layer)},
                      {"relative_path", vp.rel_path},
                      {"cache_hit", vp.cache_hit},
                      {"ok", vp.ok}});
  }
  return print_verify_report(r, a.json,
                             {{"package", pkg.ref},
                              {"schema_version", cat.schema_version},
                              {"package_id", cat.package_id},
                              {"commit", pkg.commit ? nlohmann::json(*pkg.commit) : nlohmann::json()},
                              {"manifest_sha256", pkg.manifest_sha256}},
                             std::move(jparts), !a.no_cache, pkg.warnings, notes, range, cat.package_id, "catalog");
}

int fetch_schema_v2(const OpenedCatalog& pkg, const std::optional<LayerRange>& range, const TensorChoice& tensors,
                    bool json, const nlohmann::json& peer, const ProjectorChoice& projector) {
  const auto& cat = pkg.catalog;
  const auto s = catalog_stage_for(pkg, range, tensors, projector);
  (void)provide_catalog_parts(pkg, s.parts);
  const auto report = verify_catalog_if_required(pkg, s.parts);
  const auto downloaded = pkg.source ? pkg.source->fetched() : std::vector<std::string>{};
  const auto origins = pkg.source ? pkg.source->origins() : std::map<std::string, std::string>{};
  // The farthest place anything came from: cache, then peer, then hub.
  std::string source = "cache";
  for (const auto& [path, origin] : origins) {
    if (origin == "hub" || (origin == "peer" && source == "cache")) source = origin;
  }
  nlohmann::json sources = nlohmann::json::object();
  for (const auto& p : s.parts) {
    const auto it = origins.find(p.rel_path);
    sources[p.rel_path] = it == origins.end() ? "cache" : it->second;
  }
  const auto source_notes = pkg.source ? pkg.source->notes() : std::vector<std::string>{};
  for (const auto& n : source_notes) std::cerr << "note: " << n << "\n";
  uint64_t total = 0;
  for (const auto& p : s.parts) total += p.bytes;
  if (json) {
    nlohmann::json jp = nlohmann::json::array();
    nlohmann::json ids = nlohmann::json::array();
    for (const auto& p : s.parts) {
      jp.push_back(p.rel_path);
      ids.push_back(p.artifact_id);
    }
    nlohmann::json doc = {{"package", pkg.ref},
                          {"schema_version", cat.schema_version},
                          {"package_id", cat.package_id},
                          {"model_id", cat.model_id},
                          {"commit", pkg.commit ? nlohmann::json(*pkg.commit) : nlohmann::json()},
                          {"manifest_sha256", pkg.manifest_sha256},
                          {"snapshot_dir", pkg.root.string()},
                          {"source", source},
                          {"sources", sources},
                          {"downloaded", downloaded},
                          {"parts", jp},
                          {"artifact_ids", ids},
                          {"total_bytes", total},
                          {"verified", report.has_value() && report->verified},
                          {"cache_hits", report ? report->cache_hits : 0},
                          {"hashed_bytes", report ? report->hashed_bytes : 0},
                          {"warnings", pkg.warnings},
                          {"notes", s.notes},
                          {"source_notes", source_notes},
                          {"revision", pin_json(pkg)},  // as schema 1's fetch (#25)
                          {"signed_by", pkg.signature ? nlohmann::json(pkg.signature->owner_id) : nlohmann::json()}};
    if (!peer.is_null()) doc["peer"] = peer;
    if (range) {
      doc["layer_start"] = range->start;
      doc["layer_end"] = range->end;
    }
    print_json(doc);
  } else {
    for (const auto& n : s.notes) std::cerr << "note: " << n << "\n";
    std::map<std::string, size_t> count;
    for (const auto& p : s.parts) ++count[sources[p.rel_path].get<std::string>()];
    if (!peer.is_null()) {
      std::cerr << "parts: " << count["peer"] << " from the peer, " << count["hub"] << " from the Hub, " << count["cache"]
                << " already in the cache\n";
    }
    std::cerr << "fetched " << counted(s.parts.size(), "part") << " of " << cat.package_id << ", " << human_bytes(total)
              << " (" << counted(downloaded.size(), "file") << " downloaded"
              << (count["cache"] == 0 ? std::string() : ", " + counted(count["cache"], "part") + " already in the cache")
              << "), verified\n";
    std::cout << pkg.root.string() << "\n";
  }
  return kExitOk;
}

}  // namespace skippy::cli
