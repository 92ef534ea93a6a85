#include "hub/retry.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>

#include "skippy/error.h"
#include "skippy/hub.h"

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

namespace {

std::mutex& reporter_mu() {
  static std::mutex mu;
  return mu;
}
// nullopt: the default (stderr); an empty function: silent.
std::optional<RetryReporter>& reporter() {
  static std::optional<RetryReporter> r;
  return r;
}

}  // namespace

void pause_before_retry(const RetryPolicy& policy, unsigned attempt, const HttpResponse* answer, const std::string& what,
                        const std::string& reason) {
  const unsigned ms = backoff_ms(policy, attempt, answer);
  RetryNotice n{what, reason, attempt + 1, std::max(1u, policy.max_attempts), ms};
  std::optional<RetryReporter> r;
  {
    std::lock_guard g(reporter_mu());
    r = reporter();
  }
  if (r) {
    if (*r) (*r)(n);
  } else {
    print_retry_line(n);
  }
  sleep_ms(ms);
}

HttpResponse perform_with_retries(const HttpRequest& req, const RetryPolicy& policy, const std::string& what,
                                  const std::string& hint) {
  const unsigned attempts = std::max(1u, policy.max_attempts);
  std::string last;
  for (unsigned attempt = 0; attempt < attempts; ++attempt) {
    auto res = http_perform(req);
    if (res.error) {
      last = res.error->message;
      if (!res.error->retryable) throw Error(ErrorKind::kTransport, what + ": " + last + " (" + req.url + ")");
      if (attempt + 1 < attempts) pause_before_retry(policy, attempt, nullptr, what, last);
      continue;
    }
    if (retry_status(res.response->status) && attempt + 1 < attempts) {
      last = "HTTP " + std::to_string(res.response->status);
      const std::string why = server_reason(*res.response);
      pause_before_retry(policy, attempt, &*res.response, what, why.empty() ? last : last + ": " + why);
      continue;
    }
    return std::move(*res.response);
  }
  throw Error(ErrorKind::kTransport,
              what + ": " + last + " (after " + std::to_string(attempts) + " attempts" + (hint.empty() ? "" : "; " + hint) + ")");
}

}  // namespace skippy::detail

namespace skippy {

std::string retry_line(const RetryNotice& n) {
  char delay[32];
  std::snprintf(delay, sizeof delay, n.delay_ms < 1000 ? "%.2f" : "%.1f", n.delay_ms / 1000.0);
  return "retry: " + n.what + ": " + n.reason + " (attempt " + std::to_string(n.attempt) + " of " +
         std::to_string(n.attempts) + " failed; trying again in " + delay + " s)";
}

void print_retry_line(const RetryNotice& n) {
  static std::mutex mu;
  const std::string line = retry_line(n);
  std::lock_guard g(mu);
  // On a terminal, first clear a progress line being drawn there.
  std::fprintf(stderr, "%s%s\n", ::isatty(2) == 1 ? "\r\033[K" : "", line.c_str());
  std::fflush(stderr);
}

void set_retry_reporter(RetryReporter reporter) {
  std::lock_guard g(detail::reporter_mu());
  detail::reporter() = std::move(reporter);
}

}  // namespace skippy
