// What the commands share about stages (the --tensors / --admission choice
// and the stage a command works on, for either schema), and what the
// commands show of a schema 2 root (its request defaults).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli.h"
#include "skippy/catalog_stage.h"
#include "skippy/package_layout.h"

namespace skippy::cli {

// --tensors NAME,NAME and --tensors-file FILE (one name a line; blank lines
// and lines starting with '#' skipped): a stage chosen by its tensor names
// (select_stage_tensors), for schema 2 packages only.
// --admission FILE: a stage admission descriptor (skippy/stage_admission.h)
// defines the stage, checked against the package.
struct TensorChoice {
  std::vector<std::string> names;
  std::string file;
  std::string admission;
  bool given() const { return !names.empty() || !file.empty() || !admission.empty(); }
};
void add_tensor_options(CLI::App* cmd, TensorChoice& choice);

// Usage errors: --tensors with --layers, or with a schema 1 package.
void check_tensor_choice(const TensorChoice& choice, bool has_range, bool schema_v2);

// What a command works on, whichever the schema: the stage of `range`
// with the projector (schema 2: the mmproj sidecar) `options` choose, by
// schema 1's rule: the declared one at --projector PATH, else the first one
// for a stage starting at layer 0 or with --single-stage (`artifacts_only`
// as select_stage's); or the stage of the tensor names (no projector) or of
// the admission descriptor (its sidecars among the parts); or (none) every
// artifact of the package. --projector / --single-stage without a range is
// a usage error.
StageSelection stage_for(const OpenedCatalog& pkg, const std::optional<LayerRange>& range, const TensorChoice& tensors,
                         const SelectOptions& options = {}, bool artifacts_only = false);
// A stage admission descriptor file, parsed strictly (not yet checked
// against a package).
StageAdmission read_admission_file(const std::string& file);
// The resident tensors of the --admission FILE descriptor, checked against
// the package (materialize writes exactly them); its sidecars' parts in
// *sidecars when given.
std::vector<std::string> admission_tensors(const OpenedCatalog& pkg, const std::string& file,
                                           std::vector<StagePart>* sidecars = nullptr);
// The admission descriptor of that stage: --admission's own, or the stage's
// tensors and the sidecars it loads.
StageAdmission stage_admission_for(const OpenedCatalog& pkg, const StageSelection& stage, const TensorChoice& tensors);

// generation.request_defaults as the root holds them (the root's own JSON
// bytes, so floats read as the reference wrote them); null when absent.
nlohmann::json request_defaults_json(const PackageRootV2& root);
// A member of the root as its own JSON bytes hold it; `absent` when it is not there.
nlohmann::json root_member_json(const PackageRootV2& root, const char* member, nlohmann::json absent);
// One line per profile, for people: "recommended (default): temperature
// 0.6, top_p 0.9 (meta-llama/Llama-3.2-1B-Instruct@9213176 generation_config.json)".
std::vector<std::string> request_defaults_lines(const PackageRootV2& root);

}  // namespace skippy::cli
