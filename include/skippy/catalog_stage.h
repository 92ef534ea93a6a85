// The consumer side of a package catalog (skippy/package_catalog.h):
// open a schema 2 package directory, and select what a stage needs, by
// layer range or by an explicit list of tensor names.
//
// Selection works on the catalog alone (no files): it says which artifacts
// and which tensor extents a stage reads. Bringing those artifacts (cache,
// peer, Hub: provide_parts), checking them (check_part) and hashing them
// (skippy/verify.h: verify_parts, through the verification cache) come
// after, for either schema alike: the package's ArtifactSource works on
// artifact entries (part_entry).
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
// only the fragments a stage of that range reads (select_stage's
// rule: the metadata, the embeddings when it starts at 0 or reads a tied
// output, its layers, the output when it ends at layer_count) are brought
// and read: the others keep tensors_listed false. Throws the file rule's,
// the source's and the reader's errors, each naming the package and the
// fragment.
PackageCatalog read_catalog_v1(const OpenedPackage& pkg, std::optional<LayerRange> range = std::nullopt);
// A schema 1 package as the catalog consumer takes it: its place and
// read_catalog_v1's catalog (which keeps the manifest, manifest_v1).
OpenedCatalog open_catalog_v1(const OpenedPackage& pkg, std::optional<LayerRange> range = std::nullopt);
// A schema 1 package's place and the manifest's artifacts
// (catalog_artifacts_v1): no fragment brought or read, but, for a `range`
// that owns the output, shared/output.gguf (brought, checked, its header
// read: whether the output is tied to the embeddings). Enough for what
// needs the artifacts and not their tensors: all_parts, and verify and
// fetch of a stage (select_stage with artifacts_only).
OpenedCatalog list_catalog_v1(const OpenedPackage& pkg, std::optional<LayerRange> range = std::nullopt);

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
// (manifest_v1) it picks whole parts by their role (the spec's rule for
// schema 1): the metadata, the embeddings when the range starts at 0 or
// reads a tied output (all of shared/embeddings.gguf), the range's layers,
// the output when it ends at layer_count, in that load order, each with
// every tensor in it; such a catalog must list the tensors of every
// fragment the range reads (read_catalog_v1 with the range does;
// Error(kUsage) otherwise), unless `artifacts_only`: then a schema 1 stage
// is its parts without their tensors (what verify and fetch need), and
// only the output's are needed, for a range that owns it (list_catalog_v1
// with the range reads them). No projector (select_projector), no files.
StageSelection select_stage(const PackageCatalog& catalog, LayerRange range, bool artifacts_only = false);

// The projector a stage of `range` serves with, as a part (its reason
// says why): the declared projector (schema 1: projectors[]; schema 2: an
// mmproj sidecar) at options.projector_path when one is given, which must
// be declared (projectors are never inferred from file names) and of a
// kind this runtime supports (Error(kInvalidInput) naming the package
// otherwise); without a path, the first mmproj for a stage that owns the
// input (range starting at 0) or options.single_stage; nullopt when there
// is none. Schema 1 also checks every declared projector on disk (a
// remote package's projectors no stage asked for are only path-checked).
std::optional<StagePart> select_projector(const OpenedCatalog& pkg, LayerRange range, const SelectOptions& options = {});

// What a stage loader does: select_stage on pkg.catalog, its projector
// (select_projector), then every part and the projector brought and checked
// (provide_parts), so each part's `path` is the file to read. Throws the
// selection's, the source's and the file rule's errors. (Hashing is
// verify_if_required's.)
StageSelection open_stage(const OpenedCatalog& pkg, LayerRange range, const SelectOptions& options = {});

// The artifacts and locators of exactly these tensors (each must be in the
// catalog, named once; Error(kInvalidInput) naming the first that is not).
StageSelection select_stage_tensors(const PackageCatalog& catalog, const std::vector<std::string>& names);

// The stage a schema 2 admission descriptor defines (skippy/stage_admission.h):
// check_stage_admission (naming `origin`), then the carrier, the parts
// holding its resident tensors (select_stage_tensors) and its sidecars'
// artifacts: exactly stage_admission_artifacts.
StageSelection select_stage_admission(const PackageCatalog& catalog, const StageAdmission& admission,
                                      std::string_view origin);
// The descriptor of a selected stage: its tensors, and the sidecars it
// loads (its projector, or sidecar parts an admission put among its parts),
// sorted.
StageAdmission stage_admission_of(const PackageCatalog& catalog, const StageSelection& stage);

// Every artifact of the package as parts, in load order: the carrier
// (schema 1: shared/metadata.gguf), the payload parts by part index
// (schema 1: embeddings, layers, output), then the sidecars (schema 1: the
// projectors) and the publisher files, each with its listed tensors. What
// `verify` and `fetch` take without a range or tensor names. A schema 1
// catalog needs no fragment read for it (catalog_artifacts_v1 will do).
std::vector<StagePart> all_parts(const PackageCatalog& catalog);


}  // namespace skippy
