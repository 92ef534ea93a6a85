// Memory-aware planning of a 94-layer model (Qwen3-235B-A22B's shape: 94
// layers, 4 KV heads of 128) over 8 nodes at a 32k context (issue #24
// target: under 20 ms). Three figures: reading the per-layer cache shape from
// the metadata GGUF's KVs, planning with budgets only (fill balance), and
// planning with budgets and bandwidth (the DP over cut points among the
// splits that fit). Each iteration does the whole call.
//
// Run: scripts/bench-plan.sh (or build-bench/bin/skippy-bench-plan).
#include <benchmark/benchmark.h>

#include "skippy/gguf.h"
#include "skippy/gguf_writer.h"
#include "skippy/manifest.h"
#include "skippy/memory_plan.h"

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
    benchmark::DoNotOptimize(plan_memory(m, shape, o));
  }
}
BENCHMARK(plan)->ArgName("bandwidth")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
