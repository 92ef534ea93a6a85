// What a stage of a layer range loads, as bytes: the one count every planner
// uses (spec "Layer Selection", the rule stage_reads states), read from a
// package catalog of either schema. An artifact the catalog says a stage
// reads whole (read_whole: schema 1's fragments, the carrier, sidecars)
// counts all its bytes under its part's role; one read by extents (schema
// 2's payload parts) counts each tensor's stored bytes under the tensor's
// role. Either way the same buckets: every stage, the input embeddings, the
// output, each layer, the projector.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "skippy/package_catalog.h"

namespace skippy::plan_detail {

struct StageWeights {
  uint32_t layers = 0;
  bool tied = false;          // the stage owning the output loads the embeddings too
  uint64_t every_stage = 0;   // the metadata part (carrier) and what every stage reads
  uint64_t embeddings = 0;    // the stage starting at layer 0 (and, tied, the one ending at layer_count)
  uint64_t output = 0;        // the stage ending at layer_count
  uint64_t projector = 0;     // stage 0, when counted
  std::vector<uint64_t> prefix;  // prefix[j] = bytes of layers 0..j-1
  // For the planners' notes: what `embeddings` is (a part's path, or the
  // input embeddings by name); the projector counted, if any; whether the
  // package has projectors at all; whether any bytes are tensor extents.
  std::string embeddings_label;
  const CatalogArtifact* projector_artifact = nullptr;
  bool has_projectors = false;
  bool extents = false;

  uint64_t layer_bytes(uint32_t a, uint32_t b) const { return prefix[b] - prefix[a]; }
  bool embeddings_on(uint32_t a, uint32_t b) const { return a == 0 || (tied && b == layers); }
  bool output_on(uint32_t b) const { return b == layers; }
  // Everything but its layers, for the stage of layers a..b-1.
  uint64_t shared_bytes(uint32_t a, uint32_t b) const {
    return every_stage + (embeddings_on(a, b) ? embeddings : 0) + (a == 0 ? projector : 0) + (output_on(b) ? output : 0);
  }
  uint64_t bytes(uint32_t a, uint32_t b) const { return shared_bytes(a, b) + layer_bytes(a, b); }
};

// Counts the catalog (a layer at or past layer_count, or byte counts past
// 64 bits: Error(kInvalidInput)); `include_projector` counts the first
// mmproj sidecar on stage 0. Any one stage's bytes fit 64 bits.
StageWeights stage_weights(const PackageCatalog& catalog, bool tied, bool include_projector);

// An N-stage split is possible: N >= 1 (Error(kUsage)), layers to split
// and N <= layer_count (Error(kInvalidInput) "cannot split ...").
void check_stage_count(uint32_t layers, uint32_t stages);

// Every stage of an N-stage split added up (shared parts counted per
// stage): Error(kInvalidInput) past 64 bits.
uint64_t total_bytes(const StageWeights& weights, uint32_t stages);

// When the final stage's range holds only the package's native MTP (NextN)
// layers, a note saying so: legal, and rarely what one wants (that stage does
// no work in ordinary decoding). Empty otherwise.
std::string nextn_only_note(const PackageCatalog& catalog, uint32_t last_start, uint32_t last_end);

// a + b and a * b, refusing to overflow 64 bits (Error(kInvalidInput)).
uint64_t checked_add(uint64_t a, uint64_t b);
uint64_t checked_mul(uint64_t a, uint64_t b);

}  // namespace skippy::plan_detail
