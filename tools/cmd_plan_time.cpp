// `plan --context --bandwidth`: the plan for time per token, printed.
#include "cmd_plan_time.h"

#include "cmd_plan_memory.h"

#include <cstdio>
#include <filesystem>
#include <iostream>

#include "schema_v2_consume.h"
#include "skippy/error.h"
#include "skippy/gguf.h"
#include "skippy/plan.h"
#include "skippy/verify.h"

namespace skippy::cli {
namespace {

double us(uint64_t ns) { return static_cast<double>(ns) / 1e3; }

nlohmann::json time_plan_json(const OpenedPackage& pkg, const CacheShape& shape, const DecodeCost& cost,
                              const TimePlanRequest& r, const TimePlan& p) {
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& s : p.stages) {
    stages.push_back({{"stage_index", s.index},
                      {"node", s.node},
                      {"layer_start", s.range.start},
                      {"layer_end", s.range.end},
                      {"layers", format_layer_range(s.range)},
                      {"bytes", s.weight_bytes},
                      {"weight_bytes", s.weight_bytes},
                      {"active_weight_bytes", s.active_weight_bytes},
                      {"kv_read_bytes", s.kv_read_bytes},
                      {"kv_cache_bytes", s.kv_cache_bytes},
                      {"state_bytes", s.state_bytes},
                      {"charged_cache_bytes", s.charged_cache_bytes},
                      {"headroom_bytes", s.headroom_bytes},
                      {"memory_bytes", s.memory_bytes},
                      {"budget_bytes", s.budget ? nlohmann::json(*s.budget) : nlohmann::json(nullptr)},
                      {"bandwidth_bytes_per_second", s.bandwidth},
                      {"stage_time_us", us(s.stage_time_ns)},
                      {"hop_time_us", us(s.hop_time_ns)},
                      {"decode_time_us", us(s.stage_time_ns)},
                      {"embeddings", s.embeddings},
                      {"output", s.output}});
  }
  nlohmann::json left = nlohmann::json::array();
  for (const auto& n : p.left_out) left.push_back({{"node", n.node}, {"reason", n.reason}});
  const auto& o = r.options;
  return {{"package", pkg.ref},
          {"model_id", pkg.manifest.model_id},
          {"manifest_sha256", pkg.manifest_sha256},
          {"architecture", shape.architecture},
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
          {"notes", p.notes},
          {"warnings", pkg.warnings}};
}

void print_time_plan(const OpenedPackage& pkg, const DecodeCost& cost, const TimePlan& p) {
  auto& o = std::cout;
  o << pkg.manifest.model_id << " (" << pkg.ref << "): " << p.layer_count << " layers in " << counted(p.stages.size(), "stage")
    << " at a context of " << p.context << " tokens, "
    << (p.lanes > 1 ? "pipelined over " + std::to_string(p.lanes) + " lanes" : std::string("one lane")) << "\n";
  o << "  model " << human_bytes(cost.total_bytes()) << ", read per token " << human_bytes(cost.active_bytes_per_token())
    << "\n";
  char buf[320];
  std::snprintf(buf, sizeof buf, "  %-5s  %-4s  %-11s  %10s  %10s  %10s  %10s  %10s\n", "stage", "node", "layers",
                "active", "KV read", "memory", "stage", "hop");
  o << buf;
  for (const auto& s : p.stages) {
    std::snprintf(buf, sizeof buf, "  %-5u  %-4u  %-11s  %10s  %10s  %10s  %7.2f ms  %7.2f ms\n", s.index, s.node,
                  format_layer_range(s.range).c_str(), human_bytes(s.active_weight_bytes).c_str(),
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
  for (const auto& n : p.left_out) o << "  node " << n.node << " left out: " << n.reason << "\n";
  for (const auto& n : p.notes) o << "  note: " << n << "\n";
}

int finish(const OpenedPackage& shown, const GgufFile& metadata, const std::vector<DecodeTensor>& tensors,
           TimePlanRequest r, std::optional<uint64_t> width, const nlohmann::json& extra) {
  const auto shape = read_cache_shape(metadata, r.kv_type);
  const auto cost = read_decode_cost(metadata, tensors, shown.manifest.layer_count, shown.ref);
  r.options.activation_bytes_per_token = width ? *width * r.activation_bytes_per_value : 0;
  const auto plan = plan_time(shown.manifest, shape, cost, r.options);
  nlohmann::json written;
  if (r.topology) {
    std::vector<LayerRange> ranges;
    std::vector<uint32_t> nodes;
    for (const auto& s : plan.stages) {
      ranges.push_back(s.range);
      nodes.push_back(s.node);
    }
    written = write_plan_topology(*r.topology, shown, ranges, nodes);
  }
  if (r.json) {
    auto doc = time_plan_json(shown, shape, cost, r, plan);
    doc.update(extra);
    if (r.topology) doc["topology"] = written;
    print_json(doc);
  } else {
    print_time_plan(shown, cost, plan);
    if (r.topology) print_topology_line(written);
  }
  return plan.target_met.value_or(true) ? kExitOk : 1;
}

}  // namespace

int run_time_plan(const OpenedPackage& pkg, TimePlanRequest r) {
  // The tensor table lives in the fragments' headers: every one is needed.
  // An hf:// package brings none for a plan (that would be the whole model).
  if (pkg.source) {
    size_t missing = 0;
    std::vector<const ArtifactEntry*> entries = {&pkg.manifest.shared.embeddings, &pkg.manifest.shared.output};
    for (const auto& l : pkg.manifest.layers) entries.push_back(&l);
    for (const auto* e : entries) missing += std::filesystem::exists(pkg.root / e->path) ? 0 : 1;
    if (missing > 0) {
      throw Error(ErrorKind::kNotFound,
                  pkg.ref + ": planning for time per token reads every fragment's tensor table, and " +
                      std::to_string(missing) + " of " + std::to_string(entries.size()) +
                      " fragments are not in the cache: `skippy-model-package fetch " + pkg.ref +
                      "` brings them (or plan a package schema 2, whose carrier holds the table)");
    }
  }
  auto parts = all_parts(catalog_artifacts_v1(pkg.manifest));
  provide_parts(pkg, parts);
  (void)verify_if_required(pkg, parts);  // hf://: trust nothing unverified
  std::optional<GgufFile> metadata;
  std::vector<DecodeTensor> tensors;
  for (const auto& part : parts) {
    if (part.role == PartRole::kProjector) continue;
    auto file = GgufFile::open(part.path);
    auto t = decode_tensors_of(file);
    tensors.insert(tensors.end(), std::make_move_iterator(t.begin()), std::make_move_iterator(t.end()));
    if (part.role == PartRole::kMetadata) metadata.emplace(std::move(file));
  }
  r.options.final_stage_needs_embeddings = output_tie(pkg).tied;
  const auto width = pkg.manifest.activation_width ? pkg.manifest.activation_width : activation_width_of(pkg).width;
  return finish(pkg, *metadata, tensors, r, width, nlohmann::json::object());
}

int run_time_plan(const OpenedCatalog& pkg, TimePlanRequest r) {
  const auto in = plan_input_from_catalog(pkg.catalog);
  std::vector<DecodeTensor> tensors;
  tensors.reserve(pkg.catalog.tensors.size());
  for (const auto& t : pkg.catalog.tensors) tensors.push_back({t.name, t.dims, t.stored_bytes});
  r.options.final_stage_needs_embeddings = in.output_tied;
  // The carrier was checked against the catalog (size, SHA-256) when opened.
  return finish(v2consume_detail::printable(pkg, in.manifest), *pkg.catalog.carrier_file, tensors, r,
                in.activation_width, v2consume_detail::identity(pkg));
}

}  // namespace skippy::cli
