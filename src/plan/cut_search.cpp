#include "cut_search.h"

namespace skippy::plan_detail {
namespace {

u128 sat_add(u128 a, u128 b) {
  const u128 m = ~u128{0};
  return a > m - b ? m : a + b;
}

}  // namespace

std::optional<std::vector<uint32_t>> best_cuts(uint32_t N, uint32_t L, const CutObjective& obj) {
  const size_t W = size_t{L} + 1;
  // Stage i may cover a..b when the stages before and after it can have >= 1 layer each.
  auto hi = [&](uint32_t i) { return L - (N - 1 - i); };  // largest end of stage i
  // Phase 1: best[i][j] = the smallest achievable largest score of stages
  // 0..i covering layers 0..j-1 (nullopt: no feasible way).
  std::vector<std::optional<Ratio>> best(size_t{N} * W);
  auto at = [W](auto& v, uint32_t i, uint32_t j) -> auto& { return v[size_t{i} * W + j]; };
  for (uint32_t j = 1; j <= hi(0); ++j) at(best, 0, j) = obj.score(0, 0, j);
  for (uint32_t i = 1; i < N; ++i) {
    for (uint32_t j = i + 1; j <= hi(i); ++j) {
      std::optional<Ratio> b;
      for (uint32_t k = i; k < j; ++k) {
        const auto& prev = at(best, i - 1, k);
        if (!prev) continue;
        const auto s = obj.score(i, k, j);
        if (!s) continue;
        const Ratio r = max_of(*prev, *s);
        if (!b || less(r, *b)) b = r;
      }
      at(best, i, j) = b;
    }
  }
  const auto bottleneck = at(best, N - 1, L);
  if (!bottleneck) return std::nullopt;
  auto within = [&](uint32_t i, uint32_t a, uint32_t b) {
    const auto s = obj.score(i, a, b);
    return s && !less(*bottleneck, *s);
  };

  // Phase 2: among plans whose every stage is within the bottleneck, the
  // smallest sum of tiebreaks; ties keep the earliest cut.
  const u128 kInf = ~u128{0};
  std::vector<u128> cost(size_t{N} * W, kInf);
  std::vector<uint32_t> from(size_t{N} * W, 0);
  for (uint32_t j = 1; j <= hi(0); ++j) {
    if (within(0, 0, j)) cost[j] = obj.tiebreak(0, 0, j);
  }
  for (uint32_t i = 1; i < N; ++i) {
    for (uint32_t j = i + 1; j <= hi(i); ++j) {
      u128 b = kInf;
      uint32_t arg = 0;
      for (uint32_t k = i; k < j; ++k) {
        const u128 prev = at(cost, i - 1, k);
        if (prev == kInf || !within(i, k, j)) continue;
        const u128 c = sat_add(prev, obj.tiebreak(i, k, j));
        if (arg == 0 || c < b) {
          b = c;
          arg = k;
        }
      }
      if (arg != 0) {
        at(cost, i, j) = b;
        at(from, i, j) = arg;
      }
    }
  }
  std::vector<uint32_t> cuts(size_t{N} + 1);
  cuts[N] = L;
  for (uint32_t i = N - 1; i > 0; --i) cuts[i] = at(from, i, cuts[i + 1]);
  cuts[0] = 0;
  return cuts;
}

}  // namespace skippy::plan_detail
