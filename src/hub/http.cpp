#include "hub/http.h"

#include <curl/curl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
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
  const HttpRequest* req = nullptr;
  CURL* curl = nullptr;
  HttpResponse resp;
  bool sink_aborted = false;
  bool body_too_large = false;
  bool streaming = false;  // decided at the first body byte: 2xx goes to the sink
  bool decided = false;
  uint64_t sent = 0;          // request-body bytes read from body_file
  std::string read_error;     // why reading body_file failed
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
  curl_easy_setopt(c, CURLOPT_USERAGENT, "skippy-model-package/0.1.0");
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
  if (req.method == "HEAD") curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
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
