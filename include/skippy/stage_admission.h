// A package schema 2 stage admission descriptor: what mesh-llm's runtime
// admits a stage by (its format crate's StageAdmissionDescriptor). A stage
// is exactly the package's identity, the tensors it holds (by tensor id,
// which is the tensor's name) and the sidecars it loads; what it needs on
// disk follows from those: the metadata carrier, each artifact holding one
// of its tensors, and each sidecar's artifact.
//
// Serialized as one JSON object, members in this order:
//   {"package_id":"sha256:...","resident_tensor_ids":["blk.0.attn_k.weight",...],
//    "sidecars":[{"kind":"mmproj","artifact_id":"...","name":"..."}]}
// (`name` left out when the sidecar has none).
//
// Thread-safety: plain values and pure functions; safe to call concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "skippy/manifest_v2.h"
#include "skippy/package_catalog.h"

namespace skippy {

struct StageAdmission {
  std::string package_id;
  // Strictly sorted (byte order), so unique.
  std::vector<std::string> resident_tensor_ids;
  // Strictly sorted as the reference orders sidecars: kind, then name (none
  // first), then artifact_id.
  std::vector<V2Sidecar> sidecars;
  bool operator==(const StageAdmission&) const = default;
};

// Parses a descriptor strictly (the strict JSON parser: duplicate keys,
// unknown members, wrong types refused) and checks its own rules, as the
// reference does: a "sha256:" + 64 lowercase hex package_id, tensor ids
// non-empty and strictly sorted, sidecars of a known kind and strictly
// sorted. Error(kInvalidInput) "<origin>: <field>: <problem>".
StageAdmission parse_stage_admission(std::string_view json_text, std::string_view origin);

// The descriptor as compact JSON in the member order above.
std::string stage_admission_json(const StageAdmission& admission);

// The descriptor's rules against a package, in the reference's order
// (resolve_stage_admission): the package_id equals the package's, every
// tensor id is in the catalog, every sidecar is one of the package's
// sidecars exactly. Error(kInvalidInput) naming `origin` and the first
// problem; a package_id mismatch names both ids.
void check_stage_admission(const StageAdmission& admission, const PackageCatalog& catalog, std::string_view origin);

// The artifacts the stage needs (indices into catalog.artifacts), by artifact
// id: the carrier, every artifact holding a resident tensor, every sidecar's
// artifact. check_stage_admission first.
std::vector<size_t> stage_admission_artifacts(const StageAdmission& admission, const PackageCatalog& catalog);

// The bytes the stage's tensors take, each distinct (artifact, offset,
// stored bytes) counted once (the reference's distinct_owned_stored_bytes).
uint64_t stage_admission_tensor_bytes(const StageAdmission& admission, const PackageCatalog& catalog);

// A descriptor for a stage holding exactly `tensor_names` (any order; each
// once) and `sidecars` (any order) of a schema 2 catalog.
StageAdmission make_stage_admission(const PackageCatalog& catalog, std::vector<std::string> tensor_names,
                                    std::vector<V2Sidecar> sidecars = {});

// ------------------------------------------------ the admission message
//
// What nodes exchange to admit a stage (mesh-llm's skippy-protocol
// StageAdmissionDescriptor, stage protocol generation 11, descriptor
// version 1): the descriptor above with the stage's layer range (equal to
// its load range) and what the reference's native planner (its patched
// llama.cpp) derives: plan_id ("skippy-plan:v1:" + 64 lowercase hex, a
// digest of the native semantic plan), execution_contract (its JSON, ""
// when none) and one profile per guarded execution profile (six identity
// strings and the activation frontier's imports and exports with their
// bindings). This tool builds no native graph, so it derives none of those
// three: a message it emits holds every other field and names them as
// not derived.
//
// JSON form, members in the message's field order:
//   {"version":1,"package_id":"sha256:..","plan_id":"skippy-plan:v1:..",
//    "execution_contract":"","layer_start":0,"layer_end":4,
//    "resident_tensor_ids":[..],"sidecars":[{"kind":"mmproj","artifact_id":"..","name":".."}],
//    "profiles":[{"profile_id":"decode","graph_identity":"..","profile_identity":"..",
//      "slice_identity":"..","source_snapshot_identity":"..","graph_configuration_id":"..",
//      "backend_id":"..","activation_imports":[..],"activation_exports":[..],
//      "activation_import_bindings":[..],"activation_export_bindings":[..]}]}
inline constexpr uint32_t kStageAdmissionMessageVersion = 1;

struct StageAdmissionProfile {
  std::string profile_id, graph_identity, profile_identity, slice_identity, source_snapshot_identity,
      graph_configuration_id, backend_id;
  std::vector<std::string> activation_imports, activation_exports, activation_import_bindings, activation_export_bindings;
  bool operator==(const StageAdmissionProfile&) const = default;
};

struct StageAdmissionMessage {
  uint32_t version = kStageAdmissionMessageVersion;
  StageAdmission descriptor;  // package_id, resident_tensor_ids, sidecars
  std::optional<std::string> plan_id;             // nullopt: not derived
  std::optional<std::string> execution_contract;  // nullopt: not derived
  uint32_t layer_start = 0, layer_end = 0;
  std::optional<std::vector<StageAdmissionProfile>> profiles;  // nullopt: not derived
  bool operator==(const StageAdmissionMessage&) const = default;
};

// Whether `json_text` is the full message (an object with "version") rather
// than the descriptor alone; false for anything else.
bool is_stage_admission_message(std::string_view json_text);

// Parses the full message strictly, with the reference's rules in its order
// (validate_stage_admission_descriptor): version 1; package_id "sha256:" +
// 64 lowercase hex; plan_id "skippy-plan:v1:" + 64 lowercase hex;
// layer_start < layer_end; resident_tensor_ids non-empty, each non-empty,
// strictly sorted; profiles non-empty, strictly sorted by non-empty
// profile_id, every identity non-empty, imports/exports and their bindings
// non-empty, unique within each list and paired one to one; sidecars of a
// known kind ("mmproj", or the enum's 1) with an artifact_id, strictly
// sorted. Error(kInvalidInput) "<origin>: <field>: <problem>".
StageAdmissionMessage parse_stage_admission_message(std::string_view json_text, std::string_view origin);

// The message as compact JSON in the field order above; a field not derived
// is null.
std::string stage_admission_message_json(const StageAdmissionMessage& message);

// The message for a stage of `range` (nullopt: chosen by tensors; the range
// is then the layers its blk.N tensors span) holding `admission`: every
// field the package and the stage determine; plan_id, execution_contract and
// profiles not derived.
StageAdmissionMessage make_stage_admission_message(const PackageCatalog& catalog, const StageAdmission& admission,
                                                   std::optional<LayerRange> range);

// The fields make_stage_admission_message leaves underived, each with why.
std::vector<std::pair<std::string, std::string>> stage_admission_message_underived();

}  // namespace skippy
