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
// bytes: a PlanPackage's metadata, skippy/plan.h); planning is pure
// arithmetic on the catalog and that shape.
//
// Thread-safety: plain values and pure functions, safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "skippy/gguf.h"
#include "skippy/package_catalog.h"
#include "skippy/package_layout.h"

namespace skippy {

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

}  // namespace skippy
