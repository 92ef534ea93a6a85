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

}  // namespace skippy
