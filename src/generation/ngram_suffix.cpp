// ngram-suffix: longest earlier suffix through a request-local exact-seed
// index (spec: "ngram-suffix uses a request-local exact-seed index to select
// the longest earlier suffix, up to 64 tokens").
//
// The index is a hash chain, as in LZ77 matchers: head[bucket] is the latest
// position whose seed (the ngram_min tokens ending there) hashes to that
// bucket, prev[pos] the one before it. Every candidate is compared token by
// token, so a hash collision costs time, never a wrong match.
#include "skippy/error.h"
#include "skippy/ngram.h"

namespace skippy {
namespace {

constexpr uint32_t kSuffixMinSeed = 3;
constexpr uint32_t kSuffixMaxMatch = 64;
constexpr int kMaxCandidates = 32;  // seed occurrences examined per proposal, latest first
constexpr int kMaxChainSteps = 64;  // chain entries visited (other seeds in the bucket included)
constexpr uint64_t kBase = 0x100000001B3ull;

uint64_t bucket_hash(uint64_t h) {
  h ^= h >> 31;
  h *= 0x94D049BB133111EBull;
  h ^= h >> 29;
  return h;
}

class NgramSuffixProposer final : public DraftProposer {
 public:
  explicit NgramSuffixProposer(const NgramBounds& b) : b_(b) {
    if (b.ngram_min < kSuffixMinSeed || b.ngram_min > b.ngram_max || b.ngram_max > kSuffixMaxMatch) {
      throw_invalid("ngram-suffix: ngram_min " + std::to_string(b.ngram_min) + ", ngram_max " +
                    std::to_string(b.ngram_max) + ": needs 3 <= ngram_min <= ngram_max <= 64");
    }
    if (b.max_proposal_tokens < 1 || b.max_proposal_tokens > kMaxNgramProposalTokens) {
      throw_invalid("ngram-suffix: max_proposal_tokens must be 1..64");
    }
    pow_ = 1;
    for (uint32_t i = 0; i < b.ngram_min; ++i) pow_ *= kBase;
    reset();
  }

  void commit(std::span<const Token> tokens) override {
    for (const Token t : tokens) {
      const size_t pos = history_.size();
      history_.push_back(t);
      // Rolling polynomial hash of the seed ending at pos.
      rolling_ = rolling_ * kBase + static_cast<uint32_t>(t);
      if (pos >= b_.ngram_min) rolling_ -= pow_ * static_cast<uint32_t>(history_[pos - b_.ngram_min]);
      seed_.push_back(rolling_);
      prev_.push_back(-1);
      if (pos + 1 >= b_.ngram_min) link(pos);
      if (history_.size() * 2 > head_.size()) rebuild(head_.size() * 2);
    }
  }

  void propose(std::span<const Token> provisional, size_t max_tokens, std::vector<Token>& out) override {
    out.clear();
    const size_t budget = std::min<size_t>(max_tokens, b_.max_proposal_tokens);
    const size_t n_hist = history_.size();
    const size_t n_ctx = n_hist + provisional.size();
    if (budget == 0 || n_ctx < b_.ngram_min || n_hist < 2) return;
    // The context is history ++ provisional; ctx(i) counts back from its end.
    auto ctx = [&](size_t back) -> Token {
      return back < provisional.size() ? provisional[provisional.size() - 1 - back] : history_[n_hist - 1 - (back - provisional.size())];
    };
    uint64_t h = 0;
    for (size_t back = b_.ngram_min; back-- > 0;) h = h * kBase + static_cast<uint32_t>(ctx(back));
    const size_t max_match = std::min<size_t>(b_.ngram_max, n_ctx);
    size_t best_len = 0;
    int64_t best_end = -1;
    int examined = 0;
    int steps = 0;
    for (int64_t e = head_[bucket_hash(h) & (head_.size() - 1)]; e >= 0 && examined < kMaxCandidates &&
                                                                  steps++ < kMaxChainSteps;
         e = prev_[static_cast<size_t>(e)]) {
      const auto end = static_cast<size_t>(e);
      if (seed_[end] != h || end + 1 >= n_hist) continue;  // another seed, or nothing follows it yet
      ++examined;
      size_t len = 0;
      while (len < max_match && len <= end && history_[end - len] == ctx(len)) ++len;
      if (len >= b_.ngram_min && len > best_len) {
        best_len = len;
        best_end = e;
        if (len == max_match) break;  // the latest of the longest possible matches
      }
    }
    if (best_end < 0) return;
    for (size_t i = static_cast<size_t>(best_end) + 1; i < n_hist && out.size() < budget; ++i) out.push_back(history_[i]);
  }

  void reset() override {
    history_.clear();
    seed_.clear();
    prev_.clear();
    rolling_ = 0;
    head_.assign(1024, -1);
  }
  size_t committed() const noexcept override { return history_.size(); }

 private:
  void link(size_t pos) {
    int64_t& head = head_[bucket_hash(seed_[pos]) & (head_.size() - 1)];
    prev_[pos] = head;
    head = static_cast<int64_t>(pos);
  }
  void rebuild(size_t buckets) {
    head_.assign(buckets, -1);
    for (size_t pos = b_.ngram_min - 1; pos < history_.size(); ++pos) link(pos);
  }

  NgramBounds b_;
  uint64_t pow_ = 1;      // kBase^ngram_min, to drop the token leaving the seed
  uint64_t rolling_ = 0;
  std::vector<Token> history_;
  std::vector<uint64_t> seed_;   // seed hash ending at each position
  std::vector<int64_t> prev_;    // previous position in the same bucket, or -1
  std::vector<int64_t> head_;    // latest position per bucket, or -1
};

}  // namespace

std::unique_ptr<DraftProposer> make_ngram_suffix_proposer(const NgramBounds& bounds) {
  return std::make_unique<NgramSuffixProposer>(bounds);
}

}  // namespace skippy
