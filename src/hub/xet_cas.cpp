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
  req.url = cfg_.endpoint + "/api/models/" + cfg_.repo + "/xet-write-token/" + url_encode(cfg_.branch, false);
  req.headers = {"Accept-Encoding: identity"};
  if (cfg_.hub_token) req.headers.push_back("Authorization: Bearer " + *cfg_.hub_token);
  req.max_body = size_t{64} << 10;
  const auto r = perform_with_retries(req, cfg_.policy, what, "is " + cfg_.endpoint + " reachable?");
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
    req.min_rate_bytes_per_sec = cfg_.min_rate_bytes_per_sec;
    req.min_rate_secs = cfg_.min_rate_secs;
    const auto r = perform_with_retries(req, cfg_.policy, what, "is the Xet CAS " + t.cas_url + " reachable?");
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

void XetCas::upload_shard(std::span<const uint8_t> bytes, const std::string& what) {
  const std::string w = what + ": registering the files (Xet shard)";
  const auto a = send("POST", "/v1/shards", std::string(bytes.begin(), bytes.end()), w, 1 << 16);
  if (a.status != 200) {
    HttpResponse r{a.status, {}, a.body, a.body.size()};
    throw_hub_error(r, a.status >= 500 ? ErrorKind::kTransport : ErrorKind::kInvalidInput,
                    w + ": the Xet CAS refused it (HTTP " + std::to_string(a.status) + ")" + reason_tail(r));
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
