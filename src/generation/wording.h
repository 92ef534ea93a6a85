// Small pieces the generation library's messages and checks share (one
// definition each: a unity build compiles these files together).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "skippy/manifest.h"

namespace skippy::generation_detail {

inline std::string in_quotes(std::string_view s) { return "\"" + std::string(s) + "\""; }
inline std::string num(uint64_t v) { return std::to_string(v); }

// One of known_experimental_switches() (selected_row_flash, ...).
inline bool is_known_switch(std::string_view name) {
  const auto k = known_experimental_switches();
  return std::find(k.begin(), k.end(), name) != k.end();
}

}  // namespace skippy::generation_detail
