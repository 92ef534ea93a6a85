// Schema 2's `generation` read as schema 1's (skippy/manifest.h), so that
// every consumer of generation defaults (speculative.h, policy.h,
// package_generation.h) has one set of rules for both schemas.
//
// Schema 2 (the reference, v0.76.1) carries only speculative_decoding, with
// the same field names as schema 1's; its parser (manifest_v2.h) allows some
// values schema 1's rules refuse (prediction_depth above 1, a history_scope
// other than "request", N-gram bounds past schema 1's, the ids "auto" and
// "disabled"). Such a block has no schema 1 meaning: it is refused, not
// reinterpreted.
#pragma once

#include <cstdint>
#include <string_view>

#include "skippy/manifest.h"
#include "skippy/manifest_v2.h"

namespace skippy {

// The schema 1 generation block equivalent to `g`: each V2 field becomes the
// schema 1 field of the same name, then schema 1's parser and rules check it
// against `layer_count` (exactly as a schema 1 manifest's block is checked).
// No policy, no thresholds. Throws Error(kInvalidInput)
// "<origin>: generation...<field>: <problem> (a schema 2 generation block
// read by schema 1's rules: this one does not map)".
GenerationDefaults generation_v1_of(const V2Generation& g, uint32_t layer_count, std::string_view origin);

}  // namespace skippy
