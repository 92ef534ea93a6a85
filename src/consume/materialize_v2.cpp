// materialize for package schema 2 (skippy/materialize.h): the catalog's
// locators fed to the shared stage-file writer (stage_file.h).
#include <map>

#include "skippy/catalog_parts.h"
#include "util/env.h"
#include "skippy/error.h"
#include "gguf/gguf_writer.h"
#include "skippy/materialize.h"
#include "skippy/verify.h"
#include "stage_file.h"

namespace skippy {
namespace materialize_v2_detail {

namespace fs = std::filesystem;

bool skipped_key(std::string_view key) { return is_carrier_key(key) || key.starts_with("split."); }

GgufWriter catalog_writer(const OpenedCatalog& pkg, const CatalogStage& stage,
                          const std::map<std::string, std::shared_ptr<const MappedFile>>& files) {
  const PackageCatalog& cat = pkg.catalog;
  const GgufFile& carrier = *cat.carrier_file;
  GgufWriter w(carrier.alignment());
  materialize_detail::copy_kvs(w, carrier, skipped_key);
  if (stage.range) {
    w.add_u32(std::string(kMaterializedLayerStartKey), stage.range->start);
    w.add_u32(std::string(kMaterializedLayerEndKey), stage.range->end);
  }
  w.add_string(std::string(kMaterializedManifestKey), pkg.manifest_sha256);
  w.add_string(std::string(kMaterializedModelIdKey), cat.model_id);
  w.add_string(std::string(kMaterializedPackageIdKey), cat.package_id);
  for (const auto& loc : stage.tensors) {
    const CatalogTensor* t = cat.find_tensor(loc.name);
    if (!t) throw_invalid(pkg.ref + ": tensor '" + loc.name + "' is not in the package's catalog");
    const auto file = files.find(loc.artifact_id);
    if (file == files.end()) {
      throw_invalid(pkg.ref + ": tensor '" + loc.name + "': artifact " + loc.artifact_id + " is not in the stage's parts");
    }
    std::vector<int64_t> ne;
    for (const uint64_t d : t->dims) ne.push_back(static_cast<int64_t>(d));
    w.add_tensor(loc.name, t->ggml_type, std::move(ne), file->second, loc.offset);
    if (w.tensors().back().bytes != loc.stored_bytes) {
      throw_invalid(pkg.ref + ": tensor '" + loc.name + "': stored_bytes " + std::to_string(loc.stored_bytes) +
                    " is not the " + std::to_string(w.tensors().back().bytes) + " bytes its type and dims take");
    }
  }
  return w;
}

void verify_payload(const OpenedCatalog& pkg, const CatalogStage& stage) {
  const auto report = verify_catalog_stage_parts(pkg, stage);
  if (report.verified) return;
  std::string msg = pkg.ref + ": the stage's artifacts do not match the catalog:";
  for (const auto& problem : report.problems) msg += "\n  " + problem;
  throw_integrity(msg);
}

}  // namespace materialize_v2_detail

MaterializeResult materialize_catalog_stage(const OpenedCatalog& pkg, const CatalogStage& stage,
                                            const MaterializeOptions& options) {
  // Every part's file rules first, then the layout: nothing is written or
  // locked before both hold.
  // Missing parts come through the package's source first (hf://: the
  // cache, a peer, the Hub; nothing for a local directory).
  (void)provide_catalog_parts(pkg, stage.parts);
  std::map<std::string, std::shared_ptr<const MappedFile>> files;
  for (const auto& p : stage.parts) {
    if (p.kind != CatalogArtifactKind::kPayload) continue;
    const fs::path real = check_catalog_part(pkg, p);
    files[p.artifact_id] = MappedFile::open(real);
  }
  const auto w = materialize_v2_detail::catalog_writer(pkg, stage, files);
  materialize_detail::StageFileJob job;
  job.ref = pkg.ref;
  job.boundary = pkg.boundary;
  job.manifest_sha256 = pkg.manifest_sha256;
  job.model_id = pkg.catalog.model_id;
  job.range = stage.range;
  job.writer = &w;
  job.verify = options.verify || verify_required(pkg);  // hf://, trusted signers, SKIPPY_VERIFY_PACKAGE_SHA
  job.verify_parts = [&] { materialize_v2_detail::verify_payload(pkg, stage); };
  return materialize_detail::write_materialized(job, options);
}

}  // namespace skippy
