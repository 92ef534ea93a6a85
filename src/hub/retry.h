// The Hub's retry rule, shared by downloads (hub.cpp, ranged_fetch.cpp) and
// uploads (hub_publish.cpp, lfs_upload.cpp): 429, 5xx and dropped
// connections are retried with exponential backoff from a base delay
// (doubling, capped at 30 s), and a Retry-After (seconds) is honoured up to
// 5 minutes. Every retry loop waits through pause_before_retry, which first
// reports the retry (skippy/hub.h: set_retry_reporter; one line on stderr by
// default), so no retry is ever silent. Internal.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "hub/http.h"

namespace skippy::detail {

struct RetryPolicy {
  unsigned max_attempts = 5;  // per request, retries included (>= 1)
  unsigned backoff_ms = 1000; // the first delay
};

// A status worth asking again: 429 and 5xx.
bool retry_status(long status) noexcept;
// The delay before retry number `attempt` (0-based), from the policy and,
// when `answer` carries one, its Retry-After.
unsigned backoff_ms(const RetryPolicy& policy, unsigned attempt, const HttpResponse* answer);
void sleep_ms(unsigned ms);
// Attempt number `attempt` (0-based) of `what` failed for `reason`: reports
// it (RetryNotice: attempt + 1 of policy.max_attempts, the delay), then
// waits the delay backoff_ms gives. The one way a retry loop waits.
void pause_before_retry(const RetryPolicy& policy, unsigned attempt, const HttpResponse* answer, const std::string& what,
                        const std::string& reason);
// A decimal u64 header value, or nullopt.
std::optional<uint64_t> parse_u64(const std::optional<std::string>& s);

// Performs `req` until it gets an answer that is not 429/5xx (returned
// whatever its status), or the attempts run out: then the last 429/5xx
// answer is returned when there was one, else Error(kTransport) saying
// `what`, the last failure and `hint`. A transport error that is not worth
// retrying throws at once. The request (and its body) is sent anew each time.
HttpResponse perform_with_retries(const HttpRequest& req, const RetryPolicy& policy, const std::string& what,
                                  const std::string& hint = {});

}  // namespace skippy::detail
