// composite: a native-MTP primary extended by an N-gram tail (spec:
// "A composite strategy MUST use a native-mtp primary and an N-gram
// extender. Its extension_policy bounds the adaptive tail; every combined
// candidate is still verified by one target VerifyWindow").
#include <algorithm>

#include "skippy/error.h"
#include "skippy/ngram.h"

namespace skippy {
namespace {

class CompositeProposer final : public DraftProposer {
 public:
  CompositeProposer(DraftProposer& primary, DraftProposer& extender, const ExtensionBounds& b)
      : primary_(primary), extender_(extender), b_(b), tail_budget_(b.initial_tokens) {
    if (b.initial_tokens < 1 || b.initial_tokens > b.max_tokens || b.max_tokens > 64) {
      throw_invalid("composite: extension needs 1 <= initial_tokens <= max_tokens <= 64, got " +
                    std::to_string(b.initial_tokens) + " and " + std::to_string(b.max_tokens));
    }
  }

  void commit(std::span<const Token> tokens) override {
    primary_.commit(tokens);
    extender_.commit(tokens);
  }

  void propose(std::span<const Token> provisional, size_t max_tokens, std::vector<Token>& out) override {
    primary_.propose(provisional, max_tokens, out);
    last_primary_ = out.size();
    last_tail_ = 0;
    if (backoff_left_ > 0) {
      --backoff_left_;
      return;
    }
    const size_t room = max_tokens - std::min(max_tokens, out.size());
    const size_t cap = std::min<size_t>(tail_budget_, room);
    if (cap == 0) return;
    // The tail continues after the (still unverified) primary draft.
    context_.assign(provisional.begin(), provisional.end());
    context_.insert(context_.end(), out.begin(), out.end());
    extender_.propose(context_, cap, tail_);
    out.insert(out.end(), tail_.begin(), tail_.end());
    last_tail_ = tail_.size();
  }

  void observe(size_t proposed, size_t accepted) override {
    primary_.observe(std::min(proposed, last_primary_), std::min(accepted, last_primary_));
    if (last_tail_ == 0 || accepted < last_primary_) return;  // the tail was never reached
    const size_t tail_accepted = std::min(accepted - last_primary_, last_tail_);
    extender_.observe(last_tail_, tail_accepted);
    if (tail_accepted == last_tail_) {
      tail_budget_ = std::min<uint32_t>(b_.max_tokens, tail_budget_ * 2);
    } else if (tail_accepted > 0) {
      tail_budget_ = static_cast<uint32_t>(tail_accepted);
    } else {
      tail_budget_ = std::max<uint32_t>(1, tail_budget_ / 2);
      backoff_left_ = b_.tail_backoff_proposals;
    }
  }

  void reset() override {
    primary_.reset();
    extender_.reset();
    tail_budget_ = b_.initial_tokens;
    backoff_left_ = 0;
    last_primary_ = last_tail_ = 0;
  }
  size_t committed() const noexcept override { return primary_.committed(); }

 private:
  DraftProposer& primary_;
  DraftProposer& extender_;
  ExtensionBounds b_;
  uint32_t tail_budget_;
  uint32_t backoff_left_ = 0;
  size_t last_primary_ = 0;
  size_t last_tail_ = 0;
  std::vector<Token> context_;
  std::vector<Token> tail_;
};

}  // namespace

std::unique_ptr<DraftProposer> make_composite_proposer(DraftProposer& primary, DraftProposer& extender,
                                                       const ExtensionBounds& bounds) {
  return std::make_unique<CompositeProposer>(primary, extender, bounds);
}

VerifyOutcome verify_proposal(std::span<const Token> proposal, std::span<const Token> target) {
  if (target.size() != proposal.size() + 1) {
    throw Error(ErrorKind::kUsage, "verify_proposal: the target must give one token per draft position plus one (" +
                                       std::to_string(proposal.size() + 1) + "), got " +
                                       std::to_string(target.size()));
  }
  VerifyOutcome v;
  while (v.accepted < proposal.size() && proposal[v.accepted] == target[v.accepted]) ++v.accepted;
  v.committed = v.accepted + 1;
  return v;
}

}  // namespace skippy
