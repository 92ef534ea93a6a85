// The CLI's package schema 2 paths: `inspect` dispatches here for a local
// directory whose model-package.json says schema_version 2; `select`,
// `verify` and `fetch` open any reference with open_any_for_cli (cli.h) and
// dispatch here when it is schema 2, from whichever source.
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
// (select_catalog_tensors), for schema 2 packages only.
// --admission FILE: a stage admission descriptor (skippy/stage_admission.h)
// defines the stage, checked against the package.
struct TensorChoice {
  std::vector<std::string> names;
  std::string file;
  std::string admission;
  bool given() const { return !names.empty() || !file.empty() || !admission.empty(); }
};
void add_tensor_options(CLI::App* cmd, TensorChoice& choice);

// --projector PATH / --single-stage for a schema 2 stage chosen by --layers:
// the sidecar it loads (select_catalog_projector: the declared one at PATH,
// else the first mmproj sidecar for a stage starting at layer 0 or with
// --single-stage). A stage chosen by --admission loads its descriptor's
// sidecars; by --tensors, none.
struct ProjectorChoice {
  std::optional<std::string> path;
  bool single_stage = false;
  bool given() const { return path.has_value() || single_stage; }
};
// Usage errors: --tensors with --layers, or with a schema 1 package.
void check_tensor_choice(const TensorChoice& choice, bool has_range, bool schema_v2);

// What a command works on: the stage of `range`, or of the tensor names or
// the admission descriptor, or (neither) every artifact of the package.
CatalogStage catalog_stage_for(const OpenedCatalog& pkg, const std::optional<LayerRange>& range,
                               const TensorChoice& tensors, const ProjectorChoice& projector = {});
// A stage admission descriptor file, parsed strictly (not yet checked
// against a package).
StageAdmission read_admission_file(const std::string& file);
// The resident tensors of the --admission FILE descriptor, checked against
// the package (materialize writes exactly them); its sidecars' parts in
// *sidecars when given.
std::vector<std::string> admission_tensors(const OpenedCatalog& pkg, const std::string& file,
                                           std::vector<CatalogPart>* sidecars = nullptr);
// The admission descriptor of that stage: --admission's own, or the stage's
// tensors without sidecars.
StageAdmission stage_admission_for(const OpenedCatalog& pkg, const CatalogStage& stage, const TensorChoice& tensors);

// `range` or `tensors` (exactly one); `projector` with a range only.
int select_schema_v2(const OpenedCatalog& pkg, const std::optional<LayerRange>& range, const TensorChoice& tensors,
                     bool json, const ProjectorChoice& projector);

struct VerifyV2Args {
  unsigned threads = 2;
  bool no_cache = false;
  bool json = false;
  ProjectorChoice projector;
};
int verify_schema_v2(const OpenedCatalog& pkg, const std::optional<LayerRange>& range, const TensorChoice& tensors,
                     const VerifyV2Args& args);

// `peer`: {"endpoint", "stage"} of a --peer fetch, else null.
int fetch_schema_v2(const OpenedCatalog& pkg, const std::optional<LayerRange>& range, const TensorChoice& tensors,
                    bool json, const nlohmann::json& peer, const ProjectorChoice& projector = {});
// inspect of a schema 2 package as open_package_any opened it (local or
// hf://: the carrier brought and checked).
int inspect_schema_v2(const OpenedCatalog& pkg, bool json);

// generation.request_defaults as the root holds them (the root's own JSON
// bytes, so floats read as the reference wrote them); null when absent.
nlohmann::json request_defaults_json(const PackageRootV2& root);
// A member of the root as its own JSON bytes hold it; `absent` when it is not there.
nlohmann::json root_member_json(const PackageRootV2& root, const char* member, nlohmann::json absent);
// One line per profile, for people: "recommended (default): temperature
// 0.6, top_p 0.9 (meta-llama/Llama-3.2-1B-Instruct@9213176 generation_config.json)".
std::vector<std::string> request_defaults_lines(const PackageRootV2& root);

}  // namespace skippy::cli
