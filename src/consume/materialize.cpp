// materialize (skippy/materialize.h): a stage's tensors, as its catalog
// locates them, fed to the stage-file writer (stage_file.h). Schema 1's
// catalog is its StageView's (the schema 1 reader over the selected
// fragments); schema 2's is the package's.
#include "skippy/materialize.h"

#include <map>

#include "skippy/catalog_parts.h"
#include "skippy/error.h"
#include "skippy/stage_view.h"
#include "skippy/verify.h"
#include "stage_file.h"

namespace skippy {

namespace fs = std::filesystem;

MaterializeResult materialize_stage(const OpenedPackage& pkg, const StageSelection& selection,
                                    const MaterializeOptions& options) {
  // Every StageView rule is checked before anything is written or locked.
  const auto view = StageView::open(selection);
  std::map<size_t, std::shared_ptr<const MappedFile>> files;
  for (size_t p = 0; p < view.files().size(); ++p) files[p] = view.files()[p]->file();
  std::vector<size_t> tensors(view.catalog().tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) tensors[i] = i;  // load order
  const auto w = materialize_detail::catalog_stage_writer(view.catalog(), tensors, files, selection.range,
                                                          pkg.manifest_sha256, pkg.manifest.model_id, pkg.ref);
  materialize_detail::StageFileJob job;
  job.ref = pkg.ref;
  job.boundary = pkg.boundary;
  job.manifest_sha256 = pkg.manifest_sha256;
  job.model_id = pkg.manifest.model_id;
  job.range = selection.range;
  job.writer = &w;
  job.verify = options.verify || verify_required(pkg);
  job.verify_parts = [&] {
    if (!options.verify) {
      (void)verify_if_required(pkg, selection.parts);
      return;
    }
    materialize_detail::throw_unless_verified(pkg.ref, "parts do not match the manifest", verify_parts(pkg, selection.parts));
  };
  return materialize_detail::write_materialized(job, options);
}

MaterializeResult materialize_catalog_stage(const OpenedCatalog& pkg, const CatalogStage& stage,
                                            const MaterializeOptions& options) {
  const PackageCatalog& cat = pkg.catalog;
  // Every part's file rules first, then the layout: nothing is written or
  // locked before both hold.
  // Missing parts come through the package's source first (hf://: the
  // cache, a peer, the Hub; nothing for a local directory).
  (void)provide_catalog_parts(pkg, stage.parts);
  std::map<size_t, std::shared_ptr<const MappedFile>> files;
  for (const auto& p : stage.parts) {
    if (p.kind == CatalogArtifactKind::kSidecar || p.tensors.empty()) continue;  // schema 1's carrier holds tensors
    const fs::path real = check_catalog_part(pkg, p);
    files[cat.artifact_index.at(p.artifact_id)] = MappedFile::open(real);
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
    materialize_detail::throw_unless_verified(pkg.ref, "artifacts do not match the catalog",
                                              verify_catalog_stage_parts(pkg, stage));
  };
  return materialize_detail::write_materialized(job, options);
}

}  // namespace skippy
