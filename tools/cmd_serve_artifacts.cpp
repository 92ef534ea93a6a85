#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iostream>

#include "format/json_output.h"
#include "cli.h"
#include "stage_cli.h"
#include "util/env.h"
#include "skippy/error.h"
#include "skippy/source.h"
#include "skippy/peer.h"

namespace skippy::cli {
// serve-artifacts's flags as parsed.
struct ServeArgs {
  std::string listen, topology, identity, mode;
  std::vector<std::string> trust_owner, admission;
  unsigned max_connections = 64, max_per_peer = 16, max_unauth = 32, max_unauth_per_address = 8, threads = 0;
  double idle = 30, handshake = 3, request = 10, total = 3600;
  bool no_preverify = false, json = false;
};

// Runs serve-artifacts with its parsed flags; the exit code.
int run_serve_artifacts(const ServeArgs& a) {
  // The mode first: a server that would serve nothing by default
  // does not start.
  const auto from_env = env::get(peer::kTransferModeEnv);
  if (a.mode.empty() && (!from_env || from_env->empty())) {
    throw Error(ErrorKind::kUsage, std::string("serve-artifacts: no transfer mode: give --mode trusted (peers of "
                                               "our owner or of a --trust-owner) or --mode open (any "
                                               "authenticated peer), or set ") +
                                       std::string(peer::kTransferModeEnv) +
                                       "; unset, transfer is off and nothing would be served");
  }
  peer::ServerOptions o;
  o.listen = a.listen;
  o.topology = peer::load_topology(a.topology);
  for (const auto& binding : a.admission) {
    const auto eq = binding.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == binding.size()) {
      throw Error(ErrorKind::kUsage, "--admission " + binding + ": expected STAGE_ID=FILE");
    }
    const std::string stage_id = binding.substr(0, eq);
    peer::TopologyStage* stage = o.topology.find_stage(stage_id);
    if (!stage) {
      throw Error(ErrorKind::kUsage, "--admission " + binding + ": no stage \"" + stage_id + "\" in " + a.topology);
    }
    if (stage->admission) {
      throw Error(ErrorKind::kUsage, "--admission: stage \"" + stage_id + "\" is given two descriptors");
    }
    stage->admission = read_admission_file(binding.substr(eq + 1));
  }
  o.mode = a.mode.empty() ? peer::transfer_mode_from_env() : peer::parse_transfer_mode(a.mode);
  for (const auto& cert : a.trust_owner) o.trusted_owner_ids.push_back(peer::owner_id_of_certificate(cert));
  o.hf_cache = env::hf_hub_cache_dir();
  o.limits.max_connections = a.max_connections;
  o.limits.max_connections_per_peer = a.max_per_peer;
  o.limits.idle_timeout = seconds_to_ms(a.idle);
  o.limits.max_unauthenticated = a.max_unauth;
  o.limits.max_unauthenticated_per_address = a.max_unauth_per_address;
  o.limits.handshake_timeout = seconds_to_ms(a.handshake);
  o.limits.request_timeout = seconds_to_ms(a.request);
  o.limits.total_timeout = seconds_to_ms(a.total);
  o.limits.threads = a.threads;
  o.preverify = !a.no_preverify;
  o.trusted_signers = trusted_signers_for_cli();
  auto identity = peer::NodeIdentity::load(a.identity);
  const auto mode = o.mode;
  if (mode == peer::TransferMode::kOff) {
    std::cerr << "serve-artifacts: warning: "
              << (a.mode.empty() ? std::string(peer::kTransferModeEnv) : std::string("--mode"))
              << " is not trusted or open: transfer is off, nothing will be offered or served\n";
  } else if (mode == peer::TransferMode::kTrusted && !identity.owner_verified()) {
    std::cerr << "serve-artifacts: warning: " << a.identity
              << "/node.crt does not verify under its owner.crt: in mode trusted no peer will be served\n";
  }

  const bool drained = peer::serve_until_signalled(identity, std::move(o), [&](const peer::ArtifactServer& server) {
    if (a.json) {
      nlohmann::json doc = {{"listening", server.endpoint()},
                            {"node_id", identity.node_id()},
                            {"owner_id", identity.owner_id()},
                            {"mode", std::string(peer::transfer_mode_name(mode))},
                            {"trusted_signers", trusted_signers_for_cli().size()}};
      std::cout << json_output(doc) << std::endl;
    } else {
      std::cout << server.endpoint() << std::endl;
    }
    std::cerr << "serve-artifacts: listening on " << server.endpoint() << " as node " << identity.node_id()
              << ", mode " << peer::transfer_mode_name(mode) << "\n";
  });
  if (!drained) {
    // A thread stuck in the kernel (a read that never returns)
    // still uses the libraries: leave at once rather than wait
    // for it or tear them down under it.
    std::cerr << "serve-artifacts: stopped (work still running after the shutdown grace was abandoned)"
              << std::endl;
    std::_Exit(kExitOk);
  }
  std::cerr << "serve-artifacts: stopped\n";
  return kExitOk;
}

// serve-artifacts's --help after its options: examples, then what it does.
constexpr const char* kServeArtifactsHelp =
    "Example:\n"
    "  MESH_LLM_ARTIFACT_TRANSFER=trusted skippy-model-package serve-artifacts --listen 0.0.0.0:7470 \\\n"
    "      --topology topology.json --identity ~/.skippy/node\n"
    "Serves, over TLS 1.3 with mutual authentication, the artifacts each stage of the topology needs (the\n"
    "manifest, metadata, its layers, embeddings and projectors for the stage starting at layer 0, output for\n"
    "the final stage, and embeddings for a final stage whose output is tied to them) from the Hugging Face\n"
    "cache ($HF_HUB_CACHE, $HF_HOME/hub, ~/.cache/huggingface/hub), each verified against the manifest.\n"
    "A package schema 2: the root, the metadata carrier to every stage, and the payload parts holding the\n"
    "stage's tensors as the consumer selects them from the verified carrier (sidecars to the stage at layer 0).\n"
    "Only hf://ns/repo@<40-hex commit> packages. --mode (else MESH_LLM_ARTIFACT_TRANSFER): trusted = peers\n"
    "of our owner or of a --trust-owner, open = any authenticated peer, off = start but offer and serve\n"
    "nothing (said on stderr). With neither, serve-artifacts refuses to start (it would serve nothing).\n"
    "Prints the bound HOST:PORT on stdout (with --json: one JSON line) once listening; one log line per\n"
    "request on stderr. Stops on SIGINT or SIGTERM, within a few seconds whatever it is doing.\n"
    "Before a peer authenticates, it has --handshake-timeout (3 s) from accept to finish the TLS handshake,\n"
    "and its connection counts against --max-unauthenticated (32) and --max-unauthenticated-per-address (8),\n"
    "never against the --max-connections (64) kept for authenticated peers.\n"
    "--trust-signer owner.crt (or SKIPPY_TRUSTED_SIGNERS / SKIPPY_TRUSTED_OWNERS) serves only a package signed\n"
    "by one of them: serve-artifacts does not start when the cached package is missing, unsigned, signed by\n"
    "another owner, expired or tampered with (the error says which), and refuses every request if its manifest\n"
    "or signature changes into one that fails. It serves model-package.json.sig and validation.json to every\n"
    "stage, like the manifest. (--trust-owner is a different question: whose NODES may talk to this one.)\n"
    "--admission STAGE_ID=FILE (repeatable, one per stage; package schema 2) makes the stage admission descriptor\n"
    "in FILE (as `select --json` prints under stage_admission) that stage's definition: it is served exactly the\n"
    "carrier, the parts holding the descriptor's tensors and its sidecars, whatever its layer range says; other\n"
    "stages keep their ranges. The package must be in the cache: each descriptor is checked against it (its\n"
    "package_id, tensors and sidecars) before anything is served, and serve-artifacts does not start otherwise.\n"
    "The worker fetches with the same descriptor: fetch hf://... --peer HOST:PORT --stage STAGE_ID --admission FILE.";

Command register_serve_artifacts(CLI::App& app) {
  auto* cmd = app.add_subcommand("serve-artifacts", "Serve package artifacts to the peers of an active split topology");
  cmd->footer(kServeArtifactsHelp);

  auto a = std::make_shared<ServeArgs>();
  cmd->add_option("--listen", a->listen, "HOST:PORT to listen on (port 0: any free port)")->required();
  path_option(cmd->add_option("--topology", a->topology, "The active split topology (JSON, see docs/CLI.md)"))->required();
  path_option(cmd->add_option("--identity", a->identity, "This node's identity directory (node.key, node.crt, owner.crt)"))->required();
  path_option(cmd->add_option("--trust-owner", a->trust_owner, "An owner certificate whose nodes are trusted too (repeatable)"));
  cmd->add_option("--max-connections", a->max_connections,
                  "Authenticated peers' connections at once; beyond: \"server busy\" (default 64)")
      ->check(CLI::Range(1u, 100000u));
  cmd->add_option("--max-connections-per-peer", a->max_per_peer, "Connections at once from one node (default 16)")
      ->check(CLI::Range(1u, 100000u));
  cmd->add_option("--max-unauthenticated", a->max_unauth,
                  "Connections still in the TLS handshake at once, kept apart from the authenticated ones (default 32)")
      ->check(CLI::Range(1u, 100000u));
  cmd->add_option("--max-unauthenticated-per-address", a->max_unauth_per_address,
                  "Of those, from one IP address; beyond, a newcomer takes the slot of that address's oldest silent one (default 8)")
      ->check(CLI::Range(1u, 100000u));
  cmd->add_option("--idle-timeout", a->idle, "Seconds without progress before a connection is closed (default 30)")
      ->check(CLI::Range(0.01, 86400.0));
  cmd->add_option("--handshake-timeout", a->handshake,
                  "Seconds from accept to a finished TLS handshake, ClientHello included (default 3)")
      ->check(CLI::Range(0.01, 86400.0));
  cmd->add_option("--request-timeout", a->request, "Seconds from accept to a complete request (default 10)")
      ->check(CLI::Range(0.01, 86400.0));
  cmd->add_option("--total-timeout", a->total, "Seconds a connection may last (default 3600)")->check(CLI::Range(0.01, 604800.0));
  cmd->add_option("--threads", a->threads, "I/O threads (default: the number of cores, at least 2)")->check(CLI::Range(0u, 256u));
  cmd->add_option("--admission", a->admission,
                  "STAGE_ID=FILE: package schema 2: that stage is the one this stage admission descriptor defines "
                  "(repeatable, one per stage)");
  cmd->add_flag("--no-preverify", a->no_preverify, "Do not verify the cached artifacts at start");
  cmd->add_option("--mode", a->mode,
                  "Who is served: trusted (peers of our owner or of a --trust-owner), open (any authenticated "
                  "peer) or off (nothing); default: MESH_LLM_ARTIFACT_TRANSFER, and without it no start")
      ->check(CLI::IsMember({"off", "trusted", "open"}));
  cmd->add_flag("--json", a->json, "Print one JSON line on stdout once listening");
  add_trust_signer_option(cmd);
  return {cmd, [a]() { return run_serve_artifacts(*a); }};
}

}  // namespace skippy::cli
