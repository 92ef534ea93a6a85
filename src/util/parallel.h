// Runs independent jobs on a few threads, biggest first (so the longest job
// starts early and the cores finish together). The first exception thrown by
// a job is rethrown after all threads stop; remaining jobs are skipped.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <numeric>
#include <thread>
#include <vector>

namespace skippy::detail {

// The worker count a job runs with: `requested` when given, otherwise one per
// core (at least 1, at most 16: beyond that the disk, not the cores, is the
// floor for hashing and copying model bytes).
inline unsigned worker_threads(unsigned requested) {
  if (requested) return requested;
  return std::clamp(std::thread::hardware_concurrency(), 1u, 16u);
}

inline void run_jobs_largest_first(const std::vector<uint64_t>& sizes, unsigned threads,
                                   const std::function<void(size_t)>& job) {
  std::vector<size_t> order(sizes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sizes[a] > sizes[b]; });
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex mu;
  auto worker = [&] {
    for (;;) {
      {
        std::lock_guard g(mu);
        if (error) return;
      }
      const size_t i = next.fetch_add(1);
      if (i >= order.size()) return;
      try {
        job(order[i]);
      } catch (...) {
        std::lock_guard g(mu);
        if (!error) error = std::current_exception();
        return;
      }
    }
  };
  const unsigned n = std::max(1u, std::min<unsigned>(worker_threads(threads), static_cast<unsigned>(sizes.size())));
  std::vector<std::thread> pool;
  for (unsigned i = 1; i < n; ++i) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
}

}  // namespace skippy::detail
