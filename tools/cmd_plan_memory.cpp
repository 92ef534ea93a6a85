// `plan --context`: the memory-aware plan (skippy/plan.h), printed.
#include "cmd_plan_memory.h"

#include <cstdio>
#include <iostream>

#include "plan_report.h"

namespace skippy::cli {
namespace {

nlohmann::json memory_plan_json(const CacheShape& shape, const MemoryPlan& p) {
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& s : p.stages) {
    auto j = memory_stage_json(s);
    j.update({{"bandwidth_bytes_per_second", opt_json(s.bandwidth)}, {"decode_time_us", opt_json(s.decode_time_us)}});
    stages.push_back(std::move(j));
  }
  const auto& r = p.reserves;
  return {{"architecture", shape.architecture},
          {"layer_count", p.layer_count},
          {"stage_count", p.stages.size()},
          {"context_tokens", p.context},
          {"kv_type", kv_cache_type_name(p.kv_type)},
          {"reserves",
           {{"compute_reserve_percent", r.compute_reserve_percent},
            {"headroom_percent", r.headroom_percent},
            {"headroom_cap_bytes", r.headroom_cap_bytes},
            {"rule", "memory = weights + (KV + state) x 100/" + std::to_string(100 - r.compute_reserve_percent) +
                         " + headroom; headroom = max(" + std::to_string(r.headroom_percent) + "% of the budget, min(" +
                         std::to_string(r.headroom_cap_bytes) + " bytes, budget / 2))"}}},
          {"bottleneck_time_us", opt_json(p.bottleneck_time_us)},
          {"decode_time_per_token_us", opt_json(p.decode_time_per_token_us)},
          {"stages", stages},
          {"cache_layers", cache_layers_json(shape, p.context)},
          {"notes", p.notes}};
}

void print_memory_plan(const PlanPackage& pkg, const MemoryPlan& p) {
  auto& o = std::cout;
  o << plan_headline(pkg) << ": " << p.layer_count << " layers in " << counted(p.stages.size(), "stage")
    << " at a context of " << p.context << " tokens, " << kv_cache_type_name(p.kv_type) << " KV cache\n";
  const bool budgets = !p.stages.empty() && p.stages.front().budget.has_value();
  const bool timed = p.decode_time_per_token_us.has_value();
  char buf[320];
  std::snprintf(buf, sizeof buf, "  %-5s  %-11s  %12s  %12s  %12s  %12s%s%s\n", "stage", "layers", "weights", "KV+state",
                "needs", "headroom", budgets ? "        budget" : "", timed ? "    decode" : "");
  o << buf;
  for (const auto& s : p.stages) {
    const std::string budget = budgets ? "  " + std::string(12 - std::min<size_t>(12, human_bytes(*s.budget).size()), ' ') +
                                             human_bytes(*s.budget)
                                       : "";
    char t[32] = "";
    if (timed) std::snprintf(t, sizeof t, "  %6.1f us", *s.decode_time_us);
    std::snprintf(buf, sizeof buf, "  %-5u  %-11s  %12s  %12s  %12s  %12s%s%s\n", s.index,
                  format_layer_range(s.range).c_str(), human_bytes(s.weight_bytes).c_str(),
                  human_bytes(s.kv_cache_bytes + s.state_bytes).c_str(),
                  human_bytes(s.memory_bytes - s.headroom_bytes).c_str(), human_bytes(s.headroom_bytes).c_str(),
                  budget.c_str(), t);
    o << buf;
  }
  const auto& r = p.reserves;
  o << "  needs = weights + KV/state x 100/" << (100 - r.compute_reserve_percent) << " (compute buffers)\n";
  if (budgets) {
    o << "  headroom = what a budget keeps free: max(" << r.headroom_percent << "% of the budget, min("
      << human_bytes(r.headroom_cap_bytes) << ", budget/2)); a stage fits when needs + headroom <= budget\n";
  }
  if (timed) {
    std::snprintf(buf, sizeof buf, "  modeled decode: slowest stage %.1f us, %.1f us per token through the pipeline\n",
                  *p.bottleneck_time_us, *p.decode_time_per_token_us);
    o << buf;
  }
  for (const auto& n : p.notes) o << "  note: " << n << "\n";
}

}  // namespace

nlohmann::json cache_layers_json(const CacheShape& shape, uint64_t context) {
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : shape.layers) {
    layers.push_back({{"layer_index", l.layer},
                      {"kind", layer_cache_kind_name(l.kind)},
                      {"k_elements_per_token", l.k_elements},
                      {"v_elements_per_token", l.v_elements},
                      {"kv_bytes_per_token", l.kv_bytes_per_token},
                      {"window_tokens", l.kind == LayerCacheKind::kSlidingWindow ? nlohmann::json(l.window) : nlohmann::json(nullptr)},
                      {"state_bytes", l.state_bytes},
                      {"cache_bytes", layer_cache_bytes(l, context)}});
  }
  return layers;
}

int run_memory_plan(const PlanPackage& pkg, const MemoryPlanOptions& options, KvCacheType kv_type, bool json,
                    const PlanTopologyRequest* topology) {
  const auto shape = read_cache_shape(*pkg.metadata, kv_type);
  const auto plan = plan_memory(pkg.catalog, shape, options);
  std::vector<LayerRange> ranges;
  for (const auto& s : plan.stages) ranges.push_back(s.range);
  print_plan_report(pkg, ranges, {}, topology, json, memory_plan_json(shape, plan), [&] { print_memory_plan(pkg, plan); });
  return kExitOk;
}

}  // namespace skippy::cli
