// Stage planning: where a package's layers go, in three modes on its catalog
// (skippy/package_catalog.h), each section below:
//   - by bytes (plan_stages): N contiguous stages balanced by the bytes each
//     loads, optionally under per-stage byte budgets; plan_package gathers
//     what a catalog alone cannot say into a PlanPackage;
//   - by memory (plan_memory): nodes of given memory at a target context,
//     the weights plus each layer's cache and mesh-llm's reserves;
//   - by time per token (plan_time): the least time per decoded token from
//     each node's bandwidth and link, on the decode cost (what one decoded
//     token reads, per layer: decode_cost_of, also inspect's "active bytes
//     per token").
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

#include "skippy/gguf.h"
#include "skippy/model_source.h"
#include "skippy/package_catalog.h"
#include "skippy/package_layout.h"
#include "skippy/stage.h"

namespace skippy {

// ------------------------------------------------ what one decoded token reads
// What one decoded token reads, per layer, from a package's tensor table and
// metadata alone (no weight bytes are read): the input of planning for time
// per token (plan_time below) and of inspect's "active bytes per token".
//
// The rules, as llama.cpp's decode graph reads weights for one token:
//   - a dense tensor of a layer is read whole;
//   - an expert tensor (a routed-expert weight: its outermost dimension is
//     <arch>.expert_count, "_exps" in its name or a 3-D shape) is read at
//     expert_used_count / expert_count of its bytes (rounded up): the token is
//     routed to that many experts; shared experts ("_shexp") are dense;
//   - the input embedding matrices (token_embd, per-layer token embeddings,
//     position/type embeddings) are read one row per token: bytes / rows;
//   - the output head (output.weight, output_norm; the input embedding matrix
//     whole when the output is tied to it) is read whole by the final stage;
//   - other global tensors (rope_freqs, ...) are read by every stage;
//   - the last <arch>.nextn_predict_layers layers (the native MTP / NextN
//     block) are not run by ordinary decoding: they read nothing per token.

// One entry of a package's tensor table: a fragment's header (schema 1) or
// the carrier's directory (schema 2) gives these.
struct DecodeTensor {
  std::string name;
  std::vector<uint64_t> dims;  // ne[0] first
  uint64_t bytes = 0;          // stored bytes
};

struct LayerDecodeCost {
  uint64_t weight_bytes = 0;   // every tensor of the layer, whole
  uint64_t active_bytes = 0;   // what one decoded token reads of them
  uint64_t expert_bytes = 0;   // routed-expert tensors, whole (part of weight_bytes)
  bool nextn = false;          // a NextN/MTP layer: not run in ordinary decode
};

struct DecodeCost {
  std::string architecture;
  uint64_t expert_count = 0;       // 0: a dense model
  uint64_t expert_used_count = 0;
  uint32_t nextn_layers = 0;
  std::vector<LayerDecodeCost> layers;
  uint64_t embedding_bytes = 0;            // input embedding tensors, whole
  uint64_t embedding_bytes_per_token = 0;  // one row of each (first stage)
  uint64_t output_bytes = 0;               // output-boundary tensors, whole
  uint64_t output_bytes_per_token = 0;     // the output head, whole (final stage)
  bool output_tied = false;                // no output.weight: the head is token_embd
  uint64_t global_bytes = 0;               // other non-layer tensors (every stage)
  std::vector<std::string> notes;

  // Every tensor's bytes, and what one token reads through the whole model
  // (one stage holding everything).
  uint64_t total_bytes() const;
  uint64_t active_bytes_per_token() const;
};

// Builds the per-layer costs from the tensor table and the model's metadata
// (the source's KVs: shared/metadata.gguf or a schema 2 carrier). Throws
// Error(kInvalidInput) naming `origin` when a tensor names a layer at or past
// layer_count, a sum overflows 64 bits, expert_used_count exceeds
// expert_count, or nextn_predict_layers exceeds layer_count.
DecodeCost read_decode_cost(const GgufFile& metadata, const std::vector<DecodeTensor>& tensors, uint32_t layer_count,
                            std::string_view origin);

// The tensor table of a GGUF file's header (a source model or a fragment).
std::vector<DecodeTensor> decode_tensors_of(const GgufFile& file);

// What one decoded token reads of a source model (every shard's tensors);
// nullopt for a multimodal projector (is_multimodal_projector): an encoder
// run once per image or clip, which decoding reads nothing of.
std::optional<DecodeCost> model_decode_cost(const ModelSource& model);

// ----------------------------------------------------------- planning by bytes
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
  // The model's architecture (general.architecture), for the runtime lines'
  // split rosters: the metadata's when read, else the catalog's, else, for
  // a local package, its metadata part's header (schema 1's catalog of
  // artifacts reads none); "" when unknown.
  std::string architecture;

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

// ---------------------------------------------------------- planning by memory
// Memory-aware planning: where the layers go on nodes of given memory (and,
// optionally, bandwidth) at a target context, and whether they fit at all.
//
// A stage's memory is its weights (the bytes plan_stages() counts from the
// package catalog: metadata, its layers, embeddings on the first stage — and
// the last when the output is tied — output on the last) plus its layers' cache at the context:
// per layer, as llama.cpp allocates it (read_cache_shape), KV rows for every
// token an attention layer holds, or a recurrent layer's fixed state. On top
// come the reserves mesh-llm's coordinator uses: the cache is charged at
// 100/85 (compute buffers grow with it), and each node keeps headroom of
// max(10% of its budget, min(1 GiB, budget / 2)).
//
// Reading the cache shape touches the metadata GGUF's KVs only (no weight
// bytes: a PlanPackage's metadata); planning is pure
// arithmetic on the catalog and that shape.

// The KV cache element type (llama.cpp's --cache-type-k/-v).
enum class KvCacheType { kF16, kQ8_0 };
std::string_view kv_cache_type_name(KvCacheType type) noexcept;
// "f16" or "q8_0" (case-insensitive); Error(kUsage) otherwise.
KvCacheType parse_kv_cache_type(std::string_view text);
// Bytes of one cache row of `elements` values: 2 per element for f16, 34 per
// 32 for q8_0. Error(kInvalidInput) when q8_0 gets a row that is not a
// multiple of 32 (llama.cpp cannot build that cache either).
uint64_t kv_row_bytes(KvCacheType type, uint64_t elements);

enum class LayerCacheKind {
  kAttention,      // full attention: K and V rows for every token of the context
  kSlidingWindow,  // attention over a window: at most `window` tokens
  kMla,            // multi-head latent attention: one compressed K row, no V
  kRecurrent,      // SSM / RWKV: a fixed state, whatever the context
  kNone,           // no cache (an attention layer with no KV heads)
};
std::string_view layer_cache_kind_name(LayerCacheKind kind) noexcept;

struct LayerCacheShape {
  uint32_t layer = 0;
  LayerCacheKind kind = LayerCacheKind::kAttention;
  uint64_t k_elements = 0;          // per token: key_length × head_count_kv (MLA: kv_lora_rank + rope dims)
  uint64_t v_elements = 0;          // per token: value_length × head_count_kv (0 for MLA)
  uint64_t kv_bytes_per_token = 0;  // row(K) + row(V) at the cache type
  uint64_t window = 0;              // kSlidingWindow: tokens held at most
  uint64_t state_bytes = 0;         // kRecurrent: f32 conv + recurrent state, one sequence
  bool operator==(const LayerCacheShape&) const = default;
};

struct CacheShape {
  std::string architecture;
  KvCacheType kv_type = KvCacheType::kF16;
  std::vector<LayerCacheShape> layers;  // one per layer, in order
  std::vector<std::string> notes;       // defaults taken, rules applied
};

// The per-layer cache shape from a model's GGUF metadata (a package's
// shared/metadata.gguf or a source GGUF), following llama.cpp's rules:
// key_length/value_length default to embedding_length / head_count;
// head_count and head_count_kv may be per-layer arrays (head_count_kv defaults
// to head_count); MLA when key_length_mla and kv_lora_rank are present; a
// sliding window from attention.sliding_window with
// attention.sliding_window_pattern (a period p: layer il is a window layer
// when p == 0 or il % p < p - 1; or a per-layer bool array), or llama.cpp's
// fixed pattern for the architectures that hard-code one; recurrent layers for
// the SSM/RWKV architectures and for hybrids' layers without KV heads.
// Throws Error(kInvalidInput) naming the file and key when a required key is
// missing or malformed (a per-layer array of the wrong length, a zero head count).
CacheShape read_cache_shape(const GgufFile& metadata, KvCacheType kv_type);

// One layer's cache bytes at `context` tokens (KV, or its fixed state).
uint64_t layer_cache_bytes(const LayerCacheShape& layer, uint64_t context);

// The reserves on top of weights and cache.
struct MemoryReserves {
  uint32_t compute_reserve_percent = 15;    // cache charged at 100 / (100 - this)
  uint32_t headroom_percent = 10;           // per node: max(this % of the budget,
  uint64_t headroom_cap_bytes = 1ull << 30; //   min(this, budget / 2))
};
// The headroom a node of `budget` bytes keeps free.
uint64_t headroom_bytes(const MemoryReserves& reserves, uint64_t budget);
// The cache bytes charged for `cache` bytes of KV and state.
uint64_t charged_cache_bytes(const MemoryReserves& reserves, uint64_t cache);

struct MemoryPlanOptions {
  uint64_t context = 0;                 // target context, tokens (> 0)
  uint32_t stages = 0;                  // without budgets; with them, 0 or budgets.size()
  std::vector<uint64_t> budgets;        // memory per node, stage order; empty = no fit check
  std::vector<uint64_t> bandwidth;      // bytes/s per node, stage order; empty = balance memory
  MemoryReserves reserves;
  bool final_stage_needs_embeddings = false;  // tied output (PlanPackage::final_stage_loads_embeddings)
  bool include_projector = false;             // count the first mmproj on stage 0
};

struct MemoryPlannedStage {
  uint32_t index = 0;
  LayerRange range;
  uint64_t weight_bytes = 0;      // artifacts it loads (plan_stages' bytes)
  uint64_t kv_cache_bytes = 0;    // KV of its attention layers at the context
  uint64_t state_bytes = 0;       // its recurrent layers' fixed state
  uint64_t charged_cache_bytes = 0;  // (KV + state) × 100 / (100 - compute reserve)
  uint64_t headroom_bytes = 0;    // 0 without a budget
  uint64_t memory_bytes = 0;      // weights + charged cache + headroom
  std::optional<uint64_t> budget;
  std::optional<uint64_t> bandwidth;           // bytes/s
  std::optional<double> decode_time_us;        // weight_bytes / bandwidth
  bool embeddings = false;
  bool output = false;
};

struct MemoryPlan {
  uint32_t layer_count = 0;
  uint64_t context = 0;
  KvCacheType kv_type = KvCacheType::kF16;
  MemoryReserves reserves;
  std::vector<MemoryPlannedStage> stages;
  // With bandwidth: the slowest stage's time, and one token through every
  // stage in turn (the pipeline's decode time per token for one sequence).
  std::optional<double> bottleneck_time_us;
  std::optional<double> decode_time_per_token_us;
  std::vector<std::string> notes;
};

// Chooses contiguous ranges (every stage >= 1 layer), exactly (DP over cut
// points): without bandwidth, the split whose fullest stage (memory relative
// to budget minus headroom; without budgets, the largest memory) is least
// full; with bandwidth, among the splits that fit, the one whose slowest stage
// (weight bytes / bandwidth) is fastest, ties to the smaller pipeline time.
// Throws Error(kUsage) for inconsistent options (no context, counts that do
// not match, a zero bandwidth), Error(kInvalidInput) when `shape` does not
// match the catalog's layers, and when nothing fits: the message names the
// tightest stage of the best split, how many bytes it is short, the budget it
// would need, and the largest context at which these budgets fit.
MemoryPlan plan_memory(const PackageCatalog& catalog, const CacheShape& shape, const MemoryPlanOptions& options);

// A bandwidth as written on the command line: a size (parse_byte_size) per
// second, "/s" optional: "400GB/s", "25GiB/s", "1e9" is not accepted.
uint64_t parse_bandwidth(std::string_view text);

// -------------------------------------------------- planning by time per token
// Planning for time per token: where the layers go so that a decoded token
// takes the least time, from the package's catalog (its tensor table, the decode
// cost above), its cache shape at a context (as plan_memory reads it) and
// each node's memory bandwidth and link.
//
// The model, per decoded token:
//   stage time = (active weight bytes + KV bytes read) / node bandwidth
//                + per-stage overhead
//     active weight bytes: the stage's layers' active bytes, the metadata's
//     global tensors, one embedding row on the first stage, the output head
//     on the last; KV bytes read: its layers' cache at the context (sliding
//     window layers at their window; recurrent layers their state);
//   hop time   = activation bytes per token / link bandwidth + link latency,
//     one hop after every stage of a split (the last one returns the sampled
//     token to the first stage); a single stage has no hop.
// One lane (a single sequence): time per token = the sum of every stage and
// hop (the serial time). With lanes > 1, sequences overlap in the pipeline:
// the period is the slowest stage plus its hop, and the time per token of
// each lane is max(serial time, lanes x period).
//
// Defaults are mesh-llm's calibration (its performance-aware topology
// planner): 1.3 ms per stage, 13 ms per hop.

inline constexpr uint64_t kDefaultStageOverheadNs = 1'300'000;  // 1.3 ms
inline constexpr uint64_t kDefaultHopLatencyNs = 13'000'000;    // 13 ms

// A node's link to the next stage's node.
struct NodeLink {
  uint64_t latency_ns = kDefaultHopLatencyNs;  // one way, per hop
  uint64_t bytes_per_second = 0;               // 0: the activation transfer is not charged
};

struct TimePlanOptions {
  uint64_t context = 0;               // tokens (> 0)
  std::vector<uint64_t> bandwidth;    // bytes/s per node, in stage order (one per node offered)
  std::vector<uint64_t> budgets;      // memory per node (same count), or empty: no fit check
  std::vector<NodeLink> links;        // one per node, one for all, or empty: the defaults
  bool auto_stages = false;           // use the best subset of the nodes (order kept), not all
  uint32_t lanes = 1;                 // sequences in flight (>= 1)
  uint64_t stage_overhead_ns = kDefaultStageOverheadNs;
  uint64_t activation_bytes_per_token = 0;  // activation width x bytes per value; 0: unknown
  std::optional<uint64_t> target_ns;        // a time per token to meet
  MemoryReserves reserves;
  bool final_stage_needs_embeddings = false;  // tied output (memory: the final stage loads them)
  bool include_projector = false;
};

// The options of a time plan over the nodes of a memory plan: its context,
// each node's bandwidth and budget, the reserves, the projector and the
// tie; links, lanes, the stage overhead and a target are the caller's.
TimePlanOptions time_plan_options(const MemoryPlanOptions& memory);

struct TimedStage {
  uint32_t index = 0;
  uint32_t node = 0;                  // which of the offered nodes runs it
  LayerRange range;
  uint64_t weight_bytes = 0;          // what it loads (plan_stages' bytes)
  uint64_t active_weight_bytes = 0;   // weight bytes one token reads
  uint64_t kv_read_bytes = 0;         // cache bytes one token reads at the context
  uint64_t kv_cache_bytes = 0;        // KV held (memory), as plan_memory counts it
  uint64_t state_bytes = 0;
  uint64_t charged_cache_bytes = 0;   // (KV + state) x 100 / (100 - compute reserve)
  uint64_t headroom_bytes = 0;        // 0 without a budget
  uint64_t memory_bytes = 0;          // weights + charged cache + headroom
  std::optional<uint64_t> budget;
  uint64_t bandwidth = 0;
  uint64_t stage_time_ns = 0;
  uint64_t hop_time_ns = 0;           // to the next stage (0 for a single stage)
  bool embeddings = false;
  bool output = false;
};

struct LeftOutNode {
  uint32_t node = 0;
  std::string reason;
};

struct TimePlan {
  uint32_t layer_count = 0;
  uint64_t context = 0;
  uint32_t lanes = 1;
  std::vector<TimedStage> stages;
  uint64_t serial_time_ns = 0;        // one token through every stage and hop
  uint64_t period_ns = 0;             // the slowest stage plus its hop
  uint64_t time_per_token_ns = 0;     // per lane: max(serial, lanes x period)
  double tokens_per_second = 0;       // all lanes together
  std::vector<LeftOutNode> left_out;  // with auto_stages
  std::optional<uint64_t> target_ns;
  std::optional<bool> target_met;
  std::vector<std::string> suggestions;  // what would meet a missed target
  std::vector<std::string> notes;
};

// Chooses contiguous ranges exactly (dynamic programming over cut points and,
// with auto_stages, over which nodes take part, in the order given): among
// the splits whose every stage fits its budget, the smallest serial time per
// token (one lane) or the smallest period (lanes > 1; ties to the smaller
// serial time). Throws Error(kUsage) for inconsistent options, and
// Error(kInvalidInput) when nothing fits (plan_memory's refusal, naming the
// tightest stage) or the inputs disagree with the catalog.
TimePlan plan_time(const PackageCatalog& catalog, const CacheShape& shape, const DecodeCost& cost,
                   const TimePlanOptions& options);

// "13ms", "1.3ms", "250us", "2s", "500ns" (a bare number is refused: say the unit).
uint64_t parse_duration_ns(std::string_view text);
// "LATENCY@BANDWIDTH" ("13ms@1.25GB/s"), or "LATENCY" alone (no transfer charge).
NodeLink parse_node_link(std::string_view text);

}  // namespace skippy
