// A package as the planners read it (skippy/plan.h): the catalog of either
// schema and the facts its reader adds; the plan of such a package.
#include <filesystem>

#include "skippy/error.h"
#include "skippy/plan.h"
#include "skippy/stage.h"
#include "skippy/verify.h"

namespace skippy {

bool PlanPackage::final_stage_loads_embeddings(uint32_t stages) const {
  return stages >= 2 && stages <= catalog.layer_count && output_tied.value_or(false);
}

PlanPackage plan_package(const OpenedPackage& pkg, const PlanReads& reads) {
  const uint32_t layers = pkg.identity().layer_count;
  const bool tie = reads.stages >= 2 && reads.stages <= layers;
  // By default what a reader lists without reading payloads: a schema whose
  // stages are not whole parts (a carrier's tensor table) lists the tensors
  // the per-stage bytes are counted from.
  CatalogNeed need = CatalogNeed::artifacts();
  if (reads.tensors) {
    // Tensor sizes, not tensors: an hf:// package's absent parts are read
    // as their headers alone (a few KiB each, not the model).
    need = CatalogNeed::headers();
  } else if (tie) {
    // Whether the output is tied: the catalog of a final stage's artifacts
    // (a reader of whole parts reads the output's header, and no other).
    need = CatalogNeed::artifacts(LayerRange{layers - 1, layers});
  }
  PlanPackage out;
  static_cast<OpenedPlace&>(out) = pkg;
  OpenedCatalog opened = pkg.catalog(need);
  (void)verify_catalog_reads(opened);  // hf://: trust nothing unverified
  out.catalog = opened.catalog;
  if (reads.tensors || tie || out.catalog.carrier_file) out.output_tied = out.catalog.find_tensor("output.weight") == nullptr;
  if (out.catalog.carrier_file || reads.metadata || reads.tensors) out.metadata = package_metadata(opened);
  const auto width = pkg.reader->activation_width(pkg, &out.catalog);
  out.activation_width = width.width;
  out.activation_width_note = width.note;
  out.architecture = out.metadata ? std::string(out.metadata->architecture()) : out.catalog.architecture;
  const auto local_metadata = pkg.root / std::string(kMetadataPath);
  if (out.architecture.empty() && !pkg.source && std::filesystem::is_regular_file(local_metadata)) {
    try {
      out.architecture = std::string(GgufFile::open(local_metadata).architecture());
    } catch (const Error&) {
      // unknown: no roster is consulted
    }
  }
  return out;
}

DecodeCost package_decode_cost(const PlanPackage& pkg) {
  if (!pkg.metadata) throw Error(ErrorKind::kUsage, pkg.ref + ": package_decode_cost needs a package planned with tensors");
  std::vector<DecodeTensor> tensors;
  tensors.reserve(pkg.catalog.tensors.size());
  for (const auto& t : pkg.catalog.tensors) tensors.push_back({t.name, t.dims, t.stored_bytes});
  return read_decode_cost(*pkg.metadata, tensors, pkg.catalog.layer_count, pkg.ref);
}

Plan plan_stages(const PlanPackage& pkg, PlanOptions o) {
  if (!o.final_stage_needs_embeddings) o.final_stage_needs_embeddings = pkg.final_stage_loads_embeddings(o.stages);
  if (!o.activation_width) o.activation_width = pkg.activation_width;
  auto plan = plan_stages(pkg.catalog, o);
  if (!pkg.activation_width_note.empty()) {  // how a missing width was found (or why not), in its own words
    std::erase_if(plan.notes, [](const std::string& n) { return n.starts_with("the manifest has no activation_width"); });
    plan.notes.insert(plan.notes.begin(), pkg.activation_width_note);
  }
  return plan;
}

}  // namespace skippy
