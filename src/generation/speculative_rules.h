// Shared pieces of the speculative-decoding rules (spec: "Speculative
// Decoding" table), used by the package checks and by the plan builder for
// operator-supplied values that parse_manifest never saw.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "generation/wording.h"
#include "skippy/speculative.h"

namespace skippy::generation_detail {

// Thrown inside the plan builder; resolve_speculative turns it into a refusal.
struct Refused {
  SpeculativeRefusal refusal;
};
[[noreturn]] void refuse(std::string rule, std::string message);

// The N-gram match-range rule for `type` (ngram-cache: 1 <= min <= max <= 4,
// llama.cpp's cache match window; ngram-suffix: 3 <= min <= max <= 64).
// A refusal naming rule ngram_cache_window / ngram_suffix_bounds, or nullopt.
std::optional<SpeculativeRefusal> ngram_bounds_problem(std::string_view type, uint64_t ngram_min, uint64_t ngram_max,
                                                       std::string_view where);

}  // namespace skippy::generation_detail
