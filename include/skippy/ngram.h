// N-gram draft proposers and the verification rule (spec: "Speculative
// Decoding": ngram-cache, ngram-suffix, composite strategies, "No N-gram
// proposer is authoritative: the target verifies the proposal and commits
// the accepted prefix only").
//
// A proposer belongs to one request: it sees only the tokens the target
// committed for that request (commit()), never another request's, and
// forgets everything on reset(). propose() may look past the committed
// history through a provisional prefix (e.g. an unverified MTP draft) that
// it does not remember.
//
// Cost (bench/ngram_bench.cpp, README "Generation defaults"): commit() is
// O(ngram_max - ngram_min + 1) hash updates per token for the cache
// proposer and O(1) for the suffix proposer; propose() is bounded by
// max_proposal_tokens lookups (cache) or 32 seed candidates x 64 tokens
// (suffix).
//
// Thread-safety: a proposer is used by one request at a time (no locking).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace skippy {

using Token = int32_t;  // a vocabulary id, as llama.cpp's llama_token

class DraftProposer {
 public:
  virtual ~DraftProposer() = default;
  // Appends tokens the target committed for this request (prompt included).
  virtual void commit(std::span<const Token> tokens) = 0;
  // Replaces `out` with at most `max_tokens` (and at most the proposer's own
  // cap) draft tokens that would follow history ++ provisional. May be empty.
  virtual void propose(std::span<const Token> provisional, size_t max_tokens, std::vector<Token>& out) = 0;
  // Verification feedback for the last proposal: `accepted` of `proposed`.
  virtual void observe(size_t proposed, size_t accepted) {
    (void)proposed;
    (void)accepted;
  }
  // A new request: forget all history.
  virtual void reset() = 0;
  virtual size_t committed() const noexcept = 0;
};

// ngram_min..ngram_max: the historical match lengths; max_proposal_tokens:
// the output budget (independent of ngram_max).
struct NgramBounds {
  uint32_t ngram_min = 1;
  uint32_t ngram_max = 4;
  uint32_t max_proposal_tokens = 8;
};

// The most tokens one propose() may return (max_proposal_tokens), for both
// N-gram proposers.
inline constexpr uint32_t kMaxNgramProposalTokens = 64;

// ngram-cache: a request-local incremental table from every n-gram
// (ngram_min <= n <= ngram_max <= 4) of the committed history to its most
// frequent continuations. propose() looks up the longest n-gram ending the
// context, appends its most frequent continuation (ties: most recent) and
// repeats, up to max_proposal_tokens.
// Throws Error(kInvalidInput) unless 1 <= ngram_min <= ngram_max <= 4 and
// 1 <= max_proposal_tokens <= 64.
std::unique_ptr<DraftProposer> make_ngram_cache_proposer(const NgramBounds& bounds);

// ngram-suffix: an exact-seed index (the last ngram_min tokens) over the
// committed history; propose() finds the earlier position whose preceding
// tokens match the longest suffix of the context (up to ngram_max, at least
// ngram_min; ties: most recent) and proposes what followed it.
// Throws Error(kInvalidInput) unless 3 <= ngram_min <= ngram_max <= 64 and
// 1 <= max_proposal_tokens <= 64.
std::unique_ptr<DraftProposer> make_ngram_suffix_proposer(const NgramBounds& bounds);

// The adaptive N-gram tail of a composite strategy (extension_policy).
struct ExtensionBounds {
  uint32_t initial_tokens = 8;        // tail length to start with
  uint32_t max_tokens = 8;            // tail length never exceeds this
  uint32_t tail_backoff_proposals = 0;  // proposals without a tail after an unhelpful one
};

// composite: the primary's draft (native MTP in a runtime), extended by the
// extender's proposal continuing after it. The tail starts at
// initial_tokens, doubles (up to max_tokens) while fully accepted, shrinks
// to what was accepted when partly accepted, and after a tail of which
// nothing was accepted is left off for tail_backoff_proposals proposals.
// Both parts see the committed tokens; the caller owns both proposers.
// Throws Error(kInvalidInput) unless initial_tokens <= max_tokens <= 64.
std::unique_ptr<DraftProposer> make_composite_proposer(DraftProposer& primary, DraftProposer& extender,
                                                       const ExtensionBounds& bounds);

// The verification rule. `target` holds the target's own token at each
// position of the proposal and one more (the token after the last draft),
// REQUIRES target.size() == proposal.size() + 1. The accepted prefix is the
// longest prefix of `proposal` equal to `target`'s; the runtime commits
// target[0 .. accepted] (accepted + 1 tokens: the accepted drafts, then the
// target's correction or bonus token).
struct VerifyOutcome {
  size_t accepted = 0;   // draft tokens accepted
  size_t committed = 0;  // tokens to commit: accepted + 1
};
VerifyOutcome verify_proposal(std::span<const Token> proposal, std::span<const Token> target);

}  // namespace skippy
