// The consumer side of a package catalog (skippy/package_catalog.h):
// open a schema 2 package directory, and select what a stage needs, by
// layer range or by an explicit list of tensor names.
//
// Selection works on the catalog alone (no files): it says which artifacts
// and which tensor extents a stage reads. Bringing those artifacts (cache,
// peer, Hub: provide_catalog_parts), checking them (check_catalog_part) and
// hashing them (skippy/verify.h: verify_catalog_parts, through the same
// verification cache as schema 1) come after, exactly as for schema 1: the
// package's ArtifactSource works on artifact entries (catalog_part_entry).
//
// Every source ends in open_catalog_dir, as every schema 1 source ends in
// open_package_dir: open_package_any (skippy/source.h) opens a reference of
// either schema from a local directory or hf:// (cache, peer, Hub) and gives
// an OpenedCatalog for schema 2.
//
// Thread-safety: every function is reentrant; several threads may select, bring and
// check the parts of one opened package at once (its ArtifactSource is thread-safe).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "skippy/package_catalog.h"
#include "skippy/package_layout.h"
#include "skippy/package_signature.h"
#include "skippy/stage.h"
#include "skippy/stage_admission.h"

namespace skippy {

// An opened schema 2 package: the place (skippy/stage.h: OpenedPlace, filled
// by every source as for schema 1) and the catalog.
struct OpenedCatalog : OpenedPlace {
  PackageCatalog catalog;
};

// Opens the schema 2 package whose model-package.json is in `root` (every
// source ends here): parses the root (parse_package_root_v2), brings the
// carrier through `source` when one is given (it is the first artifact any
// use of the package needs), checks the carrier file (safe relative path,
// resolving to a regular file inside `boundary`, of the declared size) and
// its SHA-256 (the package_id commits to that digest, and the locators are
// only as good as the carrier; not hashed again when `source` hashed it
// while downloading it), opens it as a directory-only GGUF and builds the
// catalog (build_catalog_v2). The result's `source` is `source`. Throws
// Error(kNotFound) without a manifest, Error(kIntegrity) for a carrier whose
// bytes differ, the source's errors (kOffline, kNotFound, kTransport, ...)
// when it cannot bring the carrier, Error(kInvalidInput) naming the file and
// the rule otherwise.
OpenedCatalog open_catalog_dir(std::string ref, const std::filesystem::path& root, const std::filesystem::path& boundary,
                               std::shared_ptr<ArtifactSource> source = nullptr);

// Opens a local schema 2 package: parses model-package.json
// (parse_package_root_v2), checks the carrier file (safe relative path,
// resolving to a regular file inside the directory, of the declared size and
// SHA-256: the package_id commits to that digest, and the locators are only
// as good as the carrier), opens it as a directory-only GGUF and builds the
// catalog (build_catalog_v2). Throws Error(kNotFound) without a manifest,
// Error(kIntegrity) for a carrier whose bytes differ, Error(kInvalidInput)
// naming the file and the rule otherwise.
// (open_catalog_dir on the directory, without a source.)
OpenedCatalog open_local_catalog_v2(const std::filesystem::path& dir);

// The catalog of an opened schema 1 package (build_catalog_v1): the model's
// fragments (metadata, embeddings, layers, output) brought through
// pkg.source in one batch (nothing for a local directory), each through the
// file rule (check_artifact_file) and its header read; projectors are
// listed, never read. With a `range` (checked as select_stage checks it),
// only the fragments a stage of that range reads (select_catalog_range's
// rule: the metadata, the embeddings when it starts at 0 or reads a tied
// output, its layers, the output when it ends at layer_count) are brought
// and read: the others keep tensors_listed false. Throws the file rule's,
// the source's and the reader's errors, each naming the package and the
// fragment.
PackageCatalog read_catalog_v1(const OpenedPackage& pkg, std::optional<LayerRange> range = std::nullopt);
// A schema 1 package as the catalog consumer takes it: its place and
// read_catalog_v1's catalog.
OpenedCatalog open_catalog_v1(const OpenedPackage& pkg, std::optional<LayerRange> range = std::nullopt);

// One tensor a stage reads: where its bytes are.
struct TensorLocator {
  std::string name;
  std::string artifact_id;
  uint64_t offset = 0;        // absolute, inside the artifact
  uint64_t stored_bytes = 0;
};

// One artifact a stage reads.
struct CatalogPart {
  std::string artifact_id;
  std::string rel_path;
  CatalogArtifactKind kind = CatalogArtifactKind::kPayload;
  std::optional<uint32_t> layer;     // of a layer artifact
  uint64_t bytes = 0;
  std::string sha256;
  std::string reason;                // why the stage needs it
  std::vector<std::string> tensors;  // the stage's tensors in it, in catalog order
};

struct CatalogStage {
  std::optional<LayerRange> range;   // absent for a selection by tensor names
  // The carrier first (every stage reads its KVs and directory), then the
  // payload parts holding the stage's tensors, by part index (artifact id).
  std::vector<CatalogPart> parts;
  std::vector<TensorLocator> tensors;  // in the carrier's directory order
  std::vector<std::string> notes;    // decisions worth logging (tied output)
};

// Consumer selection for layers range.start..range.end-1 (non-empty, within
// layer_count; Error(kInvalidInput) otherwise). A stage reads:
//   blk.N.* with N in range;
//   the input embeddings (token_embd, token_embd_norm, position_embd,
//     token_types, per-layer input embeddings, altup_proj) when the range
//     starts at 0, on no other stage;
//   output and output_norm when it ends at layer_count, and then also
//     token_embd.weight when the output is tied to it (no output.weight);
//   every other tensor without a layer (rope_freqs, ...) on every stage;
//   the NextN/MTP block (the layers holding blk.N.nextn.* tensors) only when
//   the range ends at layer_count, whichever range holds its layers, as the
//   reference's runtime loads it only on the stage owning the output.
// The rule is stage_reads (skippy/package_layout.h). On a schema 1 catalog
// (manifest_v1) it picks whole parts, as select_stage does: every tensor of
// each part the rule picks a tensor of (a tied output loads all of
// shared/embeddings.gguf), the parts in load order; such a catalog must
// list the tensors of every fragment the range reads (Error(kUsage)
// otherwise).
CatalogStage select_catalog_range(const PackageCatalog& catalog, LayerRange range);

// The projector a stage of `range` serves with, as a part (its reason
// says why): the sidecar at `path` when one is given, which must be
// declared (projectors are never inferred from file names) and of a kind
// this runtime supports (Error(kInvalidInput) naming the package
// otherwise); without a path, the first mmproj sidecar for a stage that
// owns the input (range starting at 0); nullopt when there is none.
std::optional<CatalogPart> select_catalog_projector(const OpenedCatalog& pkg, LayerRange range,
                                                    const std::optional<std::string>& path);

// The artifacts and locators of exactly these tensors (each must be in the
// catalog, named once; Error(kInvalidInput) naming the first that is not).
CatalogStage select_catalog_tensors(const PackageCatalog& catalog, const std::vector<std::string>& names);

// The stage a schema 2 admission descriptor defines (skippy/stage_admission.h):
// check_stage_admission (naming `origin`), then the carrier, the parts
// holding its resident tensors (select_catalog_tensors) and its sidecars'
// artifacts: exactly stage_admission_artifacts.
CatalogStage select_catalog_admission(const PackageCatalog& catalog, const StageAdmission& admission,
                                      std::string_view origin);
// The descriptor of a selected stage: its tensors, and the sidecars among
// its parts (a projector select_catalog_projector added), sorted.
StageAdmission catalog_stage_admission(const PackageCatalog& catalog, const CatalogStage& stage);

// Every artifact of the package as parts: the carrier, the payload parts
// by part index, then the sidecars (catalog order), each with its tensors.
// What `verify` and `fetch` take without a range or tensor names.
std::vector<CatalogPart> all_catalog_parts(const PackageCatalog& catalog);

// The artifact entry (path, bytes, SHA-256, tensor count) an ArtifactSource
// brings and the source layer checks, for a part / a catalog artifact.
ArtifactEntry catalog_part_entry(const CatalogPart& part);
ArtifactEntry catalog_artifact_entry(const CatalogArtifact& artifact);

// Brings the parts not on disk through pkg.source (one batch; nothing when
// the package has no source), then check_catalog_part on each. Returns the
// resolved paths, in order. Throws the source's errors, or check_catalog_part's.
std::vector<std::filesystem::path> provide_catalog_parts(const OpenedCatalog& pkg, const std::vector<CatalogPart>& parts);

// The spec's file rules for one selected part of a local package: safe
// relative path resolving (through symlinks) to a regular file inside the
// boundary, of the declared size. Returns the resolved path; throws
// Error(kInvalidInput) naming the artifact.
std::filesystem::path check_catalog_part(const OpenedCatalog& pkg, const CatalogPart& part);

// check_catalog_part, then the file's SHA-256 against the catalog's
// (Error(kIntegrity) naming the artifact when they differ). Hashes the file
// on every call; skippy/verify.h's verify_catalog_parts uses the
// verification cache.
std::filesystem::path verify_catalog_part(const OpenedCatalog& pkg, const CatalogPart& part);

}  // namespace skippy
