// A schema 2 stage's artifacts as StageParts (skippy/stage.h), so the
// schema 1 integrity machinery serves both schemas: verify_parts with its
// verification cache and parallel hashing. Used by materialize and the C
// API for schema 2 packages.
//
// Thread-safety: every function is reentrant and reads its package through const
// references; several threads may check parts of one opened package at once.
#pragma once

#include <vector>

#include "skippy/catalog_stage.h"
#include "skippy/stage.h"
#include "skippy/verify.h"

namespace skippy {

// The stage's parts in CatalogStage order (the carrier first unless
// `include_carrier` is false), each through check_catalog_part (throws its
// errors): the catalog artifact's role (schema 1: the manifest's; schema
// 2: kMetadata for the carrier, kLayer with layer_index for layer
// artifacts, kProjector for a sidecar), kMetadata for a payload part
// without one (shared/common.gguf);
// path resolved, bytes and sha256 from the catalog, tensor_count the
// stage's tensors in it.
std::vector<StagePart> catalog_stage_parts(const OpenedCatalog& pkg, const CatalogStage& stage, bool include_carrier);

// SHA-256 of the stage's payload parts against the catalog (a schema 2
// carrier was hashed when the package was opened; schema 1's metadata part
// is verified with the others), through verify_parts and the
// verification cache keyed by the manifest's SHA-256. A problem names the
// artifact id and path: "artifact <id> (<path>): SHA-256 is X, ...".
VerifyReport verify_catalog_stage_parts(const OpenedCatalog& pkg, const CatalogStage& stage,
                                        const VerifyOptions& options = {});

}  // namespace skippy
