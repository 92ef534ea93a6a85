// `plan --context`: the memory-aware mode of the plan command.
#pragma once

#include "cli.h"
#include "plan_topology.h"
#include "skippy/gguf.h"
#include "skippy/memory_plan.h"
#include "skippy/plan.h"

namespace skippy::cli {

// Reads the package's shared/metadata.gguf (verified first for hf://), plans
// with plan_memory() and prints the plan (JSON or a table). Returns the exit code.
// `topology` (plan --topology-out) is written from the plan before it is printed.
int run_memory_plan(const OpenedPackage& pkg, const MemoryPlanOptions& options, KvCacheType kv_type, bool json,
                    const PlanTopologyRequest* topology = nullptr);
// The same from a metadata file already read and trusted (a schema 2
// carrier); `extra` fields are added to the JSON document.
int run_memory_plan_on(const OpenedPackage& pkg, const GgufFile& metadata, const MemoryPlanOptions& options,
                       KvCacheType kv_type, bool json, const nlohmann::json& extra = nlohmann::json::object(),
                       const PlanTopologyRequest* topology = nullptr);

// Every layer's cache kind and bytes at `context` (the "cache_layers" key).
nlohmann::json cache_layers_json(const CacheShape& shape, uint64_t context);

// The byte plan's output (cmd_plan.cpp): one JSON document (with `extra`
// fields added) or the table.
void print_byte_plan(const OpenedPackage& pkg, const Plan& plan, bool json,
                     const nlohmann::json& extra = nlohmann::json::object(),
                     const PlanTopologyRequest* topology = nullptr);

}  // namespace skippy::cli
