// ngram-cache: request-local incremental n-gram table (spec: "ngram-cache is
// a request-local incremental lookup ... its match window is intentionally
// capped at four tokens by the current llama.cpp ABI").
#include <array>

#include "skippy/error.h"
#include "skippy/ngram.h"

namespace skippy {
namespace {

constexpr uint32_t kCacheMaxWindow = 4;
constexpr size_t kCandidates = 3;  // continuations kept per n-gram (the rarest is replaced)

struct Continuation {
  Token token = 0;
  uint32_t count = 0;  // 0 = empty
  uint32_t last = 0;   // position of the latest occurrence (ties go to the most recent)
};

struct Slot {
  std::array<Token, kCacheMaxWindow> key{};
  uint32_t n = 0;  // 0 = empty slot
  std::array<Continuation, kCandidates> next{};
};

uint64_t hash_key(const Token* t, uint32_t n) {
  uint64_t h = 0x9E3779B97F4A7C15ull * (n + 1);
  for (uint32_t i = 0; i < n; ++i) {
    h ^= static_cast<uint32_t>(t[i]);
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 29;
  }
  return h;
}

// Open addressing, linear probing, power-of-two capacity, load <= 1/2.
class NgramTable {
 public:
  NgramTable() : slots_(1024) {}

  Slot& upsert(const Token* key, uint32_t n) {
    if ((size_ + 1) * 2 > slots_.size()) grow();
    Slot& s = probe(slots_, key, n);
    if (s.n == 0) {
      std::copy(key, key + n, s.key.begin());
      s.n = n;
      ++size_;
    }
    return s;
  }

  const Slot* find(const Token* key, uint32_t n) const {
    const size_t mask = slots_.size() - 1;
    for (size_t i = hash_key(key, n) & mask;; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (s.n == 0) return nullptr;
      if (s.n == n && std::equal(key, key + n, s.key.begin())) return &s;
    }
  }

  void clear() {
    slots_.assign(1024, Slot{});
    size_ = 0;
  }

 private:
  static Slot& probe(std::vector<Slot>& slots, const Token* key, uint32_t n) {
    const size_t mask = slots.size() - 1;
    for (size_t i = hash_key(key, n) & mask;; i = (i + 1) & mask) {
      Slot& s = slots[i];
      if (s.n == 0 || (s.n == n && std::equal(key, key + n, s.key.begin()))) return s;
    }
  }
  void grow() {
    std::vector<Slot> bigger(slots_.size() * 2);
    for (const Slot& s : slots_) {
      if (s.n != 0) probe(bigger, s.key.data(), s.n) = s;
    }
    slots_.swap(bigger);
  }

  std::vector<Slot> slots_;
  size_t size_ = 0;
};

class NgramCacheProposer final : public DraftProposer {
 public:
  explicit NgramCacheProposer(const NgramBounds& b) : b_(b) {
    if (b.ngram_min < 1 || b.ngram_min > b.ngram_max || b.ngram_max > kCacheMaxWindow) {
      throw_invalid("ngram-cache: ngram_min " + std::to_string(b.ngram_min) + ", ngram_max " +
                    std::to_string(b.ngram_max) + ": needs 1 <= ngram_min <= ngram_max <= 4");
    }
    if (b.max_proposal_tokens < 1 || b.max_proposal_tokens > kMaxNgramProposalTokens) {
      throw_invalid("ngram-cache: max_proposal_tokens must be 1..64");
    }
  }

  void commit(std::span<const Token> tokens) override {
    for (const Token t : tokens) {
      const auto pos = static_cast<uint32_t>(history_.size());
      for (uint32_t n = b_.ngram_min; n <= b_.ngram_max && n <= pos; ++n) {
        record(table_.upsert(history_.data() + pos - n, n), t, pos);
      }
      history_.push_back(t);
    }
  }

  void propose(std::span<const Token> provisional, size_t max_tokens, std::vector<Token>& out) override {
    out.clear();
    const size_t budget = std::min<size_t>(max_tokens, b_.max_proposal_tokens);
    if (budget == 0) return;
    // The last (up to) four tokens of history ++ provisional ++ out.
    std::array<Token, kCacheMaxWindow> tail{};
    uint32_t have = 0;
    auto push = [&](Token t) {
      if (have < kCacheMaxWindow) {
        tail[have++] = t;
      } else {
        std::copy(tail.begin() + 1, tail.end(), tail.begin());
        tail[kCacheMaxWindow - 1] = t;
      }
    };
    const size_t from_history = provisional.size() >= kCacheMaxWindow
                                    ? 0
                                    : std::min(history_.size(), kCacheMaxWindow - provisional.size());
    for (size_t i = history_.size() - from_history; i < history_.size(); ++i) push(history_[i]);
    const size_t skip = provisional.size() > kCacheMaxWindow ? provisional.size() - kCacheMaxWindow : 0;
    for (size_t i = skip; i < provisional.size(); ++i) push(provisional[i]);
    while (out.size() < budget) {
      const Continuation* best = nullptr;
      for (uint32_t n = std::min(b_.ngram_max, have); n >= b_.ngram_min && n > 0; --n) {
        const Slot* s = table_.find(tail.data() + have - n, n);
        if (!s) continue;
        for (const Continuation& c : s->next) {
          if (c.count == 0) continue;
          if (!best || c.count > best->count || (c.count == best->count && c.last > best->last)) best = &c;
        }
        break;  // the longest matching n-gram decides
      }
      if (!best) break;
      out.push_back(best->token);
      push(best->token);
    }
  }

  void reset() override {
    history_.clear();
    table_.clear();
  }
  size_t committed() const noexcept override { return history_.size(); }

 private:
  static void record(Slot& s, Token t, uint32_t pos) {
    Continuation* rarest = &s.next[0];
    for (Continuation& c : s.next) {
      if (c.count != 0 && c.token == t) {
        ++c.count;
        c.last = pos;
        return;
      }
      if (c.count < rarest->count || (c.count == rarest->count && c.last < rarest->last)) rarest = &c;
    }
    *rarest = Continuation{t, 1, pos};
  }

  NgramBounds b_;
  std::vector<Token> history_;
  NgramTable table_;
};

}  // namespace

std::unique_ptr<DraftProposer> make_ngram_cache_proposer(const NgramBounds& bounds) {
  return std::make_unique<NgramCacheProposer>(bounds);
}

}  // namespace skippy
