// model-package.json "generation": policy, thresholds and speculative
// decoding (spec: "Generation Defaults", "Execution Policy", "Speculative
// Decoding"). Parsed fully and validated against the package's layer_count;
// unknown fields are kept in `extra` so a round trip loses nothing.
#include <algorithm>
#include <set>

#include "format/manifest_json.h"
#include "skippy/error.h"
#include "skippy/manifest.h"

namespace skippy {

namespace {

constexpr std::string_view kProfiles[] = {"glm-dsa-v1"};
constexpr std::string_view kPhaseValues[] = {"auto",          "dense",          "direct-sparse",
                                             "compact-flash", "sparse-chunked", "fallback"};
constexpr std::string_view kIndexshareValues[] = {"required"};
constexpr std::string_view kExperimentalSwitches[] = {"selected_row_flash", "moe_weighted_down",
                                                      "moe_merged_shared_gate_up"};
constexpr std::string_view kExperimentalValues[] = {"evidence-gated"};
constexpr std::string_view kProposerTypes[] = {kNativeMtp, kNgramCache, kNgramSuffix};
constexpr std::string_view kStrategyTypes[] = {kNativeMtp, kNgramCache, kNgramSuffix, kComposite};

bool contains(std::span<const std::string_view> list, std::string_view v) {
  return std::find(list.begin(), list.end(), v) != list.end();
}

// One line per member of `extra` (the keys a parser kept as unknown), each
// naming the field: "<parent>.<key>: unknown <what> field".
void unknown_fields(const nlohmann::json& extra, const std::string& parent, std::string_view what,
                    std::vector<std::string>& out) {
  if (!extra.is_object()) return;
  for (const auto& [name, value] : extra.items()) {
    out.push_back(manifest_detail::field_path(parent, name) + ": unknown " + std::string(what) + " field");
  }
}

}  // namespace

std::span<const std::string_view> known_policy_profiles() noexcept { return kProfiles; }
std::span<const std::string_view> known_phase_values() noexcept { return kPhaseValues; }
std::span<const std::string_view> known_indexshare_values() noexcept { return kIndexshareValues; }
std::span<const std::string_view> known_experimental_switches() noexcept {
  return kExperimentalSwitches;
}
std::span<const std::string_view> known_experimental_values() noexcept {
  return kExperimentalValues;
}
std::span<const std::string_view> known_proposer_types() noexcept { return kProposerTypes; }
std::span<const std::string_view> known_strategy_types() noexcept { return kStrategyTypes; }
bool is_known_strategy_type(std::string_view type) noexcept {
  return contains(kStrategyTypes, type);
}

std::vector<std::string> unsupported_policy_values(const GenerationPolicy& policy) {
  using manifest_detail::quote;
  const std::string p = "generation.policy";
  std::vector<std::string> out;
  if (policy.profile && !contains(kProfiles, *policy.profile)) {
    out.push_back(p + ".profile: unknown profile " + quote(*policy.profile));
  }
  const std::pair<const char*, const std::optional<std::string>*> phases[] = {
      {"decode", &policy.decode},
      {"short_prefill", &policy.short_prefill},
      {"long_prefill", &policy.long_prefill},
      {"verify", &policy.verify}};
  for (const auto& [name, value] : phases) {
    if (*value && !contains(kPhaseValues, **value)) {
      out.push_back(p + "." + name + ": unknown phase value " + quote(**value));
    }
  }
  if (policy.indexshare && !contains(kIndexshareValues, *policy.indexshare)) {
    out.push_back(p + ".indexshare: unknown indexshare value " + quote(*policy.indexshare));
  }
  for (const auto& [name, value] : policy.experimental) {
    const std::string fp = manifest_detail::field_path(p + ".experimental", name);
    if (!contains(kExperimentalSwitches, name)) {
      out.push_back(fp + ": unknown experimental switch (value " + quote(value) + ")");
    } else if (!contains(kExperimentalValues, value)) {
      out.push_back(fp + ": unknown experimental value " + quote(value));
    }
  }
  unknown_fields(policy.extra, p, "policy", out);
  return out;
}

std::optional<std::string> unsupported_default_strategy(const SpeculativeDecoding& spec) {
  using manifest_detail::quote;
  if (!spec.default_strategy) return std::nullopt;
  const std::string p = "generation.speculative_decoding.default";
  auto it = spec.strategies.find(*spec.default_strategy);
  if (it == spec.strategies.end()) {
    return p + ": names undeclared strategy " + quote(*spec.default_strategy);
  }
  if (!is_known_strategy_type(it->second.type)) {
    return p + ": strategy " + quote(it->first) + " has unsupported type " +
           quote(it->second.type);
  }
  return std::nullopt;
}

std::vector<std::string> generation_fields_outside_schema(const GenerationDefaults& generation) {
  std::vector<std::string> out;
  if (!generation.extra.is_object()) return out;
  for (const auto& [key, value] : generation.extra.items()) {
    out.push_back(manifest_detail::field_path("generation", key) +
                  ": not a generation field (policy, thresholds, speculative_decoding); the spec forbids backend- "
                  "and model-family-specific fields such as generation.metal or generation.glm_dsa (record a "
                  "profile, a phase policy, a threshold or a speculation strategy instead)");
  }
  // Below the top level: every object's unknown members, by name. Objects of
  // a type this runtime does not know are opaque (their fields are the
  // type's business) and are reported as unsupported types elsewhere.
  using manifest_detail::field_path;
  if (generation.policy) unknown_fields(generation.policy->extra, "generation.policy", "policy", out);
  if (generation.thresholds) {
    unknown_fields(generation.thresholds->extra, "generation.thresholds", "threshold", out);
  }
  if (const auto& sd = generation.speculative_decoding) {
    const std::string p = "generation.speculative_decoding";
    unknown_fields(sd->extra, p, "speculative_decoding", out);
    for (const auto& [id, pr] : sd->proposers) {
      if (contains(kProposerTypes, pr.type)) unknown_fields(pr.extra, field_path(p + ".proposers", id), "proposer", out);
    }
    for (const auto& [id, st] : sd->strategies) {
      if (!is_known_strategy_type(st.type)) continue;
      const std::string sp = field_path(p + ".strategies", id);
      unknown_fields(st.extra, sp, "strategy", out);
      if (st.window_policy) unknown_fields(st.window_policy->extra, sp + ".window_policy", "window_policy", out);
      if (st.extension_policy) {
        unknown_fields(st.extension_policy->extra, sp + ".extension_policy", "extension_policy", out);
      }
    }
  }
  return out;
}

std::vector<std::string> pipeline_depths_needing_evidence(const SpeculativeDecoding& spec) {
  std::vector<std::string> out;
  for (const auto& [id, s] : spec.strategies) {
    if (!s.window_policy || !s.window_policy->pipeline_depth || *s.window_policy->pipeline_depth <= 1) continue;
    out.push_back(manifest_detail::field_path(
                      manifest_detail::field_path("generation.speculative_decoding.strategies", id),
                      "window_policy") +
                  ".pipeline_depth: " + std::to_string(*s.window_policy->pipeline_depth) +
                  " in a package default; the spec requires topology/workload-specific evidence for a depth above "
                  "1 (omitted, it is the legacy 1)");
  }
  return out;
}

namespace manifest_detail {

namespace {

// Every key the spec names for proposers and strategies; a known-type object
// carrying one that does not apply to its type is refused (rather than kept
// as an unknown field), so a misplaced field is not silently ignored.
const std::initializer_list<std::string_view> kSpecSpeculationKeys = {
    "type",         "proposer",        "primary",       "extender",
    "prediction_depth", "layer_indices", "ngram_min",   "ngram_max",
    "max_proposal_tokens", "history_scope", "extension_policy", "window_policy"};

bool is_ngram(std::string_view type) { return type == kNgramCache || type == kNgramSuffix; }

void refuse_inapplicable(const json& j, std::string_view type,
                         std::initializer_list<std::string_view> allowed, std::string_view p,
                         const FieldReader& r) {
  for (const auto& [k, v] : j.items()) {
    if (is_one_of(k, kSpecSpeculationKeys) && !is_one_of(k, allowed)) {
      r.fail(field_path(p, k), "does not apply to type " + quote(type));
    }
  }
}

ProposerFields parse_proposer_fields(const json& j, std::string_view p, const FieldReader& r) {
  ProposerFields f;
  f.prediction_depth = r.opt_u64(j, "prediction_depth", p);
  if (const json* li = FieldReader::find(j, "layer_indices")) {
    const std::string lp = field_path(p, "layer_indices");
    r.expect_array(*li, lp);
    std::vector<uint32_t> v;
    for (size_t i = 0; i < li->size(); ++i) v.push_back(r.u32((*li)[i], index_path(lp, i)));
    f.layer_indices = std::move(v);
  }
  f.ngram_min = r.opt_u64(j, "ngram_min", p);
  f.ngram_max = r.opt_u64(j, "ngram_max", p);
  f.max_proposal_tokens = r.opt_u64(j, "max_proposal_tokens", p);
  f.history_scope = r.opt_text(j, "history_scope", p);
  return f;
}

// The rules of ProposerFields (manifest.h). `complete`: the object is the
// proposal source itself, so the fields its type needs must all be present.
void check_proposer_fields(const ProposerFields& f, std::string_view type, bool complete,
                           uint32_t layer_count, std::string_view p, const FieldReader& r) {
  auto missing = [&](std::string_view key, const std::string& why) {
    r.fail(field_path(p, key), "missing required field (" + why + ")");
  };
  if (type == kNativeMtp) {
    if (complete && !f.prediction_depth) missing("prediction_depth", "native-mtp needs it");
    if (complete && !f.layer_indices) missing("layer_indices", "native-mtp needs it");
    if (f.prediction_depth && *f.prediction_depth != 1) {
      r.fail(field_path(p, "prediction_depth"),
             "must be 1 for the current native MTP runtime, got " +
                 std::to_string(*f.prediction_depth));
    }
    if (f.layer_indices) {
      const std::string lp = field_path(p, "layer_indices");
      if (f.layer_indices->empty()) r.fail(lp, "must list at least one package layer index");
      std::set<uint32_t> seen;
      for (size_t i = 0; i < f.layer_indices->size(); ++i) {
        const uint32_t v = (*f.layer_indices)[i];
        if (v >= layer_count) {
          r.fail(index_path(lp, i), std::to_string(v) + " is not a package layer index (layer_count " +
                                        std::to_string(layer_count) + ")");
        }
        if (!seen.insert(v).second) r.fail(index_path(lp, i), "duplicate layer index " + std::to_string(v));
      }
    }
    return;
  }
  if (!is_ngram(type)) return;
  const bool cache = type == kNgramCache;
  const std::string both = std::string(type) + " needs ngram_min and ngram_max";
  if (complete && !f.ngram_min) missing("ngram_min", both);
  if (complete && !f.ngram_max) missing("ngram_max", both);
  if (complete && !f.history_scope) missing("history_scope", "must be \"request\"");
  const uint64_t lo = cache ? 1 : 3;
  const uint64_t hi = cache ? 4 : 64;
  const std::string limit =
      cache ? "ngram-cache needs 1 <= ngram_min <= ngram_max <= 4 (llama.cpp's cache match window)"
            : "ngram-suffix needs 3 <= ngram_min <= ngram_max <= 64";
  for (const auto& [key, value] : {std::pair{"ngram_min", f.ngram_min}, std::pair{"ngram_max", f.ngram_max}}) {
    if (value && (*value < lo || *value > hi)) {
      r.fail(field_path(p, key), std::to_string(*value) + " is out of range: " + limit);
    }
  }
  if (f.ngram_min && f.ngram_max && *f.ngram_min > *f.ngram_max) {
    r.fail(field_path(p, "ngram_min"), std::to_string(*f.ngram_min) + " exceeds ngram_max " +
                                           std::to_string(*f.ngram_max));
  }
  if (f.max_proposal_tokens && *f.max_proposal_tokens == 0) {
    r.fail(field_path(p, "max_proposal_tokens"), "must be at least 1");
  }
  if (f.history_scope && *f.history_scope != kHistoryScopeRequest) {
    r.fail(field_path(p, "history_scope"),
           "must be \"request\" (a history proposer never observes another request's tokens), got " +
               quote(*f.history_scope));
  }
}

WindowPolicy parse_window_policy(const json& j, std::string_view p, const FieldReader& r) {
  r.expect_object(j, p);
  WindowPolicy w;
  w.default_mode = r.opt_text(j, "default", p);
  w.initial_window = r.opt_u64(j, "initial_window", p);
  w.min_window = r.opt_u64(j, "min_window", p);
  w.max_window = r.opt_u64(j, "max_window", p);
  w.pipeline_depth = r.opt_u64(j, "pipeline_depth", p);
  for (const auto& [key, value] : {std::pair{"initial_window", w.initial_window},
                                   std::pair{"min_window", w.min_window},
                                   std::pair{"max_window", w.max_window},
                                   std::pair{"pipeline_depth", w.pipeline_depth}}) {
    if (value && *value == 0) r.fail(field_path(p, key), "must be a positive integer, got 0");
  }
  if (w.min_window && w.max_window && *w.min_window > *w.max_window) {
    r.fail(field_path(p, "min_window"), "exceeds max_window");
  }
  if (w.initial_window && w.min_window && *w.initial_window < *w.min_window) {
    r.fail(field_path(p, "initial_window"), "is below min_window");
  }
  if (w.initial_window && w.max_window && *w.initial_window > *w.max_window) {
    r.fail(field_path(p, "initial_window"), "exceeds max_window");
  }
  w.extra = unknown_members(
      j, {"default", "initial_window", "min_window", "max_window", "pipeline_depth"});
  return w;
}

ExtensionPolicy parse_extension_policy(const json& j, std::string_view p, const FieldReader& r) {
  r.expect_object(j, p);
  ExtensionPolicy e;
  e.initial_tokens = r.opt_u64(j, "initial_tokens", p);
  e.max_tokens = r.opt_u64(j, "max_tokens", p);
  e.tail_backoff_proposals = r.opt_u64(j, "tail_backoff_proposals", p);
  if (e.max_tokens && *e.max_tokens == 0) r.fail(field_path(p, "max_tokens"), "must be at least 1");
  if (e.initial_tokens && e.max_tokens && *e.initial_tokens > *e.max_tokens) {
    r.fail(field_path(p, "initial_tokens"), std::to_string(*e.initial_tokens) +
                                                " exceeds max_tokens " +
                                                std::to_string(*e.max_tokens));
  }
  e.extra = unknown_members(j, {"initial_tokens", "max_tokens", "tail_backoff_proposals"});
  return e;
}

std::string parse_type(const json& j, std::string_view p, const FieldReader& r) {
  r.expect_object(j, p);
  return r.text(r.require(j, "type", p), field_path(p, "type"));
}

Proposer parse_proposer(const json& j, std::string_view p, uint32_t layer_count,
                        const FieldReader& r) {
  Proposer out;
  out.type = parse_type(j, p, r);
  if (!contains(kProposerTypes, out.type)) {
    out.extra = unknown_members(j, {"type"});  // kept opaque, see manifest.h
    return out;
  }
  if (out.type == kNativeMtp) {
    refuse_inapplicable(j, out.type, {"type", "prediction_depth", "layer_indices"}, p, r);
  } else {
    refuse_inapplicable(j, out.type,
                        {"type", "ngram_min", "ngram_max", "max_proposal_tokens", "history_scope"},
                        p, r);
  }
  static_cast<ProposerFields&>(out) = parse_proposer_fields(j, p, r);
  check_proposer_fields(out, out.type, /*complete=*/true, layer_count, p, r);
  out.extra = unknown_members(j, kSpecSpeculationKeys);
  return out;
}

// A reference from a strategy field to a declared proposer of a fitting type.
void check_reference(const std::string& id, std::string_view key,
                     std::initializer_list<std::string_view> types, std::string_view what,
                     const std::map<std::string, Proposer>& proposers, std::string_view p,
                     const FieldReader& r) {
  auto it = proposers.find(id);
  if (it == proposers.end()) {
    r.fail(field_path(p, key), "names undeclared proposer " + quote(id));
  }
  if (!is_one_of(it->second.type, types)) {
    r.fail(field_path(p, key), "proposer " + quote(id) + " has type " + quote(it->second.type) +
                                   "; " + std::string(what));
  }
}

Strategy parse_strategy(const json& j, std::string_view p, uint32_t layer_count,
                        const std::map<std::string, Proposer>& proposers, const FieldReader& r) {
  Strategy s;
  s.type = parse_type(j, p, r);
  if (!is_known_strategy_type(s.type)) {
    s.extra = unknown_members(j, {"type"});  // kept opaque, see manifest.h
    return s;
  }
  if (s.type == kComposite) {
    refuse_inapplicable(j, s.type, {"type", "primary", "extender", "extension_policy", "window_policy"},
                        p, r);
  } else if (s.type == kNativeMtp) {
    refuse_inapplicable(j, s.type,
                        {"type", "proposer", "prediction_depth", "layer_indices", "window_policy"}, p,
                        r);
  } else {
    refuse_inapplicable(j, s.type,
                        {"type", "proposer", "ngram_min", "ngram_max", "max_proposal_tokens",
                         "history_scope", "window_policy"},
                        p, r);
  }
  static_cast<ProposerFields&>(s) = parse_proposer_fields(j, p, r);
  s.proposer = r.opt_text(j, "proposer", p);
  s.primary = r.opt_text(j, "primary", p);
  s.extender = r.opt_text(j, "extender", p);
  if (const json* e = FieldReader::find(j, "extension_policy")) {
    s.extension_policy = parse_extension_policy(*e, field_path(p, "extension_policy"), r);
  }
  if (const json* w = FieldReader::find(j, "window_policy")) {
    s.window_policy = parse_window_policy(*w, field_path(p, "window_policy"), r);
  }
  if (s.type == kComposite) {
    if (!s.primary) r.fail(field_path(p, "primary"), "missing required field (a native-mtp proposer id)");
    if (!s.extender) {
      r.fail(field_path(p, "extender"),
             "missing required field (an ngram-cache or ngram-suffix proposer id)");
    }
    check_reference(*s.primary, "primary", {kNativeMtp}, "a composite primary must be native-mtp",
                    proposers, p, r);
    check_reference(*s.extender, "extender", {kNgramCache, kNgramSuffix},
                    "a composite extender must be an N-gram proposer (ngram-cache or ngram-suffix)",
                    proposers, p, r);
  } else {
    if (s.proposer) {
      check_reference(*s.proposer, "proposer", {s.type},
                      "a " + s.type + " strategy needs a " + s.type + " proposer", proposers, p, r);
    }
    check_proposer_fields(s, s.type, /*complete=*/!s.proposer, layer_count, p, r);
  }
  s.extra = unknown_members(j, kSpecSpeculationKeys);
  return s;
}

SpeculativeDecoding parse_speculative(const json& j, uint32_t layer_count, const FieldReader& r) {
  const std::string p = "generation.speculative_decoding";
  r.expect_object(j, p);
  SpeculativeDecoding sd;
  sd.default_strategy = r.opt_text(j, "default", p);
  if (const json* pj = FieldReader::find(j, "proposers")) {
    const std::string pp = field_path(p, "proposers");
    r.expect_object(*pj, pp);
    for (const auto& [id, v] : pj->items()) {
      if (id.empty()) r.fail(pp, "a proposer id must be non-empty");
      sd.proposers.emplace(id, parse_proposer(v, field_path(pp, id), layer_count, r));
    }
  }
  if (const json* sj = FieldReader::find(j, "strategies")) {
    const std::string sp = field_path(p, "strategies");
    r.expect_object(*sj, sp);
    for (const auto& [id, v] : sj->items()) {
      if (id.empty()) r.fail(sp, "a strategy id must be non-empty");
      if (id == "auto" || id == "disabled") {
        r.fail(field_path(sp, id), quote(id) + " is an operator keyword, not a package strategy id");
      }
      sd.strategies.emplace(id, parse_strategy(v, field_path(sp, id), layer_count, sd.proposers, r));
    }
  }
  if (sd.default_strategy && !sd.strategies.contains(*sd.default_strategy)) {
    r.fail(field_path(p, "default"), quote(*sd.default_strategy) +
                                         " is not a declared strategy (declare it under strategies)");
  }
  sd.extra = unknown_members(j, {"default", "proposers", "strategies"});
  return sd;
}

GenerationPolicy parse_policy(const json& j, const FieldReader& r) {
  const std::string p = "generation.policy";
  r.expect_object(j, p);
  GenerationPolicy g;
  g.profile = r.opt_text(j, "profile", p);
  g.decode = r.opt_text(j, "decode", p);
  g.short_prefill = r.opt_text(j, "short_prefill", p);
  g.long_prefill = r.opt_text(j, "long_prefill", p);
  g.verify = r.opt_text(j, "verify", p);
  g.indexshare = r.opt_text(j, "indexshare", p);
  if (const json* e = FieldReader::find(j, "experimental")) {
    const std::string ep = field_path(p, "experimental");
    r.expect_object(*e, ep);
    for (const auto& [name, value] : e->items()) {
      if (name.empty()) r.fail(ep, "an experimental switch name must be non-empty");
      g.experimental.emplace(name, r.text(value, field_path(ep, name)));
    }
  }
  g.extra = unknown_members(j, {"profile", "decode", "short_prefill", "long_prefill", "verify",
                                "indexshare", "experimental"});
  return g;
}

GenerationThresholds parse_thresholds(const json& j, const FieldReader& r) {
  const std::string p = "generation.thresholds";
  r.expect_object(j, p);
  GenerationThresholds t;
  t.short_prefill_max_tokens = r.opt_u64(j, "short_prefill_max_tokens", p);
  t.compact_flash_min_kv = r.opt_u64(j, "compact_flash_min_kv", p);
  t.dense_mask_max_bytes = r.opt_u64(j, "dense_mask_max_bytes", p);
  t.extra = unknown_members(j, {"short_prefill_max_tokens", "compact_flash_min_kv",
                                "dense_mask_max_bytes"});
  return t;
}

// ------------------------------------------------------------- serializing

void put_proposer_fields(ojson& j, const ProposerFields& f) {
  if (f.prediction_depth) j["prediction_depth"] = *f.prediction_depth;
  if (f.layer_indices) j["layer_indices"] = *f.layer_indices;
  if (f.ngram_min) j["ngram_min"] = *f.ngram_min;
  if (f.ngram_max) j["ngram_max"] = *f.ngram_max;
  if (f.max_proposal_tokens) j["max_proposal_tokens"] = *f.max_proposal_tokens;
  if (f.history_scope) j["history_scope"] = *f.history_scope;
}

// An unknown-type proposer or strategy is opaque: all it holds besides
// `type` is `extra`, so typed members would not survive a round trip.
void refuse_typed_members_of_opaque(bool has_typed, std::string_view type, std::string_view p,
                                    const FieldReader& r) {
  if (has_typed) {
    r.fail(p, "type " + quote(type) +
                  " is not one this runtime knows; its fields belong in extra, not in typed members");
  }
}

ojson window_policy_to_json(const WindowPolicy& w, const FieldReader& r, std::string_view p) {
  ojson j = ojson::object();
  if (w.default_mode) j["default"] = *w.default_mode;
  if (w.initial_window) j["initial_window"] = *w.initial_window;
  if (w.min_window) j["min_window"] = *w.min_window;
  if (w.max_window) j["max_window"] = *w.max_window;
  if (w.pipeline_depth) j["pipeline_depth"] = *w.pipeline_depth;
  append_extra(j, w.extra, {"default", "initial_window", "min_window", "max_window", "pipeline_depth"},
               r, p);
  return j;
}

ojson extension_policy_to_json(const ExtensionPolicy& e, const FieldReader& r, std::string_view p) {
  ojson j = ojson::object();
  if (e.initial_tokens) j["initial_tokens"] = *e.initial_tokens;
  if (e.max_tokens) j["max_tokens"] = *e.max_tokens;
  if (e.tail_backoff_proposals) j["tail_backoff_proposals"] = *e.tail_backoff_proposals;
  append_extra(j, e.extra, {"initial_tokens", "max_tokens", "tail_backoff_proposals"}, r, p);
  return j;
}

ojson proposer_to_json(const Proposer& pr, const FieldReader& r, std::string_view p) {
  ojson j = ojson::object();
  j["type"] = pr.type;
  if (!contains(kProposerTypes, pr.type)) {
    refuse_typed_members_of_opaque(static_cast<const ProposerFields&>(pr) != ProposerFields{},
                                   pr.type, p, r);
    append_extra(j, pr.extra, {"type"}, r, p);
    return j;
  }
  put_proposer_fields(j, pr);
  append_extra(j, pr.extra, kSpecSpeculationKeys, r, p);
  return j;
}

ojson strategy_to_json(const Strategy& s, const FieldReader& r, std::string_view p) {
  ojson j = ojson::object();
  j["type"] = s.type;
  if (!is_known_strategy_type(s.type)) {
    const bool typed = static_cast<const ProposerFields&>(s) != ProposerFields{} || s.proposer ||
                       s.primary || s.extender || s.extension_policy || s.window_policy;
    refuse_typed_members_of_opaque(typed, s.type, p, r);
    append_extra(j, s.extra, {"type"}, r, p);
    return j;
  }
  if (s.proposer) j["proposer"] = *s.proposer;
  if (s.primary) j["primary"] = *s.primary;
  if (s.extender) j["extender"] = *s.extender;
  put_proposer_fields(j, s);
  if (s.extension_policy) {
    j["extension_policy"] =
        extension_policy_to_json(*s.extension_policy, r, field_path(p, "extension_policy"));
  }
  if (s.window_policy) {
    j["window_policy"] = window_policy_to_json(*s.window_policy, r, field_path(p, "window_policy"));
  }
  append_extra(j, s.extra, kSpecSpeculationKeys, r, p);
  return j;
}

}  // namespace

GenerationDefaults parse_generation(const json& j, uint32_t layer_count, const FieldReader& r) {
  const std::string p = "generation";
  r.expect_object(j, p);
  GenerationDefaults g;
  if (const json* v = FieldReader::find(j, "policy")) g.policy = parse_policy(*v, r);
  if (const json* v = FieldReader::find(j, "thresholds")) g.thresholds = parse_thresholds(*v, r);
  if (const json* v = FieldReader::find(j, "speculative_decoding")) {
    g.speculative_decoding = parse_speculative(*v, layer_count, r);
  }
  g.extra = unknown_members(j, {"policy", "thresholds", "speculative_decoding"});
  return g;
}

ojson generation_to_json(const GenerationDefaults& g, const FieldReader& r) {
  const std::string p = "generation";
  ojson j = ojson::object();
  if (g.policy) {
    const GenerationPolicy& pol = *g.policy;
    const std::string pp = field_path(p, "policy");
    ojson pj = ojson::object();
    if (pol.profile) pj["profile"] = *pol.profile;
    if (pol.decode) pj["decode"] = *pol.decode;
    if (pol.short_prefill) pj["short_prefill"] = *pol.short_prefill;
    if (pol.long_prefill) pj["long_prefill"] = *pol.long_prefill;
    if (pol.verify) pj["verify"] = *pol.verify;
    if (pol.indexshare) pj["indexshare"] = *pol.indexshare;
    if (!pol.experimental.empty()) {
      ojson ej = ojson::object();
      // The spec's switches in the spec's order, then any others by name.
      for (std::string_view name : kExperimentalSwitches) {
        auto it = pol.experimental.find(std::string(name));
        if (it != pol.experimental.end()) ej[it->first] = it->second;
      }
      for (const auto& [k, v] : pol.experimental) {
        if (!contains(kExperimentalSwitches, k)) ej[k] = v;
      }
      pj["experimental"] = std::move(ej);
    }
    append_extra(pj, pol.extra,
                 {"profile", "decode", "short_prefill", "long_prefill", "verify", "indexshare",
                  "experimental"},
                 r, pp);
    j["policy"] = std::move(pj);
  }
  if (g.thresholds) {
    const GenerationThresholds& t = *g.thresholds;
    ojson tj = ojson::object();
    if (t.short_prefill_max_tokens) tj["short_prefill_max_tokens"] = *t.short_prefill_max_tokens;
    if (t.compact_flash_min_kv) tj["compact_flash_min_kv"] = *t.compact_flash_min_kv;
    if (t.dense_mask_max_bytes) tj["dense_mask_max_bytes"] = *t.dense_mask_max_bytes;
    append_extra(tj, t.extra,
                 {"short_prefill_max_tokens", "compact_flash_min_kv", "dense_mask_max_bytes"}, r,
                 field_path(p, "thresholds"));
    j["thresholds"] = std::move(tj);
  }
  if (g.speculative_decoding) {
    const SpeculativeDecoding& sd = *g.speculative_decoding;
    const std::string sp = field_path(p, "speculative_decoding");
    ojson sj = ojson::object();
    if (sd.default_strategy) sj["default"] = *sd.default_strategy;
    if (!sd.proposers.empty()) {
      ojson pj = ojson::object();
      for (const auto& [id, pr] : sd.proposers) {
        pj[id] = proposer_to_json(pr, r, field_path(field_path(sp, "proposers"), id));
      }
      sj["proposers"] = std::move(pj);
    }
    if (!sd.strategies.empty()) {
      ojson stj = ojson::object();
      for (const auto& [id, st] : sd.strategies) {
        stj[id] = strategy_to_json(st, r, field_path(field_path(sp, "strategies"), id));
      }
      sj["strategies"] = std::move(stj);
    }
    append_extra(sj, sd.extra, {"default", "proposers", "strategies"}, r, sp);
    j["speculative_decoding"] = std::move(sj);
  }
  append_extra(j, g.extra, {"policy", "thresholds", "speculative_decoding"}, r, p);
  return j;
}

}  // namespace manifest_detail

std::vector<std::string> generation_warnings(const std::optional<GenerationDefaults>& generation) {
  std::vector<std::string> out;
  if (!generation) return out;
  if (generation->policy) out = unsupported_policy_values(*generation->policy);
  if (generation->speculative_decoding) {
    if (auto w = unsupported_default_strategy(*generation->speculative_decoding)) out.push_back(std::move(*w));
    for (auto& w : pipeline_depths_needing_evidence(*generation->speculative_decoding)) out.push_back(std::move(w));
  }
  // The policy's unknown fields are already in unsupported_policy_values.
  const std::vector<std::string> said = out;
  for (auto& w : generation_fields_outside_schema(*generation)) {
    if (std::find(said.begin(), said.end(), w) == said.end()) out.push_back(std::move(w) + "; ignored");
  }
  return out;
}

}  // namespace skippy
