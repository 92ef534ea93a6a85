// What generation defaults a package may declare, inferred from the source
// model's GGUF metadata and tensors (spec: "Generation Defaults", "Native
// MTP strategy rules"; docs: GLM-DSA.md). The writer declares a profile or a
// strategy only after finding the tensors it requires.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "skippy/manifest.h"
#include "skippy/model_source.h"

namespace skippy::detail {

struct GenerationInference {
  // nullopt: declare no `generation` object.
  std::optional<GenerationDefaults> generation;
  // One line per decision, for the writer's output and the package README:
  // what was declared and from which evidence, or why nothing was.
  std::vector<std::string> notes;
};

// - Native MTP: declared (strategy "mtp", type native-mtp, prediction_depth
//   1, layer_indices, window_policy fixed 1) only when every layer that
//   carries blk.N.nextn.* tensors has the required prediction tensors
//   (nextn.eh_proj, nextn.enorm, nextn.hnorm) and agrees with
//   <arch>.nextn_predict_layers when that key exists.
// - glm-dsa-v1 policy + thresholds: only for architecture "glm-dsa" whose
//   tensor set and IndexShare roles pass every check of GLM-DSA.md.
// Throws Error(kInvalidInput) for a model that contradicts itself (e.g. a
// GLM-DSA Full layer without a complete indexer group, a partial group).
GenerationInference infer_generation(const ModelSource& model, uint32_t layer_count);

}  // namespace skippy::detail
