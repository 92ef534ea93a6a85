#include "hub/http.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <memory>
#include <mutex>

namespace skippy::detail {
namespace {

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Transfer {
  const HttpRequest* req;
  CURL* curl;
  HttpResponse resp;
  bool sink_aborted = false;
  bool body_too_large = false;
  bool streaming = false;  // decided at the first body byte: 2xx goes to the sink
  bool decided = false;
};

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::string_view line(data, size * n);
  if (line.starts_with("HTTP/")) {
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

bool retryable_code(CURLcode c) {
  switch (c) {
    case CURLE_COULDNT_RESOLVE_HOST:
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

std::optional<std::string> HttpResponse::header(const std::string& lower_name) const {
  const auto it = headers.find(lower_name);
  if (it == headers.end()) return std::nullopt;
  return it->second;
}

HttpResult http_perform(const HttpRequest& req) {
  global_init();
  std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), &curl_easy_cleanup);
  if (!curl) return {std::nullopt, TransportError{"cannot initialise libcurl", false}};
  Transfer t{&req, curl.get(), {}};
  curl_slist* list = nullptr;
  for (const auto& h : req.headers) list = curl_slist_append(list, h.c_str());
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> headers(list, &curl_slist_free_all);
  char errbuf[CURL_ERROR_SIZE] = {0};

  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, req.url.c_str());
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, req.connect_timeout_secs);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, req.stall_timeout_secs);
  curl_easy_setopt(c, CURLOPT_BUFFERSIZE, 2L * 1024L * 1024L);  // fewer, larger writes
  curl_easy_setopt(c, CURLOPT_USERAGENT, "skippy-model-package/0.1.0");
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
  if (req.method == "HEAD") curl_easy_setopt(c, CURLOPT_NOBODY, 1L);

  const CURLcode rc = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &t.resp.status);
  if (rc != CURLE_OK) {
    if (t.sink_aborted) return {std::nullopt, TransportError{"download aborted", false, true}};
    if (t.body_too_large) return {std::nullopt, TransportError{"answer larger than expected", false}};
    std::string msg = errbuf[0] ? errbuf : curl_easy_strerror(rc);
    return {std::nullopt, TransportError{msg, retryable_code(rc)}};
  }
  return {std::move(t.resp), std::nullopt};
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
