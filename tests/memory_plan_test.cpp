// Memory-aware planning: per-layer KV bytes from GGUF metadata against
// hand-computed values (per-layer head_count_kv, sliding windows, MLA,
// recurrent state), the fit and its refusal, the bandwidth DP against brute
// force, and `plan --context` through the real CLI.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>

#include "skippy/error.h"
#include "skippy/gguf.h"
#include "gguf/gguf_writer.h"
#include "skippy/manifest.h"
#include "skippy/plan.h"
#include "util/sha256.h"
#include "split_enumeration.h"
#include "test_util.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using test::run_cli;

// ------------------------------------------------------------ metadata KVs

// A metadata-only GGUF (no tensors), kept alive with its parsed view.
struct Metadata {
  std::vector<uint8_t> bytes;
  std::optional<GgufFile> parsed;
  const GgufFile& file() const { return *parsed; }
};
struct MetaBuilder {
  GgufWriter w;
  std::string arch;
  explicit MetaBuilder(std::string a, uint32_t blocks) : arch(std::move(a)) {
    w.add_string("general.architecture", arch);
    w.add_u32(arch + ".block_count", blocks);
  }
  MetaBuilder& u32(const std::string& k, uint32_t v) {
    w.add_u32(arch + "." + k, v);
    return *this;
  }
  MetaBuilder& u32s(const std::string& k, const std::vector<uint64_t>& v) {
    w.add_array(arch + "." + k, GgufType::kUint32, v);
    return *this;
  }
  MetaBuilder& bools(const std::string& k, const std::vector<uint64_t>& v) {
    w.add_array(arch + "." + k, GgufType::kBool, v);
    return *this;
  }
  std::unique_ptr<Metadata> build() {
    auto m = std::make_unique<Metadata>();
    m->bytes = w.header();
    m->parsed = GgufFile::parse(m->bytes, "metadata.gguf");
    return m;
  }
};

TEST(CacheShape, PerLayerHeadCountKvArray) {
  // 256 wide, 8 heads: key/value length default to 32; KV heads per layer 8, 4, 2, 1.
  auto meta = MetaBuilder("llama", 4).u32("embedding_length", 256).u32("attention.head_count", 8)
                  .u32s("attention.head_count_kv", {8, 4, 2, 1}).build();
  const auto f16 = read_cache_shape(meta->file(), KvCacheType::kF16);
  ASSERT_EQ(f16.layers.size(), 4u);
  const uint64_t f16_bytes[] = {32 * 8 * 2 * 2, 32 * 4 * 2 * 2, 32 * 2 * 2 * 2, 32 * 1 * 2 * 2};  // (K + V) x 2 bytes
  for (uint32_t il = 0; il < 4; ++il) {
    EXPECT_EQ(f16.layers[il].kind, LayerCacheKind::kAttention);
    EXPECT_EQ(f16.layers[il].kv_bytes_per_token, f16_bytes[il]) << il;
    EXPECT_EQ(layer_cache_bytes(f16.layers[il], 1000), f16_bytes[il] * 1000);
  }
  // q8_0: 34 bytes per 32 values; rows of 256, 128, 64, 32 values.
  const auto q8 = read_cache_shape(meta->file(), KvCacheType::kQ8_0);
  const uint64_t q8_bytes[] = {2 * 8 * 34, 2 * 4 * 34, 2 * 2 * 34, 2 * 1 * 34};
  for (uint32_t il = 0; il < 4; ++il) EXPECT_EQ(q8.layers[il].kv_bytes_per_token, q8_bytes[il]) << il;
  // The defaults taken are said.
  EXPECT_NE(testing::PrintToString(f16.notes).find("key_length"), std::string::npos);
}

TEST(CacheShape, ExplicitKeyAndValueLengthsAndDefaultKvHeads) {
  auto meta = MetaBuilder("qwen3", 2).u32("embedding_length", 64).u32("attention.head_count", 4)
                  .u32("attention.key_length", 128).u32("attention.value_length", 96).build();
  const auto s = read_cache_shape(meta->file(), KvCacheType::kF16);
  // head_count_kv defaults to head_count (4): K 128 x 4, V 96 x 4.
  EXPECT_EQ(s.layers[0].k_elements, 512u);
  EXPECT_EQ(s.layers[0].v_elements, 384u);
  EXPECT_EQ(s.layers[1].kv_bytes_per_token, (512u + 384u) * 2);
}

TEST(CacheShape, SlidingWindowPeriodAndBoolArray) {
  // Period 3: layers 0, 1 windowed, 2 full; 3, 4 windowed, 5 full.
  auto meta = MetaBuilder("testswa", 6).u32("embedding_length", 64).u32("attention.head_count", 2)
                  .u32("attention.head_count_kv", 1).u32("attention.sliding_window", 1024)
                  .u32("attention.sliding_window_pattern", 3).build();
  const auto s = read_cache_shape(meta->file(), KvCacheType::kF16);
  const bool window[] = {true, true, false, true, true, false};
  const uint64_t row = (32 + 32) * 2;  // head dim 32, one KV head, K + V, f16
  for (uint32_t il = 0; il < 6; ++il) {
    EXPECT_EQ(s.layers[il].kind == LayerCacheKind::kSlidingWindow, window[il]) << il;
    EXPECT_EQ(layer_cache_bytes(s.layers[il], 4096), row * (window[il] ? 1024 : 4096)) << il;
    EXPECT_EQ(layer_cache_bytes(s.layers[il], 512), row * 512) << il;  // a context below the window
  }
  auto arr = MetaBuilder("testswa", 3).u32("embedding_length", 64).u32("attention.head_count", 2)
                 .u32("attention.sliding_window", 100).bools("attention.sliding_window_pattern", {0, 1, 0}).build();
  const auto b = read_cache_shape(arr->file(), KvCacheType::kF16);
  EXPECT_EQ(b.layers[0].kind, LayerCacheKind::kAttention);
  EXPECT_EQ(b.layers[1].kind, LayerCacheKind::kSlidingWindow);
  EXPECT_EQ(b.layers[1].window, 100u);
  EXPECT_EQ(b.layers[2].kind, LayerCacheKind::kAttention);
  // gemma3 hard-codes a period of 6 in llama.cpp (no pattern key): layer 5 is full.
  auto g = MetaBuilder("gemma3", 7).u32("embedding_length", 64).u32("attention.head_count", 2)
               .u32("attention.sliding_window", 512).build();
  const auto gs = read_cache_shape(g->file(), KvCacheType::kF16);
  for (uint32_t il = 0; il < 7; ++il) {
    EXPECT_EQ(gs.layers[il].kind == LayerCacheKind::kAttention, il == 5) << il;
  }
  // An unknown architecture with a window but no pattern: every layer full (an upper bound, said).
  auto u = MetaBuilder("mystery", 2).u32("embedding_length", 64).u32("attention.head_count", 2)
               .u32("attention.sliding_window", 512).build();
  const auto us = read_cache_shape(u->file(), KvCacheType::kF16);
  EXPECT_EQ(us.layers[0].kind, LayerCacheKind::kAttention);
  EXPECT_NE(testing::PrintToString(us.notes).find("upper bound"), std::string::npos);
}

TEST(CacheShape, MlaCachesOneLatentRowAndNoV) {
  // DeepSeek-V3 style: kv_lora_rank 512 + 64 RoPE dims = 576 values of K per token, no V.
  auto meta = MetaBuilder("deepseek2", 3).u32("embedding_length", 1024).u32("attention.head_count", 16)
                  .u32("attention.head_count_kv", 1).u32("attention.key_length", 576).u32("attention.value_length", 512)
                  .u32("attention.key_length_mla", 192).u32("attention.value_length_mla", 128)
                  .u32("attention.kv_lora_rank", 512).u32("rope.dimension_count", 64).build();
  const auto s = read_cache_shape(meta->file(), KvCacheType::kF16);
  for (const auto& l : s.layers) {
    EXPECT_EQ(l.kind, LayerCacheKind::kMla);
    EXPECT_EQ(l.k_elements, 576u);
    EXPECT_EQ(l.v_elements, 0u);
    EXPECT_EQ(l.kv_bytes_per_token, 1152u);
  }
  EXPECT_EQ(read_cache_shape(meta->file(), KvCacheType::kQ8_0).layers[0].kv_bytes_per_token, 576u / 32 * 34);
}

TEST(CacheShape, RecurrentStateIsFixedAndHybridsMixBoth) {
  // mamba2: conv (4 - 1) x (1536 + 2 x 1 x 128) + state 128 x 1536, f32.
  auto mamba = MetaBuilder("mamba2", 2).u32("embedding_length", 768).u32("ssm.conv_kernel", 4)
                   .u32("ssm.inner_size", 1536).u32("ssm.state_size", 128).u32("ssm.group_count", 1).build();
  const auto s = read_cache_shape(mamba->file(), KvCacheType::kF16);
  const uint64_t state = (3 * (1536 + 2 * 128) + 128 * 1536) * 4;
  for (const auto& l : s.layers) {
    EXPECT_EQ(l.kind, LayerCacheKind::kRecurrent);
    EXPECT_EQ(l.state_bytes, state);
    EXPECT_EQ(layer_cache_bytes(l, 1), state);
    EXPECT_EQ(layer_cache_bytes(l, 1 << 20), state);
  }
  // A jamba-style hybrid: the layers without KV heads are recurrent.
  auto hybrid = MetaBuilder("jamba", 4).u32("embedding_length", 256).u32("attention.head_count", 8)
                    .u32s("attention.head_count_kv", {0, 0, 2, 0}).u32("ssm.conv_kernel", 4)
                    .u32("ssm.inner_size", 512).u32("ssm.state_size", 16).build();
  const auto h = read_cache_shape(hybrid->file(), KvCacheType::kF16);
  EXPECT_EQ(h.layers[0].kind, LayerCacheKind::kRecurrent);
  EXPECT_EQ(h.layers[0].state_bytes, (3u * 512 + 16u * 512) * 4);
  EXPECT_EQ(h.layers[2].kind, LayerCacheKind::kAttention);
  EXPECT_EQ(h.layers[2].kv_bytes_per_token, 32u * 2 * 2 * 2);
  EXPECT_EQ(h.layers[3].kind, LayerCacheKind::kRecurrent);
}

TEST(CacheShape, MalformedMetadataIsRefusedNamingTheKey) {
  auto expect_invalid = [](std::unique_ptr<Metadata> m, KvCacheType t, const std::string& needle) {
    try {
      (void)read_cache_shape(m->file(), t);
      ADD_FAILURE() << "accepted; expected " << needle;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("metadata.gguf"), std::string::npos) << e.what();
    }
  };
  expect_invalid(MetaBuilder("llama", 3).u32("embedding_length", 64).u32("attention.head_count", 2)
                     .u32s("attention.head_count_kv", {1, 1}).build(),
                 KvCacheType::kF16, "llama.attention.head_count_kv has 2 entries for 3 layers");
  expect_invalid(MetaBuilder("llama", 3).u32("embedding_length", 64).build(), KvCacheType::kF16,
                 "llama.attention.head_count is missing");
  expect_invalid(MetaBuilder("llama", 2).u32("embedding_length", 40).u32("attention.head_count", 2)
                     .u32("attention.head_count_kv", 1).build(),
                 KvCacheType::kQ8_0, "multiple of 32");
  expect_invalid(MetaBuilder("mamba", 2).u32("embedding_length", 64).build(), KvCacheType::kF16, "state size");
}

// ------------------------------------------------------------ fit and DP

CacheShape uniform_shape(uint32_t layers, uint64_t kv_per_token) {
  CacheShape s;
  s.architecture = "llama";
  for (uint32_t il = 0; il < layers; ++il) s.layers.push_back({il, LayerCacheKind::kAttention, 0, 0, kv_per_token, 0, 0});
  return s;
}

constexpr uint64_t kGiB = 1ull << 30;

TEST(MemoryPlan, StageMemoryIsWeightsPlusChargedCachePlusHeadroom) {
  const auto m = test::plan_manifest(1000, 5000, 7000, {100000, 100000, 100000, 100000});
  auto shape = uniform_shape(4, 64);
  MemoryPlanOptions o;
  o.context = 1000;
  o.budgets = {3 * kGiB, 20 * kGiB};
  const auto p = plan_memory(catalog_artifacts_v1(m), shape, o);
  ASSERT_EQ(p.stages.size(), 2u);
  for (const auto& s : p.stages) {
    const uint64_t kv = 64ull * 1000 * s.range.size();
    EXPECT_EQ(s.kv_cache_bytes, kv);
    EXPECT_EQ(s.charged_cache_bytes, (kv * 100 + 84) / 85);
    // headroom: max(10%, min(1 GiB, budget/2)): 1 GiB on 3 GiB, 2 GiB on 20 GiB.
    EXPECT_EQ(s.headroom_bytes, s.index == 0 ? kGiB : 2 * kGiB);
    EXPECT_EQ(s.memory_bytes, s.weight_bytes + s.charged_cache_bytes + s.headroom_bytes);
  }
  EXPECT_EQ(p.stages[0].weight_bytes, 1000 + 5000 + 100000 * p.stages[0].range.size());
  EXPECT_EQ(p.stages[1].weight_bytes, 1000 + 7000 + 100000 * p.stages[1].range.size());
  EXPECT_EQ(headroom_bytes(MemoryReserves{}, 1 * kGiB), kGiB / 2);  // min(1 GiB, budget / 2)
}

TEST(MemoryPlan, SlidingWindowAndTiedOutputCountOnTheRightStages) {
  auto meta = MetaBuilder("testswa", 4).u32("embedding_length", 64).u32("attention.head_count", 2)
                  .u32("attention.head_count_kv", 1).u32("attention.sliding_window", 256)
                  .u32("attention.sliding_window_pattern", 2).build();
  const auto shape = read_cache_shape(meta->file(), KvCacheType::kF16);
  const auto m = test::plan_manifest(10, 3000, 20, {500, 500, 500, 500});
  MemoryPlanOptions o;
  o.context = 8192;
  o.stages = 2;
  o.final_stage_needs_embeddings = true;  // tied output
  const auto p = plan_memory(catalog_artifacts_v1(m), shape, o);
  const uint64_t row = 64 * 2;  // (32 + 32) values x 2 bytes
  for (const auto& s : p.stages) {
    uint64_t kv = 0;
    for (uint32_t il = s.range.start; il < s.range.end; ++il) kv += row * (il % 2 == 0 ? 256 : 8192);
    EXPECT_EQ(s.kv_cache_bytes, kv) << s.index;
  }
  EXPECT_TRUE(p.stages[1].embeddings);
  EXPECT_EQ(p.stages[1].weight_bytes, 10 + 20 + 3000 + 500 * p.stages[1].range.size());
  EXPECT_NE(testing::PrintToString(p.notes).find("rounded up to 256"), std::string::npos);
}

using test::each_split;

TEST(MemoryPlan, BandwidthSplitMatchesBruteForce) {
  std::mt19937_64 rng(2026);
  int fitted = 0, refused = 0;
  for (int iter = 0; iter < 250; ++iter) {
    const uint32_t L = 2 + static_cast<uint32_t>(rng() % 8);
    const uint32_t n = 1 + static_cast<uint32_t>(rng() % std::min<uint32_t>(L, 4));
    std::vector<uint64_t> layers(L);
    for (auto& b : layers) b = (1 + rng() % 100) << 20;
    const auto m = test::plan_manifest(1 << 20, (1 + rng() % 50) << 20, (1 + rng() % 50) << 20, layers);
    CacheShape shape;
    for (uint32_t il = 0; il < L; ++il) {
      shape.layers.push_back({il, LayerCacheKind::kAttention, 0, 0, 1 + rng() % 4096, 0, 0});
    }
    MemoryPlanOptions o;
    o.context = 1 + rng() % 65536;
    for (uint32_t i = 0; i < n; ++i) {
      o.budgets.push_back((200 + rng() % 1800) << 20);
      o.bandwidth.push_back((1 + rng() % 800) * 1000000000ull);
    }
    o.final_stage_needs_embeddings = rng() % 2 == 0;
    SCOPED_TRACE("iter " + std::to_string(iter));
    // Brute force: among the splits whose every stage fits, the smallest slowest stage.
    std::optional<double> best;
    each_split(L, n, [&](const std::vector<uint32_t>& cuts) {
      double slowest = 0;
      for (uint32_t i = 0; i < n; ++i) {
        uint64_t w = m.shared.metadata.artifact_bytes, kv = 0;
        for (uint32_t l = cuts[i]; l < cuts[i + 1]; ++l) w += layers[l], kv += shape.layers[l].kv_bytes_per_token * o.context;
        if (i == 0 || (o.final_stage_needs_embeddings && i + 1 == n && n > 1)) w += m.shared.embeddings.artifact_bytes;
        if (i + 1 == n) w += m.shared.output.artifact_bytes;
        const uint64_t need = w + charged_cache_bytes(o.reserves, kv) + headroom_bytes(o.reserves, o.budgets[i]);
        if (need > o.budgets[i]) return;
        slowest = std::max(slowest, static_cast<double>(w) / static_cast<double>(o.bandwidth[i]) * 1e6);
      }
      if (!best || slowest < *best) best = slowest;
    });
    try {
      const auto p = plan_memory(catalog_artifacts_v1(m), shape, o);
      ASSERT_TRUE(best.has_value()) << "planned a split the brute force says cannot fit";
      ++fitted;
      EXPECT_NEAR(*p.bottleneck_time_us, *best, *best * 1e-9);
      double sum = 0;
      for (const auto& s : p.stages) {
        EXPECT_LE(s.memory_bytes, *s.budget);
        sum += *s.decode_time_us;
      }
      EXPECT_NEAR(*p.decode_time_per_token_us, sum, sum * 1e-9);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput) << e.what();
      EXPECT_FALSE(best.has_value()) << "refused, but a split fits: " << e.what();
      ++refused;
    }
  }
  EXPECT_GT(fitted, 20);  // both outcomes are exercised
  EXPECT_GT(refused, 20);
}

TEST(MemoryPlan, FasterNodesTakeMoreLayers) {
  const auto m = test::plan_manifest(1, 1, 1, std::vector<uint64_t>(12, 1000));
  MemoryPlanOptions o;
  o.context = 1;
  o.stages = 2;
  o.bandwidth = {100, 300};  // the second node is three times as fast
  const auto p = plan_memory(catalog_artifacts_v1(m), uniform_shape(12, 1), o);
  EXPECT_EQ(p.stages[0].range, (LayerRange{0, 3}));
  EXPECT_EQ(p.stages[1].range, (LayerRange{3, 12}));
}

TEST(MemoryPlan, RefusalSaysHowShortAndWhatWouldFit) {
  const auto m = test::plan_manifest(1000, 1000, 1000, {1 << 20, 1 << 20, 1 << 20, 1 << 20});
  const auto shape = uniform_shape(4, 1024);  // 1 KiB per token per layer
  MemoryPlanOptions o;
  o.context = 4096;
  o.budgets = {16 << 20, 16 << 20};  // headroom 8 MiB each (budget / 2)
  std::string message;
  try {
    (void)plan_memory(catalog_artifacts_v1(m), shape, o);
    FAIL() << "fitted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    message = e.what();
  }
  // What the stage needs and the headroom its budget keeps, apart, then
  // their sum against the budget: never "needs X" beside "fits in Y > X".
  EXPECT_NE(message.find(" itself (weights "), std::string::npos) << message;
  EXPECT_NE(message.find("keeps a headroom of 8388608 bytes (8.00 MiB) free"), std::string::npos) << message;
  EXPECT_NE(message.find(" in all, over its budget of 16777216 bytes (16.00 MiB) by "), std::string::npos) << message;
  EXPECT_NE(message.find("The headroom grows with the budget"), std::string::npos) << message;
  EXPECT_NE(message.find("fits in a budget of"), std::string::npos) << message;
  // The context it names fits, one more token does not.
  const auto at = message.find("at most ");
  ASSERT_NE(at, std::string::npos) << message;
  const uint64_t ctx = std::stoull(message.substr(at + 8));
  o.context = ctx;
  EXPECT_NO_THROW((void)plan_memory(catalog_artifacts_v1(m), shape, o)) << ctx;
  o.context = ctx + 1;
  EXPECT_THROW((void)plan_memory(catalog_artifacts_v1(m), shape, o), Error);
  // The budget it names for the tightest stage fits that stage at the original context.
  o.context = 4096;
  const std::string fits_in = "fits in a budget of ";
  const auto b = message.find(fits_in);
  ASSERT_NE(b, std::string::npos) << message;
  const uint64_t need_budget = std::stoull(message.substr(b + fits_in.size()));
  o.budgets = {need_budget, need_budget};
  EXPECT_NO_THROW((void)plan_memory(catalog_artifacts_v1(m), shape, o)) << message;
  o.budgets = {need_budget - 1, need_budget - 1};
  EXPECT_THROW((void)plan_memory(catalog_artifacts_v1(m), shape, o), Error);
  // Weights alone too large: said so.
  o.budgets = {1 << 20, 1 << 20};
  try {
    (void)plan_memory(catalog_artifacts_v1(m), shape, o);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("weights alone"), std::string::npos) << e.what();
  }
}

TEST(MemoryPlan, ParsesBandwidths) {
  EXPECT_EQ(parse_bandwidth("400GB/s"), 400000000000ull);
  EXPECT_EQ(parse_bandwidth("25GiB/s"), 25ull << 30);
  EXPECT_EQ(parse_bandwidth("1000"), 1000u);
  for (const char* bad : {"0", "fast", "10GB/h", "/s"}) EXPECT_THROW((void)parse_bandwidth(bad), Error) << bad;
}

// ------------------------------------------------------------ CLI

class MemoryPlanCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new test::TempDir();
    const auto w = test::write_pkg(test::data_path("llama-tiny-q8_0.gguf"), pkg());
    ASSERT_EQ(w.exit_code, 0) << w.err;
  }
  static void TearDownTestSuite() {
    delete tmp_;
    tmp_ = nullptr;
  }
  static fs::path pkg() { return tmp_->path() / "pkg"; }
  static test::TempDir* tmp_;
};
test::TempDir* MemoryPlanCli::tmp_ = nullptr;

TEST_F(MemoryPlanCli, KvBytesFollowTheMetadata) {
  const auto meta = GgufFile::open(pkg() / "shared/metadata.gguf");
  const uint64_t width = *meta.embedding_length();
  const uint64_t heads = *meta.get_uint("llama.attention.head_count");
  const uint64_t kv_heads = *meta.get_uint("llama.attention.head_count_kv");
  const uint64_t per_token = (width / heads) * kv_heads * 2 /*K+V*/ * 2 /*f16*/;
  const auto r = run_cli({"plan", pkg().string(), "--context", "32768", "--budgets", "1GiB,2GiB", "--bandwidth",
                          "100GB/s,200GB/s", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["context_tokens"], 32768);
  EXPECT_EQ(j["kv_type"], "f16");
  EXPECT_EQ(j["reserves"]["compute_reserve_percent"], 15);
  EXPECT_TRUE(j["warnings"].is_array());
  uint64_t layers = 0;
  for (const auto& s : j["stages"]) {
    const uint64_t n = s["layer_end"].get<uint64_t>() - s["layer_start"].get<uint64_t>();
    layers += n;
    EXPECT_EQ(s["kv_cache_bytes"], per_token * 32768 * n);
    EXPECT_EQ(s["memory_bytes"].get<uint64_t>(),
              s["weight_bytes"].get<uint64_t>() + s["charged_cache_bytes"].get<uint64_t>() + s["headroom_bytes"].get<uint64_t>());
    EXPECT_LE(s["memory_bytes"].get<uint64_t>(), s["budget_bytes"].get<uint64_t>());
    EXPECT_GT(s["decode_time_us"].get<double>(), 0.0);
  }
  EXPECT_EQ(layers, 8u);
  EXPECT_GT(j["decode_time_per_token_us"].get<double>(), j["bottleneck_time_us"].get<double>());
  // q8_0 rows are 34/64 of f16's.
  const auto q = run_cli({"plan", pkg().string(), "--context", "1024", "--stages", "1", "--kv-type", "q8_0", "--json"});
  ASSERT_EQ(q.exit_code, 0) << q.err;
  EXPECT_EQ(nlohmann::json::parse(q.out)["stages"][0]["kv_cache_bytes"], per_token / 64 * 34 * 1024 * 8);
}

TEST_F(MemoryPlanCli, NothingFitsExitsOneWithWhatWouldFit) {
  const auto r = run_cli({"plan", pkg().string(), "--context", "1000000", "--budgets", "64MiB,64MiB", "--json"});
  test::expect_json_error(r, "invalid_input", "over its budget of");
  EXPECT_NE(r.out.find("fit a context of at most"), std::string::npos) << r.out;
  const auto h = run_cli({"plan", pkg().string(), "--context", "1000000", "--budgets", "64MiB,64MiB"});
  EXPECT_EQ(h.exit_code, 1);
  EXPECT_NE(h.err.find("fits in a budget of"), std::string::npos) << h.err;
  // The table shows what a stage needs and the headroom apart.
  const auto t = run_cli({"plan", pkg().string(), "--context", "1024", "--budgets", "24GiB,24GiB"});
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.out.find("KV+state         needs      headroom        budget"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("a stage fits when needs + headroom <= budget"), std::string::npos) << t.out;
}

TEST_F(MemoryPlanCli, UsageErrorsExitTwo) {
  const std::string p = pkg().string();
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"plan", p, "--context", "100"},
           {"plan", p, "--context", "0", "--stages", "2"},
           {"plan", p, "--context", "100", "--stages", "2", "--kv-type", "q4_0"},
           {"plan", p, "--context", "100", "--budgets", "1G,1G", "--bandwidth", "1GB/s"},
           {"plan", p, "--context", "100", "--budgets", "1G,1G", "--bandwidth", "0,1GB/s"},
           {"plan", p, "--stages", "2", "--bandwidth", "1GB/s,1GB/s"},
           {"plan", p, "--context", "100", "--stages", "3", "--budgets", "1G,1G"},
       }) {
    const auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << testing::PrintToString(args) << "\n" << r.err;
  }
}

}  // namespace
}  // namespace skippy
