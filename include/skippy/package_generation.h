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
#include <filesystem>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "skippy/package.h"
#include "skippy/model_source.h"
#include "skippy/policy.h"
#include "skippy/speculative.h"
#include "skippy/stage.h"

namespace skippy {

// The package's generation policy and thresholds (its identity's
// generation), general.architecture and (when the metadata declares it)
// <arch>.attention.indexer.top_k as the request's top_k. The caller fills
// in the rest of the request, the backend and any overrides.
// Both throw Error(kInvalidInput) naming the field when the package's
// generation block was set aside as malformed (generation_problem).
PolicyInputs package_policy_inputs(const OpenedPackage& pkg);

// The package's speculative_decoding (pointing into pkg's identity: keep
// pkg alive), its layer count and the NextN layers among those its
// native-mtp proposers and strategies name (the reader's catalog of those
// layers). An hf:// package's layer whose file the reader would read and
// that is not in the cache yet is not downloaded for this: nextn_layers is
// then nullopt and a note says so.
SpeculativeModel package_speculative_model(const OpenedPackage& pkg, std::vector<std::string>* notes = nullptr);

// ------------------------------------------- the commands' documents

// A request for resolve_package_policy: the request shape, the backend (a
// built-in name or a description file), operator overrides, and what the
// caller knows better than the package (top_k, the layer's IndexShare role).
struct PackagePolicyQuery {
  PolicyRequest request;
  std::string backend = "reference";
  PolicyOverrides overrides;
};

// The generation path a request shape resolves to for a package, with what
// a person should know: the inputs, the decision, the package's generation
// warnings, notes (the built-in policy applying), and the resolver's
// telemetry lines. `document` is the one JSON document the policy command
// and the C API print.
struct PackagePolicy {
  PolicyInputs inputs;
  PolicyDecision decision;
  std::vector<std::string> warnings, notes, log;
  nlohmann::json document;
};
// package_policy_inputs, then the query's request, backend and overrides
// (a query top_k wins over the package's), then resolve_policy; `on_log`
// sees each telemetry line as it is made (it is also kept in `log`).
PackagePolicy resolve_package_policy(const OpenedPackage& pkg, const PackagePolicyQuery& query,
                                     const std::function<void(const std::string&)>& on_log = {});

// The speculative-decoding plan for a package or a GGUF served directly:
// its model (package_speculative_model, gguf_speculative_model), the
// settings layered (flags, then the operator config's entry for `model`
// (default: the package's model_id), then its defaults), resolved, with
// the warnings and notes to show and the one JSON document the speculative
// command and the C API print (`target` as the caller named it).
struct PackageSpeculative {
  SpeculativeModel model;
  SpeculativeResolution resolution;
  std::string model_id;
  std::vector<std::string> warnings, notes;  // of the package and of the plan, in that order
  nlohmann::json document;
};
PackageSpeculative resolve_package_speculative(const OpenedPackage& pkg, const SpeculativeSettings& flags,
                                               const OperatorConfig& config = {}, const std::string& model_entry = "");
PackageSpeculative resolve_gguf_speculative(const std::filesystem::path& gguf, const SpeculativeSettings& flags,
                                            const OperatorConfig& config = {}, const std::string& model_entry = "");

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
