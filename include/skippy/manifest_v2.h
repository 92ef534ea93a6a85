// model-package.json, package schema 2: the small root that mesh-llm (the
// reference implementation) writes today. The tensor table is not in the
// root: it lives in the metadata carrier GGUF (skippy/package_catalog.h).
//
// parse_package_root_v2() is as strict as the reference (its serde types are
// `deny_unknown_fields` everywhere):
//   - every object refuses members it does not declare, with the field path;
//     `model_metadata` and `tensor_catalog` are refused in the root by name
//     (the reference rebuilds them from the carrier);
//   - numbers are JSON integers in their field's range (u32 / u64);
//   - optional members may be absent or null (serde's Option), required ones
//     may not; duplicate keys are refused;
//   - the root rules the reference's `validate_root` applies (below);
//   - package_id equals compute_package_id_v2() of the parsed root.
// Every refusal is Error(kInvalidInput) "<origin>: <field path>: <problem>".
//
// Not decided here: anything about files (sizes, digests, the carrier's
// contents): see skippy/package_catalog.h and the consumer.
//
// Thread-safety: plain values and pure functions (declares_schema_v2 reads a
// file), safe from any thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace skippy {

inline constexpr uint32_t kPackageSchemaV2 = 2;
inline constexpr std::string_view kSidecarKindMmproj = "mmproj";  // the only sidecar kind
// The metadata carrier (KVs and the tensor directory, no tensor data) is
// read by every stage before anything else is trusted: one whose catalogued
// byte_size is larger is refused before a byte of it is fetched.
// A 256k-token vocabulary with scores and merges is about 20 MiB.
inline constexpr uint64_t kCarrierMaxBytes = uint64_t{256} << 20;

// source_model.files[]: {path, byte_size, sha256}; path a safe relative path,
// distinct; sha256 64 lowercase hex digits.
struct V2SourceFile {
  std::string path;
  uint64_t byte_size = 0;
  std::string sha256;
  bool operator==(const V2SourceFile&) const = default;
};

// sha256 is the primary file's digest (64 lowercase hex, equal to the files[]
// entry named by primary_file, which is required and must be listed);
// metadata_artifact_id names the carrier in the artifact catalog (a GGUF path,
// not a sidecar). files is non-empty. The optional strings keep "absent"
// apart from "present" (the package_id hashes what is present).
struct V2SourceModel {
  std::string sha256;
  std::string metadata_artifact_id;
  std::optional<std::string> repo;
  std::optional<std::string> revision;
  std::optional<std::string> primary_file;
  std::optional<std::string> canonical_ref;
  std::optional<std::string> distribution_id;
  std::vector<V2SourceFile> files;
  bool operator==(const V2SourceModel&) const = default;
};

// artifact_catalog.entries[]: id of [A-Za-z0-9._-]+, distinct; path a safe
// relative path (no leading "./", "..", ".", "//", backslash, absolute),
// distinct; sha256 64 lowercase hex digits.
struct V2Artifact {
  std::string id;
  std::string path;
  uint64_t byte_size = 0;
  std::string sha256;
  bool operator==(const V2Artifact&) const = default;
};

// sidecars[]: kind "mmproj" (no other exists), artifact_id in the catalog,
// name non-empty when present; (kind, name) distinct.
struct V2Sidecar {
  std::string kind{kSidecarKindMmproj};
  std::string artifact_id;
  std::optional<std::string> name;
  bool operator==(const V2Sidecar&) const = default;
};

// publisher_metadata[] (newer reference code): immutable publisher files of
// the source repository at its revision, package files under metadata/ (ids
// "publisher-<file name, '.' and '_' as '-'>"). They are package-level
// metadata: never in stage selection, never payload parts. role one of
// model_config, generation_config, tokenizer_config, chat_template,
// hf_quant_config (this order is the role's rank in the package_id's sort);
// artifact_id in the catalog; (role, source_path) distinct; source_repo and
// source_revision equal source_model's, the revision a 40-hex commit;
// source_path a safe relative path.
inline constexpr std::string_view kPublisherRoles[] = {"model_config", "generation_config", "tokenizer_config",
                                                       "chat_template", "hf_quant_config"};
struct V2PublisherMetadata {
  std::string role;
  std::string artifact_id;
  std::string source_repo;
  std::string source_revision;
  std::string source_path;
  bool operator==(const V2PublisherMetadata&) const = default;
};
// publisher_defaults: typed defaults read from those files, each bound to a
// publisher_metadata artifact (compute_dtype to a model_config,
// kv_cache_dtype to a model_config or hf_quant_config) at a JSON pointer;
// dtype one of f16, bf16, f32, fp8, fp8_e4m3, fp8_e5m2, q8_0, q4_0.
inline constexpr std::string_view kPublisherDtypes[] = {"f16", "bf16", "f32", "fp8", "fp8_e4m3", "fp8_e5m2",
                                                        "q8_0", "q4_0"};
struct V2DtypeDeclaration {
  std::string dtype;
  std::string artifact_id;
  std::string json_path;
  bool operator==(const V2DtypeDeclaration&) const = default;
};
struct V2PublisherDefaults {
  std::optional<V2DtypeDeclaration> compute_dtype, kv_cache_dtype;
  bool operator==(const V2PublisherDefaults&) const = default;
};

// generation: speculative_decoding (the reference's release schema, v0.76.1)
// and request_defaults (its newer code, below). `policy` and `thresholds`
// (schema 1) are refused, naming the field.
struct V2WindowPolicy {
  std::string default_mode;  // JSON "default", non-empty
  uint32_t initial_window = 0;
  uint32_t min_window = 0;
  uint32_t max_window = 0;
  std::optional<uint32_t> pipeline_depth;
  bool operator==(const V2WindowPolicy&) const = default;
};

struct V2ExtensionPolicy {
  uint32_t max_tokens = 0;
  std::optional<uint32_t> initial_tokens;
  std::optional<uint32_t> tail_backoff_proposals;
  bool operator==(const V2ExtensionPolicy&) const = default;
};

// A proposer: type "native-mtp" (prediction_depth, layer_indices) or
// "ngram-cache" / "ngram-suffix" (ngram_min, ngram_max, max_proposal_tokens,
// history_scope); the fields of the other types are refused.
struct V2Proposer {
  std::string type;
  uint32_t prediction_depth = 0;
  std::vector<uint32_t> layer_indices;
  uint32_t ngram_min = 0;
  uint32_t ngram_max = 0;
  uint32_t max_proposal_tokens = 0;
  std::string history_scope;
  bool operator==(const V2Proposer&) const = default;
};

// A strategy: "native-mtp" (proposer, or inline prediction_depth +
// layer_indices, never both), "ngram-cache" / "ngram-suffix" (proposer),
// "composite" (primary native-mtp, extender n-gram, extension_policy); each
// with an optional window_policy.
struct V2Strategy {
  std::string type;
  std::optional<std::string> proposer;
  std::optional<uint32_t> prediction_depth;
  std::vector<uint32_t> layer_indices;
  std::string primary;
  std::string extender;
  std::optional<V2ExtensionPolicy> extension_policy;
  std::optional<V2WindowPolicy> window_policy;
  bool operator==(const V2Strategy&) const = default;
};

struct V2SpeculativeDecoding {
  std::string default_strategy;  // JSON "default": a declared strategy
  std::map<std::string, V2Proposer> proposers;
  std::map<std::string, V2Strategy> strategies;
  bool operator==(const V2SpeculativeDecoding&) const = default;
};

// generation.request_defaults (newer reference code, its format crate's
// GenerationRequestDefaults): publisher-reviewed sampling profiles for the
// exact source revision, advisory (a runtime resolves them below explicit
// request and operator settings). Every value optional but provenance; the
// reference's bounds apply (validate_package_root_v2): finite floats,
// temperature 0..=100, top_p/min_p/typical_p/xtc 0..=1, penalties -2..=2,
// repeat_penalty > 0, top_k >= 0, repeat_last_n >= -1, seed a u32,
// logit_bias keys token ids >= 0 with values -100..=100, mirostat_mode
// 0..=2, known sampler names and sequence codes, DRY bounds, and a
// provenance whose revision is a 40-hex commit that its http(s) url names
// as a whole segment.
struct V2DefaultsProvenance {
  std::string source_repo, revision, file, section, url;
  bool operator==(const V2DefaultsProvenance&) const = default;
};
struct V2DryDefaults {
  std::optional<double> multiplier, base;
  std::optional<int32_t> allowed_length, penalty_last_n;
  std::optional<std::vector<std::string>> sequence_breakers;
  bool operator==(const V2DryDefaults&) const = default;
};
struct V2XtcDefaults {
  std::optional<double> probability, threshold;
  bool operator==(const V2XtcDefaults&) const = default;
};
// reasoning: enabled auto|off|on; format auto|none|deepseek|deepseek-legacy|
// hidden; budget a token count or a level auto|low|medium|high|unrestricted.
struct V2ReasoningDefaults {
  std::optional<std::string> enabled, format;
  std::optional<uint32_t> budget_tokens;
  std::optional<std::string> budget_level;
  bool operator==(const V2ReasoningDefaults&) const = default;
};
struct V2GenerationProfile {
  std::optional<uint32_t> max_tokens;
  std::optional<std::vector<std::string>> stop;
  std::optional<double> temperature, top_p;
  std::optional<int32_t> top_k;
  std::optional<double> min_p, typical_p, top_nsigma, presence_penalty, frequency_penalty;
  std::optional<uint64_t> seed;
  std::optional<std::map<std::string, double>> logit_bias;
  std::optional<double> repeat_penalty;
  std::optional<int32_t> repeat_last_n;
  std::optional<double> dynatemp_range, dynatemp_exponent;
  std::optional<V2DryDefaults> dry;
  std::optional<V2XtcDefaults> xtc;
  std::optional<int32_t> mirostat_mode;
  std::optional<double> mirostat_entropy, mirostat_learning_rate;
  std::optional<std::vector<std::string>> samplers;
  std::optional<std::string> sampler_sequence;
  std::optional<bool> ignore_eos;
  std::optional<V2ReasoningDefaults> reasoning;
  V2DefaultsProvenance provenance;
  bool operator==(const V2GenerationProfile&) const = default;
};
// selection: the profile used by default and, optionally, when the
// request's reasoning is on or off; each names a declared profile.
struct V2RequestDefaults {
  std::string selection_default;  // JSON selection.default
  std::optional<std::string> reasoning_enabled, reasoning_disabled;
  std::map<std::string, V2GenerationProfile> profiles;  // non-empty, names [A-Za-z0-9._-]+
  bool operator==(const V2RequestDefaults&) const = default;
};

// In JSON (and in the package_id's bytes) request_defaults comes first.
struct V2Generation {
  std::optional<V2SpeculativeDecoding> speculative_decoding;
  // (initialized, so V2Generation{speculative} stays a complete initializer)
  std::optional<V2RequestDefaults> request_defaults = std::nullopt;
  bool operator==(const V2Generation&) const = default;
};

// A generation.request_defaults object alone (write-package
// --generation-defaults FILE), parsed and checked by the same rules.
// Throws Error(kInvalidInput) "<origin>: generation.request_defaults...".
V2RequestDefaults parse_request_defaults_v2(std::string_view json_text, std::string_view origin);

// The root, in the order the reference declares its fields (the order the
// package_id hashes them in). schema_version 2; model_id, format,
// native_abi_version, generator_version not blank; layer_count >= 1;
// package_id "sha256:" + 64 lowercase hex; artifact_catalog non-empty.
struct PackageRootV2 {
  uint32_t schema_version = kPackageSchemaV2;
  std::string package_id;
  std::string model_id;
  V2SourceModel source_model;
  std::string format;
  uint32_t layer_count = 0;
  std::vector<V2Artifact> artifacts;  // JSON artifact_catalog.entries, as listed
  std::vector<V2Sidecar> sidecars;    // empty = absent
  std::optional<V2Generation> generation;
  // (JSON: after sidecars, before generation.)
  std::vector<V2PublisherMetadata> publisher_metadata = {};  // empty = absent
  std::optional<V2PublisherDefaults> publisher_defaults = std::nullopt;
  std::string native_abi_version;
  std::string generator_version;
  uint64_t created_at_unix_secs = 0;
  bool operator==(const PackageRootV2&) const = default;
};

// The schema_version of a model-package.json text (1, 2, ...), for a reader
// that dispatches on it; nullopt when the text is not a JSON object with an
// unsigned integer schema_version. Never throws.
std::optional<uint32_t> peek_schema_version(std::string_view json_text) noexcept;

// True when `dir`/model-package.json is a readable JSON object declaring
// schema_version 2: the one test every reader that takes both schemas
// dispatches on. Anything else (no manifest, unreadable, another version,
// not JSON) is false, so the schema 1 reader says what is wrong with it.
// Never throws.
bool declares_schema_v2(const std::filesystem::path& dir) noexcept;

// Parses and validates (see the top of this file). Throws Error(kInvalidInput).
PackageRootV2 parse_package_root_v2(std::string_view json_text, std::string_view origin);

// The root rules alone, on a built value (package_id included). Throws
// Error(kInvalidInput) naming `origin` and the field.
void validate_package_root_v2(const PackageRootV2& root, std::string_view origin);

// The root as compact JSON, fields in declaration order, absent optionals and
// empty sidecars omitted, strings escaped as serde_json does. Not validated.
std::string package_root_v2_json(const PackageRootV2& root);

// The bytes the package_id hashes: package_root_v2_json() of the root with
// package_id "" and created_at_unix_secs 0, source_model.files sorted by
// path, artifacts by id, sidecars by (kind, name, artifact_id) (an absent
// name sorts first), publisher_metadata by (role rank in kPublisherRoles,
// artifact_id, source_repo, source_revision, source_path).
std::string package_id_v2_preimage(const PackageRootV2& root);
// "sha256:" + lowercase hex SHA-256 of package_id_v2_preimage(root).
std::string compute_package_id_v2(const PackageRootV2& root);

}  // namespace skippy
