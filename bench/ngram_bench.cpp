// Proposal cost per committed token of the N-gram proposers (the
// targets: < 1 us for ngram-cache, < 5 us for ngram-suffix, at an 8k-token
// context). Each run commits an 8192-token prompt (not timed), then decodes
// the next 2048 tokens of the same stream: propose, verify against the
// stream, commit the accepted prefix plus one (the runtime's loop, minus
// the model). per_committed_token = CPU time / committed tokens (commit +
// propose + verify); acceptance = accepted drafts / committed tokens.
//
// Run: scripts/bench-generation.sh (or build-bench/bin/skippy-bench-ngram).
#include <benchmark/benchmark.h>

#include "skippy/ngram.h"
#include "token_streams.h"

namespace {

using skippy::DraftProposer;
using skippy::Token;

constexpr size_t kContext = 8192;
constexpr size_t kDecode = 2048;

enum Stream { kCode, kProse, kJsonLog };

std::vector<Token> make_stream(Stream s) {
  const size_t n = kContext + kDecode;
  switch (s) {
    case kCode: return skippy::test::code_stream(n, 11);
    case kProse: return skippy::test::prose_stream(n, 12);
    case kJsonLog: return skippy::test::json_log_stream(n, 13);
  }
  return {};
}

template <typename Make>
void decode_loop(benchmark::State& state, Make make) {
  const auto stream = make_stream(static_cast<Stream>(state.range(0)));
  size_t committed = 0;
  size_t accepted = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto p = make();
    p->commit(std::span<const Token>(stream.data(), kContext));
    state.ResumeTiming();
    std::vector<Token> draft;
    size_t pos = kContext;
    while (pos < stream.size()) {
      p->propose({}, 10, draft);
      if (draft.size() > stream.size() - pos - 1) draft.resize(stream.size() - pos - 1);
      const auto v = skippy::verify_proposal(draft, std::span<const Token>(stream.data() + pos, draft.size() + 1));
      p->observe(draft.size(), v.accepted);
      p->commit(std::span<const Token>(stream.data() + pos, v.committed));
      pos += v.committed;
      accepted += v.accepted;
    }
    committed += stream.size() - kContext;
    benchmark::DoNotOptimize(draft.data());
  }
  state.counters["per_committed_token"] =
      benchmark::Counter(static_cast<double>(committed), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["acceptance"] = static_cast<double>(accepted) / static_cast<double>(committed);
}

void ngram_cache(benchmark::State& state) {
  decode_loop(state, [] { return skippy::make_ngram_cache_proposer({2, 4, 10}); });
}
void ngram_suffix(benchmark::State& state) {
  decode_loop(state, [] { return skippy::make_ngram_suffix_proposer({3, 64, 10}); });
}

// Committing a prompt: the per-token cost of building the request's index.
template <typename Make>
void prompt_commit(benchmark::State& state, Make make) {
  const auto stream = make_stream(kCode);
  for (auto _ : state) {
    auto p = make();
    p->commit(std::span<const Token>(stream.data(), kContext));
    benchmark::DoNotOptimize(p->committed());
  }
  state.counters["per_committed_token"] = benchmark::Counter(
      static_cast<double>(kContext), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
void ngram_cache_prompt(benchmark::State& state) {
  prompt_commit(state, [] { return skippy::make_ngram_cache_proposer({2, 4, 10}); });
}
void ngram_suffix_prompt(benchmark::State& state) {
  prompt_commit(state, [] { return skippy::make_ngram_suffix_proposer({3, 64, 10}); });
}

}  // namespace

BENCHMARK(ngram_cache)->ArgName("stream")->Arg(kCode)->Arg(kProse)->Arg(kJsonLog)->Unit(benchmark::kMicrosecond);
BENCHMARK(ngram_suffix)->ArgName("stream")->Arg(kCode)->Arg(kProse)->Arg(kJsonLog)->Unit(benchmark::kMicrosecond);
BENCHMARK(ngram_cache_prompt)->Unit(benchmark::kMicrosecond);
BENCHMARK(ngram_suffix_prompt)->Unit(benchmark::kMicrosecond);
BENCHMARK_MAIN();
