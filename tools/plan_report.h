// What every mode of `plan` (bytes, memory, time) reports of the package,
// and how a report is given: one builder for either schema.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cli.h"
#include "plan_topology.h"
#include "skippy/plan.h"

namespace skippy::cli {

// "package", "model_id", "manifest_sha256" and "warnings"; a package
// schema 2 adds "schema_version" and "package_id".
nlohmann::json plan_package_json(const PlanPackage& pkg);

// What every mode reports of a stage: "stage_index", "layer_start",
// "layer_end", "layers" (A..B).
nlohmann::json plan_stage_json(uint32_t index, LayerRange range);
// A value or null.
nlohmann::json opt_json(const std::optional<uint64_t>& v);
nlohmann::json opt_json(const std::optional<double>& v);

// The first words of the human report: "MODEL_ID (REF)".
std::string plan_headline(const PlanPackage& pkg);

// Writes the topology of `ranges` (stage i on node nodes[i], or node i when
// `nodes` is empty) when `topology` asks for it, then prints the report:
// with `json`, `doc` with plan_package_json's fields (and "topology") as
// one document; else `human()` and the topology line.
void print_plan_report(const PlanPackage& pkg, const std::vector<LayerRange>& ranges, const std::vector<uint32_t>& nodes,
                       const PlanTopologyRequest* topology, bool json, nlohmann::json doc,
                       const std::function<void()>& human);

}  // namespace skippy::cli
