// A package's generation defaults gathered for the resolvers (spec:
// "Generation Defaults"): what policy.h and speculative.h need from an
// opened package, read the same way by the CLI and the C API. Unlike those
// two (pure), this reads files: shared/metadata.gguf for the architecture
// and the IndexShare top-k, and the layers a native-mtp proposer names, to
// see which hold NextN tensors. Each part is verified first when the package
// requires it (hf://).
//
// Thread-safety: every function reads the package given and returns values;
// safe to call concurrently.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "skippy/catalog_stage.h"
#include "skippy/model_source.h"
#include "skippy/policy.h"
#include "skippy/speculative.h"
#include "skippy/stage.h"

namespace skippy {

// The package's generation.policy and thresholds, general.architecture and
// (when the metadata declares it) <arch>.attention.indexer.top_k as the
// request's top_k. The caller fills in the rest of the request, the backend
// and any overrides.
// Both throw Error(kInvalidInput) naming the field when the manifest's
// generation block was set aside as malformed (generation_problem).
PolicyInputs package_policy_inputs(const OpenedPackage& pkg);

// The package's speculative_decoding (pointing into pkg.manifest: keep pkg
// alive), its layer count and the NextN layers among those its native-mtp
// proposers and strategies name. An hf:// package's layer that is not in the
// cache yet is not downloaded for this: nextn_layers is then nullopt and a
// note says so.
SpeculativeModel package_speculative_model(const OpenedPackage& pkg, std::vector<std::string>* notes = nullptr);

// Schema 2 (the same consumers, a second reader): the root's generation
// read as schema 1's (generation_v1_of, skippy/generation_v2.h: a block
// with no schema 1 meaning is refused, Error(kInvalidInput) naming the
// field); nullopt when the root has none.
std::optional<GenerationDefaults> package_generation(const OpenedCatalog& pkg);

// Schema 2 has no generation.policy or thresholds (the reference refuses
// them at parse): the architecture and the IndexShare top-k from the
// carrier's KVs, no policy (the resolver uses the built-in one).
PolicyInputs package_policy_inputs(const OpenedCatalog& pkg);

// Schema 2: `generation` is package_generation(pkg) (the result points into
// it: keep it alive); the layer count is the catalog's, and the NextN layers
// among those named are found in the carrier's tensor directory (no payload
// is read, nothing is downloaded).
SpeculativeModel package_speculative_model(const OpenedCatalog& pkg, const std::optional<GenerationDefaults>& generation);

// A GGUF served directly (no package): every layer holding the NextN tensors.
SpeculativeModel gguf_speculative_model(const ModelSource& model);

// validate-package's share of the speculative rules (ValidateOptions::
// generation_model_rules): check_speculative_rules over `generation`'s
// speculative_decoding with the NextN layers of `model` (the source), e.g. a
// native-mtp layer_indices naming a layer without NextN tensors. Each
// problem ends in " (rule <id>)"; warning-only ones go to `warnings`.
void speculative_model_problems(const GenerationDefaults& generation, const ModelSource& model,
                                std::vector<std::string>& problems, std::vector<std::string>& warnings);

}  // namespace skippy
