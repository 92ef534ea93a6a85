// resolve_policy(): the spec's "Policy Resolution" order, one candidate at a
// time, each checked against the model, the thresholds in their units and
// the backend's capabilities.
#include <algorithm>

#include "generation/builtin_policy.h"
#include "generation/wording.h"
#include "skippy/error.h"
#include "skippy/policy.h"

namespace skippy {
namespace {

using generation_detail::BuiltinPolicy;

using generation_detail::in_quotes;
using generation_detail::num;

bool contains(std::span<const std::string_view> list, std::string_view v) {
  return std::find(list.begin(), list.end(), v) != list.end();
}

struct Threshold {
  uint64_t value = 0;
  PolicySource source = PolicySource::kPackage;
};

// override -> package -> built-in, per threshold field.
std::optional<Threshold> pick_threshold(const std::optional<uint64_t>& override_value,
                                        const std::optional<uint64_t>& package_value,
                                        const std::optional<uint64_t>& builtin_value) {
  if (override_value) return Threshold{*override_value, PolicySource::kOverride};
  if (package_value) return Threshold{*package_value, PolicySource::kPackage};
  if (builtin_value) return Threshold{*builtin_value, PolicySource::kBuiltin};
  return std::nullopt;
}

// Everything one resolution needs, computed once.
class Resolver {
 public:
  explicit Resolver(const PolicyInputs& in) : in_(in) {
    const auto& pol = in.policy;
    const bool known = pol && pol->profile && contains(known_policy_profiles(), *pol->profile);
    // A known profile applies only to a model that has its evidence: a
    // profile alone never switches on the paths it names.
    if (known) profile_mismatch_ = generation_detail::profile_model_mismatch(*pol->profile, in.architecture);
    profile_known_ = known && !profile_mismatch_;
    // A package without a profile still uses the spec's semantic values; a
    // package with an unknown (or inapplicable) profile has phase semantics
    // we do not know for this model.
    package_values_usable_ = pol && (!pol->profile || profile_known_);
    builtin_ = generation_detail::builtin_policy(in.architecture, profile_known_ ? pol->profile : std::nullopt);
    const auto& t = in.thresholds;
    const auto& o = in.overrides;
    spmt_ = pick_threshold(o.short_prefill_max_tokens, t ? t->short_prefill_max_tokens : std::nullopt,
                           builtin_.short_prefill_max_tokens);
    cfmk_ = pick_threshold(o.compact_flash_min_kv, t ? t->compact_flash_min_kv : std::nullopt,
                           builtin_.compact_flash_min_kv);
    dmmb_ = pick_threshold(o.dense_mask_max_bytes, t ? t->dense_mask_max_bytes : std::nullopt,
                           builtin_.dense_mask_max_bytes);
    mask_ = dense_mask_bytes(in.request.n_tokens, in.request.n_kv);
  }

  PolicyDecision run();

 private:
  // Why `path` cannot run for this request, or nullopt when it can. Records
  // the threshold it applied (in `use`).
  std::optional<std::string> check(ExecutionPath path, std::optional<ThresholdUse>& use) const;
  std::optional<ExecutionPath> first_passing(const std::vector<ExecutionPath>& order,
                                             std::optional<ThresholdUse>& use, std::string& why_none) const;
  void decide_indexshare(PolicyDecision& d) const;
  void decide_experimental(PolicyDecision& d) const;
  ThresholdUse make_use(std::string name, const Threshold& t, std::string unit, std::string outcome) const {
    return ThresholdUse{std::move(name), t.value, std::move(unit), t.source, std::move(outcome)};
  }

  const PolicyInputs& in_;
  bool profile_known_ = false;                    // known, and applicable to this model
  std::optional<std::string> profile_mismatch_;   // why a known profile does not apply
  bool package_values_usable_ = false;
  BuiltinPolicy builtin_;
  std::optional<Threshold> spmt_, cfmk_, dmmb_;
  uint64_t mask_ = 0;
  mutable bool rejected_by_threshold_ = false;  // set by check(): the last rejection came from a threshold
};

std::optional<std::string> Resolver::check(ExecutionPath path, std::optional<ThresholdUse>& use) const {
  use.reset();
  rejected_by_threshold_ = false;
  const std::string name(execution_path_name(path));
  if (!builtin_.sparse_attention && path != ExecutionPath::kDense) {
    return "the model has no sparse attention (architecture " +
           in_quotes(in_.architecture.empty() ? "unknown" : in_.architecture) +
           ", no sparse-attention profile): " + name + " cannot run";
  }
  const uint64_t n_kv = in_.request.n_kv;
  if (path == ExecutionPath::kCompactFlash && cfmk_) {
    const bool ok = n_kv >= cfmk_->value;
    use = make_use("compact_flash_min_kv", *cfmk_, "KV rows",
                   "n_kv " + num(n_kv) + (ok ? " >= " : " < ") + num(cfmk_->value) +
                       (ok ? ": compact-flash allowed" : ": compact-flash rejected"));
    if (!ok) {
      rejected_by_threshold_ = true;
      return "n_kv " + num(n_kv) + " is below compact_flash_min_kv " + num(cfmk_->value) +
             " KV rows: compact selected-KV flash is not worth it yet";
    }
  }
  if (path == ExecutionPath::kDense && builtin_.sparse_attention && dmmb_) {
    const bool ok = mask_ <= dmmb_->value;
    use = make_use("dense_mask_max_bytes", *dmmb_, "bytes",
                   "dense mask " + num(mask_) + (ok ? " <= " : " > ") + num(dmmb_->value) +
                       (ok ? ": dense allowed" : ": dense rejected"));
    if (!ok) {
      rejected_by_threshold_ = true;
      return "dense sparse mask of " + num(mask_) + " bytes (n_tokens " + num(in_.request.n_tokens) + " x n_kv " +
             num(n_kv) + " x 4) exceeds dense_mask_max_bytes " + num(dmmb_->value);
    }
  }
  if (!in_.backend.runs(path)) {
    return "backend " + in_quotes(in_.backend.name) + " cannot run " + name;
  }
  return std::nullopt;
}

std::optional<ExecutionPath> Resolver::first_passing(const std::vector<ExecutionPath>& order,
                                                     std::optional<ThresholdUse>& use, std::string& why_none) const {
  std::vector<std::string> reasons;
  for (const ExecutionPath p : order) {
    if (auto why = check(p, use); !why) return p;
    else reasons.push_back(*why);
  }
  why_none.clear();
  for (size_t i = 0; i < reasons.size(); ++i) why_none += (i ? "; " : "") + reasons[i];
  use.reset();
  return std::nullopt;
}

void Resolver::decide_indexshare(PolicyDecision& d) const {
  const auto& pol = in_.policy;
  const bool package_required = package_values_usable_ && pol->indexshare &&
                                contains(known_indexshare_values(), *pol->indexshare);
  const auto role = in_.request.indexshare_role;
  if (!role) return;
  if (*role == IndexShareRole::kFull) {
    d.indexshare = "compute";  // a Full layer computes the top-k the Shared layers reuse
    return;
  }
  if (in_.overrides.indexshare == "recompute") {
    d.indexshare = "recompute";
    if (package_required) {
      d.package_recommendation_used = false;
      const std::string why = "runtime override indexshare=recompute: this Shared layer recomputes its "
                              "indexer instead of reusing the Full layer's top-k (package: indexshare required)";
      d.fallback_reason = d.fallback_reason ? *d.fallback_reason + "; " + why : why;
    }
    return;
  }
  d.indexshare = "reuse";
}

void Resolver::decide_experimental(PolicyDecision& d) const {
  std::map<std::string, std::string> declared;  // switch -> value as declared
  if (in_.policy) declared = in_.policy->experimental;
  for (const auto& [k, v] : builtin_.experimental) declared.emplace(k, v);  // package first
  for (const auto& [k, on] : in_.overrides.experimental) declared.emplace(k, "");
  for (const auto& [name, value] : declared) {
    ExperimentalDecision e{name, value, false, ""};
    const auto ov = in_.overrides.experimental.find(name);
    const auto ev = in_.backend.evidence.find(name);
    if (!contains(known_experimental_switches(), name)) {
      e.reason = "unsupported experimental switch: off";
    } else if (!value.empty() && !contains(known_experimental_values(), value)) {
      e.reason = "unsupported value " + in_quotes(value) + ": off";
    } else if (ov != in_.overrides.experimental.end()) {
      e.enabled = ov->second;
      e.reason = std::string("runtime override ") + (ov->second ? "on" : "off");
    } else if (ev != in_.backend.evidence.end()) {
      e.enabled = true;
      e.reason = "evidence " + in_quotes(ev->second) + " from backend " + in_quotes(in_.backend.name);
    } else {
      e.reason = "evidence-gated: no evidence given, off";
    }
    d.experimental.push_back(std::move(e));
  }
}

PolicyDecision Resolver::run() {
  const PolicyRequest& rq = in_.request;
  PolicyDecision d;
  if (in_.policy) d.unsupported = unsupported_policy_values(*in_.policy);
  if (profile_mismatch_) {
    d.unsupported.push_back(*profile_mismatch_);
    d.considered.push_back("package profile " + in_quotes(*in_.policy->profile) + ": " + *profile_mismatch_);
  }
  if (in_.thresholds && in_.thresholds->extra.is_object()) {
    for (const auto& [k, v] : in_.thresholds->extra.items()) d.ignored_thresholds.push_back(k);
  }

  // Phase identification.
  d.phase = identify_phase(rq.kind, rq.n_tokens, spmt_ ? spmt_->value : UINT64_MAX);
  std::optional<ThresholdUse> phase_use;
  if (rq.kind == RequestKind::kPrefill && spmt_) {
    const bool is_short = d.phase == Phase::kShortPrefill;
    phase_use = make_use("short_prefill_max_tokens", *spmt_, "tokens",
                         "n_tokens " + num(rq.n_tokens) + (is_short ? " <= " : " > ") + num(spmt_->value) + ": " +
                             std::string(phase_name(d.phase)));
    d.thresholds.push_back(*phase_use);
  }

  // Candidates in the spec's order.
  struct Candidate {
    std::string value;
    PolicySource source;
  };
  std::vector<Candidate> candidates;
  if (auto it = in_.overrides.paths.find(d.phase); it != in_.overrides.paths.end()) {
    candidates.push_back({it->second, PolicySource::kOverride});
  }
  if (in_.policy) {
    const auto& pol = *in_.policy;
    const std::optional<std::string>* field[] = {&pol.decode, &pol.short_prefill, &pol.long_prefill, &pol.verify};
    d.package_path = *field[static_cast<size_t>(d.phase)];
  }
  std::optional<std::string> package_rejection;
  if (d.package_path) {
    if (profile_mismatch_) {
      package_rejection = *profile_mismatch_ + ": its phase values are not interpreted for this model";
    } else if (!package_values_usable_) {
      package_rejection = "unsupported profile " + in_quotes(*in_.policy->profile) + ": its phase values are not "
                          "interpreted by this runtime";
    } else if (*d.package_path != kPathAuto && *d.package_path != kPathFallback &&
               !parse_execution_path(*d.package_path)) {
      package_rejection = "unsupported phase value " + in_quotes(*d.package_path) + " for " +
                          std::string(phase_name(d.phase));
    } else {
      candidates.push_back({*d.package_path, PolicySource::kPackage});
    }
    if (package_rejection) d.considered.push_back("package " + in_quotes(*d.package_path) + ": " + *package_rejection);
  }
  if (auto it = builtin_.paths.find(d.phase); it != builtin_.paths.end()) {
    candidates.push_back({it->second, PolicySource::kBuiltin});
  }

  std::optional<ExecutionPath> selected;
  std::optional<ThresholdUse> selected_use;
  std::optional<ThresholdUse> rejecting_use;  // the threshold that turned the package path down
  for (const auto& c : candidates) {
    const std::string who = std::string(policy_source_name(c.source)) + " " + in_quotes(c.value);
    std::optional<ThresholdUse> use;
    std::string why;
    std::optional<ExecutionPath> p;
    if (c.value == kPathAuto) {
      p = first_passing(generation_detail::auto_order(d.phase), use, why);
      if (!p) why = "auto found no runnable path: " + why;
    } else if (c.value == kPathFallback) {
      p = first_passing(generation_detail::fallback_order(d.phase), use, why);
      if (!p) why = "no correctness fallback runs: " + why;
    } else {
      p = parse_execution_path(c.value);  // override and built-in values are known
      if (auto w = check(*p, use)) {
        why = *w;
        p.reset();
      }
    }
    if (use) d.thresholds.push_back(*use);
    if (p) {
      d.considered.push_back(who + ": selected " + std::string(execution_path_name(*p)));
      selected = p;
      selected_use = use;
      d.source = c.source;
      break;
    }
    d.considered.push_back(who + ": rejected: " + why);
    if (c.source == PolicySource::kOverride) d.override_rejected = why;
    if (c.source == PolicySource::kPackage) {
      package_rejection = why;
      if (rejected_by_threshold_) rejecting_use = use;
    }
  }

  if (!selected) {  // step 4: correctness fallback
    std::string why;
    selected = first_passing(generation_detail::fallback_order(d.phase), selected_use, why);
    if (selected) {
      d.considered.push_back("fallback: selected " + std::string(execution_path_name(*selected)));
    } else if (in_.backend.runs(ExecutionPath::kDense)) {
      // Thresholds are hints: dense over its mask budget is still correct.
      selected = ExecutionPath::kDense;
      d.considered.push_back("fallback: dense over its thresholds (" + why + "): the only correct path left");
    } else {
      throw_invalid("generation policy: backend " + in_quotes(in_.backend.name) +
                    " runs no path this model can execute for " + std::string(phase_name(d.phase)) + " (" + why +
                    ")");
    }
    if (selected_use) d.thresholds.push_back(*selected_use);
    d.source = PolicySource::kFallback;
  }
  d.selected = *selected;

  if (d.package_path && d.source != PolicySource::kPackage) {
    d.package_recommendation_used = false;
    if (package_rejection) {
      d.fallback_reason = *package_rejection;
    } else if (d.source == PolicySource::kOverride) {
      d.fallback_reason = "runtime override " + std::string(phase_name(d.phase)) + "=" +
                          in_.overrides.paths.at(d.phase) + " replaces the package's " + in_quotes(*d.package_path);
    }
  }
  decide_indexshare(d);
  decide_experimental(d);

  PolicyTelemetry& t = d.telemetry;
  t.profile = profile_known_ ? in_.policy->profile : builtin_.profile;
  t.phase = d.phase;
  t.backend = in_.backend.name;
  t.n_tokens = rq.n_tokens;
  t.n_kv = rq.n_kv;
  t.top_k = rq.top_k;
  t.indexshare_role = rq.indexshare_role;
  t.dense_mask_bytes = mask_;
  t.threshold = rejecting_use ? rejecting_use : selected_use ? selected_use : phase_use;
  t.selected_path = std::string(execution_path_name(d.selected));
  if (!d.package_recommendation_used && d.package_path) t.rejected_path = d.package_path;
  t.fallback_reason = d.fallback_reason;
  t.mask_bytes_avoided = builtin_.sparse_attention && d.selected != ExecutionPath::kDense ? mask_ : 0;
  return d;
}

void check_request(const PolicyRequest& rq) {
  if (rq.n_tokens == 0) throw_invalid("generation policy request: n_tokens must be at least 1");
  if (rq.n_kv < rq.n_tokens) {
    throw_invalid("generation policy request: n_kv " + num(rq.n_kv) + " is below n_tokens " + num(rq.n_tokens) +
                  " (visible KV includes the tokens being processed)");
  }
  if (rq.kind == RequestKind::kDecode && rq.n_tokens != 1) {
    throw_invalid("generation policy request: decode is one-token generation, got n_tokens " + num(rq.n_tokens) +
                  " (use prefill or verify)");
  }
}

}  // namespace

PolicyDecision resolve_policy(const PolicyInputs& inputs, const PolicyLogSink& log) {
  check_request(inputs.request);
  PolicyDecision d = Resolver(inputs).run();
  const bool experiment = std::any_of(d.experimental.begin(), d.experimental.end(),
                                      [](const ExperimentalDecision& e) { return e.enabled; });
  if (!d.package_recommendation_used || experiment || !d.unsupported.empty() || d.override_rejected) {
    nlohmann::json line = {{"event", "skippy.generation_policy"},
                           {"package_recommendation_used", d.package_recommendation_used},
                           {"source", policy_source_name(d.source)},
                           {"package_path", d.package_path ? nlohmann::json(*d.package_path) : nlohmann::json()},
                           {"telemetry", policy_telemetry_json(d.telemetry)}};
    if (d.indexshare) line["indexshare"] = *d.indexshare;
    if (!d.unsupported.empty()) line["unsupported"] = d.unsupported;
    if (d.override_rejected) line["override_rejected"] = *d.override_rejected;
    nlohmann::json enabled = nlohmann::json::array();
    for (const auto& e : d.experimental) {
      if (e.enabled) enabled.push_back({{"switch", e.name}, {"reason", e.reason}});
    }
    if (!enabled.empty()) line["experimental_enabled"] = enabled;
    d.log_line = line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    if (log) log(*d.log_line);
  }
  return d;
}

}  // namespace skippy
