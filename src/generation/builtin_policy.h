// This runtime's built-in generation defaults per architecture (resolution
// step 3, "Runtime built-in default for the architecture").
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "skippy/policy.h"

namespace skippy::generation_detail {

struct BuiltinPolicy {
  std::optional<std::string> profile;        // the profile whose table this is
  bool sparse_attention = false;             // the model has sparse attention paths at all
  std::map<Phase, std::string> paths;        // phase -> path value
  std::optional<std::string> indexshare;     // "required" for GLM-DSA
  std::map<std::string, std::string> experimental;  // switch -> "evidence-gated"
  std::optional<uint64_t> short_prefill_max_tokens;
  std::optional<uint64_t> compact_flash_min_kv;
  std::optional<uint64_t> dense_mask_max_bytes;
};

// glm-dsa (or a package declaring the known glm-dsa-v1 profile): the
// glm-dsa-v1 phase and threshold table of the spec and GLM-DSA.md. Any
// other architecture: dense everywhere (it has no sparse attention), and a
// short-prefill limit of 2048 tokens only to name the phase.
BuiltinPolicy builtin_policy(std::string_view architecture, const std::optional<std::string>& known_profile);

// Why a known `profile` does not apply to a model of `architecture` (the
// model evidence the profile needs is absent: glm-dsa-v1 is for the glm-dsa
// architecture only), or nullopt when it applies. The resolver's share of
// the profile evidence rule; validate-package checks the whole artifact
// shape (publish/generation_inference.h: profile_evidence_problem).
std::optional<std::string> profile_model_mismatch(std::string_view profile, std::string_view architecture);

// The order the resolver tries paths in, per phase: `auto` (best first, as
// measured in the spec's fixtures) and the correctness fallback (the
// cheapest correct path first: dense while its mask fits).
std::vector<ExecutionPath> auto_order(Phase phase);
std::vector<ExecutionPath> fallback_order(Phase phase);

}  // namespace skippy::generation_detail
