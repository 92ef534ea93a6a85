// The consumer side of a layer package (spec: "Layer Selection", "Consumer
// Validation", "Compatibility"): the parts a stage loads (StagePart,
// StageSelection: selected on the catalog, skippy/catalog_stage.h), and
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
#include "skippy/package_signature.h"
#include "skippy/package_layout.h"

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

// What a stage reads, whichever the schema (skippy/catalog_stage.h selects it).
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

}  // namespace skippy
