// speculative: the speculative-decoding plan for a package (or a direct
// GGUF) under the operator's settings, or the rule that refuses it (spec:
// "Speculative Decoding").
#include <filesystem>
#include <iostream>

#include "cli.h"
#include "stage_cli.h"
#include "skippy/model_source.h"
#include "skippy/package_generation.h"
#include "skippy/policy.h"
#include "skippy/speculative.h"
#include "skippy/stage.h"

namespace skippy::cli {
namespace {


struct IntFlag {
  const char* flag;
  const char* help;
  std::optional<uint64_t> SpeculativeSettings::*member;
  uint64_t value = 0;
  CLI::Option* opt = nullptr;
};

struct SpeculativeArgs {
  std::string target, strategy, config, model, ngram_proposer;
  bool json = false;
  std::vector<IntFlag> ints = {
      {"--ngram-min", "Shortest historical match", &SpeculativeSettings::ngram_min},
      {"--ngram-max", "Longest historical match", &SpeculativeSettings::ngram_max},
      {"--ngram-max-proposal-tokens", "N-gram output budget", &SpeculativeSettings::ngram_max_proposal_tokens},
      {"--extension-initial-tokens", "Composite tail to start with", &SpeculativeSettings::extension_initial_tokens},
      {"--extension-max-tokens", "Composite tail bound", &SpeculativeSettings::extension_max_tokens},
      {"--extension-tail-backoff-proposals", "Proposals without a tail after an unhelpful one",
       &SpeculativeSettings::extension_tail_backoff_proposals},
      {"--native-mtp-reject-cooldown-tokens", "Native MTP cooldown after a rejection",
       &SpeculativeSettings::native_mtp_reject_cooldown_tokens},
      {"--verify-window-min-tokens", "VerifyWindow minimum", &SpeculativeSettings::verify_window_min_tokens},
      {"--verify-window-max-tokens", "VerifyWindow maximum", &SpeculativeSettings::verify_window_max_tokens},
      {"--verify-window-pipeline-depth", "In-flight VerifyWindows per request",
       &SpeculativeSettings::verify_window_pipeline_depth},
  };
};

void print_human(const SpeculativeResolution& r) {
  auto& o = std::cout;
  if (!r.plan) return;
  const SpeculativePlan& p = *r.plan;
  o << "strategy        " << p.strategy << " (" << plan_kind_name(p.kind) << ", " << p.origin << ")\n";
  if (p.native_mtp) {
    o << "native MTP      proposer " << p.native_mtp->proposer << ", depth " << p.native_mtp->prediction_depth
      << ", layers";
    for (const auto l : p.native_mtp->layer_indices) o << " " << l;
    o << "\n";
  }
  if (p.ngram) {
    o << "n-gram          " << p.ngram->type << " (" << p.ngram->proposer << "): match " << p.ngram->ngram_min << ".."
      << p.ngram->ngram_max << ", up to " << p.ngram->max_proposal_tokens << " tokens, history "
      << p.ngram->history_scope << "\n";
  }
  if (p.extension) {
    o << "extension       tail " << p.extension->initial_tokens << " -> " << p.extension->max_tokens << " tokens, backoff "
      << p.extension->tail_backoff_proposals << " proposals\n";
  }
  if (p.verify_window) {
    o << "verify window   " << p.verify_window->min_tokens << ".." << p.verify_window->max_tokens
      << " tokens, pipeline depth " << p.verify_window->pipeline_depth << "\n";
  }
}

}  // namespace

// speculative's --help after its options: examples, then what it does.
constexpr const char* kSpeculativeHelp =
    "Examples:\n"
    "  skippy-model-package speculative ./model-package --json\n"
    "  skippy-model-package speculative ./model-package --strategy mtp --config examples/config.toml\n"
    "  skippy-model-package speculative model.gguf --strategy ngram-suffix --ngram-min 4 --ngram-max 32\n"
    "--strategy: auto (package default, else disabled), mtp, disabled, a strategy the package declares,\n"
    "native-mtp-n1 (= mtp); for a direct GGUF also ngram-cache / ngram-suffix with --ngram-min/--ngram-max.\n"
    "Each setting comes from its flag, else the [[models]] entry of --model (default: the package's\n"
    "model_id) in --config, else [defaults.speculative]. Settings tighten package bounds, never widen them.\n"
    "A refusal exits 1 and names the rule.";

Command register_speculative(CLI::App& app) {
  auto* cmd = app.add_subcommand("speculative", "The resolved speculative-decoding plan, or why it was refused");
  cmd->footer(kSpeculativeHelp);
  auto a = std::make_shared<SpeculativeArgs>();
  path_option(cmd->add_option("target", a->target, "Package directory of either schema (or hf://ns/repo[@rev]), or a GGUF for direct operation"))
      ->required();
  cmd->add_option("--strategy", a->strategy, "auto, mtp, disabled, native-mtp-n1, a package strategy id, ...");
  path_option(cmd->add_option("--config", a->config, "config.toml with [defaults.speculative] and [[models]]"));
  cmd->add_option("--model", a->model, "The [[models]] entry to use (default: the package's model_id)");
  cmd->add_option("--ngram-proposer", a->ngram_proposer, "cache or suffix")->check(CLI::IsMember({"cache", "suffix"}));
  for (auto& f : a->ints) f.opt = cmd->add_option(f.flag, f.value, f.help);
  cmd->add_flag("--json", a->json, "Print one JSON document on stdout");
  add_trust_signer_option(cmd);
  return {cmd, [a]() {
              SpeculativeSettings flags;
              if (!a->strategy.empty()) flags.strategy = a->strategy;
              if (!a->ngram_proposer.empty()) flags.ngram_proposer = a->ngram_proposer;
              for (const auto& f : a->ints) {
                if (f.opt->count() > 0) flags.*(f.member) = f.value;
              }
              OperatorConfig cfg;
              if (!a->config.empty()) cfg = load_operator_config(a->config);
              for (const auto& w : cfg.warnings) std::cerr << "warning: " << w << "\n";

              if (!a->model.empty() && !a->config.empty() && !cfg.models.contains(a->model)) {
                std::cerr << "warning: " << a->config << ": no [[models]] entry for \"" << a->model
                          << "\": global defaults only\n";
              }
              std::optional<OpenedPackage> pkg;
              if (!std::filesystem::is_regular_file(a->target)) pkg = open_for_cli(a->target);
              const auto p = pkg ? resolve_package_speculative(*pkg, flags, cfg, a->model)
                                 : resolve_gguf_speculative(a->target, flags, cfg, a->model);
              const auto& r = p.resolution;
              for (const auto& w : p.warnings) std::cerr << "warning: " << w << "\n";
              if (pkg) {
                for (const auto& l : request_defaults_lines(pkg->identity().request_defaults_document)) {
                  std::cerr << "note: request defaults (sampling, not speculative decoding) " << l << "\n";
                }
              }
              for (const auto& n : p.notes) std::cerr << "note: " << n << "\n";
              if (a->json) {
                auto doc = p.document;
                doc["target"] = a->target;
                if (pkg) doc.update(package_id_json(*pkg, pkg->identity()));
                print_json(doc);
              } else {
                print_human(r);
              }
              if (r.refusal) {
                std::cerr << "error: speculative decoding refused (rule " << r.refusal->rule << "): "
                          << r.refusal->message << "\n";
                return kExitInvalid;
              }
              return kExitOk;
          }};
}

}  // namespace skippy::cli
