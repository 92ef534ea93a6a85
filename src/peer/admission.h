// Who gets a connection slot on the server, before and after authentication
// (a flood of unauthenticated sockets must not starve
// authenticated peers). Internal to src/peer; thread-safe.
//
// Two pools, each with its own cap:
//   unauthenticated  accepted, TLS handshake not finished (or finished by a
//                    peer we do not deal with, or waiting for its "server
//                    busy"): at most max_unauthenticated, and at most
//                    max_unauthenticated_per_address from one address. The
//                    caller bounds each with the short handshake deadline.
//   authenticated    a trusted peer past the handshake: at most
//                    max_authenticated. A flood of the first kind never
//                    takes a slot of this kind.
// When its address already holds max_unauthenticated_per_address, a
// newcomer takes the slot of that address's oldest connection that has not
// delivered its ClientHello (a flood from a legitimate peer's own address,
// same host or same NAT, must not lock it out); when every one of
// them has, the newcomer is refused. A connection whose ClientHello is
// answered keeps its slot: the answer waits for hello(), which says whether
// the slot is still its own.
// When the unauthenticated pool is full, a newcomer takes the slot of the
// oldest connection that has not delivered its ClientHello, from the
// address holding the most of those (a raw-socket flood holds those; a real
// peer sends its ClientHello at once). If every one has, it takes the
// oldest slot of the address holding the most, when that address would
// still hold at least as many as the newcomer's after the swap; else the
// newcomer is refused. Slots thus go first to connections that progress,
// then are shared out evenly between addresses.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>

namespace skippy::peer::detail {

struct AdmissionLimits {
  unsigned max_unauthenticated = 32;
  unsigned max_unauthenticated_per_address = 8;
  unsigned max_authenticated = 64;
};

class Admission {
 public:
  explicit Admission(AdmissionLimits limits) : limits_(limits) {}

  enum class Verdict {
    kAdmitted,          // a free slot
    kAdmittedEvicting,  // took the slot of another connection (its evict() was called)
    kAddressFull,       // refused: this address has max_unauthenticated_per_address already, none silent
    kFull,              // refused: the pool is full and nobody may be evicted for it
  };
  // At accept. `evict` ends that connection (it must not call back into
  // this object synchronously: post it). Refused connections are not kept.
  Verdict admit(uint64_t id, const std::string& address, std::function<void()> evict);
  // The connection's ClientHello is in, about to be answered: it is evicted
  // only after every connection that has not got that far. False: it lost
  // its slot meanwhile (its evict() is on its way): do not answer.
  bool hello(uint64_t id);
  // After the handshake, for a peer we deal with: moves the connection to
  // the authenticated pool when it has room (true). False: the server is
  // full; the connection stays unauthenticated, no longer evictable (it
  // gets its "server busy").
  bool authenticate(uint64_t id);
  // The connection ended (either pool; unknown ids are ignored).
  void release(uint64_t id);

  struct Counts {
    unsigned unauthenticated = 0, authenticated = 0;
    unsigned from_address = 0;  // unauthenticated ones from the address asked about
  };
  Counts counts(const std::string& address = {}) const;
  const AdmissionLimits& limits() const noexcept { return limits_; }

 private:
  struct Pending {
    std::string address;
    std::function<void()> evict;
    bool evictable = true;
    bool hello = false;  // its ClientHello was processed
  };
  std::map<uint64_t, Pending>::iterator choose_victim(unsigned newcomer_share);
  std::map<uint64_t, Pending>::iterator choose_victim_from(const std::string& address);
  const AdmissionLimits limits_;
  mutable std::mutex mu_;
  std::map<uint64_t, Pending> pending_;  // by id: oldest first
  std::map<std::string, unsigned> per_address_;
  std::set<uint64_t> authenticated_;
};

}  // namespace skippy::peer::detail
