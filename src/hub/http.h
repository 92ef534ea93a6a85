// A small HTTP client on libcurl for the Hub protocol: one request at a
// time per call, no automatic redirects (the caller decides where a token
// may go), headers collected with lower-case names, bodies either kept
// (small answers) or streamed to a sink (downloads). Request bodies are a
// string (JSON, NDJSON) or a slice of an open file, read with pread as the
// connection takes them (uploads never hold a file in memory). Internal.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace skippy::detail {

// Bytes [offset, offset + length) of an open file descriptor (not owned).
struct FileSlice {
  int fd = -1;
  uint64_t offset = 0;
  uint64_t length = 0;
};

// SKIPPY_HF_STALL_SECS (env.h), read once.
long default_stall_timeout_secs();

struct HttpRequest {
  std::string method = "GET";       // "GET", "HEAD", "POST" or "PUT"
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  // Body bytes of a 200/206 answer go here instead of into the response;
  // return false to abort the transfer. Error bodies are always kept.
  std::function<bool(std::span<const uint8_t>)> sink;
  // Called once, before the first body byte of a 200/206 answer reaches the
  // sink, with the status and headers; return false to abort.
  std::function<bool(long status, const std::map<std::string, std::string>& headers)> on_start;
  // The request body of a POST or PUT: `body_file` when set, else `body`.
  std::string body;
  std::optional<FileSlice> body_file;
  // Called with each count of request-body bytes handed to the connection.
  std::function<void(uint64_t)> on_sent;
  size_t max_body = size_t{4} << 20;  // kept bodies larger than this abort
  long connect_timeout_secs = 15;
  // Abort when no byte moves for this long (SKIPPY_HF_STALL_SECS, default 60):
  // a server that accepts and never answers is a failed attempt, not a hang.
  long stall_timeout_secs = default_stall_timeout_secs();
  // A floor on the body's rate while it moves (a download client's low-speed
  // limit): once the request body (an upload from body_file or body, from its first
  // byte until the answer begins; bytes still in our socket buffers,
  // SIOCOUTQ, do not count as sent) or the answer's body has been in flight
  // for min_rate_secs, fewer than min_rate_bytes_per_sec * min_rate_secs
  // bytes over the last min_rate_secs abort the transfer with a retryable
  // "too slow" TransportError. An upload no larger than that one window's
  // worth is not judged once all of it is handed over (a slow answer is the
  // server thinking: the stall timeout's business). 0: off.
  uint64_t min_rate_bytes_per_sec = 0;
  unsigned min_rate_secs = 30;
};

struct HttpResponse {
  long status = 0;
  std::map<std::string, std::string> headers;  // lower-case names, last value wins
  std::string body;
  uint64_t body_bytes = 0;  // counted whether kept or streamed
  std::optional<std::string> header(const std::string& lower_name) const;
};

// A failure below HTTP: refused/dropped connection, timeout, a transfer cut
// short, or the sink aborting. `retryable` for network trouble.
struct TransportError {
  std::string message;
  bool retryable = true;
  bool aborted_by_sink = false;
};

// Performs the request; returns the response or the transport error.
// Thread-safe (one curl handle per call, global init done once).
struct HttpResult {
  std::optional<HttpResponse> response;
  std::optional<TransportError> error;
};
HttpResult http_perform(const HttpRequest& request);

// One connection kept open across requests (HTTP keep-alive): a libcurl
// handle whose connection cache survives between perform() calls, so
// consecutive requests to one host skip the TCP (and TLS) handshake. Not
// thread-safe: one thread at a time. A transfer the sink aborted closes the
// connection; the next request opens a new one.
class HttpConnection {
 public:
  HttpConnection();
  ~HttpConnection();
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;
  HttpResult perform(const HttpRequest& request);

 private:
  void* curl_ = nullptr;  // CURL*
};

// The server's own words about a refusal, kept short (at most 300 bytes, one
// line): X-Error-Message, else a JSON {"error"} or {"message"}, else an S3
// XML <Message> (with its <Code>), else the body's first non-blank line.
// "" when the answer says nothing printable.
std::string server_reason(const HttpResponse& r);

// "scheme://host[:port]" of an absolute URL (lower-cased), or "" if not absolute.
std::string url_origin(const std::string& url);
// Where a redirect from `from` to a Location header value leads: a relative
// Location ("/...") stays on `from`'s origin. same_origin tells whether a
// token sent to `from` may go there too.
struct Redirect {
  std::string url;
  bool same_origin = false;
};
Redirect follow_location(const std::string& from, const std::string& location);
// True when `url` is one of the Hub's own endpoints under `endpoint`
// (HF_ENDPOINT): the same origin, and a path (after the endpoint's own path
// prefix, if any) under /api/, or /{ns}/{name}/resolve/..., or
// /{ns}/{name}.git/info/lfs/.... The only URLs the token goes to: storage
// may share the Hub's origin, and S3-style storage refuses a presigned URL
// that also carries Authorization.
bool is_hub_api_url(const std::string& endpoint, const std::string& url);
// An absolute http(s) URL (what a server may hand back for us to follow).
inline bool is_http_url(std::string_view u) { return u.starts_with("http://") || u.starts_with("https://"); }
// Percent-encodes every byte outside [A-Za-z0-9-._~] (and '/' when keep_slash).
std::string url_encode(std::string_view s, bool keep_slash);

}  // namespace skippy::detail
