#include "util/byte_size.h"

#include <cctype>
#include <limits>
#include <string>

#include "skippy/error.h"

namespace skippy {
namespace {
__extension__ using u128 = unsigned __int128;
constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
}  // namespace

uint64_t parse_byte_size(std::string_view text) {
  const std::string shown(text);
  auto bad = [&](const std::string& why) -> uint64_t {
    throw Error(ErrorKind::kUsage, "invalid size \"" + shown + "\": " + why +
          " (write bytes, or a number with K/M/G/T = 1024^n, KiB/MiB/GiB/TiB, or KB/MB/GB/TB = 1000^n)");
  };
  size_t i = 0;
  uint64_t whole = 0;
  size_t digits = 0;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i, ++digits) {
    const auto d = static_cast<uint64_t>(text[i] - '0');
    if (whole > (kMax - d) / 10) return bad("too large");
    whole = whole * 10 + d;
  }
  if (digits == 0) return bad("expected a number");
  // Fraction: keep up to 18 digits (enough for any unit up to 2^64).
  uint64_t frac = 0, frac_scale = 1;
  bool has_frac = false;
  if (i < text.size() && text[i] == '.') {
    has_frac = true;
    ++i;
    size_t fd = 0;
    for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i, ++fd) {
      if (fd < 18) {
        frac = frac * 10 + static_cast<uint64_t>(text[i] - '0');
        frac_scale *= 10;
      }
    }
    if (fd == 0) return bad("expected digits after '.'");
  }
  std::string unit;
  for (; i < text.size(); ++i) unit += static_cast<char>(std::tolower(static_cast<unsigned char>(text[i])));
  uint64_t mult = 0;
  if (unit.empty() || unit == "b") {
    mult = 1;
  } else {
    static constexpr std::string_view kPrefixes = "kmgt";
    const auto p = kPrefixes.find(unit[0]);
    const std::string rest = unit.substr(1);
    if (p == std::string_view::npos || !(rest.empty() || rest == "b" || rest == "ib")) return bad("unknown unit");
    const uint64_t base = rest == "b" ? 1000 : 1024;
    mult = 1;
    for (size_t k = 0; k <= p; ++k) mult *= base;
  }
  if (has_frac && mult == 1) return bad("a fraction of a byte");
  if (mult != 1 && whole > kMax / mult) return bad("too large");
  const uint64_t base_bytes = whole * mult;
  const auto extra = static_cast<uint64_t>(u128{frac} * mult / frac_scale);
  if (base_bytes > kMax - extra) return bad("too large");
  return base_bytes + extra;
}

}  // namespace skippy
