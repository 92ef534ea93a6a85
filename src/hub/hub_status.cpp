#include "hub/hub_status.h"

#include "hub/retry.h"

namespace skippy::detail {

ErrorKind hub_status_kind(long status) noexcept {
  if (status == 401 || status == 403) return ErrorKind::kUnauthorized;
  if (status == 404) return ErrorKind::kNotFound;
  if (retry_status(status)) return ErrorKind::kTransport;
  return ErrorKind::kInvalidInput;
}

std::string request_id_note(const HttpResponse& r) {
  auto id = r.header("x-request-id");
  if (!id || id->empty()) id = r.header("x-amzn-trace-id");
  if (!id || id->empty()) return {};
  // One printable line, bounded: it comes from the server.
  std::string clean;
  for (const char c : id->substr(0, 128)) clean += (c >= 0x20 && c < 0x7f) ? c : '?';
  return " (Request ID: " + clean + ")";
}

std::string reason_tail(const HttpResponse& r) {
  const std::string d = server_reason(r);
  return d.empty() ? d : ": " + d;
}

void throw_hub_error(const HttpResponse& r, ErrorKind kind, const std::string& message) {
  throw Error(kind, message + request_id_note(r));
}

void throw_hub_status(const HttpResponse& r, const std::string& message) {
  throw_hub_error(r, hub_status_kind(r.status), message);
}

}  // namespace skippy::detail
