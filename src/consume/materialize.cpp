// materialize (skippy/materialize.h): a stage's tensors, as its catalog
// locates them, fed to the stage-file writer (stage_file.h), for either
// schema: schema 1's catalog is the one the schema 1 reader built of the
// stage's fragments, schema 2's the package's.
#include "skippy/materialize.h"

#include <map>

#include "skippy/error.h"
#include "skippy/stage_view.h"
#include "skippy/verify.h"
#include "stage_file.h"

namespace skippy {

namespace fs = std::filesystem;

MaterializeResult materialize_stage(const OpenedCatalog& pkg, const StageSelection& stage,
                                    const MaterializeOptions& options) {
  const PackageCatalog& cat = pkg.catalog;
  const bool whole_parts = cat.selects_whole_parts;
  // Every part's file rules first, then the layout: nothing is written or
  // locked before both hold. Missing parts come through the package's
  // source first (hf://: the cache, a peer, the Hub; nothing for a local
  // directory).
  StageSelection resolved = stage;
  resolved.projector.reset();  // never merged, never verified here
  provide_parts(pkg, resolved.parts);
  // A package of whole fragments: the stage's own rules over the fragments
  // the reader read (every layer in range present and holding tensors).
  if (whole_parts) (void)StageView::open(cat, resolved);
  std::map<size_t, std::shared_ptr<const MappedFile>> files;
  for (const auto& p : resolved.parts) {
    if (p.kind == CatalogArtifactKind::kSidecar || p.tensors.empty()) continue;  // schema 1's carrier holds tensors
    files[cat.artifact_index.at(p.artifact_id)] = MappedFile::open(p.path);
  }
  std::vector<size_t> tensors;
  for (const auto& loc : stage.tensors) {
    const auto it = cat.tensor_index.find(loc.name);
    if (it == cat.tensor_index.end()) throw_invalid(pkg.ref + ": tensor '" + loc.name + "' is not in the package's catalog");
    tensors.push_back(it->second);
  }
  const auto w = materialize_detail::catalog_stage_writer(cat, tensors, files, stage.range, pkg.manifest_sha256,
                                                          cat.model_id, pkg.ref);
  materialize_detail::StageFileJob job;
  job.ref = pkg.ref;
  job.boundary = pkg.boundary;
  job.manifest_sha256 = pkg.manifest_sha256;
  job.model_id = cat.model_id;
  job.range = stage.range;
  job.writer = &w;
  job.verify = options.verify || verify_required(pkg);  // hf://, trusted signers, SKIPPY_VERIFY_PACKAGE_SHA
  job.verify_parts = [&] {
    // Whole fragments without --verify: the stage loader's wording when the
    // package requires verification (it names the damaged cached files to remove).
    if (whole_parts && !options.verify && verify_if_required(pkg, resolved.parts)) return;
    materialize_detail::throw_unless_verified(pkg.ref, pkg.names_artifacts_by_id ? "artifacts do not match the catalog" : "parts do not match the manifest",
                                              verify_stage(pkg, resolved));
  };
  return materialize_detail::write_materialized(job, options);
}

}  // namespace skippy
