// Progress of long work (bytes, rate, ETA) on stderr, once the work takes
// long enough to matter: one redrawn line on a terminal; elsewhere (a log,
// nohup, CI) a plain line every SKIPPY_PROGRESS_SECS (default 10 s), so a log
// shows that the work moves and when it will end. SKIPPY_PROGRESS=lines or off
// chooses (util/env.h).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <cstdint>
#include <mutex>
#include <string>

namespace skippy::cli {

// How progress is shown in this process (from stderr and the environment).
struct ProgressStyle {
  enum class Mode { kOff, kRedraw, kLines } mode = Mode::kOff;
  std::chrono::steady_clock::duration every{};  // between draws
  static ProgressStyle current();
  // Whether a draw at `now` is due (updates `last`): the first after `every`
  // (a redrawn line after 0.3 s), then one per `every`.
  bool due(std::chrono::steady_clock::time_point start, std::chrono::steady_clock::time_point& last,
           std::chrono::steady_clock::time_point now) const;
  // Puts `text` on stderr: over the current line, or as a line of its own.
  void draw(const std::string& text, bool& drawn) const;
};

class Progress {
 public:
  explicit Progress(std::string label);
  ~Progress();  // clears the line
  // Thread-safe; cheap when called often (redraws at most ~8 times a second).
  // Reaching the total clears the line (what the command prints next starts clean).
  void update(uint64_t done, uint64_t total);

 private:
  std::string label_;
  const ProgressStyle style_;
  bool drawn_ = false;
  std::mutex mu_;
  std::chrono::steady_clock::time_point start_, last_;
};

// write-package --stream's one line: the source downloaded against its
// size, the package uploaded, the disk held against --max-disk, both
// rates and the ETA (from the download, which paces the run). Counters are
// thread-safe; drawn as Progress is. The rates also go into --json.
class StreamProgress {
 public:
  explicit StreamProgress(uint64_t source_total);
  // With --max-disk: the limit, and what reads the bytes held now.
  void set_disk(uint64_t limit, std::function<uint64_t()> used);
  ~StreamProgress();
  void downloaded(uint64_t bytes);                 // more bytes of the source arrived
  void uploaded(uint64_t done, uint64_t total);    // the publisher's progress
  uint64_t downloaded_bytes() const { return down_; }
  double seconds() const;
  double download_rate() const;  // bytes/s since the start
  double upload_rate() const;

 private:
  void draw();
  const uint64_t total_;
  uint64_t limit_ = 0;
  std::function<uint64_t()> disk_;
  const ProgressStyle style_;
  std::atomic<uint64_t> down_{0}, up_{0}, up_total_{0};
  std::mutex mu_;
  bool drawn_ = false;
  const std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace skippy::cli
