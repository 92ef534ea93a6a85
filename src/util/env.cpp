// The one home of getenv (see include/skippy/env.h for every rule).
#include "util/env.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>

#include "skippy/error.h"
#include "util/file.h"
#include "util/byte_size.h"

namespace skippy::env {

namespace fs = std::filesystem;

namespace {

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

std::optional<fs::path> path_var(const char* name) {
  if (auto v = get(name)) return expand_user(*v);
  return std::nullopt;
}

}  // namespace

std::optional<std::string> get(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

bool flag(const char* name) {
  auto v = get(name);
  if (!v) return false;
  std::string s = *v;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return s == "1" || s == "ON" || s == "YES" || s == "TRUE";
}

unsigned unsigned_or(const char* name, unsigned fallback) {
  auto v = get(name);
  if (!v) return fallback;
  unsigned out = 0;
  const auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  return ec == std::errc() && p == v->data() + v->size() ? out : fallback;
}

fs::path expand_user(std::string_view p) {
  if (p == "~" || p.starts_with("~/")) {
    if (auto home = home_dir()) return p.size() > 2 ? *home / p.substr(2) : *home;
  }
  return fs::path(p);
}

std::optional<fs::path> home_dir() {
  if (auto h = get("HOME")) return fs::path(*h);
  struct passwd pw {};
  struct passwd* found = nullptr;
  char buf[4096];
  if (::getpwuid_r(::getuid(), &pw, buf, sizeof buf, &found) == 0 && found != nullptr && found->pw_dir != nullptr &&
      found->pw_dir[0] == '/') {
    return fs::path(found->pw_dir);
  }
  return std::nullopt;
}

fs::path cache_home() {
  if (auto x = path_var("XDG_CACHE_HOME"); x && x->is_absolute()) return *x;
  if (auto h = home_dir()) return *h / ".cache";
  std::error_code ec;
  return fs::temp_directory_path(ec) / ("cache-" + std::to_string(::getuid()));
}

fs::path skippy_cache_dir() {
  if (auto d = path_var("SKIPPY_CACHE_DIR")) return *d;
  return cache_home() / "skippy";
}

fs::path hf_home() {
  if (auto d = path_var("HF_HOME")) return *d;
  return cache_home() / "huggingface";
}

fs::path hf_hub_cache_dir() {
  if (auto d = path_var("HF_HUB_CACHE")) return *d;
  if (auto d = path_var("HUGGINGFACE_HUB_CACHE")) return *d;  // the legacy name huggingface_hub still honours
  return hf_home() / "hub";
}

std::string hf_endpoint() {
  std::string e = get("HF_ENDPOINT").value_or("https://huggingface.co");
  while (e.ends_with('/')) e.pop_back();
  const bool https = e.starts_with("https://"), http = e.starts_with("http://");
  const size_t host_at = https ? 8 : 7;
  if ((!https && !http) || e.size() <= host_at || e[host_at] == '/') {
    throw Error(ErrorKind::kUsage, "HF_ENDPOINT=\"" + e + "\" is not an http:// or https:// URL");
  }
  return e;
}

std::optional<std::string> hf_token() {
  std::optional<std::string> t;
  if (auto a = get("HF_TOKEN")) {
    t = trim(*a);
  } else if (auto b = get("HUGGING_FACE_HUB_TOKEN")) {
    t = trim(*b);
  } else {
    const fs::path file = path_var("HF_TOKEN_PATH").value_or(hf_home() / "token");
    try {
      t = trim(read_small_file(file, 4096));
    } catch (const Error&) {
      // Absent or unreadable is the same as no token: public repos still work.
    }
  }
  if (t && t->empty()) t.reset();
  return t;
}

bool hf_hub_offline() { return flag("HF_HUB_OFFLINE"); }
bool hf_hub_disable_xet() { return flag("HF_HUB_DISABLE_XET"); }
unsigned hf_parallel_downloads() { return std::max(1u, unsigned_or("SKIPPY_HF_DOWNLOADS", 4)); }
unsigned hf_parallel_uploads() { return std::max(1u, unsigned_or("SKIPPY_HF_UPLOADS", 4)); }
unsigned hf_connections() { return std::clamp(unsigned_or("SKIPPY_HF_CONNECTIONS", 8), 1u, 64u); }
uint64_t hf_min_range_bytes() {
  return std::max<uint64_t>(uint64_t{64} << 10, unsigned_or("SKIPPY_HF_MIN_RANGE", 4u << 20));
}
unsigned hf_max_attempts() { return std::max(1u, unsigned_or("SKIPPY_HF_MAX_ATTEMPTS", 5)); }
unsigned hf_backoff_ms() { return unsigned_or("SKIPPY_HF_BACKOFF_MS", 1000); }
uint64_t hf_min_rate() {
  const auto v = get("SKIPPY_HF_MIN_RATE");
  if (!v) return 4096;
  const auto r = parse_byte_rate(*v);
  if (!r) throw Error(ErrorKind::kUsage, "SKIPPY_HF_MIN_RATE=\"" + *v + "\" is not a rate in bytes per second (e.g. 4096, 512K, 1M)");
  return *r;
}
unsigned hf_min_rate_secs() { return std::max(1u, unsigned_or("SKIPPY_HF_MIN_RATE_SECS", 30)); }
unsigned hf_stall_secs() { return std::max(1u, unsigned_or("SKIPPY_HF_STALL_SECS", 60)); }
namespace {
double seconds_or(const char* name, double fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  if (end == v || *end != '\0' || !(s > 0) || s > 86400) {
    throw Error(ErrorKind::kUsage, std::string(name) + "=" + v + ": expected seconds (e.g. 10 or 2.5)");
  }
  return std::max(0.1, s);
}
}  // namespace
double hf_etag_timeout_secs() { return seconds_or("HF_HUB_ETAG_TIMEOUT", 10); }
double hf_download_timeout_secs() { return seconds_or("HF_HUB_DOWNLOAD_TIMEOUT", 10); }

std::optional<uint64_t> parse_byte_rate(std::string_view text) {
  try {
    return parse_byte_size(text);
  } catch (const Error&) {
    return std::nullopt;
  }
}

uint64_t peer_min_rate() {
  const auto v = get("SKIPPY_PEER_MIN_RATE");
  if (!v) return uint64_t{1} << 20;
  const auto r = parse_byte_rate(*v);
  if (!r) {
    throw Error(ErrorKind::kUsage, "SKIPPY_PEER_MIN_RATE=\"" + *v + "\" is not a rate in bytes per second (e.g. 1048576, 512K, 1M)");
  }
  return *r;
}

uint64_t peer_rate_window_ms() {
  const auto v = get("SKIPPY_PEER_RATE_WINDOW");
  if (!v) return 10'000;
  double secs = 0;
  const auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), secs);
  if (ec != std::errc() || p != v->data() + v->size() || !(secs >= 0.1 && secs <= 3600)) {
    throw Error(ErrorKind::kUsage, "SKIPPY_PEER_RATE_WINDOW=\"" + *v + "\" is not a number of seconds from 0.1 to 3600");
  }
  return static_cast<uint64_t>(secs * 1000 + 0.5);
}

std::string progress_mode() {
  const auto v = get("SKIPPY_PROGRESS");
  if (!v) return "auto";
  if (*v != "auto" && *v != "lines" && *v != "off") {
    throw Error(ErrorKind::kUsage, "SKIPPY_PROGRESS=\"" + *v + "\" is not auto, lines or off");
  }
  return *v;
}

double progress_interval_secs() {
  const auto v = get("SKIPPY_PROGRESS_SECS");
  if (!v) return 10;
  double secs = 0;
  const auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), secs);
  if (ec != std::errc() || p != v->data() + v->size() || !(secs >= 0.01 && secs <= 3600)) {
    throw Error(ErrorKind::kUsage, "SKIPPY_PROGRESS_SECS=\"" + *v + "\" is not a number of seconds from 0.01 to 3600");
  }
  return secs;
}

std::vector<fs::path> trusted_signers() {
  std::vector<fs::path> out;
  // SKIPPY_TRUSTED_OWNERS is a second name for the same list.
  for (const char* name : {"SKIPPY_TRUSTED_SIGNERS", "SKIPPY_TRUSTED_OWNERS"}) {
    const auto v = get(name);
    if (!v) continue;
    size_t start = 0;
    while (start <= v->size()) {
      const size_t end = std::min(v->find(':', start), v->size());
      const std::string item = trim(v->substr(start, end - start));
      if (!item.empty()) out.push_back(expand_user(item));
      start = end + 1;
    }
  }
  return out;
}

bool verify_package_sha() {
  auto v = get("SKIPPY_VERIFY_PACKAGE_SHA");
  return v && *v != "0";
}

std::optional<std::string> runtime_abi() { return get("SKIPPY_RUNTIME_ABI"); }

std::optional<int64_t> source_date_epoch() {
  auto v = get("SOURCE_DATE_EPOCH");
  if (!v) return std::nullopt;
  int64_t out = 0;
  const auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  if (ec != std::errc() || p != v->data() + v->size() || out < 0) {
    throw Error(ErrorKind::kUsage, "SOURCE_DATE_EPOCH=\"" + *v + "\" is not a non-negative integer");
  }
  return out;
}

}  // namespace skippy::env
