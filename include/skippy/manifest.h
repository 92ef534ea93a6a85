// model-package.json, schema version 1 (spec: "Manifest Schema",
// "Generation Defaults", "Speculative Decoding", "Compatibility").
//
// parse_manifest() is strict: it refuses every manifest that breaks a rule of
// the schema (but see GenerationProblems: by default a broken `generation`
// object is set aside, not refused) with an Error(kInvalidInput) whose
// message reads
//   "<origin>: <field path>: <problem>"
// e.g. "model-package.json: layers[3].sha256: not a 64-character hex digest".
// It ignores unknown top-level and artifact-entry fields (the schema is
// additive), but keeps unknown fields inside `generation` (in `extra`) so that
// serialize_manifest() writes them back unchanged.
//
// What parse_manifest() does NOT decide (the consumer / resolver does):
//   - ABI compatibility with this runtime: call abi_compatible(); parse only
//     checks that skippy_abi_version is a well-formed "MAJOR.MINOR.PATCH".
//   - whether policy values are supported: unsupported_policy_values();
//   - whether the default speculative strategy can be served:
//     unsupported_default_strategy();
//   - anything about files on disk (existence, symlinks, sizes, SHA-256).
//
// Thread-safety: the structures are plain values; the functions are pure
// (parse and serialize hold no state), safe from any thread.
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "skippy/abi.h"

namespace skippy {

inline constexpr uint32_t kManifestSchemaVersion = 1;   // the only version accepted
inline constexpr std::string_view kManifestFileName = "model-package.json";
inline constexpr std::string_view kPackageFormat = "layer-package";
// The spec caps model-package.json at 16 MiB for peer transfer; parse refuses
// larger text everywhere so a hostile manifest cannot cost more than that.
inline constexpr size_t kManifestMaxBytes = size_t{16} << 20;

// ---------------------------------------------------------------- artifacts

// One GGUF fragment of the package. Rules (checked by parse and serialize):
// path is a safe relative path (is_safe_relative_path); artifact_bytes > 0;
// tensor_bytes == 0 exactly when tensor_count == 0; sha256 is 64 hex digits,
// either case (kept as written).
struct ArtifactEntry {
  std::string path;
  uint64_t tensor_count = 0;
  uint64_t tensor_bytes = 0;
  uint64_t artifact_bytes = 0;
  std::string sha256;
  bool operator==(const ArtifactEntry&) const = default;
};

struct LayerEntry : ArtifactEntry {
  uint32_t layer_index = 0;
  bool operator==(const LayerEntry&) const = default;
};

inline constexpr std::string_view kProjectorKindMmproj = "mmproj";
// The projector kinds this runtime can serve.
bool is_known_projector_kind(std::string_view kind) noexcept;

// kind is a non-empty string, kept as written. Only "mmproj" is defined
// today; a package may declare a kind from a later schema (an
// "audio-encoder"). The spec says consumers MUST reject unknown kinds unless
// they support them, and that runtimes may still serve text stages: so
// parse keeps them, open_package_dir warns, the default projector choice
// never picks one, and select_stage refuses a stage that asks for one.
struct ProjectorEntry : ArtifactEntry {
  std::string kind;
  bool operator==(const ProjectorEntry&) const = default;
};

struct SharedArtifacts {
  ArtifactEntry metadata;
  ArtifactEntry embeddings;
  ArtifactEntry output;
  bool operator==(const SharedArtifacts&) const = default;
};

// ------------------------------------------------------------- source model

// One file of the source distribution (a shard of a split model, or the
// single GGUF). path is relative to the source repository and safe; size_bytes
// > 0; sha256 64 hex digits.
struct SourceFile {
  std::string path;
  // null in the manifest = "not recorded" (the reference writer records
  // neither for a local source); validate-package computes and reports them.
  std::optional<uint64_t> size_bytes;
  std::optional<std::string> sha256;
  bool operator==(const SourceFile&) const = default;
};

// The source identity. Required (non-empty; parse refuses a manifest without
// them, per "model_id and source identity fields are non-empty"): sha256 (of
// the primary file, 64 hex digits), repo, revision, primary_file,
// canonical_ref, and files (at least one entry, distinct paths, one of them
// equal to primary_file).
// Optional, empty string = absent (omitted when serialized; present-but-empty
// is refused): path (the local path the writer read; provenance only, may be
// absolute, never opened by consumers) and distribution_id (empty for a repo
// without a distribution selector).
struct SourceModel {
  std::string path;
  std::string sha256;
  std::string repo;
  std::string revision;
  std::string primary_file;
  std::string canonical_ref;
  std::string distribution_id;
  std::vector<SourceFile> files;
  bool operator==(const SourceModel&) const = default;
};

// --------------------------------------------------------------- generation
//
// Every generation object keeps the fields it does not know in `extra` (a
// JSON object; serialized after the known fields, in key order). A known key
// must not also appear in `extra` (serialize refuses that). A field the spec
// names for proposers/strategies, placed on a known type it does not apply
// to (e.g. ngram_max on a native-mtp proposer), is refused, not kept.

// generation.policy. Values are kept as written; parse only requires them to
// be non-empty strings. Whether a value is one this runtime supports is
// reported by unsupported_policy_values(), never silently assumed.
struct GenerationPolicy {
  std::optional<std::string> profile;        // e.g. "glm-dsa-v1"
  std::optional<std::string> decode;         // phase values: auto, dense, ...
  std::optional<std::string> short_prefill;
  std::optional<std::string> long_prefill;
  std::optional<std::string> verify;
  std::optional<std::string> indexshare;     // "required"
  // switch -> value; empty = absent. Serialized with the spec's switches
  // first, in the spec's order, then any others by name.
  std::map<std::string, std::string> experimental;
  nlohmann::json extra = nlohmann::json::object();
  bool operator==(const GenerationPolicy&) const = default;
};

// generation.thresholds: numeric resolver hints (non-negative integers).
// Unknown thresholds are kept verbatim in `extra` (older consumers may ignore
// them; the spec calls thresholds hints).
struct GenerationThresholds {
  std::optional<uint64_t> short_prefill_max_tokens;  // tokens
  std::optional<uint64_t> compact_flash_min_kv;      // KV rows
  std::optional<uint64_t> dense_mask_max_bytes;      // bytes
  nlohmann::json extra = nlohmann::json::object();
  bool operator==(const GenerationThresholds&) const = default;
};

// window_policy of a strategy. All counts, when present, are >= 1 and
// min_window <= initial_window <= max_window (those present).
// pipeline_depth absent means the legacy depth of 1.
struct WindowPolicy {
  std::optional<std::string> default_mode;  // JSON key "default", e.g. "fixed"
  std::optional<uint64_t> initial_window;
  std::optional<uint64_t> min_window;
  std::optional<uint64_t> max_window;
  std::optional<uint64_t> pipeline_depth;
  nlohmann::json extra = nlohmann::json::object();
  bool operator==(const WindowPolicy&) const = default;
};

// extension_policy of a composite strategy: bounds of the N-gram tail.
// max_tokens >= 1 when present; initial_tokens <= max_tokens when both are.
struct ExtensionPolicy {
  std::optional<uint64_t> initial_tokens;
  std::optional<uint64_t> max_tokens;
  std::optional<uint64_t> tail_backoff_proposals;
  nlohmann::json extra = nlohmann::json::object();
  bool operator==(const ExtensionPolicy&) const = default;
};

inline constexpr std::string_view kNativeMtp = "native-mtp";
inline constexpr std::string_view kNgramCache = "ngram-cache";
inline constexpr std::string_view kNgramSuffix = "ngram-suffix";
inline constexpr std::string_view kComposite = "composite";
inline constexpr std::string_view kHistoryScopeRequest = "request";

// The proposal-source fields shared by proposers and by strategies that
// describe their source inline. Rules, by type:
//   native-mtp:   prediction_depth == 1; layer_indices non-empty, distinct,
//                 each < layer_count.
//   ngram-cache:  ngram_min, ngram_max required, 1 <= ngram_min <= ngram_max
//                 <= 4; history_scope == "request"; max_proposal_tokens >= 1
//                 when present.
//   ngram-suffix: as ngram-cache but 3 <= ngram_min <= ngram_max <= 64.
struct ProposerFields {
  std::optional<uint64_t> prediction_depth;
  std::optional<std::vector<uint32_t>> layer_indices;
  std::optional<uint64_t> ngram_min;
  std::optional<uint64_t> ngram_max;
  std::optional<uint64_t> max_proposal_tokens;
  std::optional<std::string> history_scope;
  bool operator==(const ProposerFields&) const = default;
};

// generation.speculative_decoding.proposers.<id>. A proposer whose type is
// not one of native-mtp / ngram-cache / ngram-suffix is kept, not validated:
// all its fields but `type` stay in `extra` (a known strategy may not
// reference it).
struct Proposer : ProposerFields {
  std::string type;
  nlohmann::json extra = nlohmann::json::object();
  bool operator==(const Proposer&) const = default;
};

// generation.speculative_decoding.strategies.<id>.
//   native-mtp:   either `proposer` names a declared native-mtp proposer, or
//                 prediction_depth and layer_indices are given inline (inline
//                 fields, when present, follow the ProposerFields rules).
//   ngram-cache / ngram-suffix: `proposer` names a declared proposer of the
//                 same type, or the N-gram fields are given inline.
//   composite:    `primary` names a declared native-mtp proposer, `extender`
//                 a declared ngram-cache or ngram-suffix proposer.
//   all known types: window_policy, extension_policy as above.
// A strategy of any other type (e.g. "draft-model") is kept, not validated:
// all its fields but `type` stay in `extra`. The spec says consumers MUST
// ignore such a strategy unless it is the declared default; parse therefore
// accepts it and unsupported_default_strategy() reports the default case.
struct Strategy : ProposerFields {
  std::string type;
  std::optional<std::string> proposer;
  std::optional<std::string> primary;
  std::optional<std::string> extender;
  std::optional<ExtensionPolicy> extension_policy;
  std::optional<WindowPolicy> window_policy;
  nlohmann::json extra = nlohmann::json::object();
  bool operator==(const Strategy&) const = default;
};

// Ids are non-empty; "auto" and "disabled" are operator keywords, never
// package strategy ids. `default`, when present, names a declared strategy.
struct SpeculativeDecoding {
  std::optional<std::string> default_strategy;  // JSON key "default"
  std::map<std::string, Proposer> proposers;    // empty = absent
  std::map<std::string, Strategy> strategies;   // empty = absent
  nlohmann::json extra = nlohmann::json::object();
  bool operator==(const SpeculativeDecoding&) const = default;
};

struct GenerationDefaults {
  std::optional<GenerationPolicy> policy;
  std::optional<GenerationThresholds> thresholds;
  std::optional<SpeculativeDecoding> speculative_decoding;
  nlohmann::json extra = nlohmann::json::object();
  bool operator==(const GenerationDefaults&) const = default;
};

// The spec's vocabularies: what this runtime knows. Values outside them are
// parsed and kept (the schema is additive) but are not supported paths.
std::span<const std::string_view> known_policy_profiles() noexcept;     // glm-dsa-v1
std::span<const std::string_view> known_phase_values() noexcept;        // auto, dense, direct-sparse,
                                                                        // compact-flash, sparse-chunked, fallback
std::span<const std::string_view> known_indexshare_values() noexcept;   // required
std::span<const std::string_view> known_experimental_switches() noexcept;  // selected_row_flash, ...
std::span<const std::string_view> known_experimental_values() noexcept;    // evidence-gated
std::span<const std::string_view> known_proposer_types() noexcept;
std::span<const std::string_view> known_strategy_types() noexcept;      // + composite
bool is_known_strategy_type(std::string_view type) noexcept;

// One line per policy value this runtime does not know (unknown profile,
// phase value, indexshare value, experimental switch or value, unknown
// policy field in `extra`), each naming the field, e.g.
//   generation.policy.decode: unknown phase value "turbo"
// Empty when everything is known. The spec: consumers MUST NOT silently
// reinterpret unknown policy values as a supported path.
std::vector<std::string> unsupported_policy_values(const GenerationPolicy& policy);

// When the declared default strategy has a type this runtime does not know
// (e.g. "draft-model"), the reason, e.g.
//   generation.speculative_decoding.default: strategy "draft" has unsupported type "draft-model"
// nullopt when there is no default or its type is known.
std::optional<std::string> unsupported_default_strategy(const SpeculativeDecoding& spec);

// One line per member of `generation` outside policy, thresholds and
// speculative_decoding (kept in `extra`), naming it, e.g.
//   generation.metal: not a generation field (...); the spec forbids backend-
//   and model-family-specific fields such as generation.metal ...
// then one line per unknown member at every level below it (policy,
// thresholds, speculative_decoding, each proposer and strategy of a known
// type, window_policy, extension_policy), e.g.
//   generation.policy.cuda_kernel: unknown policy field
//   generation.thresholds.metal_simdgroup: unknown threshold field
// (the policy lines are also in unsupported_policy_values).
// The spec: package authors MUST NOT use backend-specific fields, and
// generation has no model-family sub-objects. Consumers ignore them with
// this warning; validate-package (the publisher's gate) counts each as a
// problem.
std::vector<std::string> generation_fields_outside_schema(const GenerationDefaults& generation);

// One line per strategy whose window_policy.pipeline_depth is above 1,
// naming the field: the spec allows such a package default only with
// topology/workload-specific evidence, which a manifest cannot carry.
// inspect and select warn; validate-package warns.
std::vector<std::string> pipeline_depths_needing_evidence(const SpeculativeDecoding& spec);

// What `inspect` and `select` warn about: unsupported policy values
// (unsupported_policy_values), an unsupported default strategy
// (unsupported_default_strategy), package default pipeline depths above 1
// (pipeline_depths_needing_evidence) and the fields outside generation's
// schema that are ignored (generation_fields_outside_schema). Empty when
// everything is known. (A generation block set aside as malformed is the
// package's warning: OpenedPackage::warnings.)
std::vector<std::string> generation_warnings(const std::optional<GenerationDefaults>& generation);

// ABI: skippy/abi.h (kSkippyRuntimeAbi, abi_compatible).

// -------------------------------------------------------------------- paths

// A repository-relative path that cannot leave the package root: non-empty,
// at most 4096 bytes, '/'-separated components of 1..255 bytes, none of them
// "." or ".."; no leading or trailing '/', no "//", no backslash, no NUL or
// other control character, no drive prefix ("C:..."). Lexical only: symlinks
// are the consumer's business.
// Why `model_id` is not a model coordinate "namespace/name[:distribution]"
// (the manifest's rule for model_id), or nullopt when it is one.
std::optional<std::string> model_id_problem(std::string_view model_id);

bool is_safe_relative_path(std::string_view path) noexcept;
// Throws Error(kInvalidInput) "<what>: unsafe path \"...\": <reason>".
void check_safe_relative_path(std::string_view path, std::string_view what);

// ----------------------------------------------------------------- manifest

struct PackageManifest {
  uint32_t schema_version = kManifestSchemaVersion;
  std::string model_id;  // "namespace/name[:distribution]", see parse_manifest
  SourceModel source_model;
  std::string format{kPackageFormat};
  uint32_t layer_count = 0;                    // >= 1
  std::optional<uint64_t> activation_width;    // >= 1 when present
  std::optional<GenerationDefaults> generation;
  SharedArtifacts shared;
  std::vector<LayerEntry> layers;              // after parse: layers[i].layer_index == i
  std::vector<ProjectorEntry> projectors;      // empty = absent
  std::string skippy_abi_version;              // "MAJOR.MINOR.PATCH"
  std::optional<int64_t> created_at_unix_secs;  // >= 0 when present
  // Set only by parse_manifest (GenerationProblems::kSetAside) when the
  // `generation` object breaks its rules: the parse error, naming the file
  // and field; `generation` is then nullopt. Generation is policy, not
  // tensor layout, so such a package still serves layers; what resolves
  // generation (policy, speculative) refuses, naming this. serialize refuses
  // a manifest that has it.
  std::optional<std::string> generation_problem;
  bool operator==(const PackageManifest&) const = default;
};

// Parses and validates model-package.json text. `origin` names the source in
// messages (a path, or "hf://org/repo@rev/model-package.json").
// Rules beyond the ones on each struct above:
//   - text is at most kManifestMaxBytes, valid UTF-8 JSON (messages carry the
//     parser's line/column), one object, no duplicate keys, nesting <= 64;
//   - schema_version == 1 (any other version is refused, naming the
//     supported one); format == "layer-package";
//   - model_id is a model coordinate "namespace/name" or
//     "namespace/name:distribution" ([A-Za-z0-9._-] in each part), not a
//     path or file name;
//   - every number is a JSON integer in its field's range (1.5, -1, "1",
//     1e3 are refused);
//   - layers hold exactly one entry per index 0..layer_count-1 (missing and
//     duplicate indices are reported); they are returned sorted by index;
//   - artifact paths are distinct across shared, layers and projectors, and
//     none is model-package.json;
//   - skippy_abi_version is well-formed (compatibility is abi_compatible's);
//   - generation follows the rules above.
// Throws Error(kInvalidInput).
//
// `generation_problems` decides what a `generation` object that breaks its
// rules does (a threshold of the wrong type, prediction_depth 2, ...):
// kSetAside (the default, every consumer: open_package_dir, the peer) keeps
// everything else and records the error in generation_problem; kRefuse
// (publisher-side checks, round-trip tests) refuses the manifest.
enum class GenerationProblems { kSetAside, kRefuse };
PackageManifest parse_manifest(std::string_view json_text, std::string_view origin,
                               GenerationProblems generation_problems = GenerationProblems::kSetAside);

// Stable, deterministic JSON in the spec's style: 2-space indent, arrays of
// numbers on one line ("layer_indices": [47]), keys in the spec's order
// (unknown generation fields after the known ones), absent optionals and an
// empty projectors list omitted, layers in index order, trailing newline.
// Validates first, with the rules of parse_manifest, so a writer cannot emit
// a manifest that parse refuses; parse_manifest(serialize_manifest(m)) == m
// for every m whose layers are already in index order.
// Throws Error(kInvalidInput) naming "model-package.json" and the field.
std::string serialize_manifest(const PackageManifest& manifest);

}  // namespace skippy
