// The generation policy resolver (spec: "Generation Defaults", "Execution
// Policy", "Policy Resolution"; docs: GLM-DSA.md).
//
// A package's generation.policy names, per request phase, the semantic
// execution path it was validated for; generation.thresholds say when a path
// applies. resolve_policy() turns that, a request shape and a backend's
// capabilities into the path to run, in the spec's order:
//   1. runtime override (explicitly configured for an experiment);
//   2. package generation.policy + generation.thresholds;
//   3. this runtime's built-in default for the architecture;
//   4. correctness fallback when the preferred path cannot run.
// It never re-infers a policy silently: every decision carries a telemetry
// record, and whenever the package recommendation is not what runs, one JSON
// line goes to the caller's log sink.
//
// Pure: no I/O. Reading a backend capability file is
// load_backend_capabilities(), kept apart on purpose.
// Thread-safety: every function is safe to call concurrently.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "skippy/manifest.h"

namespace skippy {

// ------------------------------------------------------------- vocabulary

// The executable semantic paths ("Suggested semantic path values"). `auto`
// and `fallback` are instructions to the resolver, not paths.
enum class ExecutionPath { kDense, kDirectSparse, kCompactFlash, kSparseChunked };
inline constexpr std::string_view kPathAuto = "auto";
inline constexpr std::string_view kPathFallback = "fallback";

std::string_view execution_path_name(ExecutionPath path) noexcept;  // "compact-flash", ...
std::optional<ExecutionPath> parse_execution_path(std::string_view name) noexcept;
std::span<const ExecutionPath> all_execution_paths() noexcept;

// The phases a resolver identifies; names are the policy field names.
enum class Phase { kDecode, kShortPrefill, kLongPrefill, kVerify };
std::string_view phase_name(Phase phase) noexcept;  // "decode", "short_prefill", ...
std::optional<Phase> parse_phase(std::string_view name) noexcept;

// What the caller is doing; the resolver derives the Phase from it.
enum class RequestKind { kDecode, kPrefill, kVerify };
std::optional<RequestKind> parse_request_kind(std::string_view name) noexcept;  // decode|prefill|verify

// IndexShare role of the layer being resolved (GLM-DSA.md "IndexShare roles").
enum class IndexShareRole { kFull, kShared };
std::string_view indexshare_role_name(IndexShareRole role) noexcept;  // "full", "shared"
std::optional<IndexShareRole> parse_indexshare_role(std::string_view name) noexcept;

// Dense sparse-mask estimate: n_tokens × n_kv × 4 bytes (spec table
// "Dense sparse-mask bytes"), saturating at UINT64_MAX.
uint64_t dense_mask_bytes(uint64_t n_tokens, uint64_t n_kv) noexcept;

// decode -> kDecode; verify -> kVerify; prefill -> kShortPrefill when
// n_tokens <= short_prefill_max_tokens ("at or below this size"), else
// kLongPrefill.
Phase identify_phase(RequestKind kind, uint64_t n_tokens, uint64_t short_prefill_max_tokens) noexcept;

// ---------------------------------------------------------------- backends

// What a backend can run. Backends advertise capability; the manifest never
// selects one ("Generation policy is not a backend feature switch").
//   paths:    the semantic paths it has kernels for.
//   evidence: experimental switch -> a reference to the reproducible
//             evidence (benchmark run, parity report) that enables an
//             `evidence-gated` switch on this backend.
struct BackendCapabilities {
  std::string name;
  std::vector<ExecutionPath> paths;
  std::map<std::string, std::string> evidence;
  bool runs(ExecutionPath path) const noexcept;
  bool operator==(const BackendCapabilities&) const = default;
};

// Built-ins (their sets are documented in the README):
//   reference  every path: answers "what does the package intend?"
//   cpu        dense, direct-sparse, sparse-chunked (no compact selected-KV flash kernel)
//   cuda       dense, direct-sparse, compact-flash, sparse-chunked
//   metal      dense, direct-sparse, compact-flash, sparse-chunked
// None carries experimental evidence.
std::span<const std::string_view> builtin_backend_names() noexcept;
std::optional<BackendCapabilities> builtin_backend(std::string_view name);

// A backend description file, JSON, at most 1 MiB:
//   {"name": "vulkan-lab", "paths": ["dense", "direct-sparse"],
//    "evidence": {"selected_row_flash": "bench/2025-06-01"}}
// name: non-empty; paths: distinct known path names (a backend that claims
// a path this runtime does not know is refused, not trusted); evidence: known
// experimental switches -> non-empty strings. Unknown top-level keys are
// ignored (additive). Throws Error(kInvalidInput) "<origin>: <field>: <problem>".
BackendCapabilities parse_backend_capabilities(std::string_view json_text, std::string_view origin);
// Reads and parses the file (I/O; Error(kIo / kNotFound / kInvalidInput)).
BackendCapabilities load_backend_capabilities(const std::filesystem::path& path);
// A built-in name, else a path to a description file. Throws Error(kUsage)
// for a name that is neither.
BackendCapabilities backend_by_name_or_file(const std::string& name_or_path);

// --------------------------------------------------------------- overrides

// Runtime overrides for an experiment, each an explicit choice of the
// operator (resolution step 1). Values are validated when added.
struct PolicyOverrides {
  std::map<Phase, std::string> paths;            // a path name, "auto" or "fallback"
  std::optional<std::string> indexshare;         // "required" or "recompute"
  std::optional<uint64_t> short_prefill_max_tokens;
  std::optional<uint64_t> compact_flash_min_kv;
  std::optional<uint64_t> dense_mask_max_bytes;
  std::map<std::string, bool> experimental;      // known switch -> on/off
  bool empty() const noexcept;
};

// Adds one "FIELD=VALUE": a phase (decode, short_prefill, long_prefill,
// verify) = a known path, auto or fallback; indexshare = required|recompute;
// a threshold = a decimal integer; experimental.<switch> (or <switch>) =
// on|off. Throws Error(kUsage) naming the text and what is allowed.
void add_policy_override(PolicyOverrides& overrides, std::string_view field_eq_value);

// ------------------------------------------------------------------ inputs

struct PolicyRequest {
  RequestKind kind = RequestKind::kDecode;
  uint64_t n_tokens = 1;   // tokens in this batch (decode: 1)
  uint64_t n_kv = 1;       // visible KV rows, these tokens included
  std::optional<uint64_t> top_k;                  // IndexShare top-k width, when known
  std::optional<IndexShareRole> indexshare_role;  // of the layer, when resolving per layer
};

struct PolicyInputs {
  std::optional<GenerationPolicy> policy;          // the package's generation.policy
  std::optional<GenerationThresholds> thresholds;  // the package's generation.thresholds
  std::string architecture;                        // general.architecture ("" when unknown)
  PolicyRequest request;
  BackendCapabilities backend;
  PolicyOverrides overrides;
};

// ----------------------------------------------------------------- results

// Where a value came from.
enum class PolicySource { kOverride, kPackage, kBuiltin, kFallback };
std::string_view policy_source_name(PolicySource source) noexcept;  // "override", "package", ...

// A threshold as the resolver used it, in its unit.
struct ThresholdUse {
  std::string name;    // "compact_flash_min_kv", ...
  uint64_t value = 0;
  std::string unit;    // "tokens", "KV rows", "bytes"
  PolicySource source = PolicySource::kPackage;
  std::string outcome;  // what it decided, e.g. "n_kv 1024 >= 1: compact-flash allowed"
  bool operator==(const ThresholdUse&) const = default;
};

// The spec's telemetry record ("Policy resolution telemetry SHOULD
// include ..."); docs/CLI.md names the JSON keys.
struct PolicyTelemetry {
  std::optional<std::string> profile;       // the profile that governed the decision
  Phase phase = Phase::kDecode;
  std::string backend;
  uint64_t n_tokens = 0;
  uint64_t n_kv = 0;
  std::optional<uint64_t> top_k;
  std::optional<IndexShareRole> indexshare_role;
  uint64_t dense_mask_bytes = 0;            // estimate, n_tokens × n_kv × 4
  std::optional<ThresholdUse> threshold;    // the threshold that decided
  std::string selected_path;
  std::optional<std::string> rejected_path;    // the package path that did not run
  std::optional<std::string> fallback_reason;  // why not
  uint64_t mask_bytes_avoided = 0;          // dense mask not materialized
  bool operator==(const PolicyTelemetry&) const = default;
};

// An experimental switch and whether it is on for this decision.
struct ExperimentalDecision {
  std::string name;
  std::string value;    // as the package wrote it ("evidence-gated"), or "" when only overridden
  bool enabled = false;
  std::string reason;
  bool operator==(const ExperimentalDecision&) const = default;
};

struct PolicyDecision {
  Phase phase = Phase::kDecode;
  ExecutionPath selected = ExecutionPath::kDense;
  PolicySource source = PolicySource::kFallback;
  std::optional<std::string> package_path;     // the package's value for this phase, as written
  std::optional<std::string> fallback_reason;  // null when the package recommendation ran
  // Why the runtime override for this phase could not run (it is logged).
  std::optional<std::string> override_rejected;
  // False when the package recommended something for this phase (or
  // IndexShare) and that is not what runs: override, fallback, unsupported.
  bool package_recommendation_used = true;
  // Shared layers: "reuse" (consume the Full layer's top-k), or "recompute"
  // (only by explicit override, logged); Full layers "compute". Null without a role.
  std::optional<std::string> indexshare;
  std::vector<ExperimentalDecision> experimental;
  std::vector<std::string> unsupported;   // policy values reported, never treated as known
  std::vector<std::string> considered;    // each candidate tried, in order, and its outcome
  std::vector<ThresholdUse> thresholds;   // every threshold applied
  std::vector<std::string> ignored_thresholds;  // unknown numeric hints (allowed to ignore)
  PolicyTelemetry telemetry;
  // The structured line sent to the log sink, when one was sent.
  std::optional<std::string> log_line;
};

// Receives one JSON line (no trailing newline) per decision that does not
// run the package recommendation.
using PolicyLogSink = std::function<void(const std::string& line)>;

// Resolves one request. REQUIRES: inputs.policy / thresholds came from
// parse_manifest (their shape is already valid).
// Throws Error(kInvalidInput) when n_tokens is 0, n_kv < n_tokens, decode
// has n_tokens != 1, or the backend runs no path the model can execute.
// `log` may be empty (the line is then only in the decision).
PolicyDecision resolve_policy(const PolicyInputs& inputs, const PolicyLogSink& log);

// JSON: the telemetry record with docs/CLI.md's keys; the whole decision
// (phase, selected_path, package_path, fallback_reason, telemetry, ...).
nlohmann::json policy_telemetry_json(const PolicyTelemetry& telemetry);
nlohmann::json policy_decision_json(const PolicyDecision& decision);

// (generation_warnings: skippy/manifest.h.)

}  // namespace skippy
