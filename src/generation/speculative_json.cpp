// JSON of speculative-decoding plans (docs/CLI.md `speculative`: `strategy`, `plan`).
#include "skippy/speculative.h"

namespace skippy {

using json = nlohmann::json;

json speculative_plan_json(const SpeculativePlan& p) {
  json j = {{"strategy", p.strategy}, {"kind", plan_kind_name(p.kind)}, {"origin", p.origin}};
  j["native_mtp"] = nullptr;
  if (p.native_mtp) {
    const auto& n = *p.native_mtp;
    j["native_mtp"] = {{"proposer", n.proposer},
                       {"prediction_depth", n.prediction_depth},
                       {"layer_indices", n.layer_indices},
                       {"reject_cooldown_tokens", n.reject_cooldown_tokens ? json(*n.reject_cooldown_tokens) : json()}};
  }
  j["ngram"] = nullptr;
  if (p.ngram) {
    const auto& g = *p.ngram;
    j["ngram"] = {{"proposer", g.proposer},       {"type", g.type},
                  {"ngram_min", g.ngram_min},     {"ngram_max", g.ngram_max},
                  {"max_proposal_tokens", g.max_proposal_tokens}, {"history_scope", g.history_scope}};
  }
  j["extension"] = nullptr;
  if (p.extension) {
    j["extension"] = {{"initial_tokens", p.extension->initial_tokens},
                      {"max_tokens", p.extension->max_tokens},
                      {"tail_backoff_proposals", p.extension->tail_backoff_proposals}};
  }
  j["verify_window"] = nullptr;
  if (p.verify_window) {
    j["verify_window"] = {{"min_tokens", p.verify_window->min_tokens},
                          {"max_tokens", p.verify_window->max_tokens},
                          {"pipeline_depth", p.verify_window->pipeline_depth}};
  }
  return j;
}

json speculative_resolution_json(const SpeculativeResolution& r) {
  json j = {{"requested", r.requested},
            {"strategy", r.plan ? json(r.plan->strategy) : json(nullptr)},
            {"plan", r.plan ? speculative_plan_json(*r.plan) : json(nullptr)},
            {"notes", r.notes},
            {"warnings", r.warnings},
            {"field_sources", r.field_sources}};
  j["refusal"] = nullptr;
  if (r.refusal) j["refusal"] = {{"rule", r.refusal->rule}, {"message", r.refusal->message}};
  return j;
}

}  // namespace skippy
