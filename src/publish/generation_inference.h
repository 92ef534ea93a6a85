// What generation defaults a package may declare, inferred from the source
// model's GGUF metadata and tensors (spec: "Generation Defaults", "Native
// MTP strategy rules"; docs: GLM-DSA.md). The writer declares a profile or a
// strategy only after finding the tensors it requires.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "skippy/manifest.h"
#include "skippy/model_source.h"

namespace skippy::detail {

struct GenerationInference {
  // nullopt: declare no `generation` object.
  std::optional<GenerationDefaults> generation;
  // One line per decision that matters to a reader of the package (its
  // README, the writer's output): what was declared and from which evidence,
  // warnings, and why a declaration a model looked eligible for was withheld.
  std::vector<std::string> notes;
  // Why nothing was declared for a model that never could have been (no
  // NextN tensors, an architecture without a known profile): shown with
  // --verbose only, never in the README.
  std::vector<std::string> details;
};

// - Native MTP: declared (proposer "mtp": native-mtp, prediction_depth 1,
//   layer_indices; strategy "mtp": native-mtp referring to that proposer,
//   window_policy fixed 1; default "mtp") only when every layer that
//   carries blk.N.nextn.* tensors has the required prediction tensors
//   (nextn.eh_proj, nextn.enorm, nextn.hnorm) and agrees with
//   <arch>.nextn_predict_layers when that key exists.
// - glm-dsa-v1 policy + thresholds: only for architecture "glm-dsa" whose
//   tensor set and IndexShare roles pass every check of GLM-DSA.md.
// Throws Error(kInvalidInput) for a model that contradicts itself (e.g. a
// GLM-DSA Full layer without a complete indexer group, a partial group).
//
// Details (generation_inference.cpp):
// - MTP: nextn_predict_layers, when present, must equal the number of nextn
//   layers and those must be the last blocks; without the key, complete nextn
//   layers are declared as found (the note says nothing was cross-checked).
//   Layers >= layer_count are never declared.
// - glm-dsa-v1: the 22 required glm-dsa.* keys (typed: uint / float / bool);
//   decoder layers = layer_count - nextn_predict_layers (0 when absent);
//   every layer has the split-K/V attention set and no attn_kv_b.weight;
//   decoder layers < leading_dense_block_count the dense FFN, later ones and
//   MTP layers the MoE set; MTP layers a complete indexer group and
//   nextn.{eh_proj,enorm,hnorm}; nextn.* only in MTP layers; globals
//   token_embd.weight and output_norm.weight (output.weight may be tied, so
//   it is not required). IndexShare roles: indexer.types (length ==
//   decoder layers), else top_k_frequency F > 0 with skip_top_k_offset O
//   (0 when absent): Full when L < O or (L - O + 1) % F == 0, else presence
//   of the indexer group (with a "warning:" note). A Shared decoder layer 0
//   (no Full layer to share from) declares no policy.
//   Errors (thrown, naming the file, layer and tensor or key): a partial
//   indexer group in any layer; indexer.types not a string array or holding
//   a value other than "full"/"shared"; a Full layer without the group; a
//   Shared layer with it.
// - Notes, in order: one MTP line ("native MTP declared: ..." with the layers
//   and evidence, or "<why>: native MTP not declared" / "no NextN/MTP
//   tensors: no speculative decoding declared"); for glm-dsa an optional
//   "warning: ..." line about presence-inferred roles, then "glm-dsa-v1
//   policy declared (...) from: <evidence>" or "glm-dsa-v1 policy not
//   declared: missing metadata ...; missing tensors ...; <other reasons>"
//   (long name lists end in "(and N more)"); for other architectures "no
//   execution policy declared: no known profile for architecture ...".
// - The result passes serialize_manifest's validation for a manifest of
//   `layer_count` layers.
GenerationInference infer_generation(const ModelSource& model, uint32_t layer_count);

// validate-package's profile check, the writer's rule read back: why
// `model` lacks the evidence `profile` requires (glm-dsa-v1: architecture
// glm-dsa and every check of GLM-DSA.md above, IndexShare roles and the
// attention tensor set included), or nullopt when it has it. Profiles this
// runtime does not know: nullopt (unsupported_policy_values reports them).
std::optional<std::string> profile_evidence_problem(const ModelSource& model, uint32_t layer_count,
                                                    std::string_view profile);

}  // namespace skippy::detail
