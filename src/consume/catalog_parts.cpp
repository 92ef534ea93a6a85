// Schema 2 parts through the schema 1 verifier (see skippy/catalog_parts.h).
#include "skippy/catalog_parts.h"

namespace skippy {

std::vector<StagePart> catalog_stage_parts(const OpenedCatalog& pkg, const CatalogStage& stage, bool include_carrier) {
  std::vector<StagePart> parts;
  for (const auto& p : stage.parts) {
    if (p.kind == CatalogArtifactKind::kCarrier && !include_carrier) continue;
    StagePart sp;
    // The catalog's role (schema 1: the manifest's); a payload part without
    // one (schema 2's shared/common.gguf) is metadata.
    const CatalogArtifact* a = pkg.catalog.find_artifact(p.artifact_id);
    sp.role = a && a->role ? *a->role : (p.layer ? PartRole::kLayer : PartRole::kMetadata);
    sp.layer_index = p.layer;
    sp.rel_path = p.rel_path;
    sp.path = check_catalog_part(pkg, p);
    sp.bytes = p.bytes;
    sp.tensor_count = p.tensors.size();
    sp.sha256 = p.sha256;
    sp.reason = p.reason;
    parts.push_back(std::move(sp));
  }
  return parts;
}

VerifyReport verify_catalog_stage_parts(const OpenedCatalog& pkg, const CatalogStage& stage,
                                        const VerifyOptions& options) {
  // A schema 2 carrier was hashed when the package was opened; schema 1's
  // (shared/metadata.gguf) is a fragment like the others.
  const bool carrier_hashed = pkg.catalog.root_v2.has_value();
  std::vector<CatalogPart> payload;
  for (const auto& p : stage.parts) {
    if (p.kind != CatalogArtifactKind::kCarrier || !carrier_hashed) payload.push_back(p);
  }
  return verify_catalog_parts(pkg, payload, options);
}

}  // namespace skippy
