// Stage planning: split a package's layers into N contiguous stages balanced
// by the bytes each stage loads, optionally under per-stage byte budgets.
//
// The planners read a package of either schema through its catalog
// (skippy/package_catalog.h). A stage loads what the spec's layer-selection
// rule selects for its range: the metadata part (every stage), the input
// embeddings (the stage starting at layer 0, and the final stage too when
// the output projection is tied to the embeddings), its layers, the output
// (the stage ending at layer_count). Its bytes are what the catalog says a
// stage reads of them: a whole artifact (schema 1's fragments, the schema 2
// carrier), or the tensor extents of a part read by extents (schema 2).
//
// What a catalog alone cannot say — whether the output is tied (a schema 1
// catalog without its output fragment's header), the activation width the
// package does not declare, the model's metadata — a reader of the package's
// files adds: plan_package() gathers it into a PlanPackage.
//
// Thread-safety: plain values and pure functions, safe from any thread;
// plan_package reads files (and brings them through the package's source)
// and may run concurrently on different packages.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "skippy/catalog_stage.h"
#include "skippy/decode_cost.h"
#include "skippy/gguf.h"
#include "skippy/package_catalog.h"
#include "skippy/stage.h"

namespace skippy {

struct PlanOptions {
  uint32_t stages = 1;  // 1..layer_count
  // One budget for every stage. Mutually exclusive with node_budgets.
  std::optional<uint64_t> max_bytes_per_stage;
  // One budget per stage, in stage order (stage 0 first); empty = none.
  std::vector<uint64_t> node_budgets;
  // Activation wire dtype: 2 (f16) or 4 (f32).
  uint32_t activation_bytes_per_value = 2;
  // The output projection is tied to the token embeddings: the final stage
  // loads the embeddings too (already counted once for a single stage).
  // Unset (the default): plan_stages(PlanPackage, ...) takes the package's
  // (PlanPackage::final_stage_loads_embeddings); the catalog-only
  // plan_stages refuses a multi-stage plan without it, since a catalog may
  // not say. Set it only to override deliberately.
  std::optional<bool> final_stage_needs_embeddings;
  // Count the first declared mmproj projector on stage 0 (multimodal serving).
  bool include_projector = false;
  // The activation width when the package declares none (the reference
  // runtime's fallback, skippy/stage.h activation_width_of); the catalog's
  // declared value always wins.
  std::optional<uint64_t> activation_width;
};

struct PlannedStage {
  uint32_t index = 0;
  LayerRange range;              // half-open, non-empty
  uint64_t bytes = 0;            // everything the stage loads
  uint64_t layer_bytes = 0;      // its layers only
  uint64_t shared_bytes = 0;     // metadata + embeddings/output/projector it loads
  bool embeddings = false;       // loads shared/embeddings
  bool output = false;           // loads shared/output
  bool projector = false;        // projector bytes counted (stage 0, include_projector)
  std::optional<uint64_t> budget;  // its budget, when budgets were given
  // The activation frame this stage sends to the next one, per token;
  // nullopt for the final stage or when activation_width is unknown.
  std::optional<uint64_t> activation_out_bytes_per_token;
  bool operator==(const PlannedStage&) const = default;
};

struct Plan {
  uint32_t layer_count = 0;
  std::vector<PlannedStage> stages;
  uint64_t total_bytes = 0;       // sum over stages (shared parts counted per stage)
  uint64_t max_stage_bytes = 0;   // the bottleneck the plan minimizes
  std::optional<uint64_t> activation_width;
  uint32_t activation_bytes_per_value = 2;
  // activation_width × activation_bytes_per_value; nullopt when the manifest
  // has no activation_width.
  std::optional<uint64_t> activation_frame_bytes_per_token;
  bool output_tied_to_embeddings = false;
  std::vector<std::string> notes;  // e.g. unknown activation width, tied output
};

// A package as the planners read it, for either schema: where it is (the
// place it was opened from), its catalog, and the facts only a reader of
// its files knows.
struct PlanPackage : OpenedPlace {
  // Schema 1: the manifest's artifacts (catalog_artifacts_v1), with every
  // fragment's tensors when PlanReads::tensors asked for them; schema 2:
  // the catalog as opened.
  PackageCatalog catalog;
  // No output.weight: the final stage also loads the embeddings. nullopt
  // when it was not read (schema 1, a plan of one stage or more stages than
  // layers: neither needs it).
  std::optional<bool> output_tied;
  // The width a stage boundary carries (declared, or the reference
  // runtime's rule: skippy/stage.h activation_width_tensor) and how a width
  // the package does not declare was found, or why it is unknown ("" when
  // declared, or unknown with nothing more to say).
  std::optional<uint64_t> activation_width;
  std::string activation_width_note;
  // The model's metadata (the source's KVs: shared/metadata.gguf, the
  // schema 2 carrier), when PlanReads asked for it; verified first where
  // the package requires it.
  std::shared_ptr<const GgufFile> metadata;

  // Whether the final stage of a `stages`-stage plan loads the embeddings
  // (a tied output): for 2..layer_count stages, output_tied; else false.
  // The one home of that rule for every planner.
  bool final_stage_loads_embeddings(uint32_t stages) const;
};

// What a plan reads of a package beyond its manifest.
struct PlanReads {
  // The stage count, or the node count of a plan over nodes: the tie is
  // read (schema 1: the output fragment, brought and verified) for 2 or
  // more stages.
  uint32_t stages = 1;
  bool metadata = false;  // the model's metadata (memory and time plans)
  // Every tensor's size (the time plan): schema 1 reads every fragment's
  // header, from disk, or for an hf:// package's fragments not in the cache
  // as their first bytes alone through the source (ranged requests of a
  // few KiB, kept in the skippy cache; CatalogNeed::headers()): a plan never
  // brings the model. Implies metadata and the tie.
  bool tensors = false;
};

// A package's facts for the planners, from its reader: the catalog a plan
// needs (the artifacts; a final stage's for whether the output is tied;
// every tensor for a time plan), what the reader read verified where the
// package requires it, the model's metadata and the activation width.
// Throws the source's and the reader's errors.
PlanPackage plan_package(const OpenedPackage& package, const PlanReads& reads);

// What one decoded token reads of the package's model (read_decode_cost over
// its catalog's tensors and its metadata): `package` planned with tensors.
DecodeCost package_decode_cost(const PlanPackage& package);

// Balances contiguous ranges (every stage >= 1 layer):
//   1. minimizes the largest stage — with node_budgets, the largest
//      bytes/budget ratio — exactly (DP over prefix sums, O(N·L²));
//   2. among those plans, minimizes the sum of squared stage bytes (spreads
//      the rest evenly); remaining ties go to the earliest cut.
// Throws:
//   Error(kUsage): stages == 0, node_budgets.size() != stages, both budget
//     kinds given, activation_bytes_per_value not 2 or 4;
//   Error(kInvalidInput): stages > layer_count ("cannot split 8 layers into 9
//     stages ..."), a catalog whose layers are past layer_count or whose
//     byte counts overflow, and a plan that cannot fit its budgets — the
//     message names the stage, its bytes, its budget and the excess.
//   Error(kUsage) too: stages >= 2 with final_stage_needs_embeddings unset
//     (only the package knows; use the overload below).
Plan plan_stages(const PackageCatalog& catalog, const PlanOptions& options);

// The plan of a package, as the CLI's `plan` makes it: unless the caller
// set them, whether the final stage loads the embeddings and the activation
// width come from the package's facts; a note says how a width the package
// does not declare was found (or why it is unknown).
Plan plan_stages(const PlanPackage& package, PlanOptions options);

// A byte size as written on the command line: a decimal number (a fraction
// is allowed with a unit, rounded down to whole bytes) and an optional unit,
// case-insensitive: none or B = bytes; K, M, G, T (also KiB, MiB, GiB, TiB)
// = powers of 1024; KB, MB, GB, TB = powers of 1000. "512M", "1.5GiB", "8GB",
// "123456". Throws Error(kUsage) on anything else or past 2^64-1.
uint64_t parse_byte_size(std::string_view text);

}  // namespace skippy
