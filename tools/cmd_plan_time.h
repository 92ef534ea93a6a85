// `plan --context --bandwidth`: planning for time per token (skippy/plan.h).
#pragma once

#include "cli.h"
#include "plan_topology.h"
#include "skippy/plan.h"

namespace skippy::cli {

struct TimePlanRequest {
  TimePlanOptions options;
  KvCacheType kv_type = KvCacheType::kF16;
  uint32_t activation_bytes_per_value = 2;
  bool json = false;
  const PlanTopologyRequest* topology = nullptr;  // plan --topology-out
};

// Plans with plan_time() on the package's tensors and metadata
// (PlanReads::tensors) and prints the plan. Returns 0, or 1 when a target
// time per token is missed (the plan is printed with what would meet it).
int run_time_plan(const PlanPackage& pkg, TimePlanRequest request);

}  // namespace skippy::cli
