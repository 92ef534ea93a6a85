// Stage planning: split a package's layers into N contiguous stages balanced
// by the bytes each stage loads, optionally under per-stage byte budgets.
//
// A stage loads exactly what select_stage() selects for its range (spec:
// "Layer Selection"): shared/metadata.gguf (every stage), shared/embeddings
// (the stage starting at layer 0, and the final stage too when the output
// projection is tied to the embeddings), its layers, shared/output (the stage
// ending at layer_count). Stage bytes are the sum of those artifact_bytes.
//
// Planning works on the manifest alone; the one fact it cannot read there —
// whether the output is tied to the embeddings (no output.weight in
// shared/output.gguf) — is passed in PlanOptions by a caller that opened the
// package (the CLI checks it through select_stage()).
//
// Thread-safety: plain values and pure functions, safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "skippy/manifest.h"
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
  // loads shared/embeddings too (already counted once for a single stage).
  // Unset (the default): plan_stages(package, ...) derives it from the
  // package (output_tie, the rule select and the CLI use); the manifest-only
  // plan_stages refuses a multi-stage plan without it, since a manifest
  // alone cannot say. Set it only to override deliberately.
  std::optional<bool> final_stage_needs_embeddings;
  // Count the first declared mmproj projector on stage 0 (multimodal serving).
  bool include_projector = false;
  // The activation width when the manifest declares none (the reference
  // runtime's fallback, skippy/stage.h activation_width_of); the manifest's
  // own value always wins.
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

// Balances contiguous ranges (every stage >= 1 layer):
//   1. minimizes the largest stage — with node_budgets, the largest
//      bytes/budget ratio — exactly (DP over prefix sums, O(N·L²));
//   2. among those plans, minimizes the sum of squared stage bytes (spreads
//      the rest evenly); remaining ties go to the earliest cut.
// Throws:
//   Error(kUsage): stages == 0, node_budgets.size() != stages, both budget
//     kinds given, activation_bytes_per_value not 2 or 4;
//   Error(kInvalidInput): stages > layer_count ("cannot split 8 layers into 9
//     stages ..."), a manifest whose layers are not 0..layer_count-1 or whose
//     byte counts overflow, and a plan that cannot fit its budgets — the
//     message names the stage, its bytes, its budget and the excess.
//   Error(kUsage) too: stages >= 2 with final_stage_needs_embeddings unset
//     (only the package knows; use the overload below).
Plan plan_stages(const PackageManifest& manifest, const PlanOptions& options);

// The plan of an opened package, as the CLI's `plan` makes it: unless the
// caller set them, whether the final stage loads the embeddings (tied
// output) comes from the package's output fragment (verified first when
// the package requires it) and the activation width from the reference
// runtime's rule when the manifest declares none.
Plan plan_stages(const OpenedPackage& package, PlanOptions options);
// Whether the final stage of a `stages`-stage plan loads shared/embeddings
// (a tied output): output_tie() for 2..layer_count stages, else false. The
// one home of that rule for plan_stages and the memory plan.
bool final_stage_needs_embeddings(const OpenedPackage& package, uint32_t stages);

// The planner's input for a package schema 2 catalog: the tables
// plan_stages and plan_memory read, counted from the catalog's tensors as
// select_stage selects them (one planner, a second input).
//   layers[l]           bytes of the blk.l.* tensors;
//   shared.metadata     the carrier's artifact bytes, plus the tensors
//                       without a layer that every stage reads (rope_freqs);
//   shared.embeddings   the input tensors (token_embd.*, ...), on stage 0 and,
//                       with a tied output, on the last stage too (as schema 1
//                       counts its embeddings artifact);
//   shared.output       output and output_norm;
//   projectors          the mmproj sidecars' artifact bytes.
// Paths name what is counted (for the plan's notes). The model's own
// activation width (the layer-0 attn_norm rule of activation_width_tensor)
// and whether the output is tied come with it.
struct CatalogPlanInput {
  PackageManifest manifest;
  bool output_tied = false;            // no output.weight
  std::optional<uint64_t> activation_width;
};
CatalogPlanInput plan_input_from_catalog(const PackageCatalog& catalog);

// A byte size as written on the command line: a decimal number (a fraction
// is allowed with a unit, rounded down to whole bytes) and an optional unit,
// case-insensitive: none or B = bytes; K, M, G, T (also KiB, MiB, GiB, TiB)
// = powers of 1024; KB, MB, GB, TB = powers of 1000. "512M", "1.5GiB", "8GB",
// "123456". Throws Error(kUsage) on anything else or past 2^64-1.
uint64_t parse_byte_size(std::string_view text);

}  // namespace skippy
