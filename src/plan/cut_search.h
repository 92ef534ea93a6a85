// The search both planners share: the best way to cut L layers into N
// contiguous, non-empty stages, exactly, by dynamic programming over cut
// points (O(N·L²) score evaluations).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

namespace skippy::plan_detail {

__extension__ using u128 = unsigned __int128;

// num / den as an exact fraction; den == 0 is infinite for any num > 0.
struct Ratio {
  uint64_t num = 0;
  uint64_t den = 1;
};
// a < b, exactly (128-bit cross products).
inline bool less(Ratio a, Ratio b) { return u128{a.num} * b.den < u128{b.num} * a.den; }
inline Ratio max_of(Ratio a, Ratio b) { return less(a, b) ? b : a; }

struct CutObjective {
  // The score of stage `stage` covering layers [a, b); nullopt when that
  // stage cannot hold that range at all (a constraint, not a cost).
  std::function<std::optional<Ratio>(uint32_t stage, uint32_t a, uint32_t b)> score;
  // Among the plans with the smallest largest score, the one with the
  // smallest sum of tiebreak() wins; remaining ties go to the earliest cut.
  std::function<u128(uint32_t stage, uint32_t a, uint32_t b)> tiebreak;
};

// cuts[i] = first layer of stage i (cuts[0] = 0), cuts[N] = L; nullopt when
// no split satisfies every stage's constraint. Requires 1 <= N <= L.
std::optional<std::vector<uint32_t>> best_cuts(uint32_t stages, uint32_t layers, const CutObjective& objective);

}  // namespace skippy::plan_detail
