// Brute force for the planners' tests: every split of L layers into n
// contiguous non-empty ranges, as cuts (cuts[0] = 0, cuts[n] = L).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

namespace skippy::test {

inline void each_split(uint32_t L, uint32_t n, const std::function<void(const std::vector<uint32_t>&)>& f) {
  std::vector<uint32_t> cuts(n + 1, 0);
  cuts[n] = L;
  std::function<void(uint32_t)> rec = [&](uint32_t i) {
    if (i == n) return f(cuts);
    for (uint32_t c = cuts[i - 1] + 1; c + (n - i) <= L; ++c) {
      cuts[i] = c;
      rec(i + 1);
    }
  };
  rec(1);
}

}  // namespace skippy::test
