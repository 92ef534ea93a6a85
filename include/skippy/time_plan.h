// Planning for time per token: where the layers go so that a decoded token
// takes the least time, from the package's catalog (its tensor table,
// skippy/decode_cost.h), its cache shape at a context (skippy/memory_plan.h)
// and each node's memory bandwidth and link.
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
//
// Thread-safety: plain values and pure functions, safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "skippy/decode_cost.h"
#include "skippy/memory_plan.h"
#include "skippy/package_catalog.h"

namespace skippy {

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
