// `plan --context --bandwidth`: the plan for time per token, printed.
#include "cmd_plan_time.h"

#include "cmd_plan_memory.h"

#include <cstdio>
#include <iostream>

#include "plan_report.h"

namespace skippy::cli {
namespace {

double us(uint64_t ns) { return static_cast<double>(ns) / 1e3; }

nlohmann::json time_plan_json(const CacheShape& shape, const DecodeCost& cost, const TimePlanRequest& r,
                              const TimePlan& p) {
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& s : p.stages) {
    auto j = memory_stage_json(s);
    j.update({{"node", s.node},
              {"active_weight_bytes", s.active_weight_bytes},
              {"kv_read_bytes", s.kv_read_bytes},
              {"bandwidth_bytes_per_second", s.bandwidth},
              {"stage_time_us", us(s.stage_time_ns)},
              {"hop_time_us", us(s.hop_time_ns)},
              {"decode_time_us", us(s.stage_time_ns)}});
    stages.push_back(std::move(j));
  }
  nlohmann::json left = nlohmann::json::array();
  for (const auto& n : p.left_out) left.push_back({{"node", n.node}, {"reason", n.reason}});
  const auto& o = r.options;
  return {{"architecture", shape.architecture},
          {"layer_count", p.layer_count},
          {"stage_count", p.stages.size()},
          {"node_count", o.bandwidth.size()},
          {"context_tokens", p.context},
          {"kv_type", kv_cache_type_name(r.kv_type)},
          {"reserves",
           {{"compute_reserve_percent", o.reserves.compute_reserve_percent},
            {"headroom_percent", o.reserves.headroom_percent},
            {"headroom_cap_bytes", o.reserves.headroom_cap_bytes}}},
          {"objective", p.lanes > 1 ? "pipelined" : "serial"},
          {"lanes", p.lanes},
          {"stage_overhead_us", us(o.stage_overhead_ns)},
          {"activation_bytes_per_token", o.activation_bytes_per_token},
          {"model_bytes", cost.total_bytes()},
          {"active_bytes_per_token", cost.active_bytes_per_token()},
          {"serial_time_per_token_us", us(p.serial_time_ns)},
          {"period_us", us(p.period_ns)},
          {"time_per_token_us", us(p.time_per_token_ns)},
          {"tokens_per_second", p.tokens_per_second},
          {"bottleneck_time_us", us(p.period_ns)},
          {"decode_time_per_token_us", us(p.serial_time_ns)},
          {"target_tpot_us", p.target_ns ? nlohmann::json(us(*p.target_ns)) : nlohmann::json(nullptr)},
          {"target_met", p.target_met ? nlohmann::json(*p.target_met) : nlohmann::json(nullptr)},
          {"suggestions", p.suggestions},
          {"nodes_left_out", left},
          {"stages", stages},
          {"cache_layers", cache_layers_json(shape, p.context)},
          {"notes", p.notes}};
}

void print_time_plan(const PlanPackage& pkg, const DecodeCost& cost, const TimePlan& p,
                     const std::vector<std::string>& names) {
  auto node_name = [&](uint32_t n) { return n < names.size() ? names[n] : std::to_string(n); };
  size_t width = 4;
  for (const auto& s : p.stages) width = std::max(width, node_name(s.node).size());
  const int w = static_cast<int>(std::min<size_t>(width, 24));
  auto& o = std::cout;
  o << plan_headline(pkg) << ": " << p.layer_count << " layers in " << counted(p.stages.size(), "stage")
    << " at a context of " << p.context << " tokens, "
    << (p.lanes > 1 ? "pipelined over " + std::to_string(p.lanes) + " lanes" : std::string("one lane")) << "\n";
  o << "  model " << human_bytes(cost.total_bytes()) << ", read per token " << human_bytes(cost.active_bytes_per_token())
    << "\n";
  char buf[320];
  std::snprintf(buf, sizeof buf, "  %-5s  %-*s  %-11s  %10s  %10s  %10s  %10s  %10s\n", "stage", w, "node", "layers",
                "active", "KV read", "memory", "stage", "hop");
  o << buf;
  for (const auto& s : p.stages) {
    std::snprintf(buf, sizeof buf, "  %-5u  %-*s  %-11s  %10s  %10s  %10s  %7.2f ms  %7.2f ms\n", s.index, w,
                  node_name(s.node).substr(0, 24).c_str(), format_layer_range(s.range).c_str(), human_bytes(s.active_weight_bytes).c_str(),
                  human_bytes(s.kv_read_bytes).c_str(), human_bytes(s.memory_bytes).c_str(),
                  static_cast<double>(s.stage_time_ns) / 1e6, static_cast<double>(s.hop_time_ns) / 1e6);
    o << buf;
  }
  std::snprintf(buf, sizeof buf, "  time per token %.2f ms (serial %.2f ms, period %.2f ms), %.1f tokens/s\n",
                static_cast<double>(p.time_per_token_ns) / 1e6, static_cast<double>(p.serial_time_ns) / 1e6,
                static_cast<double>(p.period_ns) / 1e6, p.tokens_per_second);
  o << buf;
  if (p.target_ns) {
    std::snprintf(buf, sizeof buf, "  target %.2f ms: %s\n", static_cast<double>(*p.target_ns) / 1e6,
                  *p.target_met ? "met" : "missed");
    o << buf;
  }
  for (const auto& s : p.suggestions) o << "  would help: " << s << "\n";
  for (const auto& n : p.left_out) o << "  node " << node_name(n.node) << " left out: " << n.reason << "\n";
  for (const auto& n : p.notes) o << "  note: " << n << "\n";
}

}  // namespace

int run_time_plan(const PlanPackage& pkg, TimePlanRequest r) {
  const auto shape = read_cache_shape(*pkg.metadata, r.kv_type);
  const auto cost = package_decode_cost(pkg);
  r.options.final_stage_needs_embeddings = pkg.output_tied.value_or(false);
  r.options.activation_bytes_per_token = pkg.activation_width ? *pkg.activation_width * r.activation_bytes_per_value : 0;
  const auto plan = plan_time(pkg.catalog, shape, cost, r.options);
  std::vector<LayerRange> ranges;
  std::vector<uint32_t> nodes;
  for (const auto& s : plan.stages) {
    ranges.push_back(s.range);
    nodes.push_back(s.node);
  }
  print_plan_report(pkg, ranges, nodes, r.topology, r.json, time_plan_json(shape, cost, r, plan),
                    [&] { print_time_plan(pkg, cost, plan, r.topology ? r.topology->node_names : std::vector<std::string>{}); });
  return plan.target_met.value_or(true) ? kExitOk : 1;
}

}  // namespace skippy::cli
