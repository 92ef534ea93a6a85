// The consumer side of a package catalog (skippy/package_catalog.h):
// open a schema 2 package directory, and select what a stage needs, by
// layer range or by an explicit list of tensor names.
//
// Selection works on the catalog alone (no files): it says which artifacts
// and which tensor extents a stage reads. Bringing those artifacts (cache,
// peer, Hub), checking them (check_catalog_part) and hashing them come
// after, exactly as for schema 1: they work on artifact entries.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "skippy/package_catalog.h"
#include "skippy/package_layout.h"

namespace skippy {

struct OpenedCatalog {
  std::string ref;                  // as the user wrote it
  std::filesystem::path root;       // the directory holding model-package.json
  std::filesystem::path boundary;   // resolved files must stay inside (canonical)
  std::string manifest_sha256;      // of model-package.json as read
  PackageCatalog catalog;
};

// Opens a local schema 2 package: parses model-package.json
// (parse_package_root_v2), checks the carrier file (safe relative path,
// resolving to a regular file inside the directory, of the declared size and
// SHA-256: the package_id commits to that digest, and the locators are only
// as good as the carrier), opens it as a directory-only GGUF and builds the
// catalog (build_catalog_v2). Throws Error(kNotFound) without a manifest,
// Error(kIntegrity) for a carrier whose bytes differ, Error(kInvalidInput)
// naming the file and the rule otherwise.
OpenedCatalog open_local_catalog_v2(const std::filesystem::path& dir);

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
//     token_types, per-layer input embeddings) when the range starts at 0;
//   output and output_norm when it ends at layer_count, and then also
//     token_embd.weight when the output is tied to it (no output.weight);
//   every other tensor without a layer (rope_freqs, ...) on every stage.
CatalogStage select_catalog_range(const PackageCatalog& catalog, LayerRange range);

// The artifacts and locators of exactly these tensors (each must be in the
// catalog, named once; Error(kInvalidInput) naming the first that is not).
CatalogStage select_catalog_tensors(const PackageCatalog& catalog, const std::vector<std::string>& names);

// The spec's file rules for one selected part of a local package: safe
// relative path resolving (through symlinks) to a regular file inside the
// boundary, of the declared size. Returns the resolved path; throws
// Error(kInvalidInput) naming the artifact.
std::filesystem::path check_catalog_part(const OpenedCatalog& pkg, const CatalogPart& part);

// check_catalog_part, then the file's SHA-256 against the catalog's
// (Error(kIntegrity) naming the artifact when they differ). No verification
// cache yet: every call hashes the file.
std::filesystem::path verify_catalog_part(const OpenedCatalog& pkg, const CatalogPart& part);

}  // namespace skippy
