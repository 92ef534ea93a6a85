#include "progress.h"

#include <cstdio>

#include "cli.h"
#include "util/env.h"

namespace skippy::cli {
namespace {

using Clock = std::chrono::steady_clock;

// "m:ss" left at `rate`, "--:--" when unknown.
std::string eta_text(uint64_t done, uint64_t total, double rate) {
  if (!(rate > 0) || total < done) return "--:--";
  const auto left = static_cast<long>(static_cast<double>(total - done) / rate);
  char b[32];
  std::snprintf(b, sizeof b, "%ld:%02ld", left / 60, left % 60);
  return b;
}

void clear_line(bool& drawn) {
  if (drawn) std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  drawn = false;
}

}  // namespace

ProgressStyle ProgressStyle::current() {
  const std::string mode = env::progress_mode();
  ProgressStyle s;
  if (mode == "off") return s;
  if (mode == "auto" && stderr_is_tty()) {
    s.mode = Mode::kRedraw;
    s.every = std::chrono::milliseconds(125);
    return s;
  }
  s.mode = Mode::kLines;
  s.every = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(env::progress_interval_secs()));
  return s;
}

bool ProgressStyle::due(Clock::time_point start, Clock::time_point& last, Clock::time_point now) const {
  if (mode == Mode::kOff || now - last < every) return false;
  // A redrawn line waits 0.3 s (quick jobs stay quiet); a plain line waits
  // one interval, so the first line of a log already has a rate.
  if (mode == Mode::kRedraw && now - start < std::chrono::milliseconds(300)) return false;
  last = now;
  return true;
}

void ProgressStyle::draw(const std::string& text, bool& drawn) const {
  if (mode == Mode::kRedraw) {
    std::fprintf(stderr, "\r\033[K%s", text.c_str());
    drawn = true;
  } else {
    std::fprintf(stderr, "%s\n", text.c_str());
  }
  std::fflush(stderr);
}

Progress::Progress(std::string label)
    : label_(std::move(label)), style_(ProgressStyle::current()), start_(Clock::now()), last_(start_) {}

Progress::~Progress() {
  if (drawn_) std::fprintf(stderr, "\r\033[K");
}

void Progress::update(uint64_t done, uint64_t total) {
  if (style_.mode == ProgressStyle::Mode::kOff) return;
  std::lock_guard g(mu_);
  if (total > 0 && done >= total) {
    // Finished: clear the line so what the command prints next starts clean.
    clear_line(drawn_);
    return;
  }
  const auto now = Clock::now();
  if (!style_.due(start_, last_, now)) return;
  const double secs = std::chrono::duration<double>(now - start_).count();
  const double rate = secs > 0 ? static_cast<double>(done) / secs : 0;
  const double pct = total ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0;
  char b[64];
  std::snprintf(b, sizeof b, "  %5.1f%%  ", pct);
  style_.draw(label_ + " " + human_bytes(done) + " / " + human_bytes(total) + b +
                  human_bytes(static_cast<uint64_t>(rate)) + "/s  ETA " + eta_text(done, total, rate),
              drawn_);
}

StreamProgress::StreamProgress(uint64_t source_total)
    : total_(source_total), style_(ProgressStyle::current()), start_(Clock::now()), last_(start_) {}

void StreamProgress::set_disk(uint64_t limit, std::function<uint64_t()> used) {
  std::lock_guard g(mu_);
  limit_ = limit;
  disk_ = std::move(used);
}

StreamProgress::~StreamProgress() {
  std::lock_guard g(mu_);
  if (drawn_) std::fprintf(stderr, "\r\033[K");
}

void StreamProgress::downloaded(uint64_t bytes) {
  down_ += bytes;
  draw();
}

void StreamProgress::uploaded(uint64_t done, uint64_t total) {
  up_ = done;
  up_total_ = total;
  draw();
}

double StreamProgress::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

double StreamProgress::download_rate() const {
  const double s = seconds();
  return s > 0 ? static_cast<double>(down_.load()) / s : 0;
}

double StreamProgress::upload_rate() const {
  const double s = seconds();
  return s > 0 ? static_cast<double>(up_.load()) / s : 0;
}

void StreamProgress::draw() {
  if (style_.mode == ProgressStyle::Mode::kOff) return;
  std::lock_guard g(mu_);
  const auto now = Clock::now();
  if (!style_.due(start_, last_, now)) return;
  const double secs = std::chrono::duration<double>(now - start_).count();
  const uint64_t down = down_, up = up_;
  const double rate = static_cast<double>(down) / secs;
  std::string disk;
  if (disk_) disk = "  disk " + human_bytes(disk_()) + " / " + human_bytes(limit_);
  style_.draw("downloaded " + human_bytes(down) + " / " + human_bytes(total_) + " (" +
                  human_bytes(static_cast<uint64_t>(rate)) + "/s)  uploaded " + human_bytes(up) + " (" +
                  human_bytes(static_cast<uint64_t>(static_cast<double>(up) / secs)) + "/s)" + disk + "  ETA " +
                  eta_text(down, total_, rate),
              drawn_);
}

}  // namespace skippy::cli
