// The CLI's schema 2 path that plan takes (`plan` dispatches here when
// open_any_for_cli found a schema 2 package: a local directory or hf://).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "skippy/catalog_stage.h"
#include "skippy/materialize.h"
#include "skippy/memory_plan.h"
#include "skippy/plan.h"
#include "cli.h"
#include "plan_topology.h"

namespace skippy::cli {

namespace v2consume_detail {
// What the schema 1 printers read of a package, for a schema 2 one.
OpenedPackage printable(const OpenedCatalog& pkg, const PackageManifest& manifest);
// schema_version and package_id, added to a command's JSON document.
nlohmann::json identity(const OpenedCatalog& pkg);
}  // namespace v2consume_detail

// plan REF: the byte plan (memory == nullopt) or the memory plan, on
// plan_input_from_catalog's tables and the carrier's KVs.
int plan_schema_v2(const OpenedCatalog& pkg, PlanOptions options, std::optional<MemoryPlanOptions> memory,
                   KvCacheType kv_type, bool json, const PlanTopologyRequest* topology = nullptr);

}  // namespace skippy::cli
