#include <algorithm>
#include <cstdio>
#include <iostream>

#include "cli.h"
#include "cmd_plan_memory.h"
#include "cmd_plan_time.h"
#include "plan_report.h"
#include "skippy/error.h"
#include "skippy/source.h"
#include "skippy/plan.h"
#include "skippy/abi.h"

namespace skippy::cli {
namespace {

nlohmann::json plan_json(const Plan& p) {
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& s : p.stages) {
    auto j = plan_stage_json(s.index, s.range);
    j.update({{"layer_count", s.range.size()},
              {"bytes", s.bytes},
              {"layer_bytes", s.layer_bytes},
              {"shared_bytes", s.shared_bytes},
              {"embeddings", s.embeddings},
              {"output", s.output},
              {"projector", s.projector},
              {"budget_bytes", opt_json(s.budget)},
              {"activation_out_bytes_per_token", opt_json(s.activation_out_bytes_per_token)}});
    stages.push_back(std::move(j));
  }
  return {{"layer_count", p.layer_count},
          {"stage_count", p.stages.size()},
          {"total_bytes", p.total_bytes},
          {"max_stage_bytes", p.max_stage_bytes},
          {"output_tied_to_embeddings", p.output_tied_to_embeddings},
          {"activation_width", opt_json(p.activation_width)},
          {"activation_bytes_per_value", p.activation_bytes_per_value},
          {"activation_frame_bytes_per_token", opt_json(p.activation_frame_bytes_per_token)},
          {"stages", stages},
          {"notes", p.notes}};
}

void print_human(const PlanPackage& pkg, const Plan& p) {
  auto& o = std::cout;
  o << plan_headline(pkg) << ": " << p.layer_count << " layers in " << counted(p.stages.size(), "stage")
    << ", balanced by bytes\n";
  const bool budgets = !p.stages.empty() && p.stages.front().budget.has_value();
  char buf[256];
  std::snprintf(buf, sizeof buf, "  %-5s  %-11s  %12s  %12s  %12s%s  %s\n", "stage", "layers", "bytes", "layer bytes",
                "shared", budgets ? "        budget" : "", "loads");
  o << buf;
  for (const auto& s : p.stages) {
    std::string loads = "metadata";
    if (s.embeddings) loads += ", embeddings";
    if (s.projector) loads += ", projector";
    loads += ", " + std::to_string(s.range.size()) + (s.range.size() == 1 ? " layer" : " layers");
    if (s.output) loads += ", output";
    const std::string budget = budgets ? "  " + std::string(12 - std::min<size_t>(12, human_bytes(*s.budget).size()), ' ') +
                                             human_bytes(*s.budget)
                                       : "";
    std::snprintf(buf, sizeof buf, "  %-5u  %-11s  %12s  %12s  %12s%s  %s\n", s.index,
                  format_layer_range(s.range).c_str(), human_bytes(s.bytes).c_str(), human_bytes(s.layer_bytes).c_str(),
                  human_bytes(s.shared_bytes).c_str(), budget.c_str(), loads.c_str());
    o << buf;
  }
  o << "  largest stage " << human_bytes(p.max_stage_bytes) << ", all stages " << human_bytes(p.total_bytes) << "\n";
  if (p.activation_frame_bytes_per_token) {
    o << "  activation frame " << *p.activation_width << " x " << p.activation_bytes_per_value << " B = "
      << human_bytes(*p.activation_frame_bytes_per_token) << " per token between stages\n";
  }
  for (const auto& n : p.notes) o << "  note: " << n << "\n";
}

// Plans with plan_stages() and prints the plan (JSON or a table); `topology`
// (plan --topology-out) is written from the plan before it is printed.
int run_byte_plan(const PlanPackage& pkg, const PlanOptions& options, bool json, const PlanTopologyRequest* topology) {
  const auto plan = plan_stages(pkg, options);  // the tied output and the width from the package
  std::vector<LayerRange> ranges;
  for (const auto& s : plan.stages) ranges.push_back(s.range);
  print_plan_report(pkg, ranges, {}, topology, json, plan_json(plan), [&] { print_human(pkg, plan); });
  return kExitOk;
}

// plan's flags as parsed.
struct PlanArgs {
  std::string ref;
  uint32_t stages = 0;
  std::string stages_text;
  std::string max_bytes;
  std::vector<std::string> budgets;
  uint32_t activation_bytes = 2;
  bool with_projector = false;
  bool json = false;
  uint64_t context = 0;
  std::string kv_type = "f16";
  std::vector<std::string> bandwidth;
  uint32_t compute_reserve = 15;
  uint32_t headroom_percent = 10;
  std::string headroom_cap = "1GiB";
  std::vector<std::string> links;
  std::string target_tpot;
  uint32_t lanes = 1;
  std::string stage_overhead = "1.3ms";
  std::string hop_latency = "13ms";
  PlanTopologyFlags topology;
  // Which of the flags were given (their count).
  bool stages_given = false, max_given = false, budgets_given = false, context_given = false, bandwidth_given = false;
};

// The stage count and the byte plan's options from the flags (usage errors
// before any package is opened).
PlanOptions byte_plan_options(PlanArgs& a) {
  const bool auto_stages = a.stages_text == "auto";
  if (auto_stages && !a.bandwidth_given) {
    throw Error(ErrorKind::kUsage, "--stages auto needs --context and --bandwidth (one per node offered)");
  }
  if (a.stages_given && !auto_stages) a.stages = static_cast<uint32_t>(std::stoul(a.stages_text));
  if (a.bandwidth_given && (!a.stages_given || auto_stages)) {
    a.stages = static_cast<uint32_t>(a.bandwidth.size());
  }
  if (!a.stages_given && !a.budgets_given && !a.bandwidth_given) {
    throw Error(ErrorKind::kUsage, "give --stages N, or --budgets with one budget per stage");
  }
  if (a.stages == 0) a.stages = static_cast<uint32_t>(a.budgets.size());
  if (a.max_given && !a.stages_given) {
    throw Error(ErrorKind::kUsage, "--max-bytes needs --stages N (one budget for every stage)");
  }
  PlanOptions o;
  o.stages = a.stages;
  o.activation_bytes_per_value = a.activation_bytes;
  o.include_projector = a.with_projector;
  // Sizes first: a usage error needs no package.
  if (a.max_given) o.max_bytes_per_stage = size_flag("--max-bytes", a.max_bytes);
  if (a.budgets_given) {
    for (const auto& b : a.budgets) o.node_budgets.push_back(size_flag("--budgets", b));
  }
  if (!o.node_budgets.empty() && o.node_budgets.size() != o.stages) {
    throw Error(ErrorKind::kUsage, "--budgets gives " + counted(o.node_budgets.size(), "budget") +
                                       " for --stages " + std::to_string(o.stages) +
                                       ": give one per stage, in stage order");
  }
  return o;
}

// --context's memory plan options from the flags, also before the package.
MemoryPlanOptions memory_plan_options(const PlanArgs& a, const PlanOptions& o) {
  MemoryPlanOptions mo;
  if (a.context_given) {
    mo.context = a.context;
    mo.stages = o.stages;
    mo.budgets = o.node_budgets;
    if (o.max_bytes_per_stage) mo.budgets.assign(o.stages, *o.max_bytes_per_stage);
    for (const auto& b : a.bandwidth) mo.bandwidth.push_back(parse_bandwidth(b));
    if (!mo.bandwidth.empty() && mo.bandwidth.size() != o.stages) {
      throw Error(ErrorKind::kUsage, "--bandwidth gives " + counted(mo.bandwidth.size(), "value") +
                                         " for " + counted(o.stages, "stage") +
                                         ": give one per stage, in stage order");
    }
    mo.reserves.compute_reserve_percent = a.compute_reserve;
    mo.reserves.headroom_percent = a.headroom_percent;
    mo.reserves.headroom_cap_bytes = size_flag("--headroom-cap", a.headroom_cap);
    mo.include_projector = o.include_projector;
  }
  return mo;
}

// --bandwidth's time plan, when given.
std::optional<TimePlanRequest> time_plan_request(const PlanArgs& a, const MemoryPlanOptions& mo, KvCacheType kv_type,
                                                 const PlanTopologyRequest* topo) {
  std::optional<TimePlanRequest> timed;
  if (a.context_given && !mo.bandwidth.empty()) {
    TimePlanRequest t;
    t.options = time_plan_options(mo);
    t.options.auto_stages = a.stages_text == "auto";
    t.options.lanes = a.lanes;
    t.options.stage_overhead_ns = parse_duration_ns(a.stage_overhead);
    const uint64_t hop = parse_duration_ns(a.hop_latency);
    for (const auto& l : a.links) t.options.links.push_back(parse_node_link(l));
    if (t.options.links.empty()) t.options.links.push_back(NodeLink{hop, 0});
    if (!a.target_tpot.empty()) t.options.target_ns = parse_duration_ns(a.target_tpot);
    t.kv_type = kv_type;
    t.activation_bytes_per_value = a.activation_bytes;
    t.json = a.json;
    t.topology = topo;
    timed = std::move(t);
  }
  return timed;
}

// Runs plan with its parsed flags: the byte, memory or time plan they ask for; the exit code.
int run_plan(PlanArgs& a) {
  const PlanOptions o = byte_plan_options(a);
  const KvCacheType kv_type = parse_kv_cache_type(a.kv_type);
  MemoryPlanOptions mo = memory_plan_options(a, o);
  // --topology-out: one node per stage (per node offered with --stages auto).
  const auto topology = plan_topology_request(a.topology, a.ref, o.stages);
  const PlanTopologyRequest* topo = topology ? &*topology : nullptr;
  const auto timed = time_plan_request(a, mo, kv_type, topo);
  const auto opened = open_for_cli(a.ref);  // a local directory or hf://, any schema
  const PlanPackage pkg = plan_package(opened, {o.stages, a.context_given, timed.has_value()});
  // A node refuses to split an architecture its line's roster does not list: say so before planning a split.
  if (const auto w = split_roster_warning(pkg.architecture)) std::cerr << "warning: " << *w << "\n";
  if (timed) return run_time_plan(pkg, *timed);
  if (a.context_given) {
    mo.final_stage_needs_embeddings = pkg.final_stage_loads_embeddings(o.stages);
    return run_memory_plan(pkg, mo, kv_type, a.json, topo);
  }
  return run_byte_plan(pkg, o, a.json, topo);
}
}  // namespace

// plan's --help after its options: examples, then what it does.
constexpr const char* kPlanHelp =
    "Examples:\n"
    "  skippy-model-package plan ./model-package --stages 4 --json\n"
    "  skippy-model-package plan ./model-package --stages 3 --max-bytes 24GiB\n"
    "  skippy-model-package plan ./model-package --budgets 40G,24G,24G\n"
    "  skippy-model-package plan ./model-package --context 32768 --budgets 24GiB,24GiB,48GiB\n"
    "  skippy-model-package plan ./model-package --context 32768 --kv-type q8_0 \\\n"
    "      --budgets 24GiB,24GiB,48GiB --bandwidth 400GB/s,400GB/s,800GB/s --json\n"
    "  skippy-model-package plan ./model-package --context 8192 --stages auto --bandwidth 400GB/s,100GB/s \\\n"
    "      --links 2ms@10GB/s --target-tpot 33ms\n"
    "  skippy-model-package plan hf://meshllm/Qwen3-8B-Q4_K_M-layers@$COMMIT --stages 2 --topology-out split.json \\\n"
    "      --nodes ~/.skippy/node,9a3f1c0e5b7d2468ace013579bdf2468ace013579bdf2468ace013579bdf2468\n"
    "Without --context, stages are balanced by the artifact bytes they load: shared/metadata.gguf,\n"
    "its layers, shared/embeddings.gguf when it is the first (and the last, when the output is tied to\n"
    "the embeddings) and shared/output.gguf when it is the last; the plan minimizes the largest stage\n"
    "(with --budgets: the fullest relative to its budget). Those are disk bytes, and the weights a stage\n"
    "maps when it loads its parts directly.\n"
    "A package schema 2 directory is planned from its catalog: a layer's bytes are its blk.N.* tensor bytes,\n"
    "every stage counts the metadata carrier, the first the input embeddings, the last output/output_norm.\n"
    "With --context TOKENS, a stage's memory is its weights plus its layers' KV cache at that context,\n"
    "per layer from shared/metadata.gguf as llama.cpp allocates it (grouped-query heads, sliding-window\n"
    "layers, MLA, recurrent state), charged at 100/85 for compute buffers, plus per-node headroom of\n"
    "max(10% of the budget, min(1 GiB, budget/2)) (mesh-llm's reserves; see --compute-reserve,\n"
    "--headroom-percent, --headroom-cap). With --bandwidth (bytes/s per node), the split among those\n"
    "that fit with the least time per token: per stage, (the weight bytes one token reads: routed experts at\n"
    "expert_used_count/expert_count, one embedding row, the output head on the last stage; plus the KV\n"
    "bytes read at the context) / bandwidth + --stage-overhead (1.3 ms); per hop, activation bytes /\n"
    "link bandwidth + latency (--hop-latency 13 ms, or --links LATENCY[@BW] per node: its hop to the\n"
    "next stage; the last returns to the first). One lane minimizes the sum of stages and hops; with\n"
    "--lanes N > 1, the period (slowest stage + its hop). --stages auto also chooses which nodes (in the\n"
    "order given) take part. --target-tpot: exit 1 when missed, naming what would meet it.\n"
    "SIZE: bytes, or a number (fractions allowed) with K, M, G, T or KiB, MiB, GiB, TiB (powers of\n"
    "1024) or KB, MB, GB, TB (powers of 1000): 512M, 1.5GiB, 8GB; a bandwidth is a SIZE with an\n"
    "optional /s: 400GB/s.\n"
    "--topology-out FILE --nodes NODE,NODE,...: also write the plan as the split topology serve-artifacts\n"
    "and fetch --peer read: stage sI (layers of the plan's stage I) on the Ith node (with --stages auto,\n"
    "the nodes offered, in --bandwidth order); a NODE is a node id or a node identity directory. The\n"
    "topology pins the package: an hf:// package's commit, a Hugging Face cache snapshot's repository\n"
    "and commit, or --package-ref hf://ns/repo@COMMIT for another local directory (the reference its\n"
    "nodes fetch it by; it must hold the same manifest). Without --topology-out, --nodes names the\n"
    "plan's nodes with any names (alpha,beta), printed with the stages.\n"
    "Exit 1 when the package is invalid, N exceeds the layer count, --target-tpot is missed (the plan\n"
    "is printed, with what would meet it), or no plan fits the budgets\n"
    "(the message names the tightest stage, what it needs, the headroom its budget keeps, the budget\n"
    "that holds both and the largest context that fits).";

Command register_plan(CLI::App& app) {
  auto* cmd = app.add_subcommand("plan", "Layer ranges for N stages, balanced by bytes");
  cmd->footer(kPlanHelp);
  auto a = std::make_shared<PlanArgs>();
  path_option(cmd->add_option("package", a->ref, "Package directory or hf://ns/repo[@rev]"))->required();
  auto* stages_opt = cmd->add_option("--stages", a->stages_text,
                                     "Number of stages (1..layer_count), or auto with --bandwidth (the best subset of "
                                     "the nodes); optional with --budgets or --bandwidth")
                        ->check(CLI::Validator(
                            [](std::string& v) -> std::string {
                              if (v == "auto") return {};
                              return number_in(1u, 1000000u)(v);
                            },
                            "N|auto"));
  auto* max_opt = cmd->add_option("--max-bytes", a->max_bytes,
                                  "Byte budget of every stage (SIZE): artifact bytes the stage downloads and maps "
                                  "(disk, and the weights in memory when loaded directly; not KV cache or activations)");
  auto* budgets_opt = cmd->add_option("--budgets", a->budgets, "One byte budget per stage, in stage order: S1,S2,...")
                          ->delimiter(',');
  max_opt->excludes(budgets_opt);
  cmd->add_option("--activation-bytes", a->activation_bytes, "Bytes per activation value: 2 (f16, default) or 4 (f32)")
      ->check(CLI::IsMember({2u, 4u}));
  cmd->add_flag("--with-projector", a->with_projector, "Count the default mmproj projector on stage 0");
  auto* context_opt = cmd->add_option("--context", a->context,
                                      "Plan by memory at this context (tokens): weights + KV cache + reserves per stage")
                          ->check(number_in(uint64_t{1}, uint64_t{1} << 40));
  auto* kv_opt = cmd->add_option("--kv-type", a->kv_type, "KV cache type with --context: f16 (default) or q8_0");
  auto* bw_opt = cmd->add_option("--bandwidth", a->bandwidth,
                                 "With --context: memory bandwidth per node, stage order (B1,B2,...: 400GB/s)")
                     ->delimiter(',');
  auto* cr_opt = cmd->add_option("--compute-reserve", a->compute_reserve,
                                 "With --context: percent of memory kept for compute buffers; the cache is charged at "
                                 "100/(100-P) (default 15)")
                     ->check(number_in(0u, 99u));
  auto* hp_opt = cmd->add_option("--headroom-percent", a->headroom_percent,
                                 "With --context: per-node headroom, percent of its budget (default 10)")
                     ->check(number_in(0u, 100u));
  auto* hc_opt = cmd->add_option("--headroom-cap", a->headroom_cap,
                                 "With --context: headroom is at least min(SIZE, budget/2) (default 1GiB)");
  auto* links_opt = cmd->add_option("--links", a->links,
                                    "With --bandwidth: each node's link to the next stage, LATENCY[@BW] (2ms@10GB/s); "
                                    "one value for all, or one per node")
                        ->delimiter(',');
  auto* target_opt = cmd->add_option("--target-tpot", a->target_tpot,
                                     "With --bandwidth: the time per token to meet (33ms); exit 1 when missed");
  auto* lanes_opt = cmd->add_option("--lanes", a->lanes,
                                    "With --bandwidth: sequences in flight; above 1 the plan minimizes the period "
                                    "(default 1: the serial time)")
                        ->check(number_in(1u, 4096u));
  auto* so_opt = cmd->add_option("--stage-overhead", a->stage_overhead,
                                 "With --bandwidth: fixed time per stage and token (default 1.3ms)");
  auto* hl_opt = cmd->add_option("--hop-latency", a->hop_latency,
                                 "With --bandwidth: latency of a hop without --links (default 13ms)");
  for (auto* needs_context : {kv_opt, bw_opt, cr_opt, hp_opt, hc_opt}) needs_context->needs(context_opt);
  for (auto* needs_bw : {links_opt, target_opt, lanes_opt, so_opt, hl_opt}) needs_bw->needs(bw_opt);
  add_plan_topology_options(cmd, a->topology);
  cmd->add_flag("--json", a->json, "Print one JSON document on stdout");
  add_trust_signer_option(cmd);
  return {cmd, [a, max_opt, budgets_opt, stages_opt, context_opt, bw_opt]() {
            a->stages_given = stages_opt->count() > 0;
            a->max_given = max_opt->count() > 0;
            a->budgets_given = budgets_opt->count() > 0;
            a->context_given = context_opt->count() > 0;
            a->bandwidth_given = bw_opt->count() > 0;
            return run_plan(*a);
          }};
}

}  // namespace skippy::cli
