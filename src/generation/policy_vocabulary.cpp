// Names of the resolver's vocabulary (spec: "Execution Policy" path values,
// phase fields, IndexShare roles), the dense-mask estimate, phase
// identification, runtime overrides and the inspect/select warnings.
#include <algorithm>
#include <array>
#include <charconv>

#include "generation/wording.h"
#include "skippy/error.h"
#include "skippy/policy.h"

namespace skippy {
namespace {

constexpr std::array<ExecutionPath, 4> kPaths = {ExecutionPath::kDense, ExecutionPath::kDirectSparse,
                                                 ExecutionPath::kCompactFlash, ExecutionPath::kSparseChunked};
constexpr std::array<std::string_view, 4> kPathNames = {"dense", "direct-sparse", "compact-flash",
                                                        "sparse-chunked"};
constexpr std::array<std::string_view, 4> kPhaseNames = {"decode", "short_prefill", "long_prefill", "verify"};

using generation_detail::in_quotes;
using generation_detail::is_known_switch;

std::optional<uint64_t> parse_u64(std::string_view s) {
  uint64_t v = 0;
  if (s.empty()) return std::nullopt;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

std::string_view execution_path_name(ExecutionPath path) noexcept {
  return kPathNames[static_cast<size_t>(path)];
}

std::optional<ExecutionPath> parse_execution_path(std::string_view name) noexcept {
  for (size_t i = 0; i < kPathNames.size(); ++i) {
    if (kPathNames[i] == name) return kPaths[i];
  }
  return std::nullopt;
}

std::span<const ExecutionPath> all_execution_paths() noexcept { return kPaths; }

std::string_view phase_name(Phase phase) noexcept { return kPhaseNames[static_cast<size_t>(phase)]; }

std::optional<Phase> parse_phase(std::string_view name) noexcept {
  for (size_t i = 0; i < kPhaseNames.size(); ++i) {
    if (kPhaseNames[i] == name) return static_cast<Phase>(i);
  }
  return std::nullopt;
}

std::optional<RequestKind> parse_request_kind(std::string_view name) noexcept {
  if (name == "decode") return RequestKind::kDecode;
  if (name == "prefill") return RequestKind::kPrefill;
  if (name == "verify") return RequestKind::kVerify;
  return std::nullopt;
}

std::string_view indexshare_role_name(IndexShareRole role) noexcept {
  return role == IndexShareRole::kFull ? "full" : "shared";
}

std::optional<IndexShareRole> parse_indexshare_role(std::string_view name) noexcept {
  if (name == "full") return IndexShareRole::kFull;
  if (name == "shared") return IndexShareRole::kShared;
  return std::nullopt;
}

std::string_view policy_source_name(PolicySource source) noexcept {
  switch (source) {
    case PolicySource::kOverride: return "override";
    case PolicySource::kPackage: return "package";
    case PolicySource::kBuiltin: return "builtin";
    case PolicySource::kFallback: return "fallback";
  }
  return "?";
}

uint64_t dense_mask_bytes(uint64_t n_tokens, uint64_t n_kv) noexcept {
  uint64_t cells = 0;
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(n_tokens, n_kv, &cells) || __builtin_mul_overflow(cells, uint64_t{4}, &bytes)) {
    return UINT64_MAX;
  }
  return bytes;
}

Phase identify_phase(RequestKind kind, uint64_t n_tokens, uint64_t short_prefill_max_tokens) noexcept {
  switch (kind) {
    case RequestKind::kDecode: return Phase::kDecode;
    case RequestKind::kVerify: return Phase::kVerify;
    case RequestKind::kPrefill: break;
  }
  return n_tokens <= short_prefill_max_tokens ? Phase::kShortPrefill : Phase::kLongPrefill;
}

bool PolicyOverrides::empty() const noexcept {
  return paths.empty() && !indexshare && !short_prefill_max_tokens && !compact_flash_min_kv &&
         !dense_mask_max_bytes && experimental.empty();
}

void add_policy_override(PolicyOverrides& o, std::string_view text) {
  const auto eq = text.find('=');
  auto usage = [&](const std::string& why) {
    throw Error(ErrorKind::kUsage, "--override " + in_quotes(text) + ": " + why);
  };
  if (eq == std::string_view::npos || eq == 0) usage("expected FIELD=VALUE");
  const std::string_view field = text.substr(0, eq);
  const std::string_view value = text.substr(eq + 1);
  if (const auto phase = parse_phase(field)) {
    if (!parse_execution_path(value) && value != kPathAuto && value != kPathFallback) {
      usage("unknown path " + in_quotes(value) +
            " (known: dense, direct-sparse, compact-flash, sparse-chunked, auto, fallback)");
    }
    o.paths[*phase] = std::string(value);
    return;
  }
  if (field == "indexshare") {
    if (value != "required" && value != "recompute") usage("indexshare is required or recompute");
    o.indexshare = std::string(value);
    return;
  }
  const std::pair<std::string_view, std::optional<uint64_t>*> thresholds[] = {
      {"short_prefill_max_tokens", &o.short_prefill_max_tokens},
      {"compact_flash_min_kv", &o.compact_flash_min_kv},
      {"dense_mask_max_bytes", &o.dense_mask_max_bytes}};
  for (const auto& [name, slot] : thresholds) {
    if (field != name) continue;
    const auto v = parse_u64(value);
    if (!v) usage(std::string(name) + " needs a non-negative decimal integer");
    *slot = *v;
    return;
  }
  std::string_view sw = field;
  if (sw.starts_with("experimental.")) sw.remove_prefix(13);
  if (is_known_switch(sw)) {
    if (value != "on" && value != "off") usage("an experimental switch is on or off");
    o.experimental[std::string(sw)] = value == "on";
    return;
  }
  usage("unknown field " + in_quotes(field) +
        " (decode, short_prefill, long_prefill, verify, indexshare, short_prefill_max_tokens, "
        "compact_flash_min_kv, dense_mask_max_bytes, experimental.<switch>)");
}

}  // namespace skippy
