// materialize for package schema 1 (skippy/materialize.h): a StageView of
// the selected fragments fed to the shared stage-file writer (stage_file.h).
#include "skippy/materialize.h"

#include "skippy/error.h"
#include "gguf/gguf_writer.h"
#include "skippy/stage_view.h"
#include "skippy/verify.h"
#include "stage_file.h"

namespace skippy {
namespace materialize_v1_detail {

GgufWriter stage_writer(const OpenedPackage& pkg, const StageView& view) {
  GgufWriter w(view.alignment());
  materialize_detail::copy_kvs(w, view.metadata(), [](std::string_view key) { return is_fragment_key(key); });
  w.add_u32(std::string(kMaterializedLayerStartKey), view.range().start);
  w.add_u32(std::string(kMaterializedLayerEndKey), view.range().end);
  w.add_string(std::string(kMaterializedManifestKey), pkg.manifest_sha256);
  w.add_string(std::string(kMaterializedModelIdKey), pkg.manifest.model_id);
  for (const auto& t : view.tensors()) w.add_tensor_from(view.files()[t.part], *t.info);
  return w;
}

void verify_parts_or_throw(const OpenedPackage& pkg, const StageSelection& sel, bool explicit_verify) {
  if (!explicit_verify) {
    (void)verify_if_required(pkg, sel.parts);
    return;
  }
  const auto report = verify_parts(pkg, sel.parts);
  if (!report.verified) {
    std::string msg = pkg.ref + ": the stage's parts do not match the manifest:";
    for (const auto& p : report.problems) msg += "\n  " + p;
    throw_integrity(msg);
  }
}

}  // namespace materialize_v1_detail

MaterializeResult materialize_stage(const OpenedPackage& pkg, const StageSelection& selection,
                                    const MaterializeOptions& options) {
  // Every StageView rule is checked before anything is written or locked.
  const auto view = StageView::open(selection);
  const auto w = materialize_v1_detail::stage_writer(pkg, view);
  materialize_detail::StageFileJob job;
  job.ref = pkg.ref;
  job.boundary = pkg.boundary;
  job.manifest_sha256 = pkg.manifest_sha256;
  job.model_id = pkg.manifest.model_id;
  job.range = selection.range;
  job.writer = &w;
  job.verify = options.verify || verify_required(pkg);
  job.verify_parts = [&] { materialize_v1_detail::verify_parts_or_throw(pkg, selection, options.verify); };
  return materialize_detail::write_materialized(job, options);
}

}  // namespace skippy
