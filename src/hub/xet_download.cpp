#include "hub/xet_download.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <span>

#include "hub/http.h"
#include "hub/hub_status.h"
#include "hub/ranged_fetch.h"
#include "hub/xet_reconstruction.h"
#include "skippy/error.h"
#include "util/env.h"
#include "xet/xorb.h"

namespace skippy::detail {

namespace {

// A read token this close to its expiry is renewed before use.
constexpr int64_t kReadTokenMarginSecs = 30;
// A reconstruction answer larger than this is refused (a 64 MiB range needs a few KiB).
constexpr size_t kMaxReconstructionBody = size_t{16} << 20;
// Fresh reconstructions asked for in a row, without a byte gained, because
// storage refused the signed URLs, before Xet is given up for the file.
constexpr unsigned kMaxUrlRefreshes = 3;
// After a fallback, how long the process leaves Xet downloads alone.
constexpr auto kXetPause = std::chrono::minutes(10);

// Why Xet cannot serve a file, when that is not about its bytes: the caller
// falls back to the resolve URL.
struct XetUnavailable {
  std::string why;
};

int64_t xet_dl_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

bool xet_dl_is_hash(const std::string& s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// `message` without a leading "<what>: " (the note names the file itself).
std::string xet_dl_reason(const std::string& message, const std::string& what) {
  return message.starts_with(what + ": ") ? message.substr(what.size() + 2) : message;
}

// The process-wide pause after a fallback: one note, then the resolve URL
// for every file until it ends.
struct XetPauseState {
  std::mutex mu;
  std::optional<std::chrono::steady_clock::time_point> until;
};
XetPauseState& xet_pause_state() {
  static XetPauseState s;
  return s;
}

bool xet_dl_paused() {
  auto& s = xet_pause_state();
  std::lock_guard g(s.mu);
  return s.until && std::chrono::steady_clock::now() < *s.until;
}

void xet_dl_give_up(const std::string& what, const std::string& why) {
  auto& s = xet_pause_state();
  std::lock_guard g(s.mu);
  const auto now = std::chrono::steady_clock::now();
  const bool said = s.until && now < *s.until;
  s.until = now + kXetPause;
  if (said) return;
  std::fprintf(stderr, "%snote: %s: not downloaded through Xet storage (%s); the resolve URL serves it, and every file for the next %d minutes\n",
               ::isatty(2) == 1 ? "\r\033[K" : "", what.c_str(), why.c_str(),
               static_cast<int>(std::chrono::duration_cast<std::chrono::minutes>(kXetPause).count()));
  std::fflush(stderr);
}

// The URL of the Link header's entry with rel `rel` ("" when none).
std::string xet_link_url(const std::string& link, const std::string& rel) {
  size_t i = 0;
  while ((i = link.find('<', i)) != std::string::npos) {
    const size_t close = link.find('>', i);
    if (close == std::string::npos) return "";
    const size_t next = link.find('<', close);
    const std::string params = link.substr(close + 1, next == std::string::npos ? std::string::npos : next - close - 1);
    if (params.find("rel=\"" + rel + "\"") != std::string::npos) return link.substr(i + 1, close - i - 1);
    i = close + 1;
  }
  return "";
}

// Where the file's bytes go: skip the first `skip`, write the rest at `pos`
// until `end`.
struct XetCursor {
  uint64_t& pos;
  uint64_t end;
  uint64_t skip;
  RangeTarget& target;
  const std::atomic<bool>& stop;

  void emit(std::span<const uint8_t> data) {
    const size_t dropped = static_cast<size_t>(std::min<uint64_t>(skip, data.size()));
    data = data.subspan(dropped);
    skip -= dropped;
    if (data.empty() || pos >= end) return;
    data = data.first(static_cast<size_t>(std::min<uint64_t>(data.size(), end - pos)));
    target.write_at(pos, data);
    pos += data.size();
  }
};

struct XetStepResult {
  enum Kind { kOk, kRetry, kRefresh } kind = kOk;
  std::string failure;
  std::optional<HttpResponse> answer;  // for its Retry-After
};

// One GET of a fetch range: its chunks decoded as they arrive, the terms
// [step.first_term, step.last_term) checked and delivered to `cur`.
XetStepResult read_xorb_range(HttpConnection& conn, const XetClientConfig& cfg, const XetReconstruction& rec,
                              const XetFetchStep& step, XetCursor& cur) {
  const std::string& what = cur.target.what();
  const XetFetchRange& f = *step.range;
  const std::string range = std::to_string(f.byte_first) + "-" + std::to_string(f.byte_last);
  const uint64_t length = f.byte_last - f.byte_first + 1;
  const std::string xorb = "xorb " + rec.terms[step.first_term].xorb + " bytes " + range;
  HttpRequest req;
  req.url = f.url;
  req.headers = {"Accept-Encoding: identity", "Range: bytes=" + range};
  req.min_rate_bytes_per_sec = cfg.min_rate_bytes_per_sec;
  req.min_rate_secs = cfg.min_rate_secs;
  xet::ChunkRangeDecoder dec(xorb);
  uint32_t chunk = f.chunk_start;
  size_t term = step.first_term;
  uint64_t term_bytes = 0, got = 0;
  bool finished = false, in_callback = false, ignores_range = false;
  std::optional<Error> sink_error;
  std::string bad_answer;
  auto lie = [&](const XetTerm& t, const std::string& problem) {
    in_callback = true;
    throw Error(ErrorKind::kIntegrity, what + ": term " + std::to_string(term) + " of the Xet reconstruction (xorb " + t.xorb +
                                           " chunks [" + std::to_string(t.chunk_start) + ", " +
                                           std::to_string(t.chunk_end) + ")) " + problem);
  };
  const auto on_chunk = [&](std::span<const uint8_t> data) {
    if (finished) return;  // past the step's last term
    const uint32_t index = chunk++;
    const XetTerm& t = rec.terms[term];
    if (index < t.chunk_start) return;  // before the term (or between two terms)
    term_bytes += data.size();
    if (term_bytes > t.unpacked) lie(t, "unpacks to more than the " + std::to_string(t.unpacked) + " bytes it says");
    try {
      cur.emit(data);
    } catch (...) {
      in_callback = true;
      throw;
    }
    if (index + 1 == t.chunk_end) {
      if (term_bytes != t.unpacked) {
        lie(t, "unpacks to " + std::to_string(term_bytes) + " bytes, not the " + std::to_string(t.unpacked) + " it says");
      }
      term_bytes = 0;
      finished = ++term == step.last_term;
    }
  };
  req.on_start = [&](long status, const std::map<std::string, std::string>& h) {
    const auto it = h.find("content-range");
    ignores_range = status == 200;
    if (status != 206 || it == h.end() || !it->second.starts_with("bytes " + range + "/")) {
      bad_answer = "the Xet storage answered HTTP " + std::to_string(status) + " (" +
                   (it == h.end() ? std::string("no Content-Range") : it->second.substr(0, 80)) + ") for bytes=" + range;
      return false;
    }
    return true;
  };
  req.sink = [&](std::span<const uint8_t> data) {
    if (cur.stop) return false;
    got += data.size();
    try {
      dec.feed(data, on_chunk);
    } catch (const Error& e) {
      sink_error = in_callback ? e
                               : Error(ErrorKind::kIntegrity,
                                       what + ": the Xet storage sent bytes that are not the xorb's chunks: " + e.what());
      return false;
    }
    return !(finished && got < length);  // the rest holds no chunk this step needs
  };
  const auto res = conn.perform(req);
  if (sink_error) throw *sink_error;
  if (finished || cur.stop) return {};
  if (ignores_range) throw XetUnavailable{"the Xet storage ignores Range requests (HTTP 200 for bytes=" + range + ")"};
  if (!bad_answer.empty()) return {XetStepResult::kRetry, bad_answer, std::nullopt};
  if (res.error) {
    if (!res.error->retryable) throw XetUnavailable{res.error->message};
    return {XetStepResult::kRetry, res.error->message, std::nullopt};
  }
  const HttpResponse& r = *res.response;
  if (r.status == 206) {
    if (got >= length) {
      // Every byte arrived and the terms are still not whole.
      try {
        dec.finish();
      } catch (const Error& e) {
        throw Error(ErrorKind::kIntegrity, what + ": the Xet storage sent bytes that are not the xorb's chunks: " + e.what());
      }
      throw Error(ErrorKind::kIntegrity, what + ": " + xorb + " holds " + std::to_string(dec.chunks()) +
                                             " chunks, fewer than the Xet reconstruction's terms need");
    }
    return {XetStepResult::kRetry, "a xorb range ended after " + std::to_string(got) + " of " + std::to_string(length) + " bytes",
            std::nullopt};
  }
  if (storage_url_may_have_expired(r.status)) {
    return {XetStepResult::kRefresh, "the Xet storage answered HTTP " + std::to_string(r.status) + reason_tail(r), std::nullopt};
  }
  if (retry_status(r.status)) return {XetStepResult::kRetry, "HTTP " + std::to_string(r.status) + reason_tail(r), r};
  throw XetUnavailable{"the Xet storage answered HTTP " + std::to_string(r.status) + reason_tail(r) + " for " + xorb};
}

}  // namespace

std::optional<XetFileRef> xet_file_ref(const HttpResponse& head, const std::string& endpoint, const std::string& repo,
                                       const std::string& commit) {
  if (env::hf_hub_disable_xet()) return std::nullopt;
  const auto hash = head.header("x-xet-hash");
  if (!hash || hash->empty()) return std::nullopt;
  XetFileRef ref{*hash, ""};
  const auto route = head.header("x-xet-refresh-route");
  const auto link = head.header("link");
  if (route && route->starts_with("/") && is_hub_api_url(endpoint, endpoint + *route)) {
    ref.token_url = endpoint + *route;
  } else if (link) {
    const std::string u = xet_link_url(*link, "xet-auth");
    if (!u.empty() && is_hub_api_url(endpoint, follow_location(endpoint + "/", u).url)) {
      ref.token_url = follow_location(endpoint + "/", u).url;
    }
  }
  if (ref.token_url.empty()) ref.token_url = endpoint + "/api/models/" + repo + "/xet-read-token/" + url_encode(commit, false);
  return ref;
}

std::shared_ptr<XetRangeSource> make_xet_source(const std::optional<XetFileRef>& ref, const HubConfig& hub, uint64_t size) {
  if (!ref) return nullptr;
  return std::make_shared<XetRangeSource>(*ref, xet_client_config(hub), size);
}

XetRangeSource::XetRangeSource(XetFileRef ref, XetClientConfig cfg, uint64_t size)
    : ref_(std::move(ref)), cfg_(std::move(cfg)), size_(size) {}

XetRangeSource::Outcome XetRangeSource::fetch(HttpConnection& conn, uint64_t& pos, uint64_t end, RangeTarget& target,
                                              const std::atomic<bool>& stop) {
  if (off_ || xet_dl_paused()) return Outcome::kFallback;
  try {
    run(conn, pos, end, target, stop);
  } catch (const XetUnavailable& u) {
    if (stop) return Outcome::kStopped;
    if (!off_.exchange(true)) xet_dl_give_up(target.what(), xet_dl_reason(u.why, target.what()));
    return Outcome::kFallback;
  }
  return pos >= end ? Outcome::kDone : Outcome::kStopped;
}

void XetRangeSource::run(HttpConnection& conn, uint64_t& pos, uint64_t end, RangeTarget& target,
                         const std::atomic<bool>& stop) {
  const std::string& what = target.what();
  if (!xet_dl_is_hash(ref_.hash)) throw XetUnavailable{"its X-Xet-Hash \"" + ref_.hash.substr(0, 80) + "\" is not a Xet file id"};
  unsigned failures = 0, refreshes = 0;
  while (pos < end && !stop) {
    const uint64_t before = pos;
    const XetReconstruction rec = reconstruction(pos, end, what);
    const auto plan = plan_xet_fetches(rec, end - pos, what);
    XetCursor cur{pos, end, rec.offset_into_first_range, target, stop};
    XetStepResult res;
    for (const auto& step : plan) {
      if (pos >= end || stop) break;
      res = read_xorb_range(conn, cfg_, rec, step, cur);
      if (res.kind != XetStepResult::kOk) break;
    }
    if (res.kind == XetStepResult::kOk) {
      if (pos < end && !stop) {
        throw Error(ErrorKind::kIntegrity, what + ": the Xet reconstruction delivered bytes " + std::to_string(before) +
                                               "-" + std::to_string(pos) + " of " + std::to_string(before) + "-" +
                                               std::to_string(end) + " and ended");
      }
      return;
    }
    if (pos > before) refreshes = 0;
    if (res.kind == XetStepResult::kRefresh) {
      if (++refreshes > kMaxUrlRefreshes) throw XetUnavailable{res.failure + " (also for fresh signed URLs)"};
      continue;
    }
    if (++failures >= std::max(1u, cfg_.policy.max_attempts)) {
      throw XetUnavailable{"xorb ranges failed " + std::to_string(failures) + " times: " + res.failure};
    }
    pause_before_retry(cfg_.policy, failures - 1, res.answer ? &*res.answer : nullptr,
                       what + " (Xet, bytes " + std::to_string(pos) + "-" + std::to_string(end - 1) + ")", res.failure);
  }
}

std::vector<XetTerm> XetRangeSource::file_terms(const std::string& what) {
  // A few KiB of terms per 64 MiB xorb: 16 GiB asks for well under a MiB.
  constexpr uint64_t kTermPage = uint64_t{16} << 30;
  std::vector<XetTerm> out;
  try {
    if (!xet_dl_is_hash(ref_.hash)) throw XetUnavailable{"its X-Xet-Hash \"" + ref_.hash.substr(0, 80) + "\" is not a Xet file id"};
    for (uint64_t pos = 0; pos < size_;) {
      XetReconstruction rec = reconstruction(pos, std::min(size_, pos + kTermPage), what);
      if (rec.offset_into_first_range != 0 || rec.terms.empty()) {
        throw Error(ErrorKind::kIntegrity, what + ": the Xet reconstruction from byte " + std::to_string(pos) +
                                               (rec.terms.empty() ? " has no terms" : " starts inside a chunk"));
      }
      for (auto& t : rec.terms) {
        pos += t.unpacked;
        out.push_back(std::move(t));
      }
    }
  } catch (const XetUnavailable& u) {
    throw Error(ErrorKind::kTransport, what + ": " + xet_dl_reason(u.why, what));
  }
  uint64_t total = 0;
  for (const auto& t : out) total += t.unpacked;
  if (total != size_) {
    throw Error(ErrorKind::kIntegrity, what + ": the Xet reconstruction's terms hold " + std::to_string(total) +
                                           " bytes, the file has " + std::to_string(size_));
  }
  return out;
}

XetReconstruction XetRangeSource::reconstruction(uint64_t pos, uint64_t end, const std::string& what) {
  const std::string range = "bytes=" + std::to_string(pos) + "-" + std::to_string(end - 1);
  bool renewed = false;
  std::string seen;
  for (;;) {
    const XetToken t = token(renewed, seen, what);
    const int version = v1_ ? 1 : 2;
    HttpRequest req;
    req.url = t.cas_url + (version == 2 ? "/v2/reconstructions/" : "/v1/reconstructions/") + ref_.hash;
    req.headers = {"Accept-Encoding: identity", "Authorization: Bearer " + t.access_token, "Range: " + range};
    req.max_body = kMaxReconstructionBody;
    HttpResponse r;
    try {
      r = perform_with_retries(req, cfg_.policy, what + " (Xet reconstruction of " + range + ")",
                               "is the Xet CAS " + t.cas_url + " reachable?");
    } catch (const Error& e) {
      throw XetUnavailable{xet_dl_reason(e.what(), what)};
    }
    if (r.status == 200 || r.status == 206) {
      try {
        return parse_xet_reconstruction(r.body, version, what);
      } catch (const Error& e) {
        throw XetUnavailable{xet_dl_reason(e.what(), what)};
      }
    }
    if (r.status == 401 && !renewed) {  // expired: one fresh token, then the CAS decides
      renewed = true;
      seen = t.access_token;
      continue;
    }
    if ((r.status == 404 || r.status == 501) && version == 2) {
      v1_ = true;
      continue;
    }
    if (r.status == 416) {
      throw Error(ErrorKind::kIntegrity, what + ": the Xet CAS says the file ends before byte " + std::to_string(pos) +
                                             " (the Hub says it has " + std::to_string(size_) + " bytes)" + reason_tail(r));
    }
    throw XetUnavailable{"the Xet CAS answered HTTP " + std::to_string(r.status) + (r.status == 401 ? " even for a fresh token" : "") +
                         reason_tail(r) + " for the reconstruction of " + range};
  }
}

XetToken XetRangeSource::token(bool renew, const std::string& seen, const std::string& what) {
  std::lock_guard g(mu_);
  const bool stale = token_.access_token.empty() || (token_.exp > 0 && token_.exp - kReadTokenMarginSecs <= xet_dl_now());
  if (!stale && !(renew && token_.access_token == seen)) return token_;
  HttpRequest req;
  req.url = ref_.token_url;
  req.headers = {"Accept-Encoding: identity"};
  if (cfg_.hub_token && is_hub_api_url(cfg_.endpoint, req.url)) req.headers.push_back("Authorization: Bearer " + *cfg_.hub_token);
  req.max_body = size_t{64} << 10;
  HttpResponse r;
  try {
    r = perform_with_retries(req, cfg_.policy, what + " (Xet read token)", "is " + cfg_.endpoint + " reachable?");
  } catch (const Error& e) {
    throw XetUnavailable{xet_dl_reason(e.what(), what)};
  }
  if (r.status != 200) throw XetUnavailable{"the Hub gave no Xet read token (HTTP " + std::to_string(r.status) + reason_tail(r) + ")"};
  try {
    token_ = XetCas::parse_token(r.body, "the Hub's Xet read token");
  } catch (const Error& e) {
    throw XetUnavailable{e.what()};
  }
  return token_;
}

}  // namespace skippy::detail
