// What hub_stream.cpp (StreamedHubSource) asks of the Hub's protocol in
// hub.cpp. Internal.
#pragma once

#include <cstdint>
#include <string>

#include "hub/ranged_fetch.h"
#include "skippy/hub.h"
#include "skippy/source.h"

namespace skippy::detail {

// GET /api/models/{repo}/revision/{revision}?blobs=true, as the Hub remote lists.
RemoteListing list_hub_repo(const HubConfig& config, const std::string& repo, const std::string& revision);

// HEADs repo@commit:want.path (its size and SHA-256 must be what `want`
// declares), then brings the ranges target.missing() lists over `pool`, in
// ranges of range_bytes, through fetch_ranges. Throws Error(kTransport)
// when the storage ignores Range.
void fetch_hub_ranges(const HubConfig& config, const std::string& repo, const std::string& commit, const RemoteFile& want,
                      RangeTarget& target, ConnectionPool& pool, uint64_t range_bytes);

}  // namespace skippy::detail
