// A package as the planners read it (skippy/plan.h): the catalog of either
// schema and the facts its reader adds; the plan of such a package.
#include <filesystem>

#include "skippy/error.h"
#include "skippy/plan.h"
#include "skippy/verify.h"

namespace skippy {

bool PlanPackage::final_stage_loads_embeddings(uint32_t stages) const {
  return stages >= 2 && stages <= catalog.layer_count && output_tied.value_or(false);
}

PlanPackage plan_package(const OpenedPackage& pkg, const PlanReads& reads) {
  PlanPackage out;
  static_cast<OpenedPlace&>(out) = pkg;
  const auto& m = pkg.manifest;
  if (reads.tensors) {
    // The tensor table lives in the fragments' headers: every one is needed.
    // An hf:// package brings none for a plan (that would be the whole model).
    if (pkg.source) {
      size_t missing = 0;
      std::vector<const ArtifactEntry*> entries = {&m.shared.embeddings, &m.shared.output};
      for (const auto& l : m.layers) entries.push_back(&l);
      for (const auto* e : entries) missing += std::filesystem::exists(pkg.root / e->path) ? 0 : 1;
      if (missing > 0) {
        throw Error(ErrorKind::kNotFound,
                    pkg.ref + ": planning for time per token reads every fragment's tensor table, and " +
                        std::to_string(missing) + " of " + std::to_string(entries.size()) +
                        " fragments are not in the cache: `skippy-model-package fetch " + pkg.ref +
                        "` brings them (or plan a package schema 2, whose carrier holds the table)");
      }
    }
    auto parts = all_parts(catalog_artifacts_v1(m));
    provide_parts(pkg, parts);
    (void)verify_if_required(pkg, parts);  // hf://: trust nothing unverified
    out.catalog = read_catalog_v1(pkg);
    out.output_tied = out.catalog.find_tensor("output.weight") == nullptr;
    out.metadata = out.catalog.carrier_file;
  } else {
    out.catalog = catalog_artifacts_v1(m);
    if (reads.stages >= 2 && reads.stages <= m.layer_count) {
      // Whether the output is tied: the reader with a final stage's range
      // reads shared/output.gguf's header (and no other fragment's).
      out.catalog = list_catalog_v1(pkg, LayerRange{m.layer_count - 1, m.layer_count}).catalog;
      std::vector<StagePart> output;
      for (auto& p : all_parts(out.catalog)) {
        if (p.role == PartRole::kOutput) output.push_back(std::move(p));
      }
      (void)verify_if_required(pkg, output);  // hf://: trust nothing unverified
      out.output_tied = out.catalog.find_tensor("output.weight") == nullptr;
    }
    if (reads.metadata) {
      const auto meta = check_metadata_only(pkg);
      (void)verify_if_required(pkg, {meta});
      out.metadata = std::make_shared<const GgufFile>(GgufFile::open(meta.path));
    }
  }
  const auto width = activation_width_of(pkg);
  out.activation_width = width.width;
  out.activation_width_note = width.note;
  return out;
}

PlanPackage plan_package(const OpenedCatalog& pkg, const PlanReads&) {
  PlanPackage out;
  static_cast<OpenedPlace&>(out) = pkg;
  out.catalog = pkg.catalog;
  out.output_tied = pkg.catalog.find_tensor("output.weight") == nullptr;
  // The carrier holds the source's KVs and the whole directory; it was
  // checked against the catalog (size, SHA-256) when the package was opened.
  out.metadata = pkg.catalog.carrier_file;
  if (pkg.catalog.carrier_file && pkg.catalog.layer_count > 0) {
    if (const auto w = activation_width_tensor(*pkg.catalog.carrier_file, 0)) {
      out.activation_width = w->elements;
      out.activation_width_note = "package schema 2: the activation width " + std::to_string(w->elements) +
                                  " is the element count of blk.0's attn_norm in the carrier's directory";
    }
  }
  return out;
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
