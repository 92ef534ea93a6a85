#include "hub/hub_status.h"

#include "hub/retry.h"

namespace skippy::detail {

ErrorKind hub_status_kind(long status) noexcept {
  if (status == 401 || status == 403) return ErrorKind::kUnauthorized;
  if (status == 404) return ErrorKind::kNotFound;
  if (retry_status(status)) return ErrorKind::kTransport;
  return ErrorKind::kInvalidInput;
}

HubErrorCode hub_error_code(const HttpResponse& r) {
  const auto code = r.header("x-error-code");
  if (!code || code->empty()) return HubErrorCode::kNone;
  if (*code == "GatedRepo") return HubErrorCode::kGatedRepo;
  if (*code == "RepoNotFound") return HubErrorCode::kRepoNotFound;
  if (*code == "RevisionNotFound") return HubErrorCode::kRevisionNotFound;
  if (*code == "EntryNotFound") return HubErrorCode::kEntryNotFound;
  return HubErrorCode::kOther;
}

ErrorKind hub_error_code_kind(HubErrorCode code, long status) noexcept {
  switch (code) {
    case HubErrorCode::kGatedRepo: return ErrorKind::kUnauthorized;
    case HubErrorCode::kRepoNotFound:
    case HubErrorCode::kRevisionNotFound:
    case HubErrorCode::kEntryNotFound: return ErrorKind::kNotFound;
    case HubErrorCode::kNone:
    case HubErrorCode::kOther: break;
  }
  return hub_status_kind(status);
}

Error storage_refusal(const HttpResponse& r, const std::string& what, const std::string& url) {
  return Error(r.status == 401 || r.status == 403 ? ErrorKind::kUnauthorized : ErrorKind::kTransport,
               what + ": the storage host " + url_origin(url) + " answered HTTP " + std::to_string(r.status) +
                   reason_tail(r) + request_id_note(r));
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
