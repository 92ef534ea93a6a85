// N-gram proposers and the verification rule (spec: "Speculative Decoding":
// ngram-cache, ngram-suffix, composite, "commits the accepted prefix only"),
// on realistic token streams with their acceptance counts.
#include <gtest/gtest.h>

#include "skippy/error.h"
#include "skippy/ngram.h"
#include "token_streams.h"

namespace skippy {
namespace {

using test::DecodeStats;
using test::simulate_decode;

constexpr size_t kStreamTokens = 4096;
constexpr size_t kPrompt = 256;

std::vector<Token> propose(DraftProposer& p, std::vector<Token> provisional = {}, size_t max = 64) {
  std::vector<Token> out;
  p.propose(provisional, max, out);
  return out;
}

void commit(DraftProposer& p, const std::vector<Token>& t) { p.commit(t); }

// A stand-in for a native MTP head: right about the next token three times
// in four (deterministically), never more than one token.
class OracleMtp final : public DraftProposer {
 public:
  explicit OracleMtp(const std::vector<Token>& stream) : stream_(stream) {}
  void commit(std::span<const Token> t) override { pos_ += t.size(); }
  void propose(std::span<const Token> provisional, size_t max_tokens, std::vector<Token>& out) override {
    out.clear();
    const size_t at = pos_ + provisional.size();
    if (max_tokens == 0 || at >= stream_.size()) return;
    out.push_back(++calls_ % 4 == 0 ? stream_[at] + 1 : stream_[at]);
  }
  void reset() override { pos_ = 0; }
  size_t committed() const noexcept override { return pos_; }

 private:
  const std::vector<Token>& stream_;
  size_t pos_ = 0;
  size_t calls_ = 0;
};

// ------------------------------------------------------------ verification

TEST(Verification, CommitsTheLongestAcceptedPrefix) {
  const std::vector<Token> proposal = {5, 6, 7, 8};
  auto v = verify_proposal(proposal, std::vector<Token>{5, 6, 9, 8, 1});
  EXPECT_EQ(v.accepted, 2u) << "a later match after a mismatch is not accepted";
  EXPECT_EQ(v.committed, 3u) << "accepted drafts plus the target's own token";
  v = verify_proposal(proposal, std::vector<Token>{5, 6, 7, 8, 4});
  EXPECT_EQ(v.accepted, 4u);
  EXPECT_EQ(v.committed, 5u) << "all accepted: plus the bonus token";
  v = verify_proposal({}, std::vector<Token>{3});
  EXPECT_EQ(v.accepted, 0u);
  EXPECT_EQ(v.committed, 1u) << "no draft: plain decoding";
  EXPECT_THROW(verify_proposal(proposal, std::vector<Token>{5, 6, 7, 8}), Error);
}

// ------------------------------------------------------------- ngram-cache

TEST(NgramCache, MatchWindowIsAtMost4Tokens) {
  EXPECT_THROW(make_ngram_cache_proposer({1, 5, 8}), Error);
  EXPECT_THROW(make_ngram_cache_proposer({0, 2, 8}), Error);
  EXPECT_THROW(make_ngram_cache_proposer({3, 2, 8}), Error);
  EXPECT_NO_THROW(make_ngram_cache_proposer({1, 4, 8}));
}

TEST(NgramCache, ProposesTheMostFrequentContinuationOfTheLongestMatch) {
  auto p = make_ngram_cache_proposer({1, 2, 4});
  // After "1 2": 3 twice, 4 once; after the longer "9 1 2": 4.
  commit(*p, {1, 2, 3, 7, 1, 2, 3, 7, 9, 1, 2, 4, 7, 1, 2});
  EXPECT_EQ(propose(*p, {}, 1), (std::vector<Token>{3}));
  EXPECT_EQ(propose(*p, {9, 1, 2}, 1), (std::vector<Token>{3})) << "ngram_max 2: (1,2) is the longest match";
  auto q = make_ngram_cache_proposer({1, 3, 4});
  commit(*q, {1, 2, 3, 7, 1, 2, 3, 7, 9, 1, 2, 4, 7, 9, 1, 2});
  EXPECT_EQ(propose(*q, {}, 1), (std::vector<Token>{4})) << "the 3-gram (9,1,2) wins over the 2-gram's majority";
}

TEST(NgramCache, ProposalIsCappedByMaxProposalTokens) {
  auto p = make_ngram_cache_proposer({1, 4, 3});
  std::vector<Token> loop;
  for (int i = 0; i < 50; ++i) loop.push_back(i % 5);
  commit(*p, loop);
  EXPECT_EQ(propose(*p, {}, 64).size(), 3u) << "its own cap";
  EXPECT_EQ(propose(*p, {}, 2).size(), 2u) << "the caller's cap";
  EXPECT_EQ(propose(*p, {}, 64), (std::vector<Token>{0, 1, 2}));
}

// ------------------------------------------------------------ ngram-suffix

TEST(NgramSuffix, BoundsAre3To64) {
  EXPECT_THROW(make_ngram_suffix_proposer({2, 8, 8}), Error);
  EXPECT_THROW(make_ngram_suffix_proposer({3, 65, 8}), Error);
  EXPECT_THROW(make_ngram_suffix_proposer({8, 4, 8}), Error);
  EXPECT_THROW(make_ngram_suffix_proposer({3, 8, 65}), Error);
  EXPECT_NO_THROW(make_ngram_suffix_proposer({3, 64, 64}));
}

TEST(NgramSuffix, SelectsTheLongestEarlierSuffix) {
  auto p = make_ngram_suffix_proposer({3, 64, 4});
  // "5 6 7" occurs twice earlier; only the first occurrence is preceded by
  // "4", as the context is: its continuation (100 101) wins over the more
  // recent one's (200 201).
  commit(*p, {1, 4, 5, 6, 7, 100, 101, 9, 9, 8, 5, 6, 7, 200, 201, 9, 3, 4, 5, 6, 7});
  EXPECT_EQ(propose(*p), (std::vector<Token>{100, 101, 9, 9}));
  // Without a longer match the most recent occurrence wins.
  auto q = make_ngram_suffix_proposer({3, 64, 2});
  commit(*q, {5, 6, 7, 100, 101, 5, 6, 7, 200, 201, 0, 5, 6, 7});
  EXPECT_EQ(propose(*q), (std::vector<Token>{200, 201}));
  // A seed shorter than ngram_min matches nothing.
  auto r = make_ngram_suffix_proposer({4, 64, 2});
  commit(*r, {5, 6, 7, 100, 101, 0, 5, 6, 7});
  EXPECT_TRUE(propose(*r).empty());
}

TEST(NgramSuffix, MatchesAcrossAProvisionalPrefix) {
  auto p = make_ngram_suffix_proposer({3, 16, 3});
  commit(*p, {1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 1, 2});
  EXPECT_EQ(propose(*p, {3}), (std::vector<Token>{4, 5, 6})) << "history 1 2 + provisional 3";
  EXPECT_EQ(p->committed(), 12u) << "the provisional token is not remembered";
}

// ---------------------------------------------- one request's committed tokens

TEST(NgramProposers, SeeOnlyTheCommittedTokensOfOneRequest) {
  for (const bool suffix : {false, true}) {
    SCOPED_TRACE(suffix ? "ngram-suffix" : "ngram-cache");
    auto make = [&] { return suffix ? make_ngram_suffix_proposer({3, 8, 4}) : make_ngram_cache_proposer({1, 4, 4}); };
    auto a = make();
    auto b = make();
    commit(*a, {10, 11, 12, 13, 14, 10, 11, 12});
    EXPECT_FALSE(propose(*a).empty());
    commit(*b, {10, 11, 12});
    EXPECT_TRUE(propose(*b).empty()) << "request b never sees request a's tokens";
    // Provisional tokens are looked through but not kept.
    (void)propose(*b, {13, 14, 10, 11, 12});
    EXPECT_EQ(b->committed(), 3u);
    EXPECT_TRUE(propose(*b).empty());
    a->reset();
    EXPECT_EQ(a->committed(), 0u);
    commit(*a, {10, 11, 12});
    EXPECT_TRUE(propose(*a).empty()) << "reset forgets the request";
  }
}

// ------------------------------------------------ realistic token streams

struct StreamCase {
  const char* name;
  std::vector<Token> (*make)(size_t, uint64_t);
};
const StreamCase kStreams[] = {
    {"code", [](size_t n, uint64_t s) { return test::code_stream(n, s); }},
    {"prose", [](size_t n, uint64_t s) { return test::prose_stream(n, s); }},
    {"json-log", [](size_t n, uint64_t s) { return test::json_log_stream(n, s); }},
};

DecodeStats run(const char* kind, const std::vector<Token>& stream) {
  auto p = std::string(kind) == "cache" ? make_ngram_cache_proposer({2, 4, 10}) : make_ngram_suffix_proposer({3, 32, 10});
  return simulate_decode(*p, stream, kPrompt, 10);
}

TEST(NgramStreams, StreamsAreDeterministic) {
  for (const auto& s : kStreams) {
    EXPECT_EQ(s.make(kStreamTokens, 7), s.make(kStreamTokens, 7)) << s.name;
    EXPECT_EQ(s.make(kStreamTokens, 7).size(), kStreamTokens) << s.name;
  }
}

// Acceptance counts over 3840 decoded tokens (4096 minus a 256-token prompt).
// Pinned: a change in the proposers' choices shows up here.
TEST(NgramStreams, AcceptanceCountsOnCodeProseAndJsonLog) {
  struct Expect {
    const char* stream;
    const char* proposer;
    size_t accepted;
    size_t steps;
  };
  const Expect expected[] = {
      {"code", "cache", 2877, 963},      {"code", "suffix", 2798, 1042},    {"prose", "cache", 32, 3808},
      {"prose", "suffix", 7, 3833},      {"json-log", "cache", 2726, 1114}, {"json-log", "suffix", 2633, 1207},
  };
  std::map<std::string, DecodeStats> got;
  for (const auto& s : kStreams) {
    const auto stream = s.make(kStreamTokens, 1);
    for (const char* kind : {"cache", "suffix"}) {
      const auto st = run(kind, stream);
      EXPECT_EQ(st.committed, kStreamTokens - kPrompt);
      EXPECT_EQ(st.committed, st.accepted + st.steps) << "each window commits its accepted drafts plus one";
      got[std::string(s.name) + "/" + kind] = st;
    }
  }
  for (const auto& e : expected) {
    const auto& st = got[std::string(e.stream) + "/" + e.proposer];
    EXPECT_EQ(st.accepted, e.accepted) << e.stream << "/" << e.proposer;
    EXPECT_EQ(st.steps, e.steps) << e.stream << "/" << e.proposer;
  }
  // What the streams are like: the log repeats most, prose least.
  for (const char* kind : {"cache", "suffix"}) {
    const std::string k = kind;
    EXPECT_GT(got["json-log/" + k].accepted, got["code/" + k].accepted / 2) << kind;
    EXPECT_GT(got["code/" + k].accepted, 4 * got["prose/" + k].accepted) << kind;
    EXPECT_LT(got["prose/" + k].accepted, (kStreamTokens - kPrompt) / 10) << kind << ": prose rarely repeats";
  }
}

// ---------------------------------------------------------------- composite

TEST(Composite, ExtendsThePrimaryDraftWithAnNgramTail) {
  const auto stream = test::code_stream(kStreamTokens, 1);
  OracleMtp alone(stream);
  const auto base = simulate_decode(alone, stream, kPrompt, 64);

  OracleMtp mtp(stream);
  auto cache = make_ngram_cache_proposer({2, 4, 10});
  auto composite = make_composite_proposer(mtp, *cache, {2, 8, 3});
  const auto st = simulate_decode(*composite, stream, kPrompt, 64);
  EXPECT_EQ(base.drafted, base.steps) << "the stand-in MTP head drafts one token per window";
  EXPECT_EQ(base.accepted, 1646u);
  EXPECT_EQ(st.accepted, 2327u);  // pinned, as the stream counts above
  EXPECT_EQ(st.steps, 1513u);
  EXPECT_GT(st.accepted, base.accepted + base.accepted * 3 / 10) << "the tail adds accepted tokens";
  EXPECT_LT(st.steps, base.steps - base.steps / 4) << "fewer target windows for the same tokens";
  EXPECT_LE(st.drafted, st.steps * 9) << "1 primary token + a tail of at most max_tokens 8";
}

TEST(Composite, TailStartsAtInitialTokensAndStopsAfterAnUnhelpfulTail) {
  std::vector<Token> stream;
  for (int i = 0; i < 40; ++i) stream.push_back(i % 4);
  OracleMtp mtp(stream);
  auto cache = make_ngram_cache_proposer({1, 2, 16});
  auto c = make_composite_proposer(mtp, *cache, {2, 8, 2});
  c->commit(std::span<const Token>(stream.data(), 12));
  std::vector<Token> out;
  c->propose({}, 64, out);
  ASSERT_EQ(out.size(), 3u) << "1 primary + initial_tokens 2";
  c->observe(3, 3);  // all accepted: the tail doubles
  c->propose({}, 64, out);
  EXPECT_EQ(out.size(), 5u);
  c->observe(5, 1);  // primary accepted, tail not at all: back off for 2 proposals
  c->propose({}, 64, out);
  EXPECT_EQ(out.size(), 1u);
  c->propose({}, 64, out);
  EXPECT_EQ(out.size(), 1u);
  c->propose({}, 64, out);
  EXPECT_EQ(out.size(), 3u) << "after the back-off, half the tail";
  EXPECT_THROW(make_composite_proposer(mtp, *cache, {9, 8, 0}), Error);
  EXPECT_THROW(make_composite_proposer(mtp, *cache, {0, 8, 0}), Error);
}

}  // namespace
}  // namespace skippy
