// ASCII text helpers shared across the libraries.
#pragma once

#include <string>

namespace skippy::detail {

// `s` with A-Z turned into a-z (hex digests, header names, identifiers).
inline std::string ascii_lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

}  // namespace skippy::detail
