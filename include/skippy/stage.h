// The consumer side of a layer package (spec: "Layer Selection", "Consumer
// Validation", "Compatibility"): an opened package of either schema, the
// parts a stage loads (StagePart, StageSelection: selected on the catalog,
// skippy/catalog_stage.h), and bringing and checking their files.
//
// Every source of packages (skippy/source.h: a local directory, the Hugging
// Face cache, a peer, the Hub) resolves to an OpenedPlace — a directory
// plus the boundary its files must stay inside, and possibly an
// ArtifactSource that brings missing files — with the schema 1 manifest
// (OpenedPackage) or the catalog (OpenedCatalog), and then goes through the
// same validation and selection. Nothing here knows where files come from.
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
#include "skippy/package_catalog.h"
#include "skippy/package_signature.h"
#include "skippy/package_layout.h"

namespace skippy {

class GgufFile;  // skippy/gguf.h

// Where the artifacts of a package that are not on disk yet come from (the
// source layer's cache and remotes). provide_parts, the schema 1 reader
// (open_catalog_v1) and check_metadata_only ask it for exactly the entries
// they are about to check, in one batch, before checking them; it places
// each at root/<path> or throws. Thread-safe.
class ArtifactSource {
 public:
  virtual ~ArtifactSource() = default;
  virtual void provide(const std::vector<const ArtifactEntry*>& entries) = 0;
  // Relative paths brought in by this object (in the order they finished).
  virtual std::vector<std::string> fetched() const = 0;
  // Where each path provided so far came from: "cache", or the name of the
  // remote that delivered it ("peer", "hub").
  virtual std::map<std::string, std::string> origins() const = 0;
  // True when `rel_path` was downloaded by this object and its SHA-256
  // matched the manifest while it was written (no need to hash it again).
  virtual bool verified_while_fetching(const std::string& rel_path) const = 0;
  // Decisions worth telling a person: a remote that could not deliver a
  // file, and why, before the next one was asked.
  virtual std::vector<std::string> notes() const = 0;
};

// What an opened package is, whichever its schema (the part every source
// fills the same way): where its files are, how its reference resolved, and
// what brings the files not on disk yet. OpenedPackage (schema 1) adds the
// manifest, OpenedCatalog (schema 2, skippy/catalog_stage.h) the catalog.
struct OpenedPlace {
  std::string ref;                  // as the user wrote it
  std::filesystem::path root;       // the directory holding model-package.json
  std::filesystem::path boundary;   // resolved files must stay inside (canonical)
  bool always_verify = false;       // SHA-256 on every resolution (hf:// packages, trusted signers)
  std::string manifest_sha256;      // of model-package.json as read
  std::optional<std::string> commit;        // the commit a revision resolved to, for repository packages
  std::shared_ptr<ArtifactSource> source;   // brings missing artifacts; null when every file is on disk (local dirs)
  std::vector<std::string> warnings;        // worth telling a person (moving branch, ...)
  // hf://: what the revision was: "commit", "tag", "branch", or "ref" (a name
  // no remote could classify, e.g. offline); empty for a local directory.
  std::string revision_kind;
  std::optional<PackageSignature> signature;  // checked against trusted signers (none configured: not read)
  // 1 or 2: which reader opened it (open_package_dir, open_catalog_dir);
  // what the consumer's messages name a part by (its path and the
  // manifest's fields, or its artifact id and the catalog's).
  uint32_t schema_version = 1;
};

struct OpenedPackage : OpenedPlace {
  PackageManifest manifest;
};

// Reads and validates the manifest in `root`: schema version 1, format, ABI
// compatibility with this runtime, identity fields (every source ends
// here). `boundary` is where artifact files must resolve. Throws
// Error(kNotFound) without a manifest, Error(kInvalidInput) naming the
// manifest and the rule otherwise.
OpenedPackage open_package_dir(std::string ref, const std::filesystem::path& root, const std::filesystem::path& boundary);

// A local package directory, read in place (root and boundary are the
// directory). Throws Error(kNotFound / kInvalidInput) naming `dir`.
OpenedPackage open_local_package(const std::filesystem::path& dir);


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

// Metadata-only inspection (inventory, identity, prepare): the manifest and
// shared/metadata.gguf (safe path, regular file inside the boundary, size,
// a parseable GGUF). Needs no layer range. Returns the metadata part (to
// verify before trusting what it says: see verify_if_required).
StagePart check_metadata_only(const OpenedPackage& pkg);

// The reference runtime's rule for a width the manifest does not declare,
// applied to the fragment of layer `layer`: the element count of
// blk.<layer>.hc_attn_norm.weight (hyper-connected models) if the fragment
// has it, else of blk.<layer>.attn_norm.weight. Names match exactly
// (blk.0.cross_attn_norm.weight does not count). nullopt when neither is
// there. The one implementation of the rule: activation_width_of uses it,
// and plan, inspect and the C API use that.
struct WidthTensor {
  std::string name;
  uint64_t elements = 0;
};
std::optional<WidthTensor> activation_width_tensor(const GgufFile& layer_fragment, uint32_t layer);

// The hidden width a stage boundary carries. The manifest's
// activation_width when declared; else (older reference packages lack it)
// activation_width_tensor() of the first layer's fragment, read when that
// file is on disk (never fetched for this: a layer can be gigabytes).
// `note` says how a missing width was found, or why it stays unknown; empty
// when declared.
struct ActivationWidth {
  std::optional<uint64_t> width;
  bool derived = false;
  std::string note;
};
ActivationWidth activation_width_of(const OpenedPackage& pkg);

struct SelectOptions {
  // An explicit projector for this stage: a path declared in the manifest's
  // projectors[]. Wins over the default choice.
  std::optional<std::string> projector_path;
  // Treat the stage as single-stage serving (gets the default projector even
  // when its range does not start at 0).
  bool single_stage = false;
};

// check_package_file (skippy/package_layout.h: the one file rule) for one
// artifact of `pkg`: a safe relative path resolving (through any symlinks)
// to a regular file strictly inside pkg.boundary, of the declared
// artifact_bytes. Returns the resolved path; throws Error(kInvalidInput)
// naming the artifact and the rule. `what` names the artifact's role.
std::filesystem::path check_artifact_file(const OpenedPackage& pkg, const ArtifactEntry& e, std::string_view what);

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
