// `plan --context`: the memory-aware mode of the plan command, for a package
// of either schema.
#pragma once

#include "cli.h"
#include "plan_report.h"
#include "plan_topology.h"
#include "skippy/plan.h"

namespace skippy::cli {

// Reads the cache shape from the package's metadata (PlanReads::metadata),
// plans with plan_memory() and prints the plan (JSON or a table); `topology`
// (plan --topology-out) is written from the plan before it is printed.
// Returns the exit code.
int run_memory_plan(const PlanPackage& pkg, const MemoryPlanOptions& options, KvCacheType kv_type, bool json,
                    const PlanTopologyRequest* topology);

// The keys a stage of the memory plan and of the time plan share: where it
// is (plan_stage_json), its weights, cache, headroom, memory and budget.
template <class Stage>
nlohmann::json memory_stage_json(const Stage& s) {
  auto j = plan_stage_json(s.index, s.range);
  j.update({{"bytes", s.weight_bytes},
            {"weight_bytes", s.weight_bytes},
            {"kv_cache_bytes", s.kv_cache_bytes},
            {"state_bytes", s.state_bytes},
            {"charged_cache_bytes", s.charged_cache_bytes},
            {"headroom_bytes", s.headroom_bytes},
            {"memory_bytes", s.memory_bytes},
            {"budget_bytes", opt_json(s.budget)},
            {"embeddings", s.embeddings},
            {"output", s.output}});
  return j;
}

// Every layer's cache kind and bytes at `context` (the "cache_layers" key).
nlohmann::json cache_layers_json(const CacheShape& shape, uint64_t context);

}  // namespace skippy::cli
