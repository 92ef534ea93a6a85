#include "hub/retry.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <thread>

#include "skippy/error.h"

namespace skippy::detail {

namespace {
constexpr unsigned kMaxBackoffMs = 30'000;
constexpr uint64_t kMaxRetryAfterMs = 300'000;  // the Hub's 429s may ask for minutes
}  // namespace

bool retry_status(long status) noexcept { return status == 429 || (status >= 500 && status <= 599); }

std::optional<uint64_t> parse_u64(const std::optional<std::string>& s) {
  if (!s) return std::nullopt;
  uint64_t v = 0;
  const auto [p, ec] = std::from_chars(s->data(), s->data() + s->size(), v);
  if (ec != std::errc() || p != s->data() + s->size()) return std::nullopt;
  return v;
}

unsigned backoff_ms(const RetryPolicy& policy, unsigned attempt, const HttpResponse* answer) {
  uint64_t ms = std::min<uint64_t>(uint64_t{policy.backoff_ms} << std::min(attempt, 10u), kMaxBackoffMs);
  if (answer) {
    if (auto ra = parse_u64(answer->header("retry-after"))) {
      ms = std::min<uint64_t>(std::max<uint64_t>(ms / 2, *ra * 1000), kMaxRetryAfterMs);
    }
  }
  return static_cast<unsigned>(ms);
}

void sleep_ms(unsigned ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

HttpResponse perform_with_retries(const HttpRequest& req, const RetryPolicy& policy, const std::string& what,
                                  const std::string& hint) {
  const unsigned attempts = std::max(1u, policy.max_attempts);
  std::string last;
  for (unsigned attempt = 0; attempt < attempts; ++attempt) {
    auto res = http_perform(req);
    if (res.error) {
      last = res.error->message;
      if (!res.error->retryable) throw Error(ErrorKind::kTransport, what + ": " + last + " (" + req.url + ")");
      if (attempt + 1 < attempts) sleep_ms(backoff_ms(policy, attempt, nullptr));
      continue;
    }
    if (retry_status(res.response->status) && attempt + 1 < attempts) {
      last = "HTTP " + std::to_string(res.response->status);
      sleep_ms(backoff_ms(policy, attempt, &*res.response));
      continue;
    }
    return std::move(*res.response);
  }
  throw Error(ErrorKind::kTransport,
              what + ": " + last + " (after " + std::to_string(attempts) + " attempts" + (hint.empty() ? "" : "; " + hint) + ")");
}

}  // namespace skippy::detail
