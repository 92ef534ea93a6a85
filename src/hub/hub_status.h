// A refused Hub request, told one way everywhere (downloads, the write API,
// tags): the error kind its HTTP status means, the server's own reason, and
// the Hub's request id, which huggingface_hub also appends so that a
// failure can be found in the Hub's logs. Internal.
#pragma once

#include <string>

#include "hub/http.h"
#include "skippy/error.h"

namespace skippy::detail {

// 401 and 403: kUnauthorized; 404: kNotFound; 429 and 5xx (worth asking
// again): kTransport; any other status: kInvalidInput.
ErrorKind hub_status_kind(long status) noexcept;

// The Hub's X-Error-Code, the one reading of it: what the Hub says went
// wrong when the status alone does not (a 404 of a repository, of a
// revision, of a file; a 401/403 of a gated repository). Each caller words
// the message for its request; the kind goes with the code.
enum class HubErrorCode { kNone, kGatedRepo, kRepoNotFound, kRevisionNotFound, kEntryNotFound, kOther };
HubErrorCode hub_error_code(const HttpResponse& r);
ErrorKind hub_error_code_kind(HubErrorCode code, long status) noexcept;  // gated: kUnauthorized; not found: kNotFound

// A refusal from storage, another host than the Hub's (LFS or Xet storage,
// a signed URL): 401 and 403 are kUnauthorized, anything else kTransport
// (storage never decides that a file does not exist or is invalid: the Hub
// does). "<what>: the storage host <origin> answered HTTP <status>: <reason>
// (Request ID: ...)".
Error storage_refusal(const HttpResponse& r, const std::string& what, const std::string& url);
// 400, 401 or 403 from storage: most often a signed URL that expired; the
// Hub is asked for a fresh one (once per bytes gained) before it counts.
inline bool storage_url_may_have_expired(long status) noexcept { return status == 400 || status == 401 || status == 403; }

// " (Request ID: <id>)" when the answer carries X-Request-Id (else
// X-Amzn-Trace-Id), as huggingface_hub words it; "" when it carries neither.
std::string request_id_note(const HttpResponse& r);

// ": <the server's reason>" (server_reason), or "" when it gave none.
std::string reason_tail(const HttpResponse& r);

// Throws Error(kind, message + request_id_note(r)).
[[noreturn]] void throw_hub_error(const HttpResponse& r, ErrorKind kind, const std::string& message);
// The same with the kind the status means (hub_status_kind).
[[noreturn]] void throw_hub_status(const HttpResponse& r, const std::string& message);

}  // namespace skippy::detail
