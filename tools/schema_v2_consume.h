// The CLI's schema 2 consumer paths that materialize and plan take
// (`materialize` and `plan` dispatch here when schema_v2_cli.h's
// is_local_schema_v2 says so). Every open of a schema 2 package here goes
// through open_schema_v2_for_cli.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "skippy/catalog_stage.h"
#include "skippy/materialize.h"
#include "skippy/memory_plan.h"
#include "skippy/plan.h"

namespace skippy::cli {

// The one way these commands open a schema 2 package.
OpenedCatalog open_schema_v2_for_cli(const std::string& ref);

// materialize REF --layers A..B (or --tensors N,N,... with `range` nullopt):
// the stage through materialize_catalog_stage, printed as the schema 1
// command prints it (plus schema_version, package_id).
int materialize_schema_v2(const std::string& ref, std::optional<LayerRange> range, const std::vector<std::string>& tensors,
                          const MaterializeOptions& options, bool json);

// plan REF: the byte plan (memory == nullopt) or the memory plan, on
// plan_input_from_catalog's tables and the carrier's KVs.
int plan_schema_v2(const std::string& ref, PlanOptions options, std::optional<MemoryPlanOptions> memory,
                   KvCacheType kv_type, bool json);

}  // namespace skippy::cli
