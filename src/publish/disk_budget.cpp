#include "skippy/error.h"
#include "skippy/package_writer.h"

namespace skippy {

void DiskBudget::acquire(uint64_t bytes, uint64_t stuck) {
  std::unique_lock l(mu_);
  cv_.wait(l, [&] { return !cancelled_.empty() || used_ + bytes <= limit_ || used_ <= stuck; });
  if (!cancelled_.empty()) throw Error(ErrorKind::kTransport, cancelled_);
  used_ += bytes;
  peak_ = std::max(peak_, used_);
}

bool DiskBudget::try_acquire(uint64_t bytes) {
  std::lock_guard g(mu_);
  if (!cancelled_.empty() || bytes > limit_ || used_ > limit_ - bytes) return false;
  used_ += bytes;
  peak_ = std::max(peak_, used_);
  return true;
}

void DiskBudget::release(uint64_t bytes) {
  std::lock_guard g(mu_);
  used_ -= std::min(used_, bytes);
  cv_.notify_all();
}

void DiskBudget::cancel(const std::string& why) {
  std::lock_guard g(mu_);
  if (cancelled_.empty()) cancelled_ = why.empty() ? "cancelled" : why;
  cv_.notify_all();
}

uint64_t DiskBudget::peak() const {
  std::lock_guard g(mu_);
  return peak_;
}

uint64_t DiskBudget::used() const {
  std::lock_guard g(mu_);
  return used_;
}

}  // namespace skippy
