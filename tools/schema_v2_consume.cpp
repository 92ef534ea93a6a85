// materialize for package schema 2 (see schema_v2_consume.h).
#include "schema_v2_consume.h"

#include <iostream>

#include "cli.h"
#include "progress.h"
#include "skippy/error.h"

namespace skippy::cli {
namespace v2consume_detail {

nlohmann::json identity(const PackageCatalog& catalog) {
  return {{"schema_version", catalog.schema_version}, {"package_id", catalog.package_id}};
}

nlohmann::json identity(const OpenedCatalog& pkg) { return identity(pkg.catalog); }

}  // namespace v2consume_detail

int materialize_schema_v2(const OpenedCatalog& pkg, std::optional<LayerRange> range, const std::vector<std::string>& tensors,
                          const MaterializeOptions& options, bool json, std::vector<CatalogPart> sidecars) {
  const auto stage = range ? select_catalog_range(pkg.catalog, *range) : select_catalog_tensors(pkg.catalog, tensors);
  if (range) {
    if (auto p = select_catalog_projector(pkg, *range, std::nullopt)) sidecars.push_back(std::move(*p));
  }
  // Brought and checked (size; SHA-256 when the package demands it) like the stage's parts.
  const auto sidecar_paths = provide_catalog_parts(pkg, sidecars);
  (void)verify_catalog_if_required(pkg, sidecars);
  nlohmann::json sidecar_json = nlohmann::json::array();
  for (const auto& p : sidecar_paths) sidecar_json.push_back(p.string());
  MaterializeOptions o = options;
  Progress progress("materialize");
  o.on_progress = [&](uint64_t d, uint64_t t) { progress.update(d, t); };
  const auto r = materialize_catalog_stage(pkg, stage, o);
  if (json) {
    auto doc = v2consume_detail::identity(pkg);
    doc.update({{"path", r.path.string()},
                {"tensor_count", r.tensor_count},
                {"reused", r.reused},
                {"cached", r.cached},
                {"bytes", r.bytes},
                {"sha256", r.sha256.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.sha256)},
                {"layer_start", range ? nlohmann::json(range->start) : nlohmann::json(nullptr)},
                {"layer_end", range ? nlohmann::json(range->end) : nlohmann::json(nullptr)},
                {"manifest_sha256", pkg.manifest_sha256},
                {"projector", sidecar_paths.empty() ? nlohmann::json(nullptr) : nlohmann::json(sidecar_paths.front().string())},
                {"sidecars", sidecar_json},
                {"warnings", nlohmann::json::array()},
                {"notes", stage.notes}});
    print_json(doc);
  } else {
    std::cout << r.path.string() << "\n";
    std::cerr << (r.reused ? "reused " : "materialized ")
              << (range ? "layers " + format_layer_range(*range) : std::to_string(tensors.size()) + " named tensors")
              << " (package schema 2): " << r.tensor_count << " tensors, " << human_bytes(r.bytes) << "\n";
    for (const auto& p : sidecars) std::cerr << "note: the sidecar " << p.rel_path << " is not merged; load it from the package\n";
    for (const auto& n : stage.notes) std::cerr << "note: " << n << "\n";
  }
  return kExitOk;
}

}  // namespace skippy::cli
