#include "generation/builtin_policy.h"

namespace skippy::generation_detail {

namespace {
constexpr std::string_view kGlmDsaArch = "glm-dsa";
constexpr std::string_view kGlmDsaProfile = "glm-dsa-v1";
constexpr uint64_t kGenericShortPrefillMaxTokens = 2048;
}  // namespace

std::optional<std::string> profile_model_mismatch(std::string_view profile, std::string_view architecture) {
  if (profile != kGlmDsaProfile || architecture == kGlmDsaArch) return std::nullopt;
  return "generation.policy.profile \"" + std::string(profile) + "\" ignored: it is for architecture \"" +
         std::string(kGlmDsaArch) + "\" and this model's is \"" +
         std::string(architecture.empty() ? "unknown" : architecture) +
         "\" (the profile's model evidence is absent)";
}

BuiltinPolicy builtin_policy(std::string_view architecture, const std::optional<std::string>& known_profile) {
  BuiltinPolicy b;
  const bool dsa_profile = known_profile == kGlmDsaProfile && !profile_model_mismatch(*known_profile, architecture);
  if (architecture == kGlmDsaArch || dsa_profile) {
    // GLM-DSA.md "Package defaults for glm-dsa-v1".
    b.profile = std::string(kGlmDsaProfile);
    b.sparse_attention = true;
    b.paths = {{Phase::kDecode, "compact-flash"},
               {Phase::kShortPrefill, "dense"},
               {Phase::kLongPrefill, "sparse-chunked"},
               {Phase::kVerify, "auto"}};
    b.indexshare = "required";
    for (const auto s : known_experimental_switches()) b.experimental.emplace(s, "evidence-gated");
    b.short_prefill_max_tokens = 2048;
    b.compact_flash_min_kv = 1;
    b.dense_mask_max_bytes = 268435456;
    return b;
  }
  b.paths = {{Phase::kDecode, "dense"},
             {Phase::kShortPrefill, "dense"},
             {Phase::kLongPrefill, "dense"},
             {Phase::kVerify, "dense"}};
  b.short_prefill_max_tokens = kGenericShortPrefillMaxTokens;
  return b;
}

std::vector<ExecutionPath> auto_order(Phase phase) {
  using P = ExecutionPath;
  switch (phase) {
    // Compact selected-row flash won every measured one-token decode shape.
    case Phase::kDecode: return {P::kCompactFlash, P::kDense, P::kDirectSparse, P::kSparseChunked};
    // Dense masked flash was 6.5-6.9x faster than direct sparse on 4-16
    // token batches; beyond the mask budget, chunked sparse.
    case Phase::kShortPrefill:
    case Phase::kVerify: return {P::kDense, P::kSparseChunked, P::kDirectSparse, P::kCompactFlash};
    case Phase::kLongPrefill: return {P::kSparseChunked, P::kDirectSparse, P::kDense, P::kCompactFlash};
  }
  return {};
}

std::vector<ExecutionPath> fallback_order(Phase phase) {
  using P = ExecutionPath;
  if (phase == Phase::kDecode) return {P::kDense, P::kDirectSparse, P::kCompactFlash, P::kSparseChunked};
  return {P::kDense, P::kSparseChunked, P::kDirectSparse, P::kCompactFlash};
}

}  // namespace skippy::generation_detail
