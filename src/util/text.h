// Text helpers shared across the libraries and the CLI: ASCII case, byte
// counts and counted nouns for messages people read.
#pragma once

#include <cstdint>
#include <cstdio>
#include <ctime>
#include <iterator>
#include <string>
#include <string_view>

namespace skippy::detail {

// `s` with A-Z turned into a-z (hex digests, header names, identifiers).
inline std::string ascii_lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

// Problems as lines of a message, two spaces in: the first ten in full, then
// how many more, ending with `where_all` (what lists every one). A wrong
// source or a damaged package can have one problem per tensor, thousands on a
// real model, and the first few say what happened.
template <class Lines>
std::string problem_lines(const Lines& problems, std::string_view where_all) {
  constexpr size_t kShown = 10;
  const size_t n = std::size(problems);
  const size_t shown = n > kShown + 2 ? kShown : n;  // never "1 more"
  std::string out;
  size_t i = 0;
  for (const auto& p : problems) {
    if (i++ == shown) break;
    out += "\n  ";
    out += p;
  }
  if (shown < n) {
    out += "\n  ... and " + std::to_string(n - shown) + " more problem(s) like these (";
    out += where_all;
    out += " lists every one)";
  }
  return out;
}

// A byte count for people: "832 B", "39.88 KiB", "5.84 MiB" (1024^n units).
inline std::string human_bytes(uint64_t n) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(n);
  size_t u = 0;
  while (v >= 1024.0 && u + 1 < std::size(kUnits)) {
    v /= 1024.0;
    ++u;
  }
  if (u == 0) return std::to_string(n) + " B";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f %s", v, kUnits[u]);
  return buf;
}

// Exact bytes with the human size beside them: "6000000 bytes (5.72 MiB)".
inline std::string bytes_and_human(uint64_t n) {
  if (n < 1024) return std::to_string(n) + (n == 1 ? " byte" : " bytes");
  return std::to_string(n) + " bytes (" + human_bytes(n) + ")";
}

// A count and its noun, in agreement: "1 stage", "2 stages", "0 layers".
// `plural` defaults to the noun with an "s".
inline std::string counted(uint64_t n, std::string_view noun, std::string_view plural = {}) {
  std::string out = std::to_string(n) + " ";
  if (n == 1) return out.append(noun);
  if (!plural.empty()) return out.append(plural);
  return out.append(noun).append("s");
}

// A Unix time as an ISO 8601 UTC date: "2026-12-02T09:24:18Z" (as
// certificates' validity is shown); the number itself if it is out of range.
inline std::string utc_iso8601(int64_t unix_secs) {
  const auto t = static_cast<std::time_t>(unix_secs);
  std::tm tm{};
  char buf[40];
  if (static_cast<int64_t>(t) != unix_secs || ::gmtime_r(&t, &tm) == nullptr ||
      std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) {
    return std::to_string(unix_secs);
  }
  return buf;
}

}  // namespace skippy::detail
