// Transfer modes and who is trusted (skippy/peer.h).
#include <algorithm>
#include <cstdlib>

#include "util/env.h"
#include "skippy/peer.h"

namespace skippy::peer {

TransferMode parse_transfer_mode(std::string_view value) noexcept {
  std::string v(value);
  for (auto& c : v) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  for (const char* open : {"1", "true", "on", "yes", "open", "any", "public"}) {
    if (v == open) return TransferMode::kOpen;
  }
  for (const char* trusted : {"trusted", "trust", "owner", "owners", "same-owner", "allowlist"}) {
    if (v == trusted) return TransferMode::kTrusted;
  }
  return TransferMode::kOff;
}

TransferMode transfer_mode_from_env() noexcept {
  const auto v = env::get(kTransferModeEnv);
  return v ? parse_transfer_mode(*v) : TransferMode::kOff;
}

std::string_view transfer_mode_name(TransferMode m) noexcept {
  switch (m) {
    case TransferMode::kOff: return "off";
    case TransferMode::kTrusted: return "trusted";
    case TransferMode::kOpen: return "open";
  }
  return "off";
}

bool peer_trusted(const PeerTrust& trust, const NodeIdentity& local, const PeerInfo& peer) {
  switch (trust.mode) {
    case TransferMode::kOff: return false;
    case TransferMode::kOpen: return true;
    case TransferMode::kTrusted:
      // Both owners verified; the peer's is ours or one we were told to trust.
      if (!local.owner_verified() || !peer.owner_verified || peer.owner_id.empty()) return false;
      return peer.owner_id == local.owner_id() ||
             std::find(trust.trusted_owner_ids.begin(), trust.trusted_owner_ids.end(), peer.owner_id) !=
                 trust.trusted_owner_ids.end();
  }
  return false;
}

std::string_view refusal_text(Refusal r) noexcept {
  switch (r) {
    case Refusal::kDisabled: return "artifact transfer disabled";
    case Refusal::kUnavailable: return "artifact unavailable";
    case Refusal::kInvalidOffset: return "invalid transfer offset";
    case Refusal::kBusy: return "server busy";
  }
  return "artifact unavailable";
}

}  // namespace skippy::peer
