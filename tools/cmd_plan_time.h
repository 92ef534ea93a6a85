// `plan --context --bandwidth`: planning for time per token (skippy/time_plan.h).
#pragma once

#include "cli.h"
#include "plan_topology.h"
#include "skippy/catalog_stage.h"
#include "skippy/memory_plan.h"
#include "skippy/time_plan.h"

namespace skippy::cli {

struct TimePlanRequest {
  TimePlanOptions options;
  KvCacheType kv_type = KvCacheType::kF16;
  uint32_t activation_bytes_per_value = 2;
  bool json = false;
  const PlanTopologyRequest* topology = nullptr;  // plan --topology-out
};

// Reads the tensor table (each fragment's header; an hf:// package needs its
// fragments in the cache) and the metadata (verified first for hf://), plans
// with plan_time() and prints the plan. Returns 0, or 1 when a target time per
// token is missed (the plan is printed with what would meet it).
int run_time_plan(const OpenedPackage& pkg, TimePlanRequest request);
// The same for a schema 2 package: its carrier holds the whole table.
int run_time_plan(const OpenedCatalog& pkg, TimePlanRequest request);

}  // namespace skippy::cli
