// What the commands share about stages (the --tensors / --admission flags
// and the stage choice they make).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cli.h"
#include "skippy/stage.h"
#include "skippy/package_layout.h"

namespace skippy::cli {

// --tensors NAME,NAME and --tensors-file FILE (one name a line; blank lines
// and lines starting with '#' skipped): a stage chosen by its tensor names
// (select_stage_tensors), for a package whose catalog lists its tensors.
// --admission FILE: a stage admission descriptor (skippy/stage_admission.h)
// defines the stage, checked against the package.
struct TensorChoice {
  std::vector<std::string> names;
  std::string file;
  std::string admission;
  bool given() const { return !names.empty() || !file.empty() || !admission.empty(); }
};
void add_tensor_options(CLI::App* cmd, TensorChoice& choice);

// A stage admission descriptor file, parsed strictly (not yet checked
// against a package).
StageAdmission read_admission_file(const std::string& file);
// The full admission message (skippy/stage_admission.h
// StageAdmissionMessage) when FILE holds one, validated by the reference's
// rules; nullopt when it holds the descriptor alone.
std::optional<StageAdmissionMessage> read_admission_message(const std::string& file);

// The choice the flags make: the range (--layers), the projector options,
// the tensor names of --tensors and --tensors-file (read here), the
// descriptor of --admission (read and parsed here; checked against the
// package by choose_stage).
StageChoice stage_choice(const std::optional<LayerRange>& range, const TensorChoice& tensors,
                         const SelectOptions& options = {}, bool artifacts_only = false);

// The admission descriptor of a chosen stage: --admission's own, or the
// stage's tensors and the sidecars it loads.
StageAdmission stage_admission_for(const OpenedCatalog& pkg, const StageSelection& stage, const StageChoice& choice);



}  // namespace skippy::cli
