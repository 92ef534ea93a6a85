// Deterministic, realistic token streams for the N-gram proposer tests and
// benchmark: repetitive code, prose, and a JSON request log. Words and
// punctuation become ids through a growing vocabulary; numbers are split into
// single digits, as llama-family tokenizers do. Randomness is a fixed-seed
// 64-bit LCG used through raw outputs only, so every platform gets the same
// streams (std:: distributions are not portable).
#pragma once

#include <array>
#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "skippy/ngram.h"

namespace skippy::test {

class Lcg {
 public:
  explicit Lcg(uint64_t seed) : s_(seed) {}
  uint32_t next() {
    s_ = s_ * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<uint32_t>(s_ >> 33);
  }
  uint32_t below(uint32_t n) { return next() % n; }

 private:
  uint64_t s_;
};

class TokenStream {
 public:
  void word(std::string_view w) {
    auto [it, added] = vocab_.try_emplace(std::string(w), static_cast<Token>(vocab_.size()));
    (void)added;
    tokens_.push_back(it->second);
  }
  void words(std::initializer_list<std::string_view> ws) {
    for (auto w : ws) word(w);
  }
  void number(uint64_t v) {
    for (char c : std::to_string(v)) word(std::string(1, c));
  }
  size_t size() const { return tokens_.size(); }
  std::vector<Token> take(size_t n) {
    tokens_.resize(std::min(n, tokens_.size()));
    return std::move(tokens_);
  }

 private:
  std::unordered_map<std::string, Token> vocab_;
  std::vector<Token> tokens_;
};

// C-like code: a handful of function shapes over a small identifier pool, the
// way a source file repeats its loops, calls and error checks.
inline std::vector<Token> code_stream(size_t n, uint64_t seed = 1) {
  static constexpr std::array<std::string_view, 8> kNames = {"buf", "len", "count", "item", "node", "ctx", "out", "src"};
  static constexpr std::array<std::string_view, 5> kTypes = {"int", "size_t", "uint32_t", "char *", "struct entry *"};
  Lcg r(seed);
  TokenStream s;
  while (s.size() < n) {
    const auto a = kNames[r.below(kNames.size())];
    const auto b = kNames[r.below(kNames.size())];
    const auto t = kTypes[r.below(kTypes.size())];
    switch (r.below(4)) {
      case 0:
        s.words({"for", "(", t, "i", "=", "0", ";", "i", "<", a, ";", "++", "i", ")", "{", b, "[", "i", "]", "=", a,
                 "[", "i", "]", ";", "}", "\n"});
        break;
      case 1:
        s.words({"if", "(", a, "==", "NULL", ")", "{", "return", "-", "1", ";", "}", "\n"});
        break;
      case 2:
        s.words({"static", t, a, "_", "init", "(", "struct", "ctx", "*", b, ")", "{", "\n", "return", b, "->", a,
                 ";", "\n", "}", "\n"});
        break;
      default:
        s.words({b, "=", "read_", a, "(", "ctx", ",", "&"});
        s.number(r.below(64));
        s.words({")", ";", "\n"});
        break;
    }
  }
  return s.take(n);
}

// Prose: sentences drawn from a 400-word vocabulary with a skewed choice, so
// common words repeat but longer phrases rarely do.
inline std::vector<Token> prose_stream(size_t n, uint64_t seed = 2) {
  Lcg r(seed);
  TokenStream s;
  std::vector<std::string> vocab;
  for (int i = 0; i < 400; ++i) vocab.push_back("w" + std::to_string(i));
  static constexpr std::array<std::string_view, 10> kCommon = {"the", "of", "and", "a", "to", "in", "is", "that",
                                                               "it", "was"};
  while (s.size() < n) {
    const uint32_t len = 8 + r.below(14);
    for (uint32_t i = 0; i < len; ++i) {
      if (r.below(3) == 0) {
        s.word(kCommon[r.below(kCommon.size())]);
      } else {
        const uint32_t pick = r.below(400);
        s.word(vocab[(pick * pick) / 400]);  // skewed towards low indices
      }
      if (r.below(9) == 0) s.word(",");
    }
    s.word(".");
  }
  return s.take(n);
}

// A JSON request log: one object per line, a fixed key order, varying
// numbers, paths and levels.
inline std::vector<Token> json_log_stream(size_t n, uint64_t seed = 3) {
  static constexpr std::array<std::string_view, 4> kLevels = {"info", "info", "warn", "error"};
  static constexpr std::array<std::string_view, 5> kPaths = {"items", "users", "orders", "health", "search"};
  static constexpr std::array<uint64_t, 4> kStatus = {200, 200, 404, 500};
  Lcg r(seed);
  TokenStream s;
  uint64_t ts = 1700000000;
  while (s.size() < n) {
    ts += r.below(5);
    const uint32_t k = r.below(4);
    s.words({"{", "\"ts\"", ":"});
    s.number(ts);
    s.words({",", "\"level\"", ":", "\"", kLevels[k], "\"", ",", "\"msg\"", ":", "\"", "GET", "/api/v1/",
             kPaths[r.below(kPaths.size())], "/"});
    s.number(r.below(1000));
    s.words({"\"", ",", "\"status\"", ":"});
    s.number(kStatus[k]);
    s.words({",", "\"ms\"", ":"});
    s.number(1 + r.below(250));
    s.words({"}", "\n"});
  }
  return s.take(n);
}

// Statistics of one simulated decode: propose, verify against the stream
// (the target's tokens), commit accepted + 1.
struct DecodeStats {
  size_t steps = 0;     // verify windows
  size_t drafted = 0;   // draft tokens proposed
  size_t accepted = 0;  // draft tokens accepted
  size_t committed = 0;
};

inline DecodeStats simulate_decode(DraftProposer& p, const std::vector<Token>& stream, size_t prompt,
                                   size_t max_tokens) {
  DecodeStats st;
  p.commit(std::span<const Token>(stream.data(), prompt));
  std::vector<Token> draft;
  size_t pos = prompt;
  while (pos < stream.size()) {
    p.propose({}, max_tokens, draft);
    if (draft.size() > stream.size() - pos - 1) draft.resize(stream.size() - pos - 1);
    const auto v = verify_proposal(draft, std::span<const Token>(stream.data() + pos, draft.size() + 1));
    p.observe(draft.size(), v.accepted);
    p.commit(std::span<const Token>(stream.data() + pos, v.committed));
    pos += v.committed;
    ++st.steps;
    st.drafted += draft.size();
    st.accepted += v.accepted;
    st.committed += v.committed;
  }
  return st;
}

}  // namespace skippy::test
