// The server's admission rule (src/peer/admission.h), alone:
// which connection gets a slot before and after authentication.
#include <gtest/gtest.h>

#include <set>

#include "peer/admission.h"

namespace skippy::peer::detail {
namespace {

using V = Admission::Verdict;

struct Pool {
  Admission a{AdmissionLimits{4, 2, 2}};  // 4 unauthenticated, 2 per address, 2 authenticated
  std::set<uint64_t> evicted;
  uint64_t next = 0;
  V admit(const std::string& address, uint64_t* id = nullptr) {
    const uint64_t n = ++next;
    if (id) *id = n;
    return a.admit(n, address, [this, n] { evicted.insert(n); });
  }
};

TEST(PeerAdmission, CapsPerAddressAndInAll) {
  Pool p;
  EXPECT_EQ(p.admit("10.0.0.1"), V::kAdmitted);
  EXPECT_EQ(p.admit("10.0.0.1"), V::kAdmitted);
  EXPECT_EQ(p.admit("10.0.0.2"), V::kAdmitted);
  EXPECT_EQ(p.admit("10.0.0.3"), V::kAdmitted);
  EXPECT_EQ(p.a.counts().unauthenticated, 4u);
  EXPECT_EQ(p.a.counts("10.0.0.1").from_address, 2u);
  EXPECT_TRUE(p.evicted.empty());
}

// At its address's cap, a newcomer takes that address's oldest
// silent slot; one whose ClientHello is in keeps its slot, so when every one
// has, the newcomer is refused. Other addresses are not touched; a
// connection that lost its slot is told so at its ClientHello.
TEST(PeerAdmission, AtItsAddressCapANewcomerTakesThatAddressOldestSilentSlot) {
  Pool p;
  uint64_t a1 = 0, a2 = 0, b1 = 0;
  p.admit("a", &a1);
  p.admit("a", &a2);
  p.admit("b", &b1);          // silent, older than a's newcomers: never the victim
  EXPECT_TRUE(p.a.hello(a2));  // a2's handshake is under way, a1 says nothing
  uint64_t a3 = 0;
  EXPECT_EQ(p.admit("a", &a3), V::kAdmittedEvicting);
  EXPECT_EQ(p.evicted, (std::set<uint64_t>{a1}));
  EXPECT_FALSE(p.a.hello(a1));  // its ClientHello, come late: not answered
  uint64_t a4 = 0;
  EXPECT_EQ(p.admit("a", &a4), V::kAdmittedEvicting);  // a3, silent, goes
  EXPECT_EQ(p.evicted, (std::set<uint64_t>{a1, a3}));
  EXPECT_TRUE(p.a.hello(a4));
  // Both of a's slots are past the ClientHello: refused, nobody evicted.
  EXPECT_EQ(p.admit("a"), V::kAddressFull);
  EXPECT_EQ(p.evicted.size(), 2u);
  EXPECT_EQ(p.evicted.count(b1), 0u);
  EXPECT_EQ(p.a.counts("a").from_address, 2u);
  EXPECT_EQ(p.a.counts().unauthenticated, 3u);
}

TEST(PeerAdmission, ANewcomerTakesTheOldestSilentSlotOfTheAddressHoldingTheMost) {
  Pool p;
  uint64_t a1 = 0, a2 = 0, b1 = 0, c1 = 0;
  p.admit("a", &a1);
  p.admit("a", &a2);
  p.admit("b", &b1);
  p.admit("c", &c1);
  p.a.hello(b1);  // b's and c's handshakes are under way, a's say nothing
  p.a.hello(c1);
  EXPECT_EQ(p.admit("d"), V::kAdmittedEvicting);
  EXPECT_EQ(p.evicted, (std::set<uint64_t>{a1}));
  EXPECT_EQ(p.admit("d"), V::kAdmittedEvicting);
  EXPECT_EQ(p.evicted, (std::set<uint64_t>{a1, a2}));
  // Now every slot has sent its ClientHello but d's two: d is the heaviest
  // silent address, so a newcomer takes d's oldest.
  p.evicted.clear();
  EXPECT_EQ(p.admit("e"), V::kAdmittedEvicting);
  EXPECT_EQ(p.evicted.size(), 1u);
  EXPECT_EQ(*p.evicted.begin(), 5u);
}

TEST(PeerAdmission, PastTheClientHelloSharesEvenOutAndNeverFlipFlop) {
  Pool p;
  uint64_t ids[4] = {};
  p.admit("a", &ids[0]);
  p.admit("a", &ids[1]);
  p.admit("b", &ids[2]);
  p.admit("c", &ids[3]);
  for (const auto id : ids) p.a.hello(id);
  // "a" holds 2: a newcomer from "d" (0) may take one of them.
  EXPECT_EQ(p.admit("d"), V::kAdmittedEvicting);
  EXPECT_EQ(p.evicted, (std::set<uint64_t>{ids[0]}));
  p.a.hello(5);
  // Everyone holds 1: nobody gives up a slot for an equal.
  EXPECT_EQ(p.admit("e"), V::kFull);
  EXPECT_EQ(p.evicted.size(), 1u);
}

TEST(PeerAdmission, AuthenticatedPeersHaveTheirOwnCapacity) {
  Pool p;
  uint64_t x = 0, y = 0, z = 0;
  p.admit("a", &x);
  p.admit("b", &y);
  p.admit("c", &z);
  EXPECT_TRUE(p.a.authenticate(x));
  EXPECT_TRUE(p.a.authenticate(y));
  EXPECT_EQ(p.a.counts().authenticated, 2u);
  EXPECT_EQ(p.a.counts().unauthenticated, 1u);
  // Full: z stays unauthenticated (for its "server busy") and is not evictable.
  EXPECT_FALSE(p.a.authenticate(z));
  for (int i = 0; i < 3; ++i) p.admit("f" + std::to_string(i));
  EXPECT_EQ(p.a.counts().unauthenticated, 4u);
  EXPECT_EQ(p.admit("g"), V::kAdmittedEvicting);
  EXPECT_EQ(p.evicted.count(z), 0u);
  // Unauthenticated connections never took an authenticated slot.
  EXPECT_EQ(p.a.counts().authenticated, 2u);
  p.a.release(x);
  p.a.release(x);  // twice: harmless
  EXPECT_EQ(p.a.counts().authenticated, 1u);
  p.a.release(z);
  EXPECT_EQ(p.a.counts().unauthenticated, 3u);
}

}  // namespace
}  // namespace skippy::peer::detail
