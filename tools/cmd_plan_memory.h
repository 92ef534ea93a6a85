// `plan --context`: the memory-aware mode of the plan command.
#pragma once

#include "cli.h"
#include "skippy/memory_plan.h"

namespace skippy::cli {

// Reads the package's shared/metadata.gguf (verified first for hf://), plans
// with plan_memory() and prints the plan (JSON or a table). Returns the exit code.
int run_memory_plan(const OpenedPackage& pkg, const MemoryPlanOptions& options, KvCacheType kv_type, bool json);

}  // namespace skippy::cli
