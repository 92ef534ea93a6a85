// The JSON shapes of a policy decision: docs/CLI.md's `policy` keys and the
// telemetry record (same keys in the log line).
#include "skippy/policy.h"

namespace skippy {
namespace {

using json = nlohmann::json;

template <typename T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

json threshold_json(const ThresholdUse& t) {
  return {{"name", t.name},
          {"value", t.value},
          {"unit", t.unit},
          {"source", policy_source_name(t.source)},
          {"outcome", t.outcome}};
}

}  // namespace

json policy_telemetry_json(const PolicyTelemetry& t) {
  return {{"profile", opt(t.profile)},
          {"phase", phase_name(t.phase)},
          {"backend", t.backend},
          {"n_tokens", t.n_tokens},
          {"n_kv", t.n_kv},
          {"top_k", opt(t.top_k)},
          {"indexshare_role", t.indexshare_role ? json(indexshare_role_name(*t.indexshare_role)) : json(nullptr)},
          {"dense_mask_bytes", t.dense_mask_bytes},
          {"threshold", t.threshold ? threshold_json(*t.threshold) : json(nullptr)},
          {"selected_path", t.selected_path},
          {"rejected_path", opt(t.rejected_path)},
          {"fallback_reason", opt(t.fallback_reason)},
          {"mask_bytes_avoided", t.mask_bytes_avoided}};
}

json policy_decision_json(const PolicyDecision& d) {
  json experimental = json::array();
  for (const auto& e : d.experimental) {
    experimental.push_back({{"switch", e.name}, {"value", e.value}, {"enabled", e.enabled}, {"reason", e.reason}});
  }
  json thresholds = json::array();
  for (const auto& t : d.thresholds) thresholds.push_back(threshold_json(t));
  return {{"phase", phase_name(d.phase)},
          {"selected_path", execution_path_name(d.selected)},
          {"package_path", opt(d.package_path)},
          {"fallback_reason", opt(d.fallback_reason)},
          {"source", policy_source_name(d.source)},
          {"package_recommendation_used", d.package_recommendation_used},
          {"override_rejected", opt(d.override_rejected)},
          {"indexshare", opt(d.indexshare)},
          {"experimental", experimental},
          {"unsupported", d.unsupported},
          {"considered", d.considered},
          {"thresholds", thresholds},
          {"ignored_thresholds", d.ignored_thresholds},
          {"telemetry", policy_telemetry_json(d.telemetry)}};
}

}  // namespace skippy
