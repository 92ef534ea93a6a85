// A one-line progress display (bytes, rate, ETA) on stderr, shown only when
// stderr is a terminal and the work takes long enough to matter.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace skippy::cli {

class Progress {
 public:
  explicit Progress(std::string label);
  ~Progress();  // clears the line
  // Thread-safe; cheap when called often (redraws at most ~8 times a second).
  // Reaching the total clears the line (what the command prints next starts clean).
  void update(uint64_t done, uint64_t total);

 private:
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
  std::mutex mu_;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace skippy::cli
