// Below PeerClient::fetch: sends a wire request exactly as given (the
// requester id included). PeerClient::fetch fills the requester with its own
// node id; tests use this to play a client that claims to be someone else.
// Internal to src/peer.
#pragma once

#include <string_view>

#include "peer/protocol.h"
#include "skippy/peer.h"

namespace skippy::peer::detail {

TransferAnswer fetch_wire(const PeerClient& client, std::string_view endpoint, const wire::Request& request,
                          const TransferSink& sink);

}  // namespace skippy::peer::detail
