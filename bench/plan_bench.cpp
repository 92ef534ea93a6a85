// Memory-aware planning of a 94-layer model (Qwen3-235B-A22B's shape: 94
// layers, 4 KV heads of 128) over 8 nodes at a 32k context (the
// target: under 20 ms). Three figures: reading the per-layer cache shape from
// the metadata GGUF's KVs, planning with budgets only (fill balance), and
// planning with budgets and bandwidth (the DP over cut points among the
// splits that fit). Each iteration does the whole call. Then planning for
// time per token (the same target): MoE active bytes, KV reads, stage
// and hop costs, over all 8 nodes or choosing them (--stages auto), one lane
// or four, with a target that is missed (so the suggestions are computed too:
// fewer stages, a faster node, the largest context that meets it).
//
// Run: scripts/bench-plan.sh (or build-bench/bin/skippy-bench-plan).
#include <benchmark/benchmark.h>

#include "skippy/gguf.h"
#include "gguf/gguf_writer.h"
#include "skippy/manifest.h"
#include "skippy/plan.h"

namespace {

using namespace skippy;

constexpr uint32_t kLayers = 94;
constexpr uint64_t kGiB = 1ull << 30;

std::vector<uint8_t> metadata_bytes() {
  GgufWriter w;
  w.add_string("general.architecture", "qwen3moe");
  w.add_u32("qwen3moe.block_count", kLayers);
  w.add_u32("qwen3moe.embedding_length", 4096);
  w.add_u32("qwen3moe.attention.head_count", 64);
  w.add_u32("qwen3moe.attention.head_count_kv", 4);
  w.add_u32("qwen3moe.attention.key_length", 128);
  w.add_u32("qwen3moe.attention.value_length", 128);
  return w.header();
}

PackageManifest manifest() {
  PackageManifest m;
  m.layer_count = kLayers;
  m.shared.metadata = {"shared/metadata.gguf", 0, 0, 12u << 20, ""};
  m.shared.embeddings = {"shared/embeddings.gguf", 1, 800u << 20, 800u << 20, ""};
  m.shared.output = {"shared/output.gguf", 2, 800u << 20, 800u << 20, ""};
  for (uint32_t i = 0; i < kLayers; ++i) {
    LayerEntry e;
    e.layer_index = i;
    e.path = "layers/layer-" + std::to_string(i) + ".gguf";
    e.artifact_bytes = (1400ull << 20) + (i % 7) * (37ull << 20);  // ~1.4 GiB, uneven
    m.layers.push_back(e);
  }
  return m;
}

MemoryPlanOptions options(bool bandwidth) {
  MemoryPlanOptions o;
  o.context = 32768;
  o.budgets = {24 * kGiB, 24 * kGiB, 24 * kGiB, 24 * kGiB, 32 * kGiB, 32 * kGiB, 48 * kGiB, 48 * kGiB};
  if (bandwidth) o.bandwidth = {400000000000, 400000000000, 273000000000, 273000000000, 546000000000, 546000000000, 800000000000, 800000000000};
  return o;
}

void read_shape(benchmark::State& state) {
  const auto bytes = metadata_bytes();
  for (auto _ : state) {
    const auto f = GgufFile::parse(bytes, "metadata.gguf");
    benchmark::DoNotOptimize(read_cache_shape(f, KvCacheType::kF16));
  }
}
BENCHMARK(read_shape)->Unit(benchmark::kMillisecond);

void plan(benchmark::State& state) {
  const auto bytes = metadata_bytes();
  const auto m = manifest();
  const auto o = options(state.range(0) != 0);
  for (auto _ : state) {
    const auto f = GgufFile::parse(bytes, "metadata.gguf");
    const auto shape = read_cache_shape(f, KvCacheType::kF16);
    benchmark::DoNotOptimize(plan_memory(catalog_artifacts_v1(m), shape, o));
  }
}
BENCHMARK(plan)->ArgName("bandwidth")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// Qwen3-235B-A22B-like: 8 of 128 experts, the experts ~90% of a layer.
DecodeCost decode_cost(const PackageManifest& m) {
  DecodeCost c;
  c.expert_count = 128;
  c.expert_used_count = 8;
  for (const auto& l : m.layers) {
    const uint64_t experts = l.artifact_bytes / 10 * 9;
    c.layers.push_back({l.artifact_bytes, l.artifact_bytes - experts + experts / 16, experts, false});
  }
  c.embedding_bytes = 800u << 20;
  c.embedding_bytes_per_token = (800u << 20) / 151936;
  c.output_bytes = c.output_bytes_per_token = 800u << 20;
  return c;
}

void plan_time_per_token(benchmark::State& state) {
  const auto bytes = metadata_bytes();
  const auto m = manifest();
  const auto cost = decode_cost(m);
  const auto mo = options(true);
  TimePlanOptions o;
  o.context = mo.context;
  o.budgets = mo.budgets;
  o.bandwidth = mo.bandwidth;
  o.links = {parse_node_link("2ms@10GB/s")};
  o.activation_bytes_per_token = 4096 * 2;
  o.auto_stages = state.range(0) != 0;
  o.lanes = static_cast<uint32_t>(state.range(1));
  o.target_ns = 1000000;  // 1 ms: missed, so every suggestion is computed
  for (auto _ : state) {
    const auto f = GgufFile::parse(bytes, "metadata.gguf");
    const auto shape = read_cache_shape(f, KvCacheType::kF16);
    benchmark::DoNotOptimize(plan_time(catalog_artifacts_v1(m), shape, cost, o));
  }
}
BENCHMARK(plan_time_per_token)->ArgNames({"auto", "lanes"})->Args({0, 1})->Args({1, 1})->Args({1, 4})
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
