// What each stage of an N-stage split loads, as bytes: the one count both
// planners use (spec "Layer Selection", as select_stage() applies it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "skippy/manifest.h"

namespace skippy::plan_detail {

struct StageWeights {
  uint32_t layers = 0;
  uint32_t stages = 0;
  bool tied = false;                         // the final stage loads the embeddings too
  const ProjectorEntry* projector = nullptr;  // counted on stage 0
  std::vector<uint64_t> prefix;              // prefix[j] = bytes of layers 0..j-1
  std::vector<uint64_t> fixed;               // per stage: the shared artifacts it loads
  uint64_t total = 0;                        // every stage's bytes added up (fits 64 bits)

  uint64_t layer_bytes(uint32_t a, uint32_t b) const { return prefix[b] - prefix[a]; }
  uint64_t bytes(uint32_t stage, uint32_t a, uint32_t b) const { return fixed[stage] + layer_bytes(a, b); }
  bool embeddings(uint32_t stage) const { return stage == 0 || (tied && stage + 1 == stages); }
  bool output(uint32_t stage) const { return stage + 1 == stages; }
};

// Checks the split is possible (1 <= stages <= layer_count, layers listed
// 0..layer_count-1 in order, byte counts within 64 bits) and counts it.
// `include_projector` counts the first declared mmproj on stage 0.
// Throws Error(kUsage) for stages == 0, Error(kInvalidInput) otherwise.
StageWeights stage_weights(const PackageManifest& manifest, uint32_t stages, bool tied, bool include_projector);

// When the final stage's range holds only the package's native MTP (NextN)
// layers, a note saying so: legal, and rarely what one wants (that stage does
// no work in ordinary decoding). Empty otherwise.
std::string nextn_only_note(const PackageManifest& manifest, uint32_t last_start, uint32_t last_end);

// a + b and a * b, refusing to overflow 64 bits (Error(kInvalidInput)).
uint64_t checked_add(uint64_t a, uint64_t b);
uint64_t checked_mul(uint64_t a, uint64_t b);

}  // namespace skippy::plan_detail
