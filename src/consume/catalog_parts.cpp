// Schema 2 parts through the schema 1 verifier (see skippy/catalog_parts.h).
#include "skippy/catalog_parts.h"

#include <map>

namespace skippy {

std::vector<StagePart> catalog_stage_parts(const OpenedCatalog& pkg, const CatalogStage& stage, bool include_carrier) {
  std::vector<StagePart> parts;
  for (const auto& p : stage.parts) {
    if (p.kind == CatalogArtifactKind::kCarrier && !include_carrier) continue;
    StagePart sp;
    sp.role = p.layer ? PartRole::kLayer : PartRole::kMetadata;
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
  // verify_parts reads of the package only its ref, source and manifest SHA-256.
  OpenedPackage view;
  view.ref = pkg.ref;
  view.root = pkg.root;
  view.boundary = pkg.boundary;
  view.manifest_sha256 = pkg.manifest_sha256;
  auto report = verify_parts(view, catalog_stage_parts(pkg, stage, /*include_carrier=*/false), options);
  std::map<std::string, std::string> id_of;  // rel path -> artifact id
  for (const auto& p : stage.parts) id_of[p.rel_path] = p.artifact_id;
  for (auto& problem : report.problems) {
    const auto colon = problem.find(':');
    const auto it = id_of.find(problem.substr(0, colon));
    if (colon != std::string::npos && it != id_of.end()) {
      problem = "artifact " + it->second + " (" + it->first + ")" + problem.substr(colon);
    }
  }
  return report;
}

}  // namespace skippy
