#include "hub/xet_cas.h"

#include <cctype>
#include <chrono>
#include <nlohmann/json.hpp>

#include "hub/hub_status.h"
#include "skippy/error.h"

namespace skippy::detail {

namespace {

using nlohmann::json;

// A token this close to its expiry is renewed before use.
constexpr int64_t kTokenMarginSecs = 60;

int64_t now_secs() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string strip_slash(std::string u) {
  while (!u.empty() && u.back() == '/') u.pop_back();
  return u;
}

XetToken checked_token(std::string access, std::string cas_url, int64_t exp, const std::string& what) {
  if (access.empty() || access.size() > 8192 || access.find_first_of(std::string("\r\n\0 ", 4)) != std::string::npos) {
    throw_invalid(what + ": the Xet access token is empty or unusable");
  }
  if (!is_http_url(cas_url)) throw_invalid(what + ": the Xet casUrl is not an http(s) URL: " + cas_url.substr(0, 120));
  return {std::move(access), strip_slash(std::move(cas_url)), exp};
}

}  // namespace

XetClientConfig xet_client_config(const HubConfig& hub) {
  return {hub.endpoint, hub.token, {hub.max_attempts, hub.backoff_ms}, hub.min_rate_bytes_per_sec, hub.min_rate_secs};
}

std::optional<XetToken> xet_token_from_action(const json& upload_action) {
  std::string cas_url, access_token, expiration;
  if (!upload_action.is_object() || !upload_action.contains("header") || !upload_action["header"].is_object()) return std::nullopt;
  for (auto it = upload_action["header"].begin(); it != upload_action["header"].end(); ++it) {
    if (!it->is_string()) continue;
    std::string k = it.key();
    for (auto& c : k) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (k == "x-xet-cas-url") cas_url = it->get<std::string>();
    if (k == "x-xet-access-token") access_token = it->get<std::string>();
    if (k == "x-xet-token-expiration") expiration = it->get<std::string>();
  }
  if (cas_url.empty() || access_token.empty()) return std::nullopt;
  int64_t exp = 0;
  try {
    exp = expiration.empty() ? 0 : std::stoll(expiration);
  } catch (const std::exception&) {
    exp = 0;
  }
  return checked_token(access_token, cas_url, exp, "the LFS batch's Xet headers");
}

XetToken XetCas::parse_token(const std::string& body, const std::string& what) {
  json j;
  try {
    j = json::parse(body);
  } catch (const std::exception& e) {
    throw_invalid(what + ": the answer is not JSON (" + e.what() + ")");
  }
  if (!j.is_object() || !j.contains("accessToken") || !j["accessToken"].is_string() || !j.contains("casUrl") ||
      !j["casUrl"].is_string()) {
    throw_invalid(what + ": the answer has no accessToken and casUrl");
  }
  const int64_t exp = j.contains("exp") && j["exp"].is_number_integer() ? j["exp"].get<int64_t>() : 0;
  return checked_token(j["accessToken"].get<std::string>(), j["casUrl"].get<std::string>(), exp, what);
}

XetCas::XetCas(XetCasConfig cfg, std::optional<XetToken> first) : cfg_(std::move(cfg)) {
  if (first) token_ = *first;
}

XetToken XetCas::fetch_token(const std::string& what) const {
  HttpRequest req;
  req.url = cfg_.client.endpoint + "/api/models/" + cfg_.repo + "/xet-write-token/" + url_encode(cfg_.branch, false);
  req.headers = {"Accept-Encoding: identity"};
  if (cfg_.client.hub_token) req.headers.push_back("Authorization: Bearer " + *cfg_.client.hub_token);
  req.max_body = size_t{64} << 10;
  const auto r = perform_with_retries(req, cfg_.client.policy, what, "is " + cfg_.client.endpoint + " reachable?");
  if (r.status != 200) throw_hub_status(r, what + ": the Hub answered HTTP " + std::to_string(r.status) + reason_tail(r));
  return parse_token(r.body, what);
}

// The token to use: the one in hand unless it is about to expire, or
// `refresh` asks for a new one and nobody renewed `seen` meanwhile.
XetToken XetCas::token(bool refresh, const std::string& seen) {
  std::lock_guard g(mu_);
  const bool stale = token_.access_token.empty() || (token_.exp > 0 && token_.exp - kTokenMarginSecs <= now_secs());
  if (stale || (refresh && token_.access_token == seen)) {
    token_ = fetch_token("hf://" + cfg_.repo + "@" + cfg_.branch + ": asking the Hub for a Xet write token");
  }
  return token_;
}

XetCas::Answer XetCas::send(const std::string& method, const std::string& path, std::string body,
                            const std::string& what, size_t max_answer) {
  XetToken t = token(false, "");
  for (int round = 0;; ++round) {
    HttpRequest req;
    req.method = method;
    req.url = t.cas_url + path;
    req.headers = {"Accept-Encoding: identity", "Authorization: Bearer " + t.access_token};
    if (method == "POST") req.headers.push_back("Content-Type: application/octet-stream");
    req.body = std::move(body);  // one copy of a xorb in flight, taken back for the second round
    req.max_body = max_answer;
    req.min_rate_bytes_per_sec = cfg_.client.min_rate_bytes_per_sec;
    req.min_rate_secs = cfg_.client.min_rate_secs;
    const auto r = perform_with_retries(req, cfg_.client.policy, what, "is the Xet CAS " + t.cas_url + " reachable?");
    if (r.status == 401 && round == 0) {
      body = std::move(req.body);
      t = token(true, t.access_token);  // expired: one fresh token, then the CAS decides
      continue;
    }
    if (r.status == 401 || r.status == 403) {
      throw_hub_error(r, ErrorKind::kUnauthorized,
                      what + ": the Xet CAS refused the access token (HTTP " + std::to_string(r.status) + ")" +
                          (round ? " even after a fresh one" : "") + reason_tail(r));
    }
    return {r.status, r.body};
  }
}

bool XetCas::upload_xorb(const xet::Hash& hash, std::span<const uint8_t> bytes, const std::string& what) {
  const std::string w = what + ": storing xorb " + hash.to_hex();
  const auto a = send("POST", "/v1/xorbs/default/" + hash.to_hex(), std::string(bytes.begin(), bytes.end()), w, 1 << 16);
  if (a.status != 200) {
    HttpResponse r{a.status, {}, a.body, a.body.size()};
    throw_hub_error(r, ErrorKind::kTransport, w + ": the Xet CAS answered HTTP " + std::to_string(a.status) + reason_tail(r));
  }
  try {
    const json j = json::parse(a.body);
    return j.is_object() && j.contains("was_inserted") && j["was_inserted"].is_boolean() ? j["was_inserted"].get<bool>()
                                                                                          : true;
  } catch (const std::exception&) {
    return true;  // stored; the answer's wording is the CAS's business
  }
}

// The terminal frame of a POST /v2/shards answer (NDJSON: progress frames,
// the CAS repeating the last one as a heartbeat, then {"type":"result"} or
// {"type":"error","message","retryable"}), as xet-core's
// read_shard_upload_ndjson reads it: nullopt for a result, else the refusal.
namespace {
struct ShardRefusal {
  std::string message;
  bool retryable = false;
};
std::optional<ShardRefusal> shard_stream_outcome(const std::string& body) {
  size_t at = 0;
  while (at < body.size()) {
    size_t nl = body.find('\n', at);
    if (nl == std::string::npos) nl = body.size();
    const std::string line = body.substr(at, nl - at);
    at = nl + 1;
    if (line.find_first_not_of(" \r\t") == std::string::npos) continue;
    json j;
    try {
      j = json::parse(line);
    } catch (const std::exception&) {
      return ShardRefusal{"the CAS's answer is not NDJSON: " + line.substr(0, 120), false};
    }
    const std::string type = j.is_object() && j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>() : "";
    if (type == "result") return std::nullopt;
    if (type == "error") {
      ShardRefusal r;
      r.message = j.contains("message") && j["message"].is_string() ? j["message"].get<std::string>() : "no reason given";
      r.retryable = j.contains("retryable") && j["retryable"].is_boolean() && j["retryable"].get<bool>();
      return r;
    }
  }
  return ShardRefusal{"the answer ended without a result or error frame", true};
}
}  // namespace

void XetCas::upload_shard(std::span<const uint8_t> bytes, const std::string& what) {
  const std::string w = what + ": registering the files (Xet shard)";
  const std::string body(bytes.begin(), bytes.end());
  // v2 streams progress while the CAS validates (a heartbeat every ~20 s),
  // so a long validation never trips the stall deadline v1's silence can;
  // v1 where the CAS has no v2 (404/501), as xet-core falls back.
  for (unsigned attempt = 0;; ++attempt) {
    const bool v2 = !shards_v1_;
    const auto a = send("POST", v2 ? "/v2/shards" : "/v1/shards", body, w, size_t{1} << 20);
    if (v2 && (a.status == 404 || a.status == 501)) {
      shards_v1_ = true;
      continue;
    }
    HttpResponse r{a.status, {}, a.body, a.body.size()};
    if (a.status != 200) {
      throw_hub_error(r, a.status >= 500 ? ErrorKind::kTransport : ErrorKind::kInvalidInput,
                      w + ": the Xet CAS refused it (HTTP " + std::to_string(a.status) + ")" + reason_tail(r));
    }
    if (!v2) return;
    const auto refused = shard_stream_outcome(a.body);
    if (!refused) return;
    if (!refused->retryable || attempt + 1 >= std::max(1u, cfg_.client.policy.max_attempts)) {
      throw Error(refused->retryable ? ErrorKind::kTransport : ErrorKind::kInvalidInput,
                  w + ": the Xet CAS refused it: " + refused->message);
    }
    pause_before_retry(cfg_.client.policy, attempt, nullptr, w, refused->message);
  }
}

bool XetCas::has_xorb(const xet::Hash& xorb, const std::string& what) {
  try {
    return send("HEAD", "/v1/xorbs/default/" + xorb.to_hex(), "", what + ": is xorb " + xorb.to_hex() + " stored?", 1 << 16)
               .status == 200;
  } catch (const Error&) {
    return false;
  }
}

std::optional<std::vector<uint8_t>> XetCas::query_chunk(const xet::Hash& chunk, const std::string& what) {
  const std::string w = what + ": global dedupe query";
  const auto a = send("GET", "/v1/chunks/default/" + chunk.to_hex(), "", w, size_t{64} << 20);
  if (a.status == 404) return std::nullopt;
  if (a.status != 200) {
    HttpResponse r{a.status, {}, a.body, a.body.size()};
    throw_hub_error(r, ErrorKind::kTransport, w + ": the Xet CAS answered HTTP " + std::to_string(a.status) + reason_tail(r));
  }
  return std::vector<uint8_t>(a.body.begin(), a.body.end());
}

}  // namespace skippy::detail
