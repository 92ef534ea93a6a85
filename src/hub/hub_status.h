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
