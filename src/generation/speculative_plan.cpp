// resolve_speculative(): operator selection and the typed plan (spec:
// "Speculative Decoding": operator values, precedence, direct GGUF).
#include <algorithm>

#include "generation/speculative_rules.h"
#include "skippy/speculative.h"

namespace skippy {
namespace {

using generation_detail::in_quotes;
using generation_detail::refuse;

using generation_detail::num;

class Planner {
 public:
  Planner(const SpeculativeModel& m, const LayeredSettings& s, SpeculativeResolution& r) : m_(m), s_(s), r_(r) {}

  SpeculativePlan run(std::string requested);

 private:
  const SpeculativeSettings& op() const { return s_.value; }
  std::string layer_of(const std::string& field) const {
    auto it = s_.sources.find(field);
    return it == s_.sources.end() ? "runtime" : it->second;
  }
  void source(const std::string& plan_field, const std::string& from) { r_.field_sources[plan_field] = from; }

  SpeculativePlan disabled(std::string origin) const {
    SpeculativePlan p;
    p.strategy = std::string(kStrategyDisabled);
    p.origin = std::move(origin);
    return p;
  }
  SpeculativePlan declared(const std::string& id, std::string origin);
  SpeculativePlan direct_mtp();
  SpeculativePlan direct_ngram(const std::string& type);
  NativeMtpPlan native_from(const ProposerFields& f, const std::string& id);
  NgramPlan ngram_from(const ProposerFields& f, const std::string& type, const std::string& id);
  void verify_window(SpeculativePlan& p, const std::optional<WindowPolicy>& w, uint64_t capacity);
  void refuse_selected_problems(const std::set<std::string>& entries);
  uint64_t operator_value(const std::optional<uint64_t>& v, const char* field, uint64_t lo, uint64_t hi) const;

  const SpeculativeModel& m_;
  const LayeredSettings& s_;
  SpeculativeResolution& r_;
};

// An operator integer, checked against this runtime's range.
uint64_t Planner::operator_value(const std::optional<uint64_t>& v, const char* field, uint64_t lo,
                                 uint64_t hi) const {
  if (*v < lo || *v > hi) {
    refuse("operator_value", std::string(field) + " = " + num(*v) + " (from " + layer_of(field) +
                                 ") is outside " + num(lo) + ".." + num(hi));
  }
  return *v;
}

NativeMtpPlan Planner::native_from(const ProposerFields& f, const std::string& id) {
  NativeMtpPlan n;
  n.proposer = id;
  n.prediction_depth = f.prediction_depth.value_or(1);
  if (n.prediction_depth != 1) {
    refuse("prediction_depth", in_quotes(id) + ": prediction_depth " + num(n.prediction_depth) +
                                   "; the current native MTP runtime predicts exactly 1 token");
  }
  if (!f.layer_indices || f.layer_indices->empty()) {
    refuse("layer_indices_hold_nextn", in_quotes(id) + ": no layer_indices for the native MTP head");
  }
  n.layer_indices = *f.layer_indices;
  if (!m_.nextn_layers) r_.notes.push_back("NextN layers were not checked against the model's tensors");
  if (op().native_mtp_reject_cooldown_tokens) {
    n.reject_cooldown_tokens = op().native_mtp_reject_cooldown_tokens;
    source("native_mtp.reject_cooldown_tokens", layer_of("native_mtp_reject_cooldown_tokens"));
  }
  source("native_mtp", "package");
  return n;
}

// The package's N-gram proposer, tightened (never widened) by the operator.
NgramPlan Planner::ngram_from(const ProposerFields& f, const std::string& type, const std::string& id) {
  NgramPlan g;
  g.proposer = id;
  g.type = type;
  g.ngram_min = f.ngram_min.value_or(0);
  g.ngram_max = f.ngram_max.value_or(0);
  g.history_scope = f.history_scope.value_or(std::string(kHistoryScopeRequest));
  if (g.history_scope != kHistoryScopeRequest) {
    refuse("history_scope", in_quotes(id) + ": history_scope " + in_quotes(g.history_scope) +
                                "; an N-gram proposer sees only one request's committed tokens (\"request\")");
  }
  if (const auto& want = op().ngram_proposer) {
    if (*want != "cache" && *want != "suffix") {
      refuse("operator_value", "ngram_proposer = " + in_quotes(*want) + " (from " + layer_of("ngram_proposer") +
                                   "): expected \"cache\" or \"suffix\"");
    }
    if ((*want == "cache") != (type == kNgramCache)) {
      refuse("ngram_proposer_matches", "ngram_proposer = " + in_quotes(*want) + " (from " + layer_of("ngram_proposer") +
                                           ") but the package's proposer " + in_quotes(id) + " is " + type +
                                           "; an operator cannot change a package proposer's type");
    }
  }
  source("ngram.ngram_min", "package");
  source("ngram.ngram_max", "package");
  if (op().ngram_min) {
    if (*op().ngram_min > g.ngram_min) {
      g.ngram_min = *op().ngram_min;
      source("ngram.ngram_min", layer_of("ngram_min"));
    } else if (*op().ngram_min < g.ngram_min) {
      r_.notes.push_back("ngram_min " + num(*op().ngram_min) + " would widen the package's " + num(g.ngram_min) +
                         ": package bound kept");
    }
  }
  if (op().ngram_max) {
    if (*op().ngram_max < g.ngram_max) {
      g.ngram_max = *op().ngram_max;
      source("ngram.ngram_max", layer_of("ngram_max"));
    } else if (*op().ngram_max > g.ngram_max) {
      r_.notes.push_back("ngram_max " + num(*op().ngram_max) + " would widen the package's " + num(g.ngram_max) +
                         ": package bound kept");
    }
  }
  if (auto p = generation_detail::ngram_bounds_problem(type, g.ngram_min, g.ngram_max, in_quotes(id))) {
    refuse(p->rule, p->message);
  }
  g.max_proposal_tokens = f.max_proposal_tokens.value_or(kDefaultMaxProposalTokens);
  source("ngram.max_proposal_tokens", f.max_proposal_tokens ? "package" : "runtime");
  if (g.max_proposal_tokens > kMaxSpeculativeTokens) {
    refuse("max_proposal_tokens", in_quotes(id) + ": max_proposal_tokens " + num(g.max_proposal_tokens) +
                                      " exceeds this runtime's " + num(kMaxSpeculativeTokens));
  }
  if (op().ngram_max_proposal_tokens) {
    const uint64_t v = operator_value(op().ngram_max_proposal_tokens, "ngram_max_proposal_tokens", 1,
                                      kMaxSpeculativeTokens);
    if (v < g.max_proposal_tokens) {
      g.max_proposal_tokens = v;
      source("ngram.max_proposal_tokens", layer_of("ngram_max_proposal_tokens"));
    } else if (v > g.max_proposal_tokens) {
      r_.notes.push_back("ngram_max_proposal_tokens " + num(v) + " would widen the package's " +
                         num(g.max_proposal_tokens) + ": package bound kept");
    }
  }
  return g;
}

// VerifyWindow: min/max tokens and pipeline depth. `capacity` is the most
// tokens the strategy can propose for one window. An operator value tightens
// a bound the package declares (max_window, pipeline_depth), never widens it.
void Planner::verify_window(SpeculativePlan& p, const std::optional<WindowPolicy>& w, uint64_t capacity) {
  VerifyWindowPlan v;
  v.pipeline_depth = 1;
  source("verify_window.pipeline_depth", "runtime");
  if (w && w->pipeline_depth) {
    if (*w->pipeline_depth < 1 || *w->pipeline_depth > kMaxPipelineDepth) {
      refuse("pipeline_depth", in_quotes(p.strategy) + ": window_policy.pipeline_depth " + num(*w->pipeline_depth) +
                                   " is outside 1..64");
    }
    v.pipeline_depth = *w->pipeline_depth;
    source("verify_window.pipeline_depth", "package");
  }
  if (op().verify_window_pipeline_depth) {
    if (*op().verify_window_pipeline_depth < 1 || *op().verify_window_pipeline_depth > kMaxPipelineDepth) {
      refuse("pipeline_depth", "verify_window_pipeline_depth = " + num(*op().verify_window_pipeline_depth) +
                                   " (from " + layer_of("verify_window_pipeline_depth") + ") is outside 1..64");
    }
    const uint64_t want = *op().verify_window_pipeline_depth;
    if (w && w->pipeline_depth && want > v.pipeline_depth) {
      r_.notes.push_back("verify_window_pipeline_depth " + num(want) + " would widen the package's " +
                         num(v.pipeline_depth) + ": package bound kept");
    } else {
      v.pipeline_depth = want;
      source("verify_window.pipeline_depth", layer_of("verify_window_pipeline_depth"));
    }
  }
  v.max_tokens = capacity;
  source("verify_window.max_tokens", "runtime");
  if (w && w->max_window) {
    v.max_tokens = std::min(*w->max_window, capacity);
    source("verify_window.max_tokens", "package");
  }
  if (op().verify_window_max_tokens) {
    const uint64_t want = operator_value(op().verify_window_max_tokens, "verify_window_max_tokens", 1,
                                         kMaxSpeculativeTokens);
    if (w && w->max_window && want > v.max_tokens) {
      r_.notes.push_back("verify_window_max_tokens " + num(want) + " would widen the package's " +
                         num(v.max_tokens) + ": package bound kept");
    } else {
      if (want > capacity) {
        r_.notes.push_back("verify_window_max_tokens " + num(want) + " exceeds what " + p.strategy +
                           " can propose per window (" + num(capacity) + "): " + num(capacity) + " used");
      }
      v.max_tokens = std::min(want, capacity);
      source("verify_window.max_tokens", layer_of("verify_window_max_tokens"));
    }
  }
  v.min_tokens = 1;
  source("verify_window.min_tokens", "runtime");
  if (w && w->min_window) {
    v.min_tokens = *w->min_window;
    source("verify_window.min_tokens", "package");
  }
  if (op().verify_window_min_tokens) {
    v.min_tokens = operator_value(op().verify_window_min_tokens, "verify_window_min_tokens", 1, kMaxSpeculativeTokens);
    source("verify_window.min_tokens", layer_of("verify_window_min_tokens"));
  }
  if (v.min_tokens > v.max_tokens) {
    refuse("verify_window_bounds", in_quotes(p.strategy) + ": verify window min_tokens " + num(v.min_tokens) +
                                       " exceeds max_tokens " + num(v.max_tokens));
  }
  p.verify_window = v;
}

// Problems check_speculative_rules found in what the plan uses are
// refusals; the rest of the package gets warnings.
void Planner::refuse_selected_problems(const std::set<std::string>& entries) {
  if (!m_.package) return;
  for (const auto& p : check_speculative_rules(*m_.package, m_.nextn_layers)) {
    if (!p.warning_only && entries.contains(p.strategy_or_proposer)) refuse(p.problem.rule, p.problem.message);
    if (p.warning_only || !entries.contains(p.strategy_or_proposer)) r_.warnings.push_back(p.problem.message);
  }
}

SpeculativePlan Planner::declared(const std::string& id, std::string origin) {
  const Strategy& st = m_.package->strategies.at(id);
  if (!is_known_strategy_type(st.type)) {
    refuse("strategy_type_supported", "strategy " + in_quotes(id) + " has type " + in_quotes(st.type) +
                                          ", which this runtime cannot serve (known: native-mtp, ngram-cache, "
                                          "ngram-suffix, composite)");
  }
  SpeculativePlan p;
  p.strategy = id;
  p.origin = std::move(origin);
  std::set<std::string> entries = {"strategies." + id};
  for (const auto* ref : {&st.proposer, &st.primary, &st.extender}) {
    if (*ref) entries.insert("proposers." + **ref);
  }
  refuse_selected_problems(entries);
  // parse_manifest guarantees these references; a hand-built struct gets a
  // refusal rather than an exception.
  auto proposer = [&](const std::optional<std::string>& ref, std::initializer_list<std::string_view> types,
                      const char* what) -> const Proposer& {
    const auto it = ref ? m_.package->proposers.find(*ref) : m_.package->proposers.end();
    if (it == m_.package->proposers.end() ||
        std::find(types.begin(), types.end(), it->second.type) == types.end()) {
      refuse("composite_shape", "strategy " + in_quotes(id) + ": " + what);
    }
    return it->second;
  };
  auto fields_of = [&](const std::optional<std::string>& ref) -> const ProposerFields& {
    if (!ref) return st;
    return proposer(ref, {st.type}, "its proposer must be a declared proposer of the same type");
  };
  uint64_t capacity = 1;
  if (st.type == kNativeMtp) {
    p.kind = PlanKind::kNativeMtpOnly;
    p.native_mtp = native_from(fields_of(st.proposer), st.proposer.value_or(id));
    capacity = p.native_mtp->prediction_depth;
  } else if (st.type == kComposite) {
    p.kind = PlanKind::kMtpWithNgram;
    const Proposer& primary = proposer(st.primary, {kNativeMtp}, "a composite primary must be a native-mtp proposer");
    const Proposer& ext = proposer(st.extender, {kNgramCache, kNgramSuffix},
                                   "a composite extender must be an N-gram proposer (ngram-cache or ngram-suffix)");
    p.native_mtp = native_from(primary, *st.primary);
    p.ngram = ngram_from(ext, ext.type, *st.extender);
    ExtensionPlan e;
    const ExtensionPolicy pol = st.extension_policy.value_or(ExtensionPolicy{});
    // The tail never exceeds what the extender may return.
    e.max_tokens = std::min(pol.max_tokens.value_or(p.ngram->max_proposal_tokens), p.ngram->max_proposal_tokens);
    source("extension.max_tokens", pol.max_tokens ? "package" : "runtime");
    if (e.max_tokens > kMaxSpeculativeTokens) {
      refuse("extension_bounds", in_quotes(id) + ": extension max_tokens " + num(e.max_tokens) + " exceeds " +
                                     num(kMaxSpeculativeTokens));
    }
    if (op().extension_max_tokens) {
      const uint64_t v = operator_value(op().extension_max_tokens, "extension_max_tokens", 1, kMaxSpeculativeTokens);
      if (v < e.max_tokens) {
        e.max_tokens = v;
        source("extension.max_tokens", layer_of("extension_max_tokens"));
      } else if (v > e.max_tokens) {
        r_.notes.push_back("extension_max_tokens " + num(v) + " would widen the package's " + num(e.max_tokens) +
                           ": package bound kept");
      }
    }
    e.initial_tokens = std::min(pol.initial_tokens.value_or(e.max_tokens), e.max_tokens);
    source("extension.initial_tokens", pol.initial_tokens ? "package" : "runtime");
    if (op().extension_initial_tokens) {
      e.initial_tokens = operator_value(op().extension_initial_tokens, "extension_initial_tokens", 1, e.max_tokens);
      source("extension.initial_tokens", layer_of("extension_initial_tokens"));
    }
    e.tail_backoff_proposals = pol.tail_backoff_proposals.value_or(0);
    source("extension.tail_backoff_proposals", pol.tail_backoff_proposals ? "package" : "runtime");
    if (op().extension_tail_backoff_proposals) {
      e.tail_backoff_proposals = operator_value(op().extension_tail_backoff_proposals,
                                                "extension_tail_backoff_proposals", 0, 1024);
      source("extension.tail_backoff_proposals", layer_of("extension_tail_backoff_proposals"));
    }
    p.extension = e;
    capacity = p.native_mtp->prediction_depth + e.max_tokens;
  } else {
    p.kind = PlanKind::kNgramOnly;
    p.ngram = ngram_from(fields_of(st.proposer), st.type, st.proposer.value_or(id));
    capacity = p.ngram->max_proposal_tokens;
  }
  verify_window(p, st.window_policy, capacity);
  return p;
}

// `mtp` without a package strategy of that name: the package's native MTP
// source, or the GGUF's NextN layers.
SpeculativePlan Planner::direct_mtp() {
  SpeculativePlan p;
  p.strategy = std::string(kStrategyMtp);
  p.kind = PlanKind::kNativeMtpOnly;
  p.origin = "operator";
  if (m_.package) {
    for (const auto& [id, pr] : m_.package->proposers) {
      if (pr.type != kNativeMtp) continue;
      refuse_selected_problems({"proposers." + id});
      p.native_mtp = native_from(pr, id);
      break;
    }
    for (const auto& [id, st] : m_.package->strategies) {
      if (p.native_mtp || st.type != kNativeMtp) continue;
      return declared(id, "operator (mtp: the package's native-mtp strategy " + in_quotes(id) + ")");
    }
  }
  if (!p.native_mtp && m_.direct_gguf && m_.nextn_layers && !m_.nextn_layers->empty()) {
    p.native_mtp = NativeMtpPlan{"gguf", 1, {m_.nextn_layers->begin(), m_.nextn_layers->end()}, std::nullopt};
    p.native_mtp->reject_cooldown_tokens = op().native_mtp_reject_cooldown_tokens;
    source("native_mtp", "gguf");
  }
  if (!p.native_mtp) {
    refuse("native_mtp_available", m_.direct_gguf
                                       ? "mtp: the GGUF has no layer with NextN/MTP prediction tensors"
                                       : "mtp: the package declares no native-mtp proposer or strategy");
  }
  verify_window(p, std::nullopt, 1);
  return p;
}

// Direct GGUF: an N-gram proposer built from the operator's bounds alone.
SpeculativePlan Planner::direct_ngram(const std::string& type) {
  SpeculativePlan p;
  p.strategy = type;
  p.kind = PlanKind::kNgramOnly;
  p.origin = "operator";
  if (!op().ngram_min || !op().ngram_max) {
    refuse("ngram_bounds_required", type + " on a direct GGUF needs ngram_min and ngram_max from the operator");
  }
  if (const auto& want = op().ngram_proposer; want && *want != (type == kNgramCache ? "cache" : "suffix")) {
    refuse("ngram_proposer_matches", "ngram_proposer = " + in_quotes(*want) + " contradicts strategy " + in_quotes(type));
  }
  NgramPlan g;
  g.proposer = "operator";
  g.type = type;
  g.ngram_min = *op().ngram_min;
  g.ngram_max = *op().ngram_max;
  if (auto prob = generation_detail::ngram_bounds_problem(type, g.ngram_min, g.ngram_max, "operator " + type)) {
    refuse(prob->rule, prob->message);
  }
  g.max_proposal_tokens = kDefaultMaxProposalTokens;
  source("ngram.max_proposal_tokens", "runtime");
  if (op().ngram_max_proposal_tokens) {
    g.max_proposal_tokens = operator_value(op().ngram_max_proposal_tokens, "ngram_max_proposal_tokens", 1,
                                           kMaxSpeculativeTokens);
    source("ngram.max_proposal_tokens", layer_of("ngram_max_proposal_tokens"));
  }
  source("ngram.ngram_min", layer_of("ngram_min"));
  source("ngram.ngram_max", layer_of("ngram_max"));
  p.ngram = g;
  verify_window(p, std::nullopt, g.max_proposal_tokens);
  return p;
}

SpeculativePlan Planner::run(std::string requested) {
  const SpeculativeDecoding* pkg = m_.package;
  if (requested == kStrategyLegacyMtp) {
    r_.notes.push_back("legacy strategy \"native-mtp-n1\" normalised to \"mtp\"");
    requested = std::string(kStrategyMtp);
  }
  if (requested == kStrategyDisabled) {
    refuse_selected_problems({});  // nothing runs: the package's problems are only warnings
    return disabled("operator");
  }
  if (requested == kStrategyAuto) {
    if (pkg && pkg->default_strategy) {
      if (auto why = unsupported_default_strategy(*pkg)) refuse("strategy_type_supported", *why);
      return declared(*pkg->default_strategy, "package default");
    }
    r_.notes.push_back(pkg ? "the package declares no default strategy: runtime default (disabled)"
                           : "no package default: runtime default (disabled)");
    if (pkg) refuse_selected_problems({});
    return disabled("runtime default");
  }
  if (pkg && pkg->strategies.contains(requested)) {
    if (requested == kStrategyMtp && pkg->strategies.at(requested).type != kNativeMtp) {
      r_.notes.push_back("the package's \"mtp\" strategy is " + pkg->strategies.at(requested).type +
                         "; mtp forces direct native MTP");
      return direct_mtp();
    }
    return declared(requested, "package strategy");
  }
  if (requested == kStrategyMtp) return direct_mtp();
  if (m_.direct_gguf && (requested == kNgramCache || requested == kNgramSuffix)) return direct_ngram(requested);
  refuse("strategy_declared",
         "strategy " + in_quotes(requested) +
             (m_.direct_gguf ? " cannot be used with a direct GGUF (only mtp, ngram-cache, ngram-suffix, auto, disabled)"
                             : " is not declared by this package; a named strategy cannot be invented outside its "
                               "package"));
}

}  // namespace

std::string_view plan_kind_name(PlanKind kind) noexcept {
  switch (kind) {
    case PlanKind::kDisabled: return "disabled";
    case PlanKind::kNativeMtpOnly: return "native-mtp";
    case PlanKind::kNgramOnly: return "ngram";
    case PlanKind::kMtpWithNgram: return "composite";
  }
  return "?";
}

SpeculativeResolution resolve_speculative(const SpeculativeModel& model, const LayeredSettings& settings) {
  SpeculativeResolution r;
  r.requested = settings.value.strategy.value_or(std::string(kStrategyAuto));
  r.field_sources["strategy"] = settings.sources.contains("strategy") ? settings.sources.at("strategy") : "runtime";
  try {
    r.plan = Planner(model, settings, r).run(r.requested);
  } catch (const generation_detail::Refused& e) {
    r.refusal = e.refusal;
  }
  return r;
}

}  // namespace skippy
