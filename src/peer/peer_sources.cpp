// A worker's source chain, cache -> peer -> fallback (skippy/peer.h:
// make_peer_sources): what `fetch --peer` and the C API share.
#include "util/env.h"
#include "skippy/peer.h"

namespace skippy::peer {

PeerSources make_peer_sources(const HfRef& ref, const PeerSourcesOptions& o, std::vector<std::shared_ptr<Remote>> fallback) {
  const std::string topology_name = o.topology_file.string();
  const auto commit = pinned_commit(o.topology.package_ref);
  if (!commit) {
    throw Error(ErrorKind::kInvalidInput, topology_name + ": package_ref " + o.topology.package_ref +
                                              " does not pin a commit (hf://ns/repo@<40-hex commit>)");
  }
  const HfRef topo_ref = parse_hf_ref(o.topology.package_ref);
  if (topo_ref.repo_id != ref.repo_id || (is_commit_hash(ref.revision) && ref.revision != *commit)) {
    throw Error(ErrorKind::kUsage, ref.text() + " is not the topology's package (" + topology_name + ": " +
                                       o.topology.package_ref + ")");
  }
  PeerSources out;
  auto identity = NodeIdentity::load(o.identity_dir);
  PeerTrust trust;
  // Asking a peer is the opt-in: the server must be of our owner or a
  // trusted owner (trusted), unless MESH_LLM_ARTIFACT_TRANSFER=open says
  // any node will do.
  trust.mode = transfer_mode_from_env() == TransferMode::kOpen ? TransferMode::kOpen : TransferMode::kTrusted;
  for (const auto& cert : o.trusted_owner_certs) trust.trusted_owner_ids.push_back(owner_id_of_certificate(cert));
  if (trust.mode == TransferMode::kTrusted && !identity.owner_verified()) {
    out.warnings.push_back(o.identity_dir.string() + "/node.crt does not verify under its owner.crt: no peer is trusted (set " +
                           kTransferModeEnv + "=open to accept any node)");
  }
  ClientOptions co;
  co.connect_timeout = o.connect_timeout;
  co.idle_timeout = o.idle_timeout;
  co.min_rate = o.min_rate ? *o.min_rate : env::peer_min_rate();
  co.rate_window = o.rate_window ? *o.rate_window : std::chrono::milliseconds(env::peer_rate_window_ms());
  PeerRemoteOptions po;
  po.endpoint = o.endpoint;
  po.topology = o.topology;
  po.stage_id = o.stage_id;
  out.sources.hf_cache = env::hf_hub_cache_dir();
  out.sources.offline = env::hf_hub_offline();
  out.sources.remotes.push_back(make_peer_remote(PeerClient(std::move(identity), std::move(trust), co), std::move(po)));
  if (!out.sources.offline) {
    for (auto& r : fallback) out.sources.remotes.push_back(std::move(r));
  }
  return out;
}

}  // namespace skippy::peer
