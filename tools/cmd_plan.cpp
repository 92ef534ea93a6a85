#include <algorithm>
#include <cstdio>
#include <iostream>

#include "cli.h"
#include "skippy/error.h"
#include "skippy/plan.h"
#include "skippy/stage.h"
#include "skippy/verify.h"

namespace skippy::cli {
namespace {

nlohmann::json opt_json(const std::optional<uint64_t>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

nlohmann::json plan_json(const OpenedPackage& pkg, const Plan& p) {
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& s : p.stages) {
    stages.push_back({{"stage_index", s.index},
                      {"layer_start", s.range.start},
                      {"layer_end", s.range.end},
                      {"layers", format_layer_range(s.range)},
                      {"layer_count", s.range.size()},
                      {"bytes", s.bytes},
                      {"layer_bytes", s.layer_bytes},
                      {"shared_bytes", s.shared_bytes},
                      {"embeddings", s.embeddings},
                      {"output", s.output},
                      {"projector", s.projector},
                      {"budget_bytes", opt_json(s.budget)},
                      {"activation_out_bytes_per_token", opt_json(s.activation_out_bytes_per_token)}});
  }
  return {{"package", pkg.ref},
          {"model_id", pkg.manifest.model_id},
          {"manifest_sha256", pkg.manifest_sha256},
          {"layer_count", p.layer_count},
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

void print_human(const OpenedPackage& pkg, const Plan& p) {
  auto& o = std::cout;
  o << pkg.manifest.model_id << " (" << pkg.ref << "): " << p.layer_count << " layers in " << p.stages.size()
    << " stage(s), balanced by bytes\n";
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

}  // namespace

Command register_plan(CLI::App& app) {
  auto* cmd = app.add_subcommand("plan", "Layer ranges for N stages, balanced by bytes");
  cmd->footer(
      "Examples:\n"
      "  skippy-model-package plan ./model-package --stages 4 --json\n"
      "  skippy-model-package plan ./model-package --stages 3 --max-bytes 24GiB\n"
      "  skippy-model-package plan ./model-package --stages 3 --budgets 40G,24G,24G\n"
      "Each stage loads shared/metadata.gguf, its layers, shared/embeddings.gguf when it is the first\n"
      "(and the last, when the output is tied to the embeddings) and shared/output.gguf when it is the\n"
      "last; the plan minimizes the largest stage (with --budgets: the fullest relative to its budget).\n"
      "Stage bytes are artifact bytes: what the stage downloads and keeps on disk, and the weights it maps\n"
      "into memory when it loads its parts directly (KV cache and activations come on top).\n"
      "SIZE: bytes, or a number (fractions allowed) with K, M, G, T or KiB, MiB, GiB, TiB (powers of\n"
      "1024) or KB, MB, GB, TB (powers of 1000): 512M, 1.5GiB, 8GB.\n"
      "Exit 1 when the package is invalid, N exceeds the layer count, or no plan fits the budgets\n"
      "(the message names the stage and by how many bytes it is over).");
  struct Args {
    std::string ref;
    uint32_t stages = 0;
    std::string max_bytes;
    std::vector<std::string> budgets;
    uint32_t activation_bytes = 2;
    bool with_projector = false;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("package", a->ref, "Package directory or hf://ns/repo[@rev]")->required();
  cmd->add_option("--stages", a->stages, "Number of stages (1..layer_count)")
      ->required()
      ->check(CLI::Range(1u, 1000000u));
  auto* max_opt = cmd->add_option("--max-bytes", a->max_bytes,
                                  "Byte budget of every stage (SIZE): artifact bytes the stage downloads and maps "
                                  "(disk, and the weights in memory when loaded directly; not KV cache or activations)");
  auto* budgets_opt = cmd->add_option("--budgets", a->budgets, "One byte budget per stage, in stage order: S1,S2,...")
                          ->delimiter(',');
  max_opt->excludes(budgets_opt);
  cmd->add_option("--activation-bytes", a->activation_bytes, "Bytes per activation value: 2 (f16, default) or 4 (f32)")
      ->check(CLI::IsMember({2u, 4u}));
  cmd->add_flag("--with-projector", a->with_projector, "Count the default mmproj projector on stage 0");
  cmd->add_flag("--json", a->json, "Print one JSON document on stdout");
  return {cmd, [a, max_opt, budgets_opt]() {
            PlanOptions o;
            o.stages = a->stages;
            o.activation_bytes_per_value = a->activation_bytes;
            o.include_projector = a->with_projector;
            // Sizes first: a usage error needs no package.
            if (max_opt->count() > 0) o.max_bytes_per_stage = parse_byte_size(a->max_bytes);
            if (budgets_opt->count() > 0) {
              for (const auto& b : a->budgets) o.node_budgets.push_back(parse_byte_size(b));
            }
            if (!o.node_budgets.empty() && o.node_budgets.size() != o.stages) {
              throw Error(ErrorKind::kUsage, "--budgets gives " + std::to_string(o.node_budgets.size()) +
                                                 " budgets for --stages " + std::to_string(o.stages) +
                                                 ": give one per stage, in stage order");
            }
            const auto pkg = open_package_for_cli(a->ref);
            const uint32_t layers = pkg.manifest.layer_count;
            // Tied output: ask selection what the final stage loads, so the
            // plan counts exactly what `select` would.
            if (o.stages >= 2 && o.stages <= layers) {
              const auto tie = output_tie(pkg);
              (void)verify_if_required(pkg, {tie.output});  // hf://: trust nothing unverified
              o.final_stage_needs_embeddings = tie.tied;
            }
            const auto width = activation_width_of(pkg);
            if (width.derived) o.activation_width = width.width;
            auto plan = plan_stages(pkg.manifest, o);
            if (!width.note.empty()) {  // say how a missing width was found (or why not) in its own words
              std::erase_if(plan.notes, [](const std::string& n) { return n.starts_with("the manifest has no activation_width"); });
              plan.notes.insert(plan.notes.begin(), width.note);
            }
            if (a->json) {
              print_json(plan_json(pkg, plan));
            } else {
              print_human(pkg, plan);
            }
            return kExitOk;
          }};
}

}  // namespace skippy::cli
