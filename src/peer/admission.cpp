#include "peer/admission.h"

#include <utility>

namespace skippy::peer::detail {

Admission::Verdict Admission::admit(uint64_t id, const std::string& address, std::function<void()> evict) {
  std::function<void()> victim;
  Verdict verdict = Verdict::kAdmitted;
  {
    std::lock_guard g(mu_);
    const unsigned mine = per_address_.count(address) ? per_address_.at(address) : 0;
    if (mine >= limits_.max_unauthenticated_per_address) return Verdict::kAddressFull;
    if (pending_.size() >= limits_.max_unauthenticated) {
      // The address with the most evictable slots, and its oldest one.
      std::map<std::string, unsigned> evictable;
      for (const auto& [pid, p] : pending_) {
        if (p.evictable) ++evictable[p.address];
      }
      const std::string* heaviest = nullptr;
      unsigned most = 0;
      for (const auto& [a, n] : evictable) {
        const unsigned held = per_address_.at(a);
        if (held > most) {
          most = held;
          heaviest = &a;
        }
      }
      // Only when that address would still hold at least as many as the
      // newcomer's after the swap: shares even out, never flip-flop.
      if (!heaviest || most < mine + 2) return Verdict::kFull;
      for (auto it = pending_.begin(); it != pending_.end(); ++it) {
        if (it->second.evictable && it->second.address == *heaviest) {
          victim = std::move(it->second.evict);
          if (--per_address_[it->second.address] == 0) per_address_.erase(it->second.address);
          pending_.erase(it);
          break;
        }
      }
      verdict = Verdict::kAdmittedEvicting;
    }
    pending_[id] = Pending{address, std::move(evict), true};
    ++per_address_[address];
  }
  if (victim) victim();
  return verdict;
}

bool Admission::authenticate(uint64_t id) {
  std::lock_guard g(mu_);
  const auto it = pending_.find(id);
  if (it == pending_.end()) return false;  // evicted meanwhile: it is ending anyway
  if (authenticated_.size() >= limits_.max_authenticated) {
    it->second.evictable = false;
    return false;
  }
  if (--per_address_[it->second.address] == 0) per_address_.erase(it->second.address);
  pending_.erase(it);
  authenticated_.insert(id);
  return true;
}

void Admission::release(uint64_t id) {
  std::lock_guard g(mu_);
  if (authenticated_.erase(id)) return;
  const auto it = pending_.find(id);
  if (it == pending_.end()) return;
  if (--per_address_[it->second.address] == 0) per_address_.erase(it->second.address);
  pending_.erase(it);
}

Admission::Counts Admission::counts(const std::string& address) const {
  std::lock_guard g(mu_);
  Counts c;
  c.unauthenticated = static_cast<unsigned>(pending_.size());
  c.authenticated = static_cast<unsigned>(authenticated_.size());
  if (const auto it = per_address_.find(address); it != per_address_.end()) c.from_address = it->second;
  return c;
}

}  // namespace skippy::peer::detail
