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
  const bool writes = topology && !topology->out.empty();
  if (writes) written = write_plan_topology(*topology, pkg, ranges, nodes);
  // Stage i runs on node nodes[i] (a time plan's choice) or node i.
  const std::vector<std::string> no_names;
  const auto& names = topology ? topology->node_names : no_names;
  auto name_of = [&](size_t i) -> std::string {
    const size_t n = i < nodes.size() ? nodes[i] : i;
    return n < names.size() ? names[n] : std::string();
  };
  if (json) {
    doc.update(plan_package_json(pkg));
    if (writes) doc["topology"] = written;
    if (!names.empty() && doc.contains("stages")) {
      for (size_t i = 0; i < doc["stages"].size(); ++i) doc["stages"][i]["node_name"] = name_of(i);
    }
    print_json(doc);
  } else {
    human();
    if (!names.empty() && nodes.empty()) {  // a time plan's table names its nodes itself
      std::string line = "  nodes:";
      for (size_t i = 0; i < ranges.size(); ++i) line += (i ? ", stage " : " stage ") + std::to_string(i) + " on " + name_of(i);
      std::cout << line << "\n";
    }
    if (writes) print_topology_line(written);
  }
}

}  // namespace skippy::cli
