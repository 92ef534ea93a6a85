#include "progress.h"

#include <cstdio>

#include "cli.h"

namespace skippy::cli {

Progress::Progress(std::string label)
    : label_(std::move(label)), enabled_(stderr_is_tty()), start_(std::chrono::steady_clock::now()), last_(start_) {}

Progress::~Progress() {
  if (drawn_) std::fprintf(stderr, "\r\033[K");
}

void Progress::update(uint64_t done, uint64_t total) {
  if (!enabled_) return;
  std::lock_guard g(mu_);
  if (total > 0 && done >= total) {
    // Finished: clear the line so what the command prints next starts clean.
    if (drawn_) std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    drawn_ = false;
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  if (now - last_ < std::chrono::milliseconds(125)) return;
  last_ = now;
  const double secs = std::chrono::duration<double>(now - start_).count();
  if (secs < 0.3) return;  // quick jobs stay quiet
  const double rate = secs > 0 ? static_cast<double>(done) / secs : 0;
  std::string eta = "--:--";
  if (rate > 0 && total >= done) {
    const auto left = static_cast<long>(static_cast<double>(total - done) / rate);
    char b[32];
    std::snprintf(b, sizeof b, "%ld:%02ld", left / 60, left % 60);
    eta = b;
  }
  const double pct = total ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100.0;
  std::fprintf(stderr, "\r\033[K%s %s / %s  %5.1f%%  %s/s  ETA %s", label_.c_str(), human_bytes(done).c_str(),
               human_bytes(total).c_str(), pct, human_bytes(static_cast<uint64_t>(rate)).c_str(), eta.c_str());
  drawn_ = true;
  std::fflush(stderr);
}

StreamProgress::StreamProgress(uint64_t source_total)
    : total_(source_total), enabled_(stderr_is_tty()), start_(std::chrono::steady_clock::now()), last_(start_) {}

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
  if (!enabled_) return;
  std::lock_guard g(mu_);
  const auto now = std::chrono::steady_clock::now();
  if (now - last_ < std::chrono::milliseconds(125)) return;
  last_ = now;
  const double secs = std::chrono::duration<double>(now - start_).count();
  if (secs < 0.3) return;
  const uint64_t down = down_;
  const double rate = static_cast<double>(down) / secs;
  std::string eta = "--:--";
  if (rate > 0 && total_ >= down) {
    const auto left = static_cast<long>(static_cast<double>(total_ - down) / rate);
    char b[32];
    std::snprintf(b, sizeof b, "%ld:%02ld", left / 60, left % 60);
    eta = b;
  }
  std::string disk;
  if (disk_) disk = "  disk " + human_bytes(disk_()) + " / " + human_bytes(limit_);
  std::fprintf(stderr, "\r\033[Kdownloaded %s / %s (%s/s)  uploaded %s (%s/s)%s  ETA %s", human_bytes(down).c_str(),
               human_bytes(total_).c_str(), human_bytes(static_cast<uint64_t>(rate)).c_str(),
               human_bytes(up_.load()).c_str(), human_bytes(static_cast<uint64_t>(static_cast<double>(up_.load()) / secs)).c_str(),
               disk.c_str(), eta.c_str());
  drawn_ = true;
  std::fflush(stderr);
}

}  // namespace skippy::cli
