#include "peer/admission.h"

#include <utility>

namespace skippy::peer::detail {

Admission::Verdict Admission::admit(uint64_t id, const std::string& address, std::function<void()> evict) {
  std::function<void()> victim;
  Verdict verdict = Verdict::kAdmitted;
  {
    std::lock_guard g(mu_);
    const unsigned mine = per_address_.count(address) ? per_address_.at(address) : 0;
    // The address is at its cap: the newcomer takes the slot of one of its
    // own (a flood from the worker's own address must not lock it out);
    // else the pool is full: of someone else's.
    const bool address_full = mine >= limits_.max_unauthenticated_per_address;
    if (address_full || pending_.size() >= limits_.max_unauthenticated) {
      const auto victim_it = address_full ? choose_victim_from(address) : choose_victim(mine);
      if (victim_it == pending_.end()) return address_full ? Verdict::kAddressFull : Verdict::kFull;
      victim = std::move(victim_it->second.evict);
      if (--per_address_[victim_it->second.address] == 0) per_address_.erase(victim_it->second.address);
      pending_.erase(victim_it);
      verdict = Verdict::kAdmittedEvicting;
    }
    pending_[id] = Pending{address, std::move(evict), true, false};
    ++per_address_[address];
  }
  if (victim) victim();
  return verdict;
}

std::map<uint64_t, Admission::Pending>::iterator Admission::choose_victim(unsigned mine) {
  // 1. A connection that has not even delivered its ClientHello (what a
  //    flood of raw sockets holds; a real peer sends its ClientHello at
  //    once): from the address holding the most of those, its oldest.
  // 2. Else, all of them past the ClientHello: from an address that would
  //    still hold at least as many as the newcomer's after the swap (so
  //    shares even out and never flip-flop), the address holding the most,
  //    its oldest.
  for (const bool silent_only : {true, false}) {
    std::map<std::string, unsigned> held;
    for (const auto& [pid, p] : pending_) {
      if (p.evictable && (!silent_only || !p.hello)) ++held[p.address];
    }
    const std::string* heaviest = nullptr;
    unsigned most = 0;
    for (const auto& [a, n] : held) {
      const unsigned share = silent_only ? n : per_address_.at(a);
      if (share > most) {
        most = share;
        heaviest = &a;
      }
    }
    if (!heaviest || (!silent_only && most < mine + 2)) continue;
    for (auto it = pending_.begin(); it != pending_.end(); ++it) {
      if (it->second.evictable && (!silent_only || !it->second.hello) && it->second.address == *heaviest) return it;
    }
  }
  return pending_.end();
}

std::map<uint64_t, Admission::Pending>::iterator Admission::choose_victim_from(const std::string& address) {
  // That address's oldest connection that has not delivered its ClientHello
  // (one that has is answered and keeps its slot: evicting it would break a
  // real peer's handshake half-way).
  for (auto it = pending_.begin(); it != pending_.end(); ++it) {
    const Pending& p = it->second;
    if (p.address == address && p.evictable && !p.hello) return it;
  }
  return pending_.end();
}

bool Admission::hello(uint64_t id) {
  std::lock_guard g(mu_);
  const auto it = pending_.find(id);
  if (it == pending_.end()) return false;
  it->second.hello = true;
  return true;
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
