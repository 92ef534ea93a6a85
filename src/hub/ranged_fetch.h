// Downloads at the speed of the pipe: one pool of kept-alive connections
// shared by every file of a fetch, and large files split into HTTP Range
// requests spread over those connections, written in place into the blob's
// .incomplete file (source/blob_writer.h: RangedBlobWriter). Internal.
//
// A signed storage URL that expires mid-download is refreshed (once per
// expiry, for every connection: they all move to the fresh URL) for the
// ranges still missing; a server that answers a Range request with 200 (it
// ignores Range) makes fetch_ranges return false so the caller receives the
// file in one stream instead.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "hub/http.h"
#include "skippy/error.h"
#include "hub/retry.h"
#include "hub/xet_download.h"
#include "source/blob_writer.h"

namespace skippy::detail {

// A fixed number of connections, each a thread with its own HttpConnection
// (so consecutive requests reuse the open TCP connection), taking jobs in
// the order they were queued.
class ConnectionPool {
 public:
  explicit ConnectionPool(unsigned connections);
  // Waits for the queued jobs, then stops the threads.
  ~ConnectionPool();
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  unsigned size() const noexcept { return static_cast<unsigned>(threads_.size()); }
  // Queues `job` (it must not throw: what it throws is lost).
  void submit(std::function<void(HttpConnection&)> job);
  // Runs `job` on one of the connections and waits for it; rethrows what it throws.
  void run(const std::function<void(HttpConnection&)>& job);

 private:
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void(HttpConnection&)>> queue_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

// Where a file's bytes are: the storage URL the Hub redirected to (no token
// there), or the Hub's own URL (token allowed).
struct DownloadLocation {
  std::string url;
  bool token_allowed = false;
};

struct RangedFetchOptions {
  ConnectionPool* pool = nullptr;
  unsigned connections = 8;           // at most this many requests at once for this file
  uint64_t range_bytes = 16u << 20;   // the missing bytes are asked for in ranges of this size
  RetryPolicy retry;                  // per range
  uint64_t min_rate_bytes_per_sec = 0;  // HttpRequest's floor on each range's rate (0: none)
  unsigned min_rate_secs = 30;
  std::vector<std::string> headers;   // sent with every request
  std::optional<std::string> token_header;  // "Authorization: Bearer ...", only where token_allowed
  // A fresh location describing the same bytes (a new HEAD on the Hub);
  // throws when the Hub's answer changed or it refuses.
  std::function<DownloadLocation()> refresh;
  // Throws the error for a final refusal of the Hub's own host (404, 401...).
  std::function<void(const HttpResponse&, const std::string& url)> refused;
  // A Xet-backed file: each range is read through Xet first, and from the
  // location above only where Xet cannot serve it (hub/xet_download.h).
  std::shared_ptr<XetRangeSource> xet;
};

// Where fetch_ranges puts one file's bytes: a blob of the Hugging Face cache
// (RangedBlobWriter), or the in-order stream a streamed write-package reads
// (hub/hub_stream.h). write_at is called from the connections' threads at
// once (each byte offset by one thread at a time); pump and notify from the
// one thread that waits for them.
class RangeTarget {
 public:
  virtual ~RangeTarget() = default;
  virtual const std::string& what() const = 0;  // prefixes every message
  virtual uint64_t size() const = 0;            // the file's size
  virtual std::vector<ByteRanges::Range> missing() const = 0;
  virtual uint64_t received() const = 0;
  virtual void write_at(uint64_t offset, std::span<const uint8_t> data) = 0;
  virtual void pump(std::chrono::milliseconds wait) = 0;
  virtual void notify() = 0;
  // Called before a connection asks for [first, end) (in the order the
  // ranges are taken): may block until the target has room for them
  // (back-pressure), returning false when it never will (the reader
  // stopped). `stop` turns true when the fetch is stopping anyway.
  virtual bool admit(uint64_t first, uint64_t end, const std::atomic<bool>& stop) {
    (void)first;
    (void)end;
    (void)stop;
    return true;
  }
};

// [first, first + buf.size()) of a file of `size` bytes into memory the
// caller holds (a header prefix, which may grow in place).
class PrefixTarget final : public detail::RangeTarget {
 public:
  PrefixTarget(std::string what, uint64_t size, uint64_t first, std::span<uint8_t> buf)
      : what_(std::move(what)), size_(size), first_(first), buf_(buf) {}
  const std::string& what() const override { return what_; }
  uint64_t size() const override { return size_; }
  std::vector<ByteRanges::Range> missing() const override {
    return got_ < buf_.size() ? std::vector<ByteRanges::Range>{{first_ + got_, first_ + buf_.size()}} : std::vector<ByteRanges::Range>{};
  }
  uint64_t received() const override { return got_; }
  void write_at(uint64_t offset, std::span<const uint8_t> data) override {
    if (offset < first_ || offset - first_ + data.size() > buf_.size()) {
      throw Error(ErrorKind::kIntegrity, what_ + ": bytes arrived outside the range asked for");
    }
    std::memcpy(buf_.data() + (offset - first_), data.data(), data.size());
    got_ = std::max<uint64_t>(got_, offset - first_ + data.size());
  }
  void pump(std::chrono::milliseconds wait) override {
    std::unique_lock g(mu_);
    cv_.wait_for(g, wait, [&] { return woken_; });
    woken_ = false;
  }
  void notify() override {
    std::lock_guard g(mu_);
    woken_ = true;
    cv_.notify_all();
  }
  bool complete() const { return got_ == buf_.size(); }

 private:
  std::string what_;
  uint64_t size_, first_;
  std::span<uint8_t> buf_;
  std::atomic<uint64_t> got_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool woken_ = false;
};

// Brings every range target.missing() lists, over up to options.connections
// pooled connections at once, pumping the target (a blob hashes its prefix
// as it grows) while it waits. Returns true when the target is complete;
// false when the server ignored Range (nothing more was written then:
// receive the file in one stream). Throws Error when a range cannot be had
// (its retries used up, a refusal, the disk, the target refusing to admit
// it): the target keeps every byte that did arrive.
bool fetch_ranges(RangeTarget& target, const DownloadLocation& start, const RangedFetchOptions& options);
// The same into a blob of the cache.
bool fetch_ranges(RangedBlobWriter& writer, const DownloadLocation& start, const RangedFetchOptions& options);

// The range size for a file of `size` bytes over `connections`: about four
// ranges per connection (so the hashed prefix grows steadily and a slow
// connection holds back little at the end), at least `min_range` and at
// most 64 MiB, in whole 64 KiB.
uint64_t range_size_for(uint64_t size, unsigned connections, uint64_t min_range) noexcept;

}  // namespace skippy::detail
