// A client of a Xet CAS (hub-docs docs/xet/api.md, upload-protocol.md,
// auth.md): the write token, xorb and shard uploads, and the global dedupe
// query. Internal to the hub library; xet_upload.h drives it.
//
//   token   GET {endpoint}/api/models/{repo}/xet-write-token/{branch} with the
//           Hub token -> {accessToken, exp, casUrl}; or the X-Xet-* headers of
//           an LFS batch answer that chose transfer "xet". Refreshed before it
//           expires, and once when the CAS answers 401 (a second 401 is
//           Error(kUnauthorized)).
//   xorb    POST {casUrl}/v1/xorbs/default/{hash}   the serialized xorb
//   shard   POST {casUrl}/v2/shards                 the upload shard (NDJSON
//           progress, then a result or error frame; /v1/shards when the CAS
//           answers v2 with 404/501, as xet-core does)
//   dedupe  GET  {casUrl}/v1/chunks/default/{hash}  404, or a shard whose CAS
//           section lists xorbs holding that chunk (chunk hashes keyed with
//           the footer's HMAC key)
// Every request has the Hub client's deadlines (connect, stall, the minimum
// rate for bodies), is retried on 429/5xx and dropped connections (each
// retry reported: retry.h), and a refusal names the CAS's own reason. The
// access token goes to the CAS only; the Hub token to the Hub only.
//
// Thread-safety: a XetCas may be used from several threads at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hub/retry.h"
#include "skippy/hub.h"
#include "xet/hash.h"

namespace skippy::detail {

struct XetToken {
  std::string access_token;
  std::string cas_url;  // no trailing '/'
  int64_t exp = 0;      // unix seconds; 0: unknown
};

// The X-Xet-Cas-Url / X-Xet-Access-Token / X-Xet-Token-Expiration entries
// of an LFS batch upload action's header object (names in any case), when it
// has the first two; nullopt otherwise (the token is then asked for).
std::optional<XetToken> xet_token_from_action(const nlohmann::json& upload_action);

// How the Xet clients (uploads here, downloads in xet_download.h, the
// source's reconstruction in xet_source_index.h) reach the Hub and the CAS:
// the Hub client's endpoint, token, retries and minimum rate.
struct XetClientConfig {
  std::string endpoint;  // HF_ENDPOINT, no trailing '/'
  std::optional<std::string> hub_token;
  RetryPolicy policy;
  uint64_t min_rate_bytes_per_sec = 0;
  unsigned min_rate_secs = 30;
};
// The one a HubConfig gives.
XetClientConfig xet_client_config(const HubConfig& hub);

// An upload's: where it goes.
struct XetCasConfig {
  XetClientConfig client;
  std::string repo;  // "ns/name"
  std::string branch;
};

class XetCas {
 public:
  // `first`: a token already in hand (the LFS batch's), else one is asked for.
  XetCas(XetCasConfig cfg, std::optional<XetToken> first);

  // Stores a xorb; false when the CAS had it already. `what` names the file.
  bool upload_xorb(const xet::Hash& hash, std::span<const uint8_t> bytes, const std::string& what);
  void upload_shard(std::span<const uint8_t> bytes, const std::string& what);
  // Whether the CAS still holds `xorb` (HEAD /v1/xorbs/default/{hash}: not
  // in the published API, which has no existence check; a CAS without it,
  // or any failure, answers false, and the caller sends the xorb).
  bool has_xorb(const xet::Hash& xorb, const std::string& what);
  // The CAS's dedupe shard for `chunk`, or nullopt when it knows no xorb
  // holding it.
  std::optional<std::vector<uint8_t>> query_chunk(const xet::Hash& chunk, const std::string& what);

  // The GET xet-write-token answer, parsed (exposed for tests).
  static XetToken parse_token(const std::string& body, const std::string& what);

 private:
  XetToken token(bool refresh, const std::string& seen);
  XetToken fetch_token(const std::string& what) const;
  struct Answer {
    long status = 0;
    std::string body;
  };
  Answer send(const std::string& method, const std::string& path, std::string body, const std::string& what,
              size_t max_answer);

  XetCasConfig cfg_;
  std::atomic<bool> shards_v1_{false};  // the CAS has no /v2/shards
  std::mutex mu_;
  XetToken token_;
};

}  // namespace skippy::detail
