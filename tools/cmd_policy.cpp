// policy: the generation path a package resolves to for one request shape,
// with its telemetry record (spec: "Policy Resolution").
#include <iostream>

#include "cli.h"
#include "skippy/package_generation.h"
#include "skippy/policy.h"
#include "skippy/stage.h"

namespace skippy::cli {
namespace {

struct PolicyArgs {
  std::string ref, phase, backend = "reference", role;
  uint64_t n_tokens = 0, n_kv = 0, top_k = 0;
  std::vector<std::string> overrides;
  bool json = false;
  CLI::Option* top_k_opt = nullptr;
};

void print_human(const PolicyDecision& d, const std::string& ref) {
  const PolicyTelemetry& t = d.telemetry;
  auto& o = std::cout;
  o << ref << "\n";
  o << "  phase           " << phase_name(d.phase) << " (n_tokens " << t.n_tokens << ", n_kv " << t.n_kv << ")\n";
  o << "  selected path   " << execution_path_name(d.selected) << " (" << policy_source_name(d.source) << ")\n";
  o << "  package path    " << d.package_path.value_or("(none)") << "\n";
  o << "  backend         " << t.backend << "\n";
  o << "  profile         " << t.profile.value_or("(none)") << "\n";
  o << "  dense mask      " << t.dense_mask_bytes << " bytes (" << human_bytes(t.dense_mask_bytes) << "), "
    << t.mask_bytes_avoided << " avoided\n";
  if (t.threshold) {
    o << "  threshold       " << t.threshold->name << " = " << t.threshold->value << " " << t.threshold->unit << " ("
      << policy_source_name(t.threshold->source) << "): " << t.threshold->outcome << "\n";
  }
  if (d.fallback_reason) o << "  fallback reason " << *d.fallback_reason << "\n";
  if (d.indexshare) o << "  indexshare      " << *d.indexshare << "\n";
  for (const auto& e : d.experimental) {
    o << "  experimental    " << e.name << " " << (e.enabled ? "on" : "off") << " (" << e.reason << ")\n";
  }
}

}  // namespace

// policy's --help after its options: examples, then what it does.
constexpr const char* kPolicyHelp =
    "Examples:\n"
    "  skippy-model-package policy ./model-package --phase decode --n-tokens 1 --n-kv 1024 --json\n"
    "  skippy-model-package policy ./model-package --phase prefill --n-tokens 4096 --n-kv 131072 --backend cpu\n"
    "  skippy-model-package policy ./model-package --phase decode --n-tokens 1 --n-kv 8 --override decode=dense\n"
    "Order: --override, the package's generation.policy and thresholds, the built-in default for the\n"
    "architecture, then a correctness fallback. prefill is short when n_tokens <= short_prefill_max_tokens.\n"
    "Backends: reference (every path: what the package intends; the default), cpu (no compact-flash),\n"
    "cuda, metal, or a JSON file {\"name\": ..., \"paths\": [...], \"evidence\": {...}}.\n"
    "When the package recommendation does not run, one JSON log line goes to stderr.";

Command register_policy(CLI::App& app) {
  auto* cmd = app.add_subcommand("policy", "The resolved generation path for a request shape, with its telemetry");
  cmd->footer(kPolicyHelp);
  auto a = std::make_shared<PolicyArgs>();
  path_option(cmd->add_option("package", a->ref, "Package directory of either schema (or hf://ns/repo[@rev])"))->required();
  cmd->add_option("--phase", a->phase, "decode, prefill or verify")
      ->required()
      ->check(CLI::IsMember({"decode", "prefill", "verify"}));
  cmd->add_option("--n-tokens", a->n_tokens, "Tokens in the batch (decode: 1)")->required();
  cmd->add_option("--n-kv", a->n_kv, "Visible KV rows, the batch included")->required();
  cmd->add_option("--backend", a->backend, "reference, cpu, cuda, metal, or a backend description file");
  cmd->add_option("--override", a->overrides, "FIELD=VALUE runtime override (repeatable), e.g. decode=dense")
      ->allow_extra_args(false);  // one value per --override, so a following argument is not swallowed
  a->top_k_opt = cmd->add_option("--top-k", a->top_k, "IndexShare top-k width (default: <arch>.attention.indexer.top_k)");
  cmd->add_option("--indexshare-role", a->role, "IndexShare role of the layer: full or shared")
      ->check(CLI::IsMember({"full", "shared"}));
  cmd->add_flag("--json", a->json, "Print one JSON document on stdout");
  add_trust_signer_option(cmd);
  return {cmd, [a]() {
              // Flags first: a usage error needs no package.
              PackagePolicyQuery q;
              for (const auto& o : a->overrides) add_policy_override(q.overrides, o);
              q.backend = a->backend;
              q.request.kind = *parse_request_kind(a->phase);
              q.request.n_tokens = a->n_tokens;
              q.request.n_kv = a->n_kv;
              if (!a->role.empty()) q.request.indexshare_role = parse_indexshare_role(a->role);
              if (a->top_k_opt->count() > 0) q.request.top_k = a->top_k;
              (void)backend_by_name_or_file(a->backend);  // a usage error before the package is opened
              const auto pkg = open_for_cli(a->ref);
              const auto r = resolve_package_policy(pkg, q, [](const std::string& line) { std::cerr << line << "\n"; });
              for (const auto& w : r.warnings) std::cerr << "warning: " << w << "\n";
              for (const auto& n : r.notes) std::cerr << "note: " << n << "\n";
              if (a->json) {
                print_json(r.document);
              } else {
                print_human(r.decision, pkg.ref);
              }
              return kExitOk;
          }};
}

}  // namespace skippy::cli
