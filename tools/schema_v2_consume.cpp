// plan for package schema 2 (see schema_v2_consume.h).
#include "schema_v2_consume.h"

#include <iostream>

#include "cli.h"
#include "cmd_plan_memory.h"
#include "progress.h"
#include "skippy/error.h"

namespace skippy::cli {
namespace v2consume_detail {

// What the schema 1 printers read of a package, for a schema 2 one.
OpenedPackage printable(const OpenedCatalog& pkg, const PackageManifest& manifest) {
  OpenedPackage p;
  p.ref = pkg.ref;
  p.root = pkg.root;
  p.boundary = pkg.boundary;
  p.manifest = manifest;
  p.manifest_sha256 = pkg.manifest_sha256;
  p.commit = pkg.commit;  // hf://: what pin_json reports (and plan --topology-out pins)
  p.revision_kind = pkg.revision_kind;
  return p;
}

nlohmann::json identity(const OpenedCatalog& pkg) {
  return {{"schema_version", pkg.catalog.schema_version}, {"package_id", pkg.catalog.package_id}};
}

}  // namespace v2consume_detail

int plan_schema_v2(const OpenedCatalog& pkg, PlanOptions o, std::optional<MemoryPlanOptions> memory, KvCacheType kv_type,
                   bool json, const PlanTopologyRequest* topology) {
  const auto in = plan_input_from_catalog(pkg.catalog);
  const auto shown = v2consume_detail::printable(pkg, in.manifest);
  o.final_stage_needs_embeddings = in.output_tied && o.stages >= 2;
  if (memory) {
    memory->final_stage_needs_embeddings = o.final_stage_needs_embeddings.value_or(false);
    memory->include_projector = o.include_projector;
    // The carrier was checked against the catalog (size, SHA-256) when opened.
    return run_memory_plan_on(shown, *pkg.catalog.carrier_file, *memory, kv_type, json, v2consume_detail::identity(pkg),
                              topology);
  }
  o.activation_width = in.activation_width;
  auto plan = plan_stages(in.manifest, o);
  if (in.activation_width) {
    std::erase_if(plan.notes, [](const std::string& n) { return n.starts_with("the manifest has no activation_width"); });
    plan.notes.insert(plan.notes.begin(), "package schema 2: the activation width " + std::to_string(*in.activation_width) +
                                              " is the element count of blk.0's attn_norm in the carrier's directory");
  }
  plan.notes.push_back("package schema 2: stage bytes are the tensor bytes a stage reads (carrier, its layers' "
                       "tensors, the boundary tensors), not whole artifacts");
  print_byte_plan(shown, plan, json, v2consume_detail::identity(pkg), topology);
  return kExitOk;
}

}  // namespace skippy::cli
