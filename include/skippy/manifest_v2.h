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

// generation, in the reference's release schema (v0.76.1): only
// speculative_decoding. `policy` and `thresholds` (schema 1) and the newer
// `request_defaults` are refused, naming the field.
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

struct V2Generation {
  std::optional<V2SpeculativeDecoding> speculative_decoding;
  bool operator==(const V2Generation&) const = default;
};

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
// name sorts first).
std::string package_id_v2_preimage(const PackageRootV2& root);
// "sha256:" + lowercase hex SHA-256 of package_id_v2_preimage(root).
std::string compute_package_id_v2(const PackageRootV2& root);

}  // namespace skippy
