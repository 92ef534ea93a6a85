// validate-package's package-level rules: what the manifest says of the
// model, checked against the source (validator_internal.h).
#include <string>
#include <utility>
#include <vector>

#include "publish/generation_inference.h"
#include "publish/validator_internal.h"
#include "skippy/error.h"
#include "skippy/manifest.h"
#include "skippy/model_source.h"

namespace skippy::detail {
namespace {

// What the generation block claims about the model, checked against the
// source: a policy profile only with the artifact shape it requires (the
// writer's rule, profile_evidence_problem), then the rules of the libraries
// above this one that the caller passes in (options.generation_model_rules:
// validate-package gives the speculative rules, e.g. native-mtp
// layer_indices holding NextN tensors, as `speculative` applies them).
void check_generation_evidence(const GenerationDefaults& gen, const ModelSource& model, const ValidateOptions& opt,
                               std::vector<std::string>& problems, std::vector<std::string>& warnings) {
  try {
    if (gen.policy && gen.policy->profile) {
      if (auto p = profile_evidence_problem(model, model.layer_count(), *gen.policy->profile)) {
        problems.push_back(std::move(*p));
      }
    }
    if (opt.generation_model_rules) opt.generation_model_rules(gen, model, problems, warnings);
  } catch (const Error& e) {
    problems.push_back(std::string("generation: the model evidence could not be checked: ") + e.what());
  }
}

}  // namespace

void check_manifest_against_source(const PackageManifest& m, const ModelSource& model, const ValidateOptions& opt,
                                   std::vector<std::string>& problems, std::vector<std::string>& warnings) {
  if (m.generation_problem) problems.push_back(*m.generation_problem);
  if (m.generation) {
    // The publisher's gate: what consumers ignore with a warning is refused here.
    for (auto& p : generation_fields_outside_schema(*m.generation)) problems.push_back(std::move(p));
    if (m.generation->speculative_decoding) {
      for (auto& w : pipeline_depths_needing_evidence(*m.generation->speculative_decoding)) {
        warnings.push_back(std::move(w));
      }
    }
  }
  try {
    const uint32_t lc = model.layer_count();
    if (m.layer_count != lc) {
      problems.push_back("layer_count: manifest says " + std::to_string(m.layer_count) + ", the source has " +
                         std::to_string(lc));
    }
  } catch (const Error& e) {
    problems.push_back(e.what());
  }
  if (m.generation) check_generation_evidence(*m.generation, model, opt, problems, warnings);
  const auto width = model.activation_width();
  if (m.activation_width != width) {
    problems.push_back("activation_width: manifest says " +
                       (m.activation_width ? std::to_string(*m.activation_width) : std::string("nothing")) +
                       ", the source's embedding_length is " + (width ? std::to_string(*width) : std::string("absent")));
  }
  if (m.source_model.files.size() != model.shards().size()) {
    problems.push_back("source_model.files: lists " + std::to_string(m.source_model.files.size()) +
                       " file(s), the source has " + std::to_string(model.shards().size()) + " shard(s)");
  }
}

}  // namespace skippy::detail
