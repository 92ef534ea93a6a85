#include "hub/hub_status.h"
#include "hub/ranged_fetch.h"
#include "hub/xet_download.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <exception>
#include <map>

#include "skippy/error.h"

namespace skippy::detail {

namespace {

constexpr unsigned kMaxRedirects = 5;
constexpr uint64_t kMaxRange = uint64_t{64} << 20;
constexpr uint64_t kRangeAlign = uint64_t{64} << 10;

bool parse_u64_exact(std::string_view s, uint64_t& v) {
  if (s.empty() || s.size() > 20) return false;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size();
}

// "bytes A-B/T" is exactly [first, end) of a file of `size` bytes.
bool content_range_is(const std::string& value, uint64_t first, uint64_t end, uint64_t size) {
  std::string_view v(value);
  if (!v.starts_with("bytes ")) return false;
  v.remove_prefix(6);
  const auto dash = v.find('-'), slash = v.find('/');
  if (dash == std::string_view::npos || slash == std::string_view::npos || slash < dash) return false;
  uint64_t a = 0, b = 0, t = 0;
  return parse_u64_exact(v.substr(0, dash), a) && parse_u64_exact(v.substr(dash + 1, slash - dash - 1), b) &&
         parse_u64_exact(v.substr(slash + 1), t) && a == first && b + 1 == end && t == size;
}

// The state one file's range workers share.
struct Shared {
  std::mutex mu;
  std::deque<ByteRanges::Range> pending;
  DownloadLocation where;
  uint64_t generation = 0;        // bumped whenever `where` changes
  unsigned redirects = 0;
  // Per location (generation): requests still waiting for their answer, and
  // whether any got its range. A refusal is judged once the others sent
  // on that location have answered.
  struct Tally {
    unsigned waiting = 0;
    bool served = false;
  };
  std::map<uint64_t, Tally> tally;
  std::condition_variable answered;
  unsigned dead_locations = 0;  // locations in a row refused before serving anything
  std::optional<Error> fatal;     // the first error that stops the file
  bool ranges_ignored = false;
  unsigned running = 0;
  std::atomic<bool> stop{false};  // fatal or ranges_ignored: every transfer winds down
  std::mutex refresh_mu;          // one refresh at a time

  void fail(Error e) {
    std::lock_guard g(mu);
    if (!fatal) fatal = std::move(e);
    stop = true;
  }
};

class RangeWorker {
 public:
  RangeWorker(RangeTarget& w, Shared& sh, const RangedFetchOptions& o) : w_(w), sh_(sh), o_(o) {}

  void run(HttpConnection& conn) {
    for (;;) {
      ByteRanges::Range r;
      {
        std::lock_guard g(sh_.mu);
        if (sh_.stop || sh_.pending.empty()) return;
        r = sh_.pending.front();
        sh_.pending.pop_front();
      }
      if (!w_.admit(r.first, r.second, sh_.stop)) {
        if (!sh_.stop) sh_.fail(Error(ErrorKind::kTransport, what() + ": the reader of the stream stopped"));
        return;
      }
      if (o_.xet) {  // through Xet first; the location serves what Xet could not
        XetRangeSource::Outcome got;
        try {
          got = o_.xet->fetch(conn, r.first, r.second, w_, sh_.stop);
        } catch (const Error& e) {
          sh_.fail(e);
          return;
        }
        if (got == XetRangeSource::Outcome::kDone) continue;
        if (got == XetRangeSource::Outcome::kStopped) return;
      }
      if (!fetch(conn, r.first, r.second)) return;
    }
  }

 private:
  const std::string& what() const { return w_.what(); }

  // [pos, end), with retries; false when the file must stop.
  bool fetch(HttpConnection& conn, uint64_t pos, const uint64_t end) {
    unsigned failures = 0;
    std::string failure;
    while (pos < end) {
      DownloadLocation where;
      uint64_t generation;
      {
        std::lock_guard g(sh_.mu);
        if (sh_.stop) return false;
        where = sh_.where;
        generation = sh_.generation;
        ++sh_.tally[generation].waiting;
      }
      bool answered = false;
      auto answer_is = [&](bool served) {
        if (answered) return;
        answered = true;
        {
          std::lock_guard g(sh_.mu);
          auto& t = sh_.tally[generation];
          --t.waiting;
          t.served = t.served || served;
        }
        sh_.answered.notify_all();
      };
      HttpRequest req;
      req.url = where.url;
      req.headers = o_.headers;
      if (where.token_allowed && o_.token_header) req.headers.push_back(*o_.token_header);
      req.headers.push_back("Range: bytes=" + std::to_string(pos) + "-" + std::to_string(end - 1));
      req.min_rate_bytes_per_sec = o_.min_rate_bytes_per_sec;
      req.min_rate_secs = o_.min_rate_secs;
      const uint64_t asked = pos;
      bool ignored = false, stopped = false;
      std::string bad_range;
      std::optional<Error> sink_error;
      req.on_start = [&](long status, const std::map<std::string, std::string>& h) {
        if (status == 200) {
          ignored = true;
          return false;
        }
        const auto it = h.find("content-range");
        if (it == h.end() || !content_range_is(it->second, asked, end, w_.size())) {
          bad_range = "the server answered another range (" + (it == h.end() ? std::string("none") : it->second) +
                      ") for bytes=" + std::to_string(asked) + "-" + std::to_string(end - 1);
          return false;
        }
        answer_is(true);
        return true;
      };
      req.sink = [&](std::span<const uint8_t> data) {
        if (sh_.stop) {
          stopped = true;
          return false;
        }
        if (data.size() > end - pos) {
          sink_error = Error(ErrorKind::kIntegrity, what() + ": more bytes than the range " + std::to_string(asked) +
                                                        "-" + std::to_string(end - 1) + " asked for arrived");
          return false;
        }
        try {
          w_.write_at(pos, data);
        } catch (const Error& e) {
          sink_error = e;
          return false;
        }
        pos += data.size();
        return true;
      };
      auto res = conn.perform(req);
      answer_is(false);
      if (ignored) {
        std::lock_guard g(sh_.mu);
        sh_.ranges_ignored = true;
        sh_.stop = true;
        return false;
      }
      if (sink_error) {
        sh_.fail(*sink_error);
        return false;
      }
      if (stopped) return false;
      const HttpResponse* answer = nullptr;
      if (res.error) {
        failure = !bad_range.empty() ? bad_range : res.error->message;
        if (!res.error->retryable && bad_range.empty()) {
          sh_.fail(Error(ErrorKind::kTransport, what() + ": " + failure));
          return false;
        }
      } else {
        const HttpResponse& r = *res.response;
        answer = &r;
        if (r.status == 206) {
          if (pos >= end) return true;
          failure = "a range request ended after " + std::to_string(pos - asked) + " of " + std::to_string(end - asked) +
                    " bytes";
        } else if (r.status == 301 || r.status == 302 || r.status == 303 || r.status == 307 || r.status == 308) {
          if (!follow(r, where, generation)) return false;
          continue;  // a redirect is not a failed attempt
        } else if (storage_url_may_have_expired(r.status) && !where.token_allowed) {
          if (!refresh(r, generation)) return false;
          continue;
        } else if (r.status == 416) {
          sh_.fail(Error(ErrorKind::kInvalidInput,
                         what() + ": the storage host answered HTTP 416 for bytes " + std::to_string(asked) + "-" +
                             std::to_string(end - 1) + " of a file the Hub says has " +
                             std::to_string(w_.size()) + " bytes"));
          return false;
        } else if (retry_status(r.status)) {
          failure = "HTTP " + std::to_string(r.status) + reason_tail(r);
        } else {
          refused(r, where);
          return false;
        }
      }
      if (++failures >= std::max(1u, o_.retry.max_attempts)) {
        const uint64_t kept = w_.received();
        sh_.fail(Error(ErrorKind::kTransport, what() + ": download failed after " + std::to_string(failures) +
                                                  " attempts at bytes " + std::to_string(pos) + "-" +
                                                  std::to_string(end - 1) + ": " + failure + " (" + std::to_string(kept) +
                                                  " of " + std::to_string(w_.size()) +
                                                  " bytes kept; the next run resumes)"));
        return false;
      }
      pause_before_retry(o_.retry, failures - 1, answer,
                         what() + " (bytes " + std::to_string(pos) + "-" + std::to_string(end - 1) + ")", failure);
    }
    return true;
  }

  bool follow(const HttpResponse& r, const DownloadLocation& from, uint64_t generation) {
    const auto loc = r.header("location");
    std::lock_guard g(sh_.mu);
    if (sh_.generation != generation) return true;  // another worker moved on already
    if (!loc || loc->empty() || ++sh_.redirects > kMaxRedirects) {
      if (!sh_.fatal) {
        sh_.fatal = Error(ErrorKind::kInvalidInput, what() + ": " + (loc ? "too many redirects" : "a redirect without a Location") +
                                                        " from " + from.url);
      }
      sh_.stop = true;
      return false;
    }
    const auto next = follow_location(from.url, *loc);
    sh_.where.token_allowed = from.token_allowed && next.same_origin;
    sh_.where.url = next.url;
    ++sh_.generation;
    return true;
  }

  // A signed storage URL that expired (or was refused): a fresh one from the
  // Hub, shared by every worker. When two locations in a row served nothing
  // (every request sent there was refused), the file stops with the
  // storage's reason.
  bool refresh(const HttpResponse& r, uint64_t generation) {
    std::lock_guard rg(sh_.refresh_mu);
    std::unique_lock g(sh_.mu);
    if (sh_.generation != generation) return !sh_.stop;  // refreshed meanwhile: use that
    // Let the requests still out on this location answer first (bounded:
    // one that hangs is judged without).
    sh_.answered.wait_for(g, std::chrono::seconds(2), [&] {
      const auto& t = sh_.tally[generation];
      return t.served || t.waiting == 0 || sh_.stop;
    });
    if (sh_.stop) return false;
    const bool served = sh_.tally[generation].served;
    sh_.dead_locations = served ? 0 : sh_.dead_locations + 1;
    if (sh_.dead_locations >= 2 || !o_.refresh) {
      const std::string origin = url_origin(sh_.where.url);
      g.unlock();
      sh_.fail(Error(r.status == 400 ? ErrorKind::kTransport : ErrorKind::kUnauthorized,
                     what() + ": the storage host " + origin + " answered HTTP " + std::to_string(r.status) +
                         reason_tail(r) + request_id_note(r)));
      return false;
    }
    g.unlock();
    DownloadLocation fresh;
    try {
      fresh = o_.refresh();
    } catch (const Error& e) {
      sh_.fail(e);
      return false;
    }
    g.lock();
    sh_.where = std::move(fresh);
    sh_.redirects = 0;
    ++sh_.generation;
    return true;
  }

  void refused(const HttpResponse& r, const DownloadLocation& where) {
    if (!where.token_allowed || !o_.refused) {
      sh_.fail(storage_refusal(r, what(), where.url));
      return;
    }
    try {
      o_.refused(r, where.url);
      sh_.fail(Error(ErrorKind::kTransport, what() + ": HTTP " + std::to_string(r.status) + " from " + where.url));
    } catch (const Error& e) {
      sh_.fail(e);
    }
  }

  RangeTarget& w_;
  Shared& sh_;
  const RangedFetchOptions& o_;
};

}  // namespace

ConnectionPool::ConnectionPool(unsigned connections) {
  const unsigned n = std::max(1u, connections);
  threads_.reserve(n);
  for (unsigned i = 0; i < n; ++i) threads_.emplace_back([this] { loop(); });
}

ConnectionPool::~ConnectionPool() {
  {
    std::lock_guard g(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void ConnectionPool::loop() {
  HttpConnection conn;
  for (;;) {
    std::function<void(HttpConnection&)> job;
    {
      std::unique_lock g(mu_);
      cv_.wait(g, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      job(conn);
    } catch (...) {
      // submit()'s jobs report their own failures; run() carries its own.
    }
  }
}

void ConnectionPool::submit(std::function<void(HttpConnection&)> job) {
  {
    std::lock_guard g(mu_);
    queue_.push_back(std::move(job));
  }
  cv_.notify_one();
}

void ConnectionPool::run(const std::function<void(HttpConnection&)>& job) {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;
  submit([&](HttpConnection& conn) {
    try {
      job(conn);
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard g(m);
    done = true;
    cv.notify_all();
  });
  std::unique_lock g(m);
  cv.wait(g, [&] { return done; });
  if (error) std::rethrow_exception(error);
}

uint64_t range_size_for(uint64_t size, unsigned connections, uint64_t min_range) noexcept {
  const uint64_t parts = uint64_t{std::max(1u, connections)} * 4;
  uint64_t r = (size + parts - 1) / parts;
  r = std::clamp<uint64_t>(r, std::max<uint64_t>(min_range, kRangeAlign), std::max(kMaxRange, min_range));
  return (r + kRangeAlign - 1) / kRangeAlign * kRangeAlign;
}

namespace {

// A cache blob as a RangeTarget.
class BlobTarget final : public RangeTarget {
 public:
  explicit BlobTarget(RangedBlobWriter& w) : w_(w) {}
  const std::string& what() const override { return w_.spec().what; }
  uint64_t size() const override { return w_.spec().size; }
  std::vector<ByteRanges::Range> missing() const override { return w_.missing(); }
  uint64_t received() const override { return w_.received(); }
  void write_at(uint64_t offset, std::span<const uint8_t> data) override { w_.write_at(offset, data); }
  void pump(std::chrono::milliseconds wait) override { w_.pump(wait); }
  void notify() override { w_.notify(); }

 private:
  RangedBlobWriter& w_;
};

}  // namespace

bool fetch_ranges(RangedBlobWriter& writer, const DownloadLocation& start, const RangedFetchOptions& options) {
  BlobTarget target(writer);
  return fetch_ranges(target, start, options);
}

bool fetch_ranges(RangeTarget& writer, const DownloadLocation& start, const RangedFetchOptions& options) {
  Shared sh;
  sh.where = start;
  const uint64_t step = std::max<uint64_t>(options.range_bytes, 1);
  for (const auto& [a, b] : writer.missing()) {
    for (uint64_t off = a; off < b; off += std::min(step, b - off)) sh.pending.push_back({off, std::min(b, off + step)});
  }
  if (sh.pending.empty()) return true;
  const unsigned workers =
      static_cast<unsigned>(std::min<size_t>(std::max(1u, options.connections), sh.pending.size()));
  sh.running = workers;
  RangeWorker worker(writer, sh, options);
  for (unsigned i = 0; i < workers; ++i) {
    options.pool->submit([&](HttpConnection& conn) {
      try {
        worker.run(conn);
      } catch (const Error& e) {
        sh.fail(e);
      } catch (const std::exception& e) {
        sh.fail(Error(ErrorKind::kIo, writer.what() + ": " + e.what()));
      }
      // Wake the hashing thread while still holding sh.mu: it reads
      // `running` under sh.mu, so it cannot see 0, return, and let the
      // caller destroy `writer` before notify() is done with it.
      std::lock_guard g(sh.mu);
      --sh.running;
      writer.notify();
    });
  }
  // This thread hashes the prefix as it grows and records finished ranges,
  // until every worker is done (they use `sh`: never leave before that).
  std::optional<Error> local;
  for (;;) {
    {
      std::lock_guard g(sh.mu);
      if (sh.running == 0) break;
    }
    try {
      writer.pump(std::chrono::milliseconds(50));
    } catch (const Error& e) {
      if (!local) local = e;
      sh.stop = true;
    }
  }
  if (local) throw *local;
  if (sh.fatal) throw *sh.fatal;
  if (sh.ranges_ignored) return false;
  return true;
}

}  // namespace skippy::detail
