#include "plan_report.h"

namespace skippy::cli {

nlohmann::json plan_package_json(const PlanPackage& pkg) {
  nlohmann::json doc = {{"package", pkg.ref},
                        {"model_id", pkg.catalog.model_id},
                        {"manifest_sha256", pkg.manifest_sha256},
                        {"warnings", pkg.warnings}};
  doc.update(package_id_json(pkg, pkg.catalog));
  return doc;
}

nlohmann::json plan_stage_json(uint32_t index, LayerRange range) {
  return {{"stage_index", index},
          {"layer_start", range.start},
          {"layer_end", range.end},
          {"layers", format_layer_range(range)}};
}

nlohmann::json opt_json(const std::optional<uint64_t>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }
nlohmann::json opt_json(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

std::string plan_headline(const PlanPackage& pkg) { return pkg.catalog.model_id + " (" + pkg.ref + ")"; }

void print_plan_report(const PlanPackage& pkg, const std::vector<LayerRange>& ranges, const std::vector<uint32_t>& nodes,
                       const PlanTopologyRequest* topology, bool json, nlohmann::json doc,
                       const std::function<void()>& human) {
  nlohmann::json written;
  if (topology) written = write_plan_topology(*topology, pkg, ranges, nodes);
  if (json) {
    doc.update(plan_package_json(pkg));
    if (topology) doc["topology"] = written;
    print_json(doc);
  } else {
    human();
    if (topology) print_topology_line(written);
  }
}

}  // namespace skippy::cli
