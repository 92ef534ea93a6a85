// `plan --context`: the memory-aware mode of the plan command, for a package
// of either schema.
#pragma once

#include "cli.h"
#include "plan_topology.h"
#include "skippy/memory_plan.h"
#include "skippy/plan.h"

namespace skippy::cli {

// Reads the cache shape from the package's metadata (PlanReads::metadata),
// plans with plan_memory() and prints the plan (JSON or a table); `topology`
// (plan --topology-out) is written from the plan before it is printed.
// Returns the exit code.
int run_memory_plan(const PlanPackage& pkg, const MemoryPlanOptions& options, KvCacheType kv_type, bool json,
                    const PlanTopologyRequest* topology);

// Every layer's cache kind and bytes at `context` (the "cache_layers" key).
nlohmann::json cache_layers_json(const CacheShape& shape, uint64_t context);

}  // namespace skippy::cli
