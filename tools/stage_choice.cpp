// The stage a command works on: --layers, --tensors, --tensors-file,
// --admission, or every artifact (see stage_cli.h).
#include <filesystem>

#include "stage_cli.h"
#include "skippy/error.h"
#include "util/file.h"

namespace skippy::cli {
namespace stage_choice_detail {

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
  if (const auto m = read_admission_message(file)) return m->descriptor;
  return parse_stage_admission(read_small_file(file, 64u << 20), "--admission " + file);
}

}  // namespace stage_choice_detail

std::optional<StageAdmissionMessage> read_admission_message(const std::string& file) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) throw_not_found("--admission " + file + ": no such file");
  const std::string text = read_small_file(file, 64u << 20);
  // The full message nodes exchange (it has a version), validated by the reference's rules first.
  if (!is_stage_admission_message(text)) return std::nullopt;
  return parse_stage_admission_message(text, "--admission " + file);
}

StageAdmission read_admission_file(const std::string& file) { return stage_choice_detail::read_admission(file); }

StageChoice stage_choice(const std::optional<LayerRange>& range, const TensorChoice& tensors, const SelectOptions& options,
                         bool artifacts_only) {
  if (!tensors.admission.empty() && (!tensors.names.empty() || !tensors.file.empty())) {
    throw Error(ErrorKind::kUsage, "--admission and --tensors / --tensors-file choose a stage two ways: give one");
  }
  StageChoice c;
  c.range = range;
  c.options = options;
  c.artifacts_only = artifacts_only;
  if (range && tensors.given()) {
    throw Error(ErrorKind::kUsage, "--tensors / --tensors-file / --admission and --layers choose a stage two ways: give one");
  }
  if (!tensors.admission.empty()) {
    c.admission = stage_choice_detail::read_admission(tensors.admission);
    c.admission_origin = "--admission " + tensors.admission;
  } else if (tensors.given()) {
    c.tensor_names = stage_choice_detail::tensor_names(tensors);
  }
  return c;
}

StageAdmission stage_admission_for(const OpenedCatalog& pkg, const StageSelection& stage, const StageChoice& choice) {
  if (choice.admission) return *choice.admission;
  return stage_admission_of(pkg.catalog, stage);
}

void add_tensor_options(CLI::App* cmd, TensorChoice& choice) {
  cmd->add_option("--tensors", choice.names,
                  "Packages whose catalog lists tensors (schema 2): the stage is exactly these tensors (comma-separated "
                  "names) instead of --layers")
      ->delimiter(',');
  path_option(cmd->add_option("--tensors-file", choice.file,
                  "The same, one tensor name a line ('#' lines and blank lines skipped)"));
  path_option(cmd->add_option("--admission", choice.admission,
                  "The stage is the one this stage admission descriptor (JSON, as `select --json` prints under "
                  "stage_admission) defines: its tensors and sidecars, for this package_id only; or the full "
                  "admission message nodes exchange (its JSON form, with version, plan_id, layer range and "
                  "profiles), checked by mesh-llm's rules first"));
}

}  // namespace skippy::cli
