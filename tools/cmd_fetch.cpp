#include <iostream>
#include <map>

#include "cli.h"
#include "skippy/error.h"
#include "skippy/hf_ref.h"
#include "skippy/hub.h"
#include "skippy/verify.h"

namespace skippy::cli {

Command register_fetch(CLI::App& app) {
  auto* cmd = app.add_subcommand("fetch", "Bring a stage's parts of an hf:// package into the Hugging Face cache, verified");
  cmd->footer(
      "Example:\n  skippy-model-package fetch hf://meshllm/Qwen3-8B-Q4_K_M-layers@<commit> --layers 0..12 --json\n"
      "Downloads model-package.json, then only the parts the range selects (metadata, embeddings when the range\n"
      "starts at 0, its layers, output when it ends at layer_count, the stage's projector), several at once, into\n"
      "the cache huggingface_hub uses ($HF_HUB_CACHE, $HF_HOME/hub, ~/.cache/huggingface/hub). Every part is checked\n"
      "against the manifest's size and SHA-256 before it gets its final name; cache hits are verified too.\n"
      "Without --layers, every artifact of the package is fetched.\n"
      "Large parts come as byte ranges over several connections at once (--connections, default 8).\n"
      "Environment: HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE=1 (cache only, no network), SKIPPY_HF_CONNECTIONS.");
  struct Args {
    std::string ref, layers, projector;
    bool json = false, single_stage = false, refresh = false;
    unsigned connections = 0;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("package", a->ref, "hf://ns/repo, hf://ns/repo:rev or hf://ns/repo@rev")->required();
  cmd->add_option("--layers", a->layers, "Stage layer range START..END (half-open); default: the whole package");
  cmd->add_option("--projector", a->projector, "With --layers: the declared projector the stage uses");
  cmd->add_flag("--single-stage", a->single_stage, "Single-stage serving: the stage also gets the default projector");
  cmd->add_flag("--refresh", a->refresh,
                "For a branch or tag: ask the Hub what it names now (default: a ref already in the cache answers, "
                "with no network)");
  cmd->add_option("--connections", a->connections,
                  "Connections to the Hub's storage at once, shared by all files; a large file is split into byte "
                  "ranges over them (default 8, or SKIPPY_HF_CONNECTIONS; 1 = one stream at a time)")
      ->check(CLI::Range(1u, 64u));
  cmd->add_flag("--json", a->json, "Print one JSON document on stdout");
  return {cmd, [a]() {
            if (!is_hf_ref(a->ref)) {
              throw Error(ErrorKind::kUsage, a->ref + ": fetch takes an hf://ns/repo[@rev] reference "
                                                      "(a local package directory needs no fetching)");
            }
            std::optional<LayerRange> range;
            if (!a->layers.empty()) range = parse_layer_range(a->layers);
            if (!range && (!a->projector.empty() || a->single_stage)) {
              throw Error(ErrorKind::kUsage, "--projector and --single-stage need --layers");
            }
            std::optional<Sources> with_connections;
            if (a->connections) {
              HubConfig hub = HubConfig::from_env();
              hub.connections = a->connections;
              with_connections = default_sources(hub);
            }
            const auto pkg = open_package_for_cli(a->ref, a->refresh, with_connections);
            SelectOptions so;
            if (!a->projector.empty()) so.projector_path = a->projector;
            so.single_stage = a->single_stage;
            const auto [parts, notes] = parts_for(pkg, range, so);
            const auto report = verify_if_required(pkg, parts);
            const auto downloaded = pkg.source ? pkg.source->fetched() : std::vector<std::string>{};
            const auto origins = pkg.source ? pkg.source->origins() : std::map<std::string, std::string>{};
            // The farthest place anything came from: cache, then peer, then hub.
            std::string source = "cache";
            for (const auto& [path, origin] : origins) {
              if (origin == "hub" || (origin == "peer" && source == "cache")) source = origin;
            }
            nlohmann::json sources = nlohmann::json::object();
            for (const auto& p : parts) {
              const auto it = origins.find(p.rel_path);
              sources[p.rel_path] = it == origins.end() ? "cache" : it->second;
            }
            if (pkg.source) {
              for (const auto& n : pkg.source->notes()) std::cerr << "note: " << n << "\n";
            }
            uint64_t total = 0;
            for (const auto& p : parts) total += p.bytes;
            if (a->json) {
              nlohmann::json jp = nlohmann::json::array();
              for (const auto& p : parts) jp.push_back(p.rel_path);
              nlohmann::json doc = {{"package", pkg.ref},
                                    {"model_id", pkg.manifest.model_id},
                                    {"commit", pkg.commit ? nlohmann::json(*pkg.commit) : nlohmann::json()},
                                    {"manifest_sha256", pkg.manifest_sha256},
                                    {"snapshot_dir", pkg.root.string()},
                                    {"source", source},
                                    {"sources", sources},
                                    {"downloaded", downloaded},
                                    {"parts", jp},
                                    {"total_bytes", total},
                                    {"verified", report.has_value() && report->verified},
                                    {"cache_hits", report ? report->cache_hits : 0},
                                    {"hashed_bytes", report ? report->hashed_bytes : 0},
                                    {"warnings", pkg.warnings},
                                    {"notes", notes}};
              if (range) {
                doc["layer_start"] = range->start;
                doc["layer_end"] = range->end;
              }
              print_json(doc);
            } else {
              for (const auto& n : notes) std::cerr << "note: " << n << "\n";
              std::cerr << "fetched " << parts.size() << " part(s), " << human_bytes(total) << " ("
                        << downloaded.size() << " file(s) downloaded, the rest from the cache), verified\n";
              std::cout << pkg.root.string() << "\n";
            }
            return kExitOk;
          }};
}

}  // namespace skippy::cli
