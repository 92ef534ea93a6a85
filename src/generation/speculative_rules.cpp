// The rules of the spec's speculative-decoding table that depend on more
// than the manifest text: what the model holds (NextN layers) and this
// runtime's bounds. The shape rules (prediction_depth 1, history_scope
// "request", N-gram ranges, composite = native-mtp primary + N-gram
// extender, references) are parse_manifest's and are not repeated here.
#include "generation/speculative_rules.h"

#include "skippy/speculative.h"

namespace skippy {
namespace generation_detail {

void refuse(std::string rule, std::string message) { throw Refused{{std::move(rule), std::move(message)}}; }

std::optional<SpeculativeRefusal> ngram_bounds_problem(std::string_view type, uint64_t lo, uint64_t hi,
                                                       std::string_view where) {
  const bool cache = type == kNgramCache;
  const uint64_t min_allowed = cache ? 1 : 3;
  const uint64_t max_allowed = cache ? 4 : 64;
  if (lo >= min_allowed && hi <= max_allowed && lo <= hi) return std::nullopt;
  const std::string bounds = "ngram_min " + std::to_string(lo) + ", ngram_max " + std::to_string(hi);
  if (cache) {
    return SpeculativeRefusal{"ngram_cache_window",
                              std::string(where) + ": " + bounds +
                                  ": ngram-cache needs 1 <= ngram_min <= ngram_max <= 4 (llama.cpp's cache "
                                  "match window)"};
  }
  return SpeculativeRefusal{"ngram_suffix_bounds", std::string(where) + ": " + bounds +
                                                       ": ngram-suffix needs 3 <= ngram_min <= ngram_max <= 64"};
}

}  // namespace generation_detail

namespace {

using generation_detail::in_quotes;

void check_nextn(const ProposerFields& f, const std::string& where, const std::optional<std::set<uint32_t>>& nextn,
                 std::vector<RuleProblem>& out) {
  if (!f.layer_indices || !nextn) return;
  for (const uint32_t l : *f.layer_indices) {
    if (nextn->contains(l)) continue;
    out.push_back({{"layer_indices_hold_nextn",
                    "generation.speculative_decoding." + where + ".layer_indices: layer " + std::to_string(l) +
                        " holds no NextN/MTP prediction tensors (blk." + std::to_string(l) +
                        ".nextn.eh_proj/enorm/hnorm) in this package"},
                   where});
  }
}

void check_proposal_budget(const ProposerFields& f, const std::string& where, std::vector<RuleProblem>& out) {
  if (f.max_proposal_tokens && *f.max_proposal_tokens > kMaxSpeculativeTokens) {
    out.push_back({{"max_proposal_tokens", "generation.speculative_decoding." + where + ".max_proposal_tokens: " +
                                               std::to_string(*f.max_proposal_tokens) + " exceeds this runtime's " +
                                               std::to_string(kMaxSpeculativeTokens)},
                   where});
  }
}

}  // namespace

std::vector<RuleProblem> check_speculative_rules(const SpeculativeDecoding& spec,
                                                 const std::optional<std::set<uint32_t>>& nextn_layers) {
  std::vector<RuleProblem> out;
  for (const auto& [id, p] : spec.proposers) {
    const std::string where = "proposers." + id;
    if (p.type == kNativeMtp) check_nextn(p, where, nextn_layers, out);
    if (p.type == kNgramCache || p.type == kNgramSuffix) check_proposal_budget(p, where, out);
  }
  for (const auto& [id, s] : spec.strategies) {
    if (!is_known_strategy_type(s.type)) continue;  // ignored unless it is the default (the resolver decides)
    const std::string where = "strategies." + id;
    if (s.type == kNativeMtp) check_nextn(s, where, nextn_layers, out);
    if (s.type == kNgramCache || s.type == kNgramSuffix) check_proposal_budget(s, where, out);
    if (s.window_policy) {
      const WindowPolicy& w = *s.window_policy;
      if (w.pipeline_depth && *w.pipeline_depth > kMaxPipelineDepth) {
        out.push_back({{"pipeline_depth", "generation.speculative_decoding." + where +
                                              ".window_policy.pipeline_depth: " + std::to_string(*w.pipeline_depth) +
                                              " is outside 1..64"},
                       where});
      }
      if (s.type == kNativeMtp && w.max_window && *w.max_window > 1) {
        out.push_back({{"native_mtp_window", "generation.speculative_decoding." + where +
                                                 ".window_policy.max_window: " + std::to_string(*w.max_window) +
                                                 ": native MTP windows should stay fixed to 1 until runtimes "
                                                 "support wider heads (the plan uses 1)"},
                       where, /*warning_only=*/true});
      }
    }
    if (s.extension_policy && s.extension_policy->max_tokens &&
        *s.extension_policy->max_tokens > kMaxSpeculativeTokens) {
      out.push_back({{"extension_bounds", "generation.speculative_decoding." + where +
                                              ".extension_policy.max_tokens: " +
                                              std::to_string(*s.extension_policy->max_tokens) +
                                              " exceeds this runtime's " + std::to_string(kMaxSpeculativeTokens)},
                     where});
    }
  }
  return out;
}

}  // namespace skippy
