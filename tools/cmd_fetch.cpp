#include <chrono>
#include <cmath>
#include <iostream>
#include <map>
#include <vector>

#include "cli.h"
#include "stage_cli.h"
#include "util/env.h"
#include "skippy/error.h"
#include "skippy/source.h"
#include "skippy/hub.h"
#include "skippy/peer.h"
#include "skippy/verify.h"

namespace skippy::cli {
namespace {

struct PeerArgs {
  std::string peer, topology, stage, identity;
  std::vector<std::string> trust_owner;
  double connect_timeout = 30, idle_timeout = 30;
  std::string min_rate;        // --peer-min-rate (else SKIPPY_PEER_MIN_RATE)
  double rate_window = 0;      // --peer-rate-window seconds (else SKIPPY_PEER_RATE_WINDOW)
  bool timeouts_given = false;
};

// --peer and the flags that go with it, checked before anything is read.
void check_peer_flags(const PeerArgs& p) {
  if (p.peer.empty()) {
    if (!p.topology.empty() || !p.stage.empty() || !p.identity.empty() || !p.trust_owner.empty() || p.timeouts_given) {
      throw Error(ErrorKind::kUsage,
                  "--topology, --stage, --identity, --trust-owner, --peer-*-timeout, --peer-min-rate and "
                  "--peer-rate-window go with --peer HOST:PORT");
    }
    return;
  }
  std::string missing;
  if (p.topology.empty()) missing += " --topology FILE";
  if (p.stage.empty()) missing += " --stage STAGE_ID";
  if (p.identity.empty()) missing += " --identity NODE_DIR";
  if (!missing.empty()) throw Error(ErrorKind::kUsage, "--peer " + p.peer + " also needs" + missing);
  const auto colon = p.peer.rfind(':');
  const std::string port = colon == std::string::npos ? std::string() : p.peer.substr(colon + 1);
  const bool digits = !port.empty() && port.size() <= 5 && port.find_first_not_of("0123456789") == std::string::npos;
  if (colon == 0 || !digits || std::stoul(port) == 0 || std::stoul(port) > 65535) {
    throw Error(ErrorKind::kUsage, "--peer " + p.peer + ": expected HOST:PORT (e.g. 10.0.0.5:7470 or [::1]:7470)");
  }
  if (!p.min_rate.empty()) (void)size_flag("--peer-min-rate", p.min_rate);  // a usage error before any file is read
}

// The sources of a `fetch --peer` (the library's chain: cache, peer, then
// the Hub unless HF_HUB_OFFLINE=1), from the flags.
Sources peer_sources(const PeerArgs& p, const HfRef& ref, const peer::Topology& topology, const HubConfig& hub) {
  peer::PeerSourcesOptions o;
  o.endpoint = p.peer;
  o.topology_file = p.topology;
  o.topology = topology;
  o.stage_id = p.stage;
  o.identity_dir = p.identity;
  for (const auto& cert : p.trust_owner) o.trusted_owner_certs.emplace_back(cert);
  o.connect_timeout = seconds_to_ms(p.connect_timeout);
  o.idle_timeout = seconds_to_ms(p.idle_timeout);
  if (!p.min_rate.empty()) {  // the flag, else the environment
    o.min_rate = size_flag("--peer-min-rate", p.min_rate);
  }
  if (p.rate_window > 0) o.rate_window = seconds_to_ms(p.rate_window);
  auto chain = peer::make_peer_sources(ref, o, {make_hub_remote(hub)});
  for (const auto& w : chain.warnings) std::cerr << "warning: " << w << "\n";
  return std::move(chain.sources);
}

// fetch --local-dir: the stage's files copied, verified, into DIR.
nlohmann::json local_dir_json(const LocalDirReport& r) {
  return {{"dir", r.dir.string()},
          {"copied", r.copied},
          {"kept", r.kept},
          {"copied_bytes", r.copied_bytes},
          {"verified", r.verify.verified}};
}

struct FetchArgs {
  std::string ref, layers, projector, local_dir;
  bool json = false, single_stage = false, refresh = false;
  unsigned connections = 0;
  PeerArgs peer;
  TensorChoice tensors;
};

// --peer: the stage the topology gives (its range, or its --admission
// descriptor), and the sources that ask the peer first.
Sources peer_stage_sources(const FetchArgs& a, std::optional<LayerRange>& range, const HubConfig& hub) {
  auto topology = peer::load_topology(a.peer.topology);
  peer::TopologyStage* stage = topology.find_stage(a.peer.stage);
  if (!stage) {
    std::string ids;
    for (const auto& st : topology.stages) ids += (ids.empty() ? "" : ", ") + st.stage_id;
    throw Error(ErrorKind::kUsage, "--stage " + a.peer.stage + ": not a stage of " + a.peer.topology +
                                       " (its stages: " + ids + ")");
  }
  // --admission: the stage is its descriptor's, on both sides
  // (serve-artifacts --admission STAGE_ID=FILE binds the same).
  if (!a.tensors.admission.empty()) stage->admission = read_admission_file(a.tensors.admission);
  auto sources = peer_sources(a.peer, parse_hf_ref(a.ref), topology, hub);
  if (stage->admission) {
    std::cerr << "note: stage " << stage->stage_id << " is the one --admission " << a.tensors.admission
              << " defines (not its layer range)\n";
  } else if (!range) {
    range = stage->layers;
    std::cerr << "note: --layers " << format_layer_range(*range) << ", stage " << stage->stage_id
              << "'s range in the topology\n";
  } else if (range->start < stage->layers.start || range->end > stage->layers.end) {
    std::cerr << "warning: --layers " << format_layer_range(*range) << " reaches outside stage "
              << stage->stage_id << "'s range " << format_layer_range(stage->layers)
              << ": the peer serves a stage only its own parts, the rest come from the Hub\n";
  }
  return sources;
}

struct FetchOutcome {
  std::vector<StagePart> parts;
  std::vector<std::string> downloaded, source_notes, notes;
  std::string source;  // the farthest place anything came from
  nlohmann::json sources;
  std::optional<VerifyReport> report;
  std::optional<LocalDirReport> local;
  uint64_t total = 0;
};

void print_fetch(const FetchArgs& a, const OpenedCatalog& pkg, const std::optional<LayerRange>& range, FetchOutcome& f) {
  const auto& [parts, downloaded, source_notes, notes, source, sources, report, local, total] = f;
  const bool by_id = pkg.names_artifacts_by_id;
  if (a.json) {
    nlohmann::json jp = nlohmann::json::array();
    nlohmann::json ids = nlohmann::json::array();
    for (const auto& p : parts) {
      jp.push_back(p.rel_path);
      ids.push_back(p.artifact_id);
    }
    nlohmann::json doc = {{"package", pkg.ref},
                          {"model_id", pkg.catalog.model_id},
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
                          {"notes", notes},
                          {"source_notes", source_notes},
                          {"revision", pin_json(pkg)},
                          {"signed_by", pkg.signature ? nlohmann::json(pkg.signature->owner_id) : nlohmann::json()}};
    doc.update(package_id_json(pkg, pkg.catalog));
    if (!pkg.catalog.package_id.empty()) doc["artifact_ids"] = ids;  // artifacts named by id
    if (!a.peer.peer.empty()) doc["peer"] = {{"endpoint", a.peer.peer}, {"stage", a.peer.stage}};
    if (local) doc["local_dir"] = local_dir_json(*local);
    if (range) {
      doc["layer_start"] = range->start;
      doc["layer_end"] = range->end;
    }
    print_json(doc);
  } else {
    for (const auto& n : notes) std::cerr << "note: " << n << "\n";
    std::map<std::string, size_t> count;
    for (const auto& p : parts) {
      const std::string from = sources[p.rel_path];
      ++count[from];
      if (!by_id && from == "peer" && !a.peer.peer.empty()) {
        std::cerr << "from the peer " << a.peer.peer << ": " << p.rel_path << " (" << human_bytes(p.bytes) << ")\n";
      }
    }
    if (!a.peer.peer.empty()) {
      std::cerr << "parts: " << count["peer"] << " from the peer, " << count["hub"] << " from the Hub, "
                << count["cache"] << " already in the cache\n";
    }
    std::cerr << "fetched " << counted(parts.size(), "part")
              << (pkg.catalog.package_id.empty() ? "" : " of " + pkg.catalog.package_id) << ", "
              << human_bytes(total) << " (" << counted(downloaded.size(), "file") << " downloaded"
              << (count["cache"] == 0 ? std::string() : ", " + counted(count["cache"], "part") + " already in the cache")
              << "), verified\n";
    if (local) {
      std::cerr << "local dir " << local->dir.string() << ": " << counted(local->copied.size(), "file")
                << " copied (" << human_bytes(local->copied_bytes) << "), "
                << counted(local->kept.size(), "file") << " already there, verified\n";
    }
    std::cout << (local ? local->dir : pkg.root).string() << "\n";
  }
}

}  // namespace

// Runs fetch with its parsed flags (the peer timeouts' presence set); the exit code.
int run_fetch(FetchArgs& a) {
  if (!is_hf_ref(a.ref)) {
    throw Error(ErrorKind::kUsage, a.ref + ": fetch takes an hf://ns/repo[@rev] reference "
                                            "(a local package directory needs no fetching)");
  }
  check_peer_flags(a.peer);
  std::optional<LayerRange> range;
  if (!a.layers.empty()) range = parse_layer_range(a.layers);
  (void)stage_choice(range, a.tensors);  // a usage error before anything is opened
  if ((!a.tensors.names.empty() || !a.tensors.file.empty()) && !a.peer.peer.empty()) {
    throw Error(ErrorKind::kUsage,
                "--tensors / --tensors-file and --peer: a peer serves a stage by its layers or by its "
                "admission descriptor (--admission FILE)");
  }
  HubConfig hub = HubConfig::from_env();
  if (a.connections) hub.connections = a.connections;
  std::optional<Sources> chosen;
  if (a.connections) chosen = default_sources(hub);
  if (!a.peer.peer.empty()) chosen = peer_stage_sources(a, range, hub);
  if (!range && (!a.projector.empty() || a.single_stage)) {
    throw Error(ErrorKind::kUsage, "--projector and --single-stage need --layers");
  }
  SelectOptions so;
  if (!a.projector.empty()) so.projector_path = a.projector;
  so.single_stage = a.single_stage;
  const StageChoice choice = stage_choice(range, a.tensors, so, /*artifacts_only=*/true);
  const auto opened = open_for_cli(a.ref, a.refresh, chosen);
  check_runtime_abi_for_cli(opened);  // before any payload is brought
  check_stage_choice(choice, opened.identity());
  const CheckedStage checked = open_checked_stage(opened, choice);
  const OpenedCatalog& pkg = checked.pkg;
  const auto& parts = checked.parts;
  std::optional<LocalDirReport> local;
  if (!a.local_dir.empty()) local = export_to_local_dir(pkg, parts, a.local_dir);
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
  const auto source_notes = pkg.source ? pkg.source->notes() : std::vector<std::string>{};
  for (const auto& n : source_notes) std::cerr << "note: " << n << "\n";
  FetchOutcome f{parts,   downloaded,       source_notes, checked.stage.notes, source,
                 sources, checked.verified, local,        checked.total_bytes};
  print_fetch(a, pkg, range, f);
  return kExitOk;
}

// fetch's --help after its options: examples, then what it does.
constexpr const char* kFetchHelp =
    "Example ($COMMIT: the commit publish printed, hf://ns/repo@<commit>):\n"
    "  skippy-model-package fetch hf://meshllm/Qwen3-8B-Q4_K_M-layers@$COMMIT --layers 0..2 --json\n"
    "Downloads model-package.json, then only the parts the range selects (metadata, embeddings when the range\n"
    "starts at 0, its layers, output when it ends at layer_count, the stage's projector), several at once, into\n"
    "the cache huggingface_hub uses ($HF_HUB_CACHE, $HF_HOME/hub, ~/.cache/huggingface/hub). Every part is checked\n"
    "against the manifest's size and SHA-256 before it gets its final name; cache hits are verified too.\n"
    "Without --layers, every artifact of the package is fetched.\n"
    "A package schema 2 brings model-package.json, its metadata carrier (checked before its locators are\n"
    "trusted) and only the parts holding the stage's tensors (or those of --tensors NAME,...), and the stage's\n"
    "mmproj sidecar (as a projector above; --admission FILE: the descriptor's sidecars), from the same\n"
    "sources (cache, --peer, Hub).\n"
    "Large parts come as byte ranges over several connections at once (--connections, default 8).\n"
    "With --peer, a worker of a split run asks the coordinator's serve-artifacts first (TLS 1.3, both sides\n"
    "authenticated) for the parts its stage may have, then the Hub for whatever the peer did not deliver:\n"
    "  skippy-model-package fetch hf://meshllm/Qwen3-8B-Q4_K_M-layers@$COMMIT --layers 2..4 --peer 10.0.0.5:7470 \\\n"
    "      --topology topology.json --stage s1 --identity ~/.skippy/node\n"
    "--layers defaults to the stage's range then; a schema 2 stage that serve-artifacts binds to a stage admission\n"
    "descriptor (--admission STAGE_ID=FILE) is fetched with the same file: --admission FILE instead of --layers.\n"
    "The server must be of our owner or of a --trust-owner\n"
    "(MESH_LLM_ARTIFACT_TRANSFER=open: any node). Every part is verified the same way whoever sent it.\n"
    "A peer slower than --peer-min-rate (default 1M bytes/s, or SKIPPY_PEER_MIN_RATE) averaged over\n"
    "--peer-rate-window seconds (default 10, or SKIPPY_PEER_RATE_WINDOW), or than the deadline that gives a\n"
    "file (its size at that rate plus two windows), is given up: that file goes to the Hub, the reason in\n"
    "the notes. \"server busy\" is asked again a few times with a growing pause, one line on stderr each.\n"
    "Every retry prints one line on stderr (\"retry: <what>: <reason> (attempt N of M failed; trying again in S s)\"),\n"
    "on a terminal and off it. A download slower than SKIPPY_HF_MIN_RATE bytes/s per connection (default 4096)\n"
    "over SKIPPY_HF_MIN_RATE_SECS (default 30) is a failed attempt; what arrived stays and the next run resumes.\n"
    "Environment: HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE=1 (cache and peer only, no Hub), SKIPPY_HF_CONNECTIONS,\n"
    "SKIPPY_HF_MAX_ATTEMPTS (5), SKIPPY_HF_BACKOFF_MS (1000), SKIPPY_HF_MIN_RATE, SKIPPY_HF_MIN_RATE_SECS,\n"
    "SKIPPY_HF_STALL_SECS (60: no byte moving for that long is a failed attempt), HF_HUB_ETAG_TIMEOUT and\n"
    "HF_HUB_DOWNLOAD_TIMEOUT (10 each: a metadata request or a download with no answer for that long is a\n"
    "failed attempt, with its retry line), SKIPPY_PEER_MIN_RATE,\n"
    "SKIPPY_PEER_RATE_WINDOW.\n"
    "--local-dir DIR also puts the stage's files (model-package.json, its signature, the parts) in DIR as\n"
    "plain files at their package paths, as huggingface-cli's --local-dir does, each written under a\n"
    "temporary name and renamed, then verified against the package; a rerun keeps what is already there\n"
    "and verifies:\n"
    "  skippy-model-package fetch hf://meshllm/Qwen3-8B-Q4_K_M-layers@$COMMIT --layers 0..2 --local-dir ./stage0";

Command register_fetch(CLI::App& app) {
  auto* cmd = app.add_subcommand("fetch", "Bring a stage's parts of an hf:// package into the Hugging Face cache, verified");
  cmd->footer(kFetchHelp);
  auto a = std::make_shared<FetchArgs>();
  cmd->add_option("package", a->ref, "hf://ns/repo, hf://ns/repo:rev or hf://ns/repo@rev")->required();
  cmd->add_option("--layers", a->layers,
                  "Stage layer range START..END (half-open); default: the whole package (with --peer: the stage's range)");
  cmd->add_option("--projector", a->projector, "With --layers: the declared projector the stage uses");
  cmd->add_flag("--single-stage", a->single_stage, "Single-stage serving: the stage also gets the default projector");
  add_tensor_options(cmd, a->tensors);
  cmd->add_flag("--refresh", a->refresh,
                "For a branch or tag: ask the Hub what it names now (default: a ref already in the cache answers, "
                "with no network)");
  cmd->add_option("--connections", a->connections,
                  "Connections to the Hub's storage at once, shared by all files; a large file is split into byte "
                  "ranges over them (default 8, or SKIPPY_HF_CONNECTIONS; 1 = one stream at a time)")
      ->check(CLI::Range(1u, 64u));
  path_option(cmd->add_option("--local-dir", a->local_dir,
                              "Also copy the stage's files, verified, into DIR as plain files at their package paths"));
  cmd->add_flag("--json", a->json, "Print one JSON document on stdout");
  add_trust_signer_option(cmd);
  add_runtime_abi_option(cmd);
  cmd->add_option("--peer", a->peer.peer, "HOST:PORT of the coordinator's serve-artifacts: asked first for the stage's parts");
  path_option(cmd->add_option("--topology", a->peer.topology, "With --peer: the active split topology (JSON, see docs/CLI.md)"));
  cmd->add_option("--stage", a->peer.stage, "With --peer: this node's stage id in the topology");
  path_option(cmd->add_option("--identity", a->peer.identity, "With --peer: this node's identity directory (node.key, node.crt, owner.crt)"));
  path_option(cmd->add_option("--trust-owner", a->peer.trust_owner, "With --peer: an owner certificate whose nodes are trusted too (repeatable)"));
  auto* ct = cmd->add_option("--peer-connect-timeout", a->peer.connect_timeout,
                             "With --peer: seconds to connect and authenticate (default 30)")
                 ->check(CLI::Range(0.01, 3600.0));
  auto* idle = cmd->add_option("--peer-idle-timeout", a->peer.idle_timeout,
                             "With --peer: seconds without progress before the peer is given up for the Hub (default 30)")
                 ->check(CLI::Range(0.01, 3600.0));
  auto* rate = cmd->add_option("--peer-min-rate", a->peer.min_rate,
                               "With --peer: the slowest transfer waited for, bytes per second (a size: 512K, 1M, 1MB; "
                               "default 1M or SKIPPY_PEER_MIN_RATE; 0 = none)");
  auto* window = cmd->add_option("--peer-rate-window", a->peer.rate_window,
                                 "With --peer: seconds that --peer-min-rate is averaged over (default 10 or "
                                 "SKIPPY_PEER_RATE_WINDOW)")
                     ->check(CLI::Range(0.1, 3600.0));
  return {cmd, [a, ct, idle, rate, window]() {
            a->peer.timeouts_given = ct->count() > 0 || idle->count() > 0 || rate->count() > 0 || window->count() > 0;
            return run_fetch(*a);
          }};
}

}  // namespace skippy::cli
