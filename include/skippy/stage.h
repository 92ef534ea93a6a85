// The consumer side of a layer package (spec: "Layer Selection", "Consumer
// Validation", "Compatibility"): the parts a stage loads (StagePart,
// StageSelection: selected on the catalog, choose_stage below), and
// bringing and checking their files.
//
// Every source of packages (skippy/source.h: a local directory, the Hugging
// Face cache, a peer, the Hub) resolves to an opened package
// (skippy/package.h: a place and its schema's reader), whose catalog goes
// through the same validation and selection. Nothing here knows where files
// come from, nor which schema a package has.
//
// Thread-safety: every function is reentrant; several threads may select and check
// stages of one opened package at once (its ArtifactSource is thread-safe).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "skippy/manifest.h"
#include "skippy/package.h"
#include "skippy/package_catalog.h"
#include "skippy/package_layout.h"
#include "skippy/package_signature.h"
#include "skippy/stage_admission.h"

namespace skippy {

class GgufFile;  // skippy/gguf.h

// One artifact a stage reads (or, for verify and fetch, one artifact of the
// package), whichever the schema: what the catalog says of it, and where
// its file is once brought and checked (provide_parts).
struct StagePart {
  std::string artifact_id;              // schema 1: the relative path (it has no ids)
  std::string rel_path;                 // as the package declares it
  CatalogArtifactKind kind = CatalogArtifactKind::kPayload;
  // The part it plays (the catalog's: schema 1, the manifest's; schema 2,
  // kMetadata for the carrier, kLayer for a layer artifact, kProjector for
  // a sidecar); nullopt for a schema 2 payload part without a layer
  // (shared/common.gguf).
  std::optional<PartRole> role;
  std::optional<uint32_t> layer_index;  // of a layer artifact
  uint64_t bytes = 0;                   // declared (checked against the file)
  uint64_t tensor_count = 0;            // the tensors the package declares in the artifact
  std::string sha256;                   // declared
  bool hashed_on_read = false;          // its reader checked its SHA-256 already (CatalogArtifact::hashed_on_read)
  std::string reason;                   // why the stage needs it
  std::vector<std::string> tensors;     // the stage's tensors in it, in catalog order (when listed)
  std::filesystem::path path;           // the file to read: set by provide_parts / check_part, empty before
};

// The role a part is shown with: its role's name, "common" without one.
std::string_view part_role_label(const StagePart& part) noexcept;

// One tensor a stage reads: where its bytes are.
struct TensorLocator {
  std::string name;
  std::string artifact_id;
  uint64_t offset = 0;        // absolute, inside the artifact
  uint64_t stored_bytes = 0;
};

// What a stage reads, whichever the schema (chosen by the functions below).
struct StageSelection {
  std::optional<LayerRange> range;     // absent for a selection by tensor names
  // In load order. Schema 1: metadata, embeddings (range starts at 0, or the
  // output is tied to the embeddings), layers start..end-1, output (range
  // ends at layer_count). Schema 2: the carrier first (every stage reads its
  // KVs and directory), then the payload parts holding the stage's tensors,
  // by part index.
  std::vector<StagePart> parts;
  std::vector<TensorLocator> tensors;  // in the catalog's order
  std::optional<StagePart> projector;  // the projector this stage uses, if any (select_projector)
  std::vector<std::string> notes;      // decisions worth logging (tied output, projector choice)
  // The parts with the projector last: what a stage brings and verifies.
  std::vector<StagePart> parts_with_projector() const;
};

// Metadata-only inspection (inventory, identity, prepare): the carrier
// (schema 1: shared/metadata.gguf) brought and checked (safe path, regular
// file inside the boundary, size, a parseable GGUF); a catalog of the root
// alone (CatalogNeed::root_only) will do. Needs no layer range. Returns the
// carrier's part (to verify before trusting what it says: see
// verify_if_required).
StagePart check_metadata_only(const OpenedCatalog& pkg);
// The model's metadata (the source's KVs and tensor directory): the carrier
// the reader read to build pkg's catalog, or else the carrier brought and
// checked (check_metadata_only), verified where the package requires it
// (skippy/verify.h verify_if_required) and opened. Throws their errors.
std::shared_ptr<const GgufFile> package_metadata(const OpenedCatalog& pkg);

struct SelectOptions {
  // An explicit projector for this stage: a path declared in the manifest's
  // projectors[]. Wins over the default choice.
  std::optional<std::string> projector_path;
  // Treat the stage as single-stage serving (gets the default projector even
  // when its range does not start at 0).
  bool single_stage = false;
};

// The file rule for one part of a package of either schema (the wording
// of the package's schema: "<ref>: <path>" and the manifest's
// artifact_bytes for schema 1, "<ref>: artifact <id> (<path>)" and the
// catalog's byte_size for schema 2). Returns the resolved path; throws
// Error(kInvalidInput).
std::filesystem::path check_part(const OpenedPlace& pkg, const StagePart& part);

// Brings the parts not on disk through pkg.source (one batch, each path
// once; nothing when the package has no source), then check_part on each,
// setting its `path`. Throws the source's errors, or check_part's.
void provide_parts(const OpenedPlace& pkg, std::vector<StagePart>& parts);

// The artifact entry (path, bytes, SHA-256, tensor count) an ArtifactSource
// brings and the source layer checks, for a part.
ArtifactEntry part_entry(const StagePart& part);

// --------------------------------------------- choosing a stage on the catalog
// The consumer side of a package catalog (skippy/package_catalog.h): select
// what a stage needs, by layer range, by an explicit list of tensor names,
// or by a stage admission descriptor, whichever the package's schema.
//
// Selection works on the catalog alone (no files): it says which artifacts
// and which tensor extents a stage reads. Bringing those artifacts (cache,
// peer, Hub: provide_parts), checking them (check_part) and hashing them
// (skippy/verify.h: verify_parts, through the verification cache) come
// after; the package's ArtifactSource works on artifact entries
// (part_entry).
//
// Thread-safety: every function is reentrant; several threads may select, bring and
// check the parts of one opened package at once (its ArtifactSource is thread-safe).

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
// The rule is stage_reads (skippy/package_layout.h). A catalog whose
// package chooses whole parts (selects_whole_parts: the spec's rule for
// fragments) gives whole parts by their role: the metadata, the embeddings
// when the range starts at 0 or reads a tied output (the whole embeddings
// part), the range's layers, the output when it ends at layer_count, in
// that load order, each with every tensor in it; such a catalog must list
// the tensors of every part the range reads (CatalogNeed::stage does;
// Error(kUsage) otherwise), unless `artifacts_only`: then the stage is its
// parts without their tensors (what verify and fetch need), and only the
// output's are needed, for a range that owns it (CatalogNeed::artifacts
// with the range reads them). No projector (select_projector), no files.
StageSelection select_stage(const PackageCatalog& catalog, LayerRange range, bool artifacts_only = false);

// The projector a stage of `range` serves with, as a part (its reason
// says why): the declared projector (a sidecar of kind mmproj) at
// options.projector_path when one is given, which must
// be declared (projectors are never inferred from file names) and of a
// kind this runtime supports (Error(kInvalidInput) naming the package
// otherwise); without a path, the first mmproj for a stage that owns the
// input (range starting at 0) or options.single_stage; nullopt when there
// is none. A package that checks its declared sidecars
// (checks_declared_sidecars) has every one checked on disk (a remote
// package's sidecars no stage asked for are only path-checked).
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

// The stage an admission descriptor defines (skippy/stage_admission.h):
// check_stage_admission (naming `origin`), then the carrier, the parts
// holding its resident tensors (select_stage_tensors) and its sidecars'
// artifacts: exactly stage_admission_artifacts.
StageSelection select_stage_admission(const PackageCatalog& catalog, const StageAdmission& admission,
                                      std::string_view origin);
// The descriptor of a selected stage: its tensors, and the sidecars it
// loads (its projector, or sidecar parts an admission put among its parts),
// sorted.
StageAdmission stage_admission_of(const PackageCatalog& catalog, const StageSelection& stage);

// How a caller chooses the stage it works on (the commands' --layers,
// --projector, --single-stage, --tensors, --admission): a layer range (with
// the projector `options` choose), exactly these tensors, an admission
// descriptor, or none of them (every artifact of the package).
struct StageChoice {
  std::optional<LayerRange> range;
  std::vector<std::string> tensor_names;
  std::optional<StageAdmission> admission;
  std::string admission_origin;  // names the descriptor in messages
  SelectOptions options;
  // verify and fetch: a range's parts without their tensors (select_stage's).
  bool artifacts_only = false;
};

// The catalog a choice needs: a range's stage (its artifacts only, with
// artifacts_only), every tensor for tensor names or a descriptor, the
// artifacts for every artifact.
CatalogNeed catalog_need(const StageChoice& choice);

// Error(kUsage) for a choice that cannot be made: two ways at once, a
// projector without a range, or tensor names / a descriptor for a package
// whose stages are whole parts by role (selects_whole_parts);
// Error(kInvalidInput) for a descriptor of another package_id (the root
// decides: nothing is brought first).
void check_stage_choice(const StageChoice& choice, const PackageIdentity& package);

// The stage: select_stage with its projector (select_projector) for a
// range; select_stage_tensors for names; select_stage_admission for a
// descriptor; all_parts for none. `pkg` holds the catalog catalog_need(choice)
// asked for. Throws check_stage_choice's and the selections' errors.
StageSelection choose_stage(const OpenedCatalog& pkg, const StageChoice& choice);

// Every artifact of the package as parts, in load order: the carrier, the
// payload parts by part index, then the sidecars and the publisher files,
// each with its listed tensors. What `verify` and `fetch` take without a
// range or tensor names.
std::vector<StagePart> all_parts(const PackageCatalog& catalog);

}  // namespace skippy
