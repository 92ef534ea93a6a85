// Speculative-decoding plans (spec: "Speculative Decoding", "Native MTP
// strategy rules", "Generation Defaults").
//
// resolve_speculative() turns the package's generation.speculative_decoding,
// the operator's settings and what the model holds into one typed plan, or
// a refusal that names the rule that failed. The plan is what a serving
// runtime (skippy-server) receives; it does not repeat this resolution.
//
// Operator strategy values: "auto" (the package default, else the runtime
// default, which is disabled), "mtp" (direct native MTP), "disabled", a
// strategy the package declares, the legacy "native-mtp-n1" (normalised to
// "mtp"), and for a direct GGUF "ngram-cache" / "ngram-suffix" with valid
// N-gram bounds. A named strategy cannot be invented outside its package.
//
// Settings are layered per field: CLI flag, then the selected model's entry,
// then global defaults (config.toml, see parse_operator_config). They may
// tighten a package's bounds, never widen them.
//
// Pure, except parse/load_operator_config which read config.toml (toml++).
// Thread-safety: every function is safe to call concurrently.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "skippy/manifest.h"

namespace skippy {

// This runtime's limits on per-request speculation (untrusted manifests and
// configs cannot make a plan allocate more): proposal and extension tokens,
// verify-window tokens and in-flight windows are each at most 64.
inline constexpr uint64_t kMaxSpeculativeTokens = 64;
inline constexpr uint64_t kMaxPipelineDepth = 64;
// max_proposal_tokens of a direct-GGUF N-gram plan when the operator gives none.
inline constexpr uint64_t kDefaultMaxProposalTokens = 8;

inline constexpr std::string_view kStrategyAuto = "auto";
inline constexpr std::string_view kStrategyMtp = "mtp";
inline constexpr std::string_view kStrategyDisabled = "disabled";
inline constexpr std::string_view kStrategyLegacyMtp = "native-mtp-n1";

// ------------------------------------------------------- operator settings

// One layer of operator settings ([defaults.speculative], a model's
// [models.speculative], or CLI flags). Absent = not set at this layer.
struct SpeculativeSettings {
  std::optional<std::string> strategy;
  std::optional<std::string> ngram_proposer;  // "cache" | "suffix"
  std::optional<uint64_t> ngram_min;
  std::optional<uint64_t> ngram_max;
  std::optional<uint64_t> ngram_max_proposal_tokens;
  std::optional<uint64_t> extension_initial_tokens;
  std::optional<uint64_t> extension_max_tokens;
  std::optional<uint64_t> extension_tail_backoff_proposals;
  std::optional<uint64_t> native_mtp_reject_cooldown_tokens;
  std::optional<uint64_t> verify_window_min_tokens;
  std::optional<uint64_t> verify_window_max_tokens;
  std::optional<uint64_t> verify_window_pipeline_depth;
  bool operator==(const SpeculativeSettings&) const = default;
};

// config.toml, the operator's file (mesh-llm's shape):
//   [defaults.speculative]           global defaults
//   strategy = "auto"
//   [[models]]
//   model = "org/repo:dist"           the model entry's id
//   [models.speculative]
//   strategy = "mtp-cache"
//   ngram_max_proposal_tokens = 10
// Keys inside a speculative table are SpeculativeSettings' names; integers
// are 0..2^63-1 as TOML allows, then checked by the resolver; an unknown key
// there is a warning (the file is shared with other tools), a wrong type an
// error. Everything outside `defaults.speculative` and `models` is ignored.
// Two [[models]] entries with the same `model` are refused.
struct OperatorConfig {
  SpeculativeSettings defaults;
  std::map<std::string, SpeculativeSettings> models;  // model id -> its speculative table
  std::vector<std::string> warnings;
};
// Throws Error(kInvalidInput) "<origin>: <line:column or key>: <problem>".
OperatorConfig parse_operator_config(std::string_view toml_text, std::string_view origin);
// Reads the file (at most 1 MiB) and parses it.
OperatorConfig load_operator_config(const std::filesystem::path& path);

// The settings in force, with the layer each field came from ("cli",
// "model", "defaults").
struct LayeredSettings {
  SpeculativeSettings value;
  std::map<std::string, std::string> sources;  // field name -> layer
};
// Per field: cli, then `model` (may be null), then `defaults`.
LayeredSettings layer_settings(const SpeculativeSettings& cli, const SpeculativeSettings* model,
                               const SpeculativeSettings& defaults);

// ------------------------------------------------------------------ inputs

// What is being served.
struct SpeculativeModel {
  // The package's speculative_decoding (as parse_manifest returned it), or
  // null: a package that declares none, or a direct GGUF.
  const SpeculativeDecoding* package = nullptr;
  bool direct_gguf = false;  // no package at all (operators may choose N-gram proposers)
  uint32_t layer_count = 0;
  // Layers that hold the native MTP/NextN prediction tensors
  // (blk.N.nextn.eh_proj/enorm/hnorm), as the caller found them in the
  // package's artifacts or the GGUF. nullopt: not checked (the plan notes it).
  std::optional<std::set<uint32_t>> nextn_layers;
};

// ------------------------------------------------------------------ result

// A rule of the spec's table (or of this runtime) that failed. `rule` is a
// stable id tests and scripts can match on:
//   prediction_depth, layer_indices_hold_nextn, history_scope,
//   ngram_cache_window, ngram_suffix_bounds, ngram_bounds_required,
//   max_proposal_tokens, composite_shape, pipeline_depth, extension_bounds,
//   verify_window_bounds, strategy_declared, strategy_type_supported,
//   native_mtp_available, ngram_proposer_matches, operator_value
struct SpeculativeRefusal {
  std::string rule;
  std::string message;
  bool operator==(const SpeculativeRefusal&) const = default;
};

struct NativeMtpPlan {
  std::string proposer;              // the proposer or strategy id it came from
  uint64_t prediction_depth = 1;
  std::vector<uint32_t> layer_indices;
  std::optional<uint64_t> reject_cooldown_tokens;
  bool operator==(const NativeMtpPlan&) const = default;
};

struct NgramPlan {
  std::string proposer;              // id, or "operator" for a direct-GGUF plan
  std::string type;                  // "ngram-cache" | "ngram-suffix"
  uint64_t ngram_min = 0;
  uint64_t ngram_max = 0;
  uint64_t max_proposal_tokens = 0;
  std::string history_scope{kHistoryScopeRequest};
  bool operator==(const NgramPlan&) const = default;
};

struct ExtensionPlan {
  uint64_t initial_tokens = 0;
  uint64_t max_tokens = 0;
  uint64_t tail_backoff_proposals = 0;
  bool operator==(const ExtensionPlan&) const = default;
};

// Tokens one target VerifyWindow checks, and how many windows of one request
// may be in flight.
struct VerifyWindowPlan {
  uint64_t min_tokens = 1;
  uint64_t max_tokens = 1;
  uint64_t pipeline_depth = 1;
  bool operator==(const VerifyWindowPlan&) const = default;
};

enum class PlanKind { kDisabled, kNativeMtpOnly, kNgramOnly, kMtpWithNgram };
std::string_view plan_kind_name(PlanKind kind) noexcept;  // "disabled", "native-mtp", "ngram", "composite"

struct SpeculativePlan {
  std::string strategy;              // effective strategy id, or "disabled"
  PlanKind kind = PlanKind::kDisabled;
  std::string origin;                // "package default", "package strategy", "operator", "runtime default"
  std::optional<NativeMtpPlan> native_mtp;
  std::optional<NgramPlan> ngram;    // N-gram-only plans and composite extenders
  std::optional<ExtensionPlan> extension;
  std::optional<VerifyWindowPlan> verify_window;  // absent when disabled
  bool operator==(const SpeculativePlan&) const = default;
};

struct SpeculativeResolution {
  std::string requested;                    // the operator's value as given ("auto" when none)
  std::optional<SpeculativePlan> plan;      // exactly one of plan / refusal
  std::optional<SpeculativeRefusal> refusal;
  std::vector<std::string> notes;           // decisions worth logging
  std::vector<std::string> warnings;        // problems outside the selected strategy
  std::map<std::string, std::string> field_sources;  // plan field -> "cli" | "model" | "defaults" | "package" | "runtime"
};

// Never throws for a bad package or setting: those are refusals (a
// hand-built SpeculativeDecoding that breaks parse_manifest's rules included).
SpeculativeResolution resolve_speculative(const SpeculativeModel& model, const LayeredSettings& settings);

// Every rule the spec's table sets for the package's declared proposers and
// strategies that parse_manifest does not already enforce (it checks shapes
// against layer_count; this checks them against the model): layer_indices
// that hold NextN tensors, pipeline_depth <= 64, max_proposal_tokens and
// extension max_tokens <= 64, native MTP windows fixed to 1 (a SHOULD: a
// warning). Each problem names its rule and the field.
struct RuleProblem {
  SpeculativeRefusal problem;
  std::string strategy_or_proposer;  // "strategies.mtp", "proposers.cache"
  bool warning_only = false;
};
std::vector<RuleProblem> check_speculative_rules(const SpeculativeDecoding& spec,
                                                 const std::optional<std::set<uint32_t>>& nextn_layers);

// JSON of a plan / a resolution (docs/CLI.md: `strategy`, `plan`).
nlohmann::json speculative_plan_json(const SpeculativePlan& plan);
nlohmann::json speculative_resolution_json(const SpeculativeResolution& resolution);

}  // namespace skippy
