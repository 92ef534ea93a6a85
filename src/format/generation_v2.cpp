// generation_v1_of (skippy/generation_v2.h): schema 2's generation block as
// the schema 1 JSON it corresponds to, parsed by schema 1's own parser.
#include "format/generation_v2.h"

#include "format/manifest_json.h"
#include "skippy/error.h"

namespace skippy {
namespace generation_v2_detail {

using manifest_detail::json;

json proposer_json(const V2Proposer& p) {
  json j = {{"type", p.type}};
  if (p.type == kNativeMtp) {
    j["prediction_depth"] = p.prediction_depth;
    j["layer_indices"] = p.layer_indices;
  } else {
    j["ngram_min"] = p.ngram_min;
    j["ngram_max"] = p.ngram_max;
    j["max_proposal_tokens"] = p.max_proposal_tokens;
    j["history_scope"] = p.history_scope;
  }
  return j;
}

json strategy_json(const V2Strategy& s) {
  json j = {{"type", s.type}};
  if (s.proposer) j["proposer"] = *s.proposer;
  if (s.prediction_depth) j["prediction_depth"] = *s.prediction_depth;
  if (!s.layer_indices.empty()) j["layer_indices"] = s.layer_indices;
  if (!s.primary.empty()) j["primary"] = s.primary;
  if (!s.extender.empty()) j["extender"] = s.extender;
  if (const auto& e = s.extension_policy) {
    json ej = {{"max_tokens", e->max_tokens}};
    if (e->initial_tokens) ej["initial_tokens"] = *e->initial_tokens;
    if (e->tail_backoff_proposals) ej["tail_backoff_proposals"] = *e->tail_backoff_proposals;
    j["extension_policy"] = ej;
  }
  if (const auto& w = s.window_policy) {
    json wj = {{"default", w->default_mode},
               {"initial_window", w->initial_window},
               {"min_window", w->min_window},
               {"max_window", w->max_window}};
    if (w->pipeline_depth) wj["pipeline_depth"] = *w->pipeline_depth;
    j["window_policy"] = wj;
  }
  return j;
}

}  // namespace generation_v2_detail

GenerationDefaults generation_v1_of(const V2Generation& g, uint32_t layer_count, std::string_view origin) {
  using namespace generation_v2_detail;
  json gen = json::object();
  if (const auto& sd = g.speculative_decoding) {
    json sj = {{"default", sd->default_strategy}};
    if (!sd->proposers.empty()) {
      json ps = json::object();
      for (const auto& [id, p] : sd->proposers) ps[id] = proposer_json(p);
      sj["proposers"] = ps;
    }
    if (!sd->strategies.empty()) {
      json ss = json::object();
      for (const auto& [id, s] : sd->strategies) ss[id] = strategy_json(s);
      sj["strategies"] = ss;
    }
    gen["speculative_decoding"] = sj;
  }
  try {
    return manifest_detail::parse_generation(gen, layer_count, manifest_detail::FieldReader(std::string(origin)));
  } catch (const Error& e) {
    throw Error(e.kind(), std::string(e.what()) +
                              " (a schema 2 generation block read by schema 1's rules: this one does not map)");
  }
}

}  // namespace skippy
