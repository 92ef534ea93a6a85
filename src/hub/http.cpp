#include "hub/http.h"

#include <curl/curl.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cctype>
#include <deque>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>

#include "skippy/version.h"
#include "util/env.h"

namespace skippy::detail {
namespace {

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Transfer {
  const HttpRequest* req = nullptr;
  CURL* curl = nullptr;
  HttpResponse resp;
  bool sink_aborted = false;
  bool body_too_large = false;
  bool streaming = false;  // decided at the first body byte: 2xx goes to the sink
  bool decided = false;
  uint64_t sent = 0;          // request-body bytes read from body_file
  std::string read_error;     // why reading body_file failed
  // The minimum rate: (time, bytes moved) samples while a body is in flight.
  struct Sample {
    std::chrono::steady_clock::time_point at;
    uint64_t bytes;
  };
  std::deque<Sample> samples;
  std::string too_slow;       // why the minimum rate aborted the transfer
  bool answering = false;     // the answer's status line arrived
  // GET and HEAD: the answer's first byte is due within this long
  // (HF_HUB_ETAG_TIMEOUT kept answers, HF_HUB_DOWNLOAD_TIMEOUT downloads).
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  double answer_timeout_secs = 0;
  const char* answer_timeout_name = "";
  std::string no_answer;      // why the transfer was given up before any answer
};

std::string rate_text(double bytes_per_sec) {
  char b[48];
  if (bytes_per_sec >= 1024.0 * 1024.0) {
    std::snprintf(b, sizeof b, "%.1f MiB/s", bytes_per_sec / (1024.0 * 1024.0));
  } else if (bytes_per_sec >= 1024.0) {
    std::snprintf(b, sizeof b, "%.1f KiB/s", bytes_per_sec / 1024.0);
  } else {
    std::snprintf(b, sizeof b, "%.0f B/s", bytes_per_sec);
  }
  return b;
}

// libcurl's progress callback (about once a second at least, and whenever
// bytes move): enforces HttpRequest::min_rate_bytes_per_sec while a body is
// in flight. Returning non-zero aborts the transfer.
int on_progress(void* user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) {
  auto* t = static_cast<Transfer*>(user);
  const HttpRequest& req = *t->req;
  if (t->answer_timeout_secs > 0 && !t->answering) {
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t->started).count();
    if (waited < t->answer_timeout_secs) return 0;
    char b[32];
    std::snprintf(b, sizeof b, "%g", t->answer_timeout_secs);
    t->no_answer = std::string("no answer within ") + b + " s (the server took the request and said nothing; the limit is " +
                   t->answer_timeout_name + ")";
    return 1;
  }
  if (req.min_rate_bytes_per_sec == 0) return 0;
  // The body in flight: an upload from its first byte until the answer
  // begins, else the answer's body from its first byte until its declared
  // end. An upload's bytes count once the server's side holds them: bytes
  // still in our socket buffers (SIOCOUTQ) do not. Once all of it is there,
  // waiting for the answer still counts (a server behind large buffers that
  // reads at 1000 B/s looks just like that), unless the whole body is no
  // more than the floor asks of one window: then a slow answer is the
  // server thinking, which the stall timeout bounds.
  // A request body from memory (a Xet xorb) counts as an upload too.
  const bool has_upload = req.body_file.has_value() || ((req.method == "POST" || req.method == "PUT") && !req.body.empty());
  uint64_t queued = 0;
  if (has_upload) {
    curl_socket_t sock = CURL_SOCKET_BAD;
    int outq = 0;
    if (curl_easy_getinfo(t->curl, CURLINFO_ACTIVESOCKET, &sock) == CURLE_OK && sock != CURL_SOCKET_BAD &&
        ::ioctl(sock, SIOCOUTQ, &outq) == 0 && outq > 0) {
      queued = static_cast<uint64_t>(outq);
    }
  }
  const uint64_t floor_per_window = req.min_rate_bytes_per_sec * std::max(1u, req.min_rate_secs);
  const bool handed_over = ulnow >= ultotal && queued == 0;
  const bool uploading = has_upload && !t->answering && ulnow > 0 &&
                         !(handed_over && static_cast<uint64_t>(ultotal) <= floor_per_window);
  const bool downloading = !has_upload && dlnow > 0 && (dltotal <= 0 || dlnow < dltotal);
  if (!uploading && !downloading) {
    t->samples.clear();
    return 0;
  }
  const uint64_t sent = static_cast<uint64_t>(ulnow);
  const uint64_t moved = uploading ? sent - std::min(sent, queued) : static_cast<uint64_t>(dlnow);
  const auto now = std::chrono::steady_clock::now();
  const auto window = std::chrono::seconds(std::max(1u, req.min_rate_secs));
  if (t->samples.empty() || now - t->samples.back().at >= std::chrono::milliseconds(200)) t->samples.push_back({now, moved});
  // Keep the newest sample at least a window old, and what came after it.
  while (t->samples.size() >= 2 && t->samples[1].at <= now - window) t->samples.pop_front();
  const auto& first = t->samples.front();
  const double secs = std::chrono::duration<double>(now - first.at).count();
  if (now - first.at < window) return 0;
  const double rate = (static_cast<double>(moved) - static_cast<double>(first.bytes)) / secs;
  if (rate >= static_cast<double>(req.min_rate_bytes_per_sec)) return 0;
  char b[32];
  std::snprintf(b, sizeof b, "%.0f", secs);
  t->too_slow = std::string(uploading ? "the upload" : "the download") + " moved at " + rate_text(rate) + " over the last " + b +
                " s, below the minimum of " + rate_text(static_cast<double>(req.min_rate_bytes_per_sec)) +
                " (the floor: SKIPPY_HF_MIN_RATE or publish --min-rate, over SKIPPY_HF_MIN_RATE_SECS)";
  return 1;
}

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::string_view line(data, size * n);
  if (line.starts_with("HTTP/")) {
    t->answering = true;
    t->resp.headers.clear();  // a new response (e.g. after 100 Continue)
    return size * n;
  }
  const auto colon = line.find(':');
  if (colon != std::string_view::npos) {
    std::string name(line.substr(0, colon));
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    t->resp.headers[name] = trim(line.substr(colon + 1));
  }
  return size * n;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t len = size * n;
  if (!t->decided) {
    long code = 0;
    curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &code);
    t->streaming = t->req->sink && (code == 200 || code == 206);
    t->decided = true;
    if (t->streaming && t->req->on_start && !t->req->on_start(code, t->resp.headers)) {
      t->sink_aborted = true;
      return 0;
    }
  }
  t->resp.body_bytes += len;
  if (t->streaming) {
    if (!t->req->sink({reinterpret_cast<const uint8_t*>(data), len})) {
      t->sink_aborted = true;
      return 0;
    }
    return len;
  }
  if (t->resp.body.size() + len > t->req->max_body) {
    t->body_too_large = true;
    return 0;
  }
  t->resp.body.append(data, len);
  return len;
}

// Feeds curl the request body from body_file, with pread (no shared file
// offset: several uploads may read one descriptor at once).
size_t on_read(char* buffer, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const FileSlice& f = *t->req->body_file;
  const uint64_t left = f.length - t->sent;
  const size_t want = static_cast<size_t>(std::min<uint64_t>(left, uint64_t{size} * n));
  if (want == 0) return 0;
  ssize_t got;
  do {
    got = ::pread(f.fd, buffer, want, static_cast<off_t>(f.offset + t->sent));
  } while (got < 0 && errno == EINTR);
  if (got <= 0) {
    t->read_error = got < 0 ? std::string("cannot read the file to upload: ") + std::strerror(errno)
                            : "the file to upload ended early (did it change?)";
    return CURL_READFUNC_ABORT;
  }
  t->sent += static_cast<uint64_t>(got);
  if (t->req->on_sent) t->req->on_sent(static_cast<uint64_t>(got));
  return static_cast<size_t>(got);
}

// Failures worth another attempt: the connection or the transfer broke.
bool retryable_code(CURLcode c) {
  switch (c) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_PARTIAL_FILE:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
      return true;
    default:
      return false;
  }
}

}  // namespace

long default_stall_timeout_secs() {
  static const long secs = static_cast<long>(env::hf_stall_secs());
  return secs;
}

std::optional<std::string> HttpResponse::header(const std::string& lower_name) const {
  const auto it = headers.find(lower_name);
  if (it == headers.end()) return std::nullopt;
  return it->second;
}

HttpResult http_perform(const HttpRequest& req) {
  HttpConnection c;
  return c.perform(req);
}

HttpConnection::HttpConnection() {
  global_init();
  curl_ = curl_easy_init();
}

HttpConnection::~HttpConnection() {
  if (curl_) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

HttpResult HttpConnection::perform(const HttpRequest& req) {
  if (!curl_) return {std::nullopt, TransportError{"cannot initialise libcurl", false}};
  CURL* const c = static_cast<CURL*>(curl_);
  curl_easy_reset(c);  // every option anew; the open connection stays in the handle's cache
  Transfer t;
  t.req = &req;
  t.curl = c;
  curl_slist* list = nullptr;
  for (const auto& h : req.headers) list = curl_slist_append(list, h.c_str());
  const bool has_body = req.method == "POST" || req.method == "PUT";
  if (has_body) list = curl_slist_append(list, "Expect:");  // no 100-continue round trip
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> headers(list, &curl_slist_free_all);
  char errbuf[CURL_ERROR_SIZE] = {0};

  curl_easy_setopt(c, CURLOPT_URL, req.url.c_str());
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, req.connect_timeout_secs);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, req.stall_timeout_secs);
  curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 2L * 1024L * 1024L);  // fewer, larger writes
  static const std::string kUserAgent = "skippy-model-package/" + std::string(library_version());
  curl_easy_setopt(c, CURLOPT_USERAGENT, kUserAgent.c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
  if (req.method == "HEAD") curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  if (req.method == "GET" || req.method == "HEAD") {
    // A silent server gets a line as soon as huggingface_hub would give up on it.
    const bool download = static_cast<bool>(req.sink);
    t.answer_timeout_secs = download ? env::hf_download_timeout_secs() : env::hf_etag_timeout_secs();
    t.answer_timeout_name = download ? "HF_HUB_DOWNLOAD_TIMEOUT" : "HF_HUB_ETAG_TIMEOUT";
  }
  if (req.min_rate_bytes_per_sec > 0 || t.answer_timeout_secs > 0) {
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &t);
  }
  if (has_body && req.body_file) {
    curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);  // PUT, unless told otherwise below
    curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
    curl_easy_setopt(c, CURLOPT_READDATA, &t);
    curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(req.body_file->length));
    curl_easy_setopt(c, CURLOPT_UPLOAD_BUFFERSIZE, 2L * 1024L * 1024L);
    if (req.method == "POST") curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "POST");
  } else if (has_body) {
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(req.body.size()));
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, req.body.data());
    if (req.method == "PUT") curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "PUT");
  }

  const CURLcode rc = curl_easy_perform(c);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, nullptr);  // errbuf goes out of scope
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &t.resp.status);
  if (rc != CURLE_OK) {
    if (t.sink_aborted) return {std::nullopt, TransportError{"download aborted", false, true}};
    if (t.body_too_large) return {std::nullopt, TransportError{"answer larger than expected", false}};
    if (!t.read_error.empty()) return {std::nullopt, TransportError{t.read_error, false}};
    if (!t.too_slow.empty()) return {std::nullopt, TransportError{t.too_slow, true}};
    if (!t.no_answer.empty()) return {std::nullopt, TransportError{t.no_answer, true}};
    std::string msg = errbuf[0] ? errbuf : curl_easy_strerror(rc);
    if (rc == CURLE_OPERATION_TIMEDOUT && msg.starts_with("Operation too slow")) {
      // libcurl's low-speed limit is our stall timeout: say it plainly.
      msg = "nothing moved for " + std::to_string(req.stall_timeout_secs) + " s (the server took the request and " +
            (t.resp.status > 0 ? "stopped sending" : "never answered") + "; the limit is SKIPPY_HF_STALL_SECS)";
    }
    if (rc == CURLE_COULDNT_RESOLVE_HOST) {
      // A name that does not resolve is a wrong endpoint or no network, not
      // a blip: retrying only delays the answer.
      msg += " (not retried: check HF_ENDPOINT and the network; HF_HUB_OFFLINE=1 uses the cache alone)";
    }
        return {std::nullopt, TransportError{msg, retryable_code(rc)}};
  }
  return {std::move(t.resp), std::nullopt};
}

std::string server_reason(const HttpResponse& r) {
  std::string d = r.header("x-error-message").value_or("");
  if (d.empty()) {
    try {
      const auto j = nlohmann::json::parse(r.body);
      if (j.is_object() && j.contains("error") && j["error"].is_string()) d = j["error"].get<std::string>();
      if (d.empty() && j.is_object() && j.contains("message") && j["message"].is_string()) d = j["message"].get<std::string>();
    } catch (const std::exception&) {
    }
  }
  auto tag = [&](const char* name) -> std::string {
    const std::string open = std::string("<") + name + ">", close = std::string("</") + name + ">";
    const auto a = r.body.find(open);
    const auto b = a == std::string::npos ? std::string::npos : r.body.find(close, a);
    return b == std::string::npos ? std::string() : r.body.substr(a + open.size(), b - a - open.size());
  };
  if (d.empty()) {
    d = tag("Message");
    const std::string code = tag("Code");
    if (!code.empty()) d = d.empty() ? code : code + ": " + d;
  }
  if (d.empty() && r.body.find('<') == std::string::npos) {
    // Plain text: its first non-blank line.
    size_t at = 0;
    while (d.empty() && at < r.body.size()) {
      const auto nl = r.body.find('\n', at);
      d = trim(std::string_view(r.body).substr(at, nl == std::string::npos ? std::string::npos : nl - at));
      at = nl == std::string::npos ? r.body.size() : nl + 1;
    }
  }
  // One short printable line.
  for (char& ch : d) {
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) ch = ' ';
  }
  d = trim(d);
  if (d.size() > 300) {
    size_t cut = 300;  // never inside a UTF-8 sequence
    while (cut > 0 && (static_cast<unsigned char>(d[cut]) & 0xC0) == 0x80) --cut;
    d = d.substr(0, cut) + "...";
  }
  return d;
}

std::string url_origin(const std::string& url) {
  const auto scheme = url.find("://");
  if (scheme == std::string::npos) return {};
  const auto end = url.find_first_of("/?#", scheme + 3);
  std::string o = url.substr(0, end);
  std::transform(o.begin(), o.end(), o.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  return o;
}

Redirect follow_location(const std::string& from, const std::string& location) {
  const std::string origin = url_origin(from);
  Redirect r;
  r.url = location.starts_with('/') ? origin + location : location;
  r.same_origin = !origin.empty() && url_origin(r.url) == origin;
  return r;
}

namespace {

// The path as the server will route it: percent-escapes decoded; nullopt
// when that cannot be told for sure (a malformed escape, an encoded '/' or
// '\\', a "." or ".." segment, decoded or not), which is then not the Hub's.
std::optional<std::string> normalized_path(std::string_view raw) {
  std::string out;
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] != '%') {
      if (raw[i] == '\\') return std::nullopt;
      out += raw[i];
      continue;
    }
    const auto hex = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    if (i + 2 >= raw.size()) return std::nullopt;
    const int h = hex(raw[i + 1]), l = hex(raw[i + 2]);
    if (h < 0 || l < 0) return std::nullopt;
    const char c = static_cast<char>(h * 16 + l);
    if (c == '/' || c == '\\' || c == '\0') return std::nullopt;
    out += c;
    i += 2;
  }
  for (size_t start = 0; start <= out.size();) {
    const size_t end = std::min(out.find('/', start), out.size());
    const std::string_view seg = std::string_view(out).substr(start, end - start);
    if (seg == "." || seg == "..") return std::nullopt;
    start = end + 1;
  }
  return out;
}

}  // namespace

bool is_hub_api_url(const std::string& endpoint, const std::string& url) {
  const std::string origin = url_origin(endpoint);
  if (origin.empty() || url_origin(url) != origin) return false;
  const std::string base = endpoint.substr(origin.size());  // a mirror's path prefix, usually ""
  std::string_view raw = std::string_view(url).substr(origin.size());
  raw = raw.substr(0, raw.find_first_of("?#"));
  // Decided on the path the server will see (".." spelled
  // "%2e%2e" reached storage with the token).
  const auto normalized = normalized_path(raw);
  if (!normalized) return false;
  std::string_view path = *normalized;
  if (!path.starts_with(base + "/")) return false;
  path.remove_prefix(base.size() + 1);
  if (path.starts_with("api/")) return true;
  // {ns}/{name}/resolve/... or {ns}/{name}.git/info/lfs/...
  const auto a = path.find('/');
  if (a == std::string_view::npos || a == 0) return false;
  const auto b = path.find('/', a + 1);
  if (b == std::string_view::npos || b == a + 1) return false;
  const std::string_view name = path.substr(a + 1, b - a - 1), rest = path.substr(b + 1);
  return rest.starts_with("resolve/") || (name.ends_with(".git") && rest.starts_with("info/lfs/"));
}

std::string url_encode(std::string_view s, bool keep_slash) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char ch : s) {
    if (std::isalnum(ch) || ch == '-' || ch == '.' || ch == '_' || ch == '~' || (keep_slash && ch == '/')) {
      out += static_cast<char>(ch);
    } else {
      out += '%';
      out += hex[ch >> 4];
      out += hex[ch & 15];
    }
  }
  return out;
}

}  // namespace skippy::detail
