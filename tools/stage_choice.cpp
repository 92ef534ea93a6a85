// The stage a command works on, for either schema: --layers, --tensors,
// --tensors-file, --admission, or every artifact (see schema_v2_cli.h).
#include <filesystem>

#include "schema_v2_cli.h"
#include "skippy/error.h"
#include "util/file.h"

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
                                           std::vector<StagePart>* sidecars) {
  const StageAdmission a = v2src_detail::read_admission(file);
  const StageSelection s = select_stage_admission(pkg.catalog, a, "--admission " + file);  // checks it
  if (sidecars) {
    for (const auto& p : s.parts) {
      if (p.kind == CatalogArtifactKind::kSidecar) sidecars->push_back(p);
    }
  }
  return a.resident_tensor_ids;
}

StageAdmission stage_admission_for(const OpenedCatalog& pkg, const StageSelection& stage, const TensorChoice& tensors) {
  if (!tensors.admission.empty()) return v2src_detail::read_admission(tensors.admission);
  return stage_admission_of(pkg.catalog, stage);
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

StageSelection stage_for(const OpenedCatalog& pkg, const std::optional<LayerRange>& range, const TensorChoice& tensors,
                         const SelectOptions& options, bool artifacts_only) {
  if (range) {
    StageSelection s = select_stage(pkg.catalog, *range, artifacts_only);
    s.projector = select_projector(pkg, *range, options);
    return s;
  }
  if (options.projector_path || options.single_stage) {
    throw Error(ErrorKind::kUsage, "--projector and --single-stage need --layers (an --admission descriptor names its "
                                   "sidecars itself)");
  }
  if (!tensors.admission.empty()) {
    return select_stage_admission(pkg.catalog, v2src_detail::read_admission(tensors.admission), "--admission " + tensors.admission);
  }
  if (tensors.given()) return select_stage_tensors(pkg.catalog, v2src_detail::tensor_names(tensors));
  StageSelection s;
  s.parts = all_parts(pkg.catalog);
  return s;
}

}  // namespace skippy::cli
