#include "hub/lfs_upload.h"

#include <algorithm>
#include <atomic>
#include <cctype>

#include "hub/hub_status.h"
#include "skippy/error.h"

namespace skippy::detail {

namespace {

using nlohmann::json;

constexpr size_t kMaxParts = 10'000;  // S3's multipart limit

bool header_name_ok(const std::string& k) {
  if (k.empty() || k.size() > 256) return false;
  return std::all_of(k.begin(), k.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
  });
}

bool has_authorization(const std::vector<std::string>& headers) {
  return std::any_of(headers.begin(), headers.end(), [](const std::string& h) {
    std::string name = h.substr(0, h.find(':'));
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return name == "authorization";
  });
}

}  // namespace

std::vector<std::string> lfs_action_headers(const json& action, const std::string& what) {
  std::vector<std::string> out;
  if (!action.is_object() || !action.contains("header") || action["header"].is_null()) return out;
  const json& h = action["header"];
  if (!h.is_object()) throw_invalid(what + ": the action's header is not an object");
  for (auto it = h.begin(); it != h.end(); ++it) {
    if (!header_name_ok(it.key())) throw_invalid(what + ": the action names an unusable header \"" + it.key().substr(0, 80) + "\"");
    if (!it->is_string()) throw_invalid(what + ": the action's header " + it.key() + " is not a string");
    const std::string v = it->get<std::string>();
    if (v.find_first_of(std::string("\r\n\0", 3)) != std::string::npos || v.size() > 8192) {
      throw_invalid(what + ": the action's header " + it.key() + " has an unusable value");
    }
    out.push_back(it.key() + ": " + v);
  }
  return out;
}

bool LfsUploader::hub_api_url(const std::string& url) const { return is_hub_api_url(endpoint, url); }

HttpResponse LfsUploader::put_slice(int fd, const std::string& url, const std::vector<std::string>& headers, uint64_t offset,
                                    uint64_t length, const std::string& what) const {
  const unsigned attempts = std::max(1u, policy.max_attempts);
  for (unsigned attempt = 0;; ++attempt) {
    HttpRequest req;
    req.method = "PUT";
    req.url = url;
    req.headers = headers;  // the action's, nothing of ours: never the token
    req.body_file = FileSlice{fd, offset, length};
    req.min_rate_bytes_per_sec = min_rate_bytes_per_sec;
    req.min_rate_secs = min_rate_secs;
    std::atomic<uint64_t> sent{0};
    req.on_sent = [&](uint64_t n) {
      sent += n;
      if (on_progress) on_progress(static_cast<int64_t>(n));
    };
    auto res = http_perform(req);
    const bool ok = res.response && res.response->status >= 200 && res.response->status < 300;
    if (!ok && on_progress) on_progress(-static_cast<int64_t>(sent.load()));
    if (ok && on_stored) on_stored(length);
    if (res.response && !retry_status(res.response->status)) return std::move(*res.response);
    const std::string last =
        res.error ? res.error->message : "HTTP " + std::to_string(res.response->status) + reason_tail(*res.response);
    if (res.error && !res.error->retryable) throw Error(ErrorKind::kTransport, what + ": " + last);
    if (attempt + 1 >= attempts) {
      throw Error(ErrorKind::kTransport, what + ": " + last + " (after " + std::to_string(attempts) +
                                             " attempts; what was stored stays, and a rerun sends only what is missing)");
    }
    pause_before_retry(policy, attempt, res.response ? &*res.response : nullptr, what, last);
  }
}

std::optional<HttpResponse> LfsUploader::send(int fd, uint64_t size, const std::string& sha256, const json& upload_action,
                                              const std::string& what) const {
  const std::string href = upload_action["href"].get<std::string>();
  const json header = upload_action.contains("header") && upload_action["header"].is_object() ? upload_action["header"] : json::object();
  if (header.contains("chunk_size")) return send_multipart(fd, size, sha256, href, header, what);
  auto r = put_slice(fd, href, lfs_action_headers(upload_action, what), 0, size, what);
  if (r.status >= 200 && r.status < 300) return std::nullopt;
  return r;
}

std::optional<HttpResponse> LfsUploader::send_multipart(int fd, uint64_t size, const std::string& sha256, const std::string& href,
                                                        const json& header, const std::string& what) const {
  uint64_t chunk = 0;
  const auto& cs = header["chunk_size"];
  if (cs.is_string()) {
    chunk = parse_u64(cs.get<std::string>()).value_or(0);
  } else if (cs.is_number_unsigned()) {
    chunk = cs.get<uint64_t>();
  }
  if (chunk == 0) throw_invalid(what + ": the multipart action has an unusable chunk_size");
  std::vector<std::pair<uint64_t, std::string>> parts;
  for (auto p = header.begin(); p != header.end(); ++p) {
    const std::string& k = p.key();
    if (k.empty() || k.size() > 6 || !std::all_of(k.begin(), k.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    if (!p->is_string() || !is_http_url(p->get<std::string>())) throw_invalid(what + ": part " + k + " has no http(s) URL");
    parts.emplace_back(std::stoull(k), p->get<std::string>());
  }
  std::sort(parts.begin(), parts.end());
  const uint64_t want = (size + chunk - 1) / chunk;
  if (parts.size() != want || parts.size() > kMaxParts) {
    throw_invalid(what + ": the Hub gave " + std::to_string(parts.size()) + " part URLs for " + std::to_string(size) +
                  " bytes in chunks of " + std::to_string(chunk) + " (expected " + std::to_string(want) + ")");
  }
  json done = json::array();
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].first != i + 1) throw_invalid(what + ": the part numbers are not 1.." + std::to_string(parts.size()));
    const uint64_t off = uint64_t{i} * chunk;
    const uint64_t len = std::min(chunk, size - off);
    // A part URL is presigned: no header at all (the "header" object holds
    // the part URLs, not headers).
    auto r = put_slice(fd, parts[i].second, {}, off, len, what + " (part " + std::to_string(i + 1) + ")");
    if (r.status < 200 || r.status >= 300) return r;
    const auto etag = r.header("etag").value_or("");
    if (etag.empty() || etag.size() > 1024) throw_invalid(what + ": storage gave no ETag for part " + std::to_string(i + 1));
    done.push_back({{"partNumber", i + 1}, {"etag", etag}});
  }
  HttpRequest req;
  req.method = "POST";
  req.url = href;
  // Signed: the LFS content type and nothing else (as both official clients).
  req.headers = {"Accept: application/vnd.git-lfs+json", "Content-Type: application/vnd.git-lfs+json"};
  req.body = json{{"oid", sha256}, {"parts", done}}.dump();
  const std::string step = what + " (completing the multipart upload)";
  const auto r = perform_with_retries(req, policy, step);
  if (r.status < 200 || r.status >= 300) {
    throw Error(retry_status(r.status) ? ErrorKind::kTransport : ErrorKind::kInvalidInput,
                step + ": " + url_origin(href) + " answered HTTP " + std::to_string(r.status) + reason_tail(r));
  }
  return std::nullopt;
}

void LfsUploader::verify(const json& verify_action, const std::string& sha256, uint64_t size, const std::string& what) const {
  if (verify_action.is_null()) return;
  const std::string href = verify_action["href"].get<std::string>();
  HttpRequest req;
  req.method = "POST";
  req.url = href;
  req.headers = lfs_action_headers(verify_action, what + " (verify)");
  if (token && !has_authorization(req.headers) && hub_api_url(href)) req.headers.push_back("Authorization: Bearer " + *token);
  req.headers.push_back("Accept: application/vnd.git-lfs+json");
  req.headers.push_back("Content-Type: application/vnd.git-lfs+json");
  req.body = json{{"oid", sha256}, {"size", size}}.dump();
  const std::string step = what + " (verify)";
  const auto r = perform_with_retries(req, policy, step, "is " + endpoint + " reachable?");
  if (r.status < 200 || r.status >= 300) {
    throw_hub_error(r, r.status == 404 || r.status == 422 ? ErrorKind::kIntegrity : ErrorKind::kTransport,
                    what + ": the Hub did not verify the upload: HTTP " + std::to_string(r.status) + reason_tail(r));
  }
}

}  // namespace skippy::detail
