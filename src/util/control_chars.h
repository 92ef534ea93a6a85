// Terminal control code points in untrusted text: the one rule for what
// no identity field or path may hold and what the CLI never prints raw.
#pragma once

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

namespace skippy {

// The one rule for terminal control code points in untrusted text (UTF-8):
// C0 controls (U+0000-001F; newline and tab too unless `layout_ok`), DEL,
// C1 controls (U+0080-009F) and Unicode's bidirectional controls (U+061C,
// U+200E-200F, U+202A-202E, U+2066-2069). Returns the byte length of the
// one starting at s[i], or 0.
inline size_t control_at(std::string_view s, size_t i, bool layout_ok = true) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x20) return layout_ok && (c == '\n' || c == '\t') ? 0 : 1;
  if (c == 0x7f) return 1;
  if (i + 1 < s.size() && (b(i + 1) & 0xC0) == 0x80) {
    if (c == 0xC2 && b(i + 1) <= 0x9F) return 2;  // C1
    if (c == 0xD8 && b(i + 1) == 0x9C) return 2;  // U+061C
  }
  if (c == 0xE2 && i + 2 < s.size() && (b(i + 2) & 0xC0) == 0x80) {
    const unsigned char c1 = b(i + 1), c2 = b(i + 2);
    if (c1 == 0x80 && (c2 == 0x8E || c2 == 0x8F || (c2 >= 0xAA && c2 <= 0xAE))) return 3;
    if (c1 == 0x81 && c2 >= 0xA6 && c2 <= 0xA9) return 3;
  }
  return 0;
}

// True when `s` (bytes still arriving) may be the start of a control
// control_at cannot decide yet.
inline bool control_prefix_pending(std::string_view s) {
  if (s.empty()) return false;
  const auto c = static_cast<unsigned char>(s[0]);
  if (s.size() == 1) return c == 0xC2 || c == 0xD8 || c == 0xE2;
  const auto c1 = static_cast<unsigned char>(s[1]);
  return s.size() == 2 && c == 0xE2 && (c1 == 0x80 || c1 == 0x81);
}

// The code point of a sequence control_at matched, as "\uXXXX".
inline std::string escape_control(std::string_view seq) {
  uint32_t cp = static_cast<unsigned char>(seq[0]);
  if (seq.size() == 2) cp = ((cp & 0x1Fu) << 6) | (static_cast<unsigned char>(seq[1]) & 0x3Fu);
  if (seq.size() == 3) {
    cp = ((cp & 0x0Fu) << 12) | ((static_cast<unsigned char>(seq[1]) & 0x3Fu) << 6) |
         (static_cast<unsigned char>(seq[2]) & 0x3Fu);
  }
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
  return buf;
}

// Why `s` may not be an identity field or a path: the first control in it
// (newline and tab included), named, or nullopt.
inline std::optional<std::string> control_character_problem(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    if (const size_t n = control_at(s, i, /*layout_ok=*/false)) {
      std::string cp = escape_control(s.substr(i, n));
      cp.replace(0, 2, "U+");
      for (size_t k = 2; k < cp.size(); ++k) cp[k] = static_cast<char>(std::toupper(static_cast<unsigned char>(cp[k])));
      return std::string(n == 3 || cp == "U+061C" ? "contains a Unicode bidirectional control character ("
                                                  : "contains a control character (") + cp + ")";
    }
  }
  return std::nullopt;
}

}  // namespace skippy
