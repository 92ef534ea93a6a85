// Planning for time per token: bytes read per decoded token (MoE experts
// scaled, shared experts and dense layers whole, one embedding row, the NextN
// block skipped) by hand and on the real fixtures; stage and hop costs by
// hand; sliding-window KV reads; the DP against brute force for both
// objectives, with and without choosing the nodes; a slow node left out; a
// missed target and what would meet it; `plan --bandwidth` through the CLI.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <random>

#include "skippy/plan.h"
#include "skippy/error.h"
#include "skippy/gguf.h"
#include "gguf/gguf_writer.h"
#include "split_enumeration.h"
#include "test_util.h"

namespace skippy::time_plan_test {

namespace fs = std::filesystem;

// A metadata-only GGUF with the MoE keys, kept alive with its parsed view.
struct TpMeta {
  std::vector<uint8_t> bytes;
  std::optional<GgufFile> parsed;
};
std::unique_ptr<TpMeta> moe_meta(const std::string& arch, uint32_t blocks, uint32_t experts, uint32_t used,
                                 uint32_t nextn) {
  GgufWriter w;
  w.add_string("general.architecture", arch);
  w.add_u32(arch + ".block_count", blocks);
  if (experts) {
    w.add_u32(arch + ".expert_count", experts);
    w.add_u32(arch + ".expert_used_count", used);
  }
  if (nextn) w.add_u32(arch + ".nextn_predict_layers", nextn);
  auto m = std::make_unique<TpMeta>();
  m->bytes = w.header();
  m->parsed = GgufFile::parse(m->bytes, "metadata.gguf");
  return m;
}

TEST(DecodeCost, MoeWithADenseFirstLayerAndANextnBlockByHand) {
  const auto meta = moe_meta("deepseek2", 3, 8, 2, 1);
  const std::vector<DecodeTensor> t = {
      {"token_embd.weight", {64, 1000}, 64000},  // one row per token: 64 bytes
      {"output_norm.weight", {64}, 256},
      {"output.weight", {64, 1000}, 64000},
      {"rope_freqs.weight", {32}, 128},            // every stage
      {"blk.0.attn_q.weight", {64, 64}, 4096},     // dense layer
      {"blk.0.ffn_up.weight", {64, 256}, 16384},
      {"blk.1.attn_q.weight", {64, 64}, 4096},
      {"blk.1.ffn_gate_inp.weight", {64, 8}, 512},      // the router: dense
      {"blk.1.ffn_up_exps.weight", {64, 128, 8}, 65536},  // 2 of 8 experts
      {"blk.1.ffn_down_exps.weight", {128, 64, 8}, 65537},  // rounded up
      {"blk.1.ffn_up_shexp.weight", {64, 128}, 8192},   // shared expert: whole
      {"blk.1.exp_probs_b.bias", {8}, 32},
      {"blk.2.nextn.eh_proj.weight", {128, 64}, 8192},  // the NextN block
      {"blk.2.ffn_up_exps.weight", {64, 128, 8}, 65536},
  };
  const auto c = read_decode_cost(*meta->parsed, t, 3, "test");
  ASSERT_EQ(c.layers.size(), 3u);
  EXPECT_EQ(c.layers[0].weight_bytes, 4096u + 16384);
  EXPECT_EQ(c.layers[0].active_bytes, 4096u + 16384);
  EXPECT_EQ(c.layers[1].weight_bytes, 4096u + 512 + 65536 + 65537 + 8192 + 32);
  EXPECT_EQ(c.layers[1].expert_bytes, 65536u + 65537);
  EXPECT_EQ(c.layers[1].active_bytes, 4096u + 512 + 16384 + 16385 + 8192 + 32);
  EXPECT_TRUE(c.layers[2].nextn);
  EXPECT_EQ(c.layers[2].active_bytes, 0u);
  EXPECT_EQ(c.embedding_bytes_per_token, 64u);
  EXPECT_EQ(c.output_bytes_per_token, 64256u);
  EXPECT_FALSE(c.output_tied);
  EXPECT_EQ(c.global_bytes, 128u);
  EXPECT_EQ(c.total_bytes(), 64000u + 256 + 64000 + 128 + 20480 + 143905 + 73728);
  EXPECT_EQ(c.active_bytes_per_token(), 64u + 64256 + 128 + 20480 + 45601);

  // Tied: no output.weight, the head is token_embd read whole.
  const std::vector<DecodeTensor> tied = {{"token_embd.weight", {64, 1000}, 64000}, {"output_norm.weight", {64}, 256},
                                          {"blk.0.attn_q.weight", {64, 64}, 4096}};
  const auto d = read_decode_cost(*moe_meta("llama", 1, 0, 0, 0)->parsed, tied, 1, "tied");
  EXPECT_TRUE(d.output_tied);
  EXPECT_EQ(d.output_bytes_per_token, 64256u);
  EXPECT_EQ(d.total_bytes(), 64000u + 256 + 4096);
}

TEST(DecodeCost, RefusesWhatCannotBeTrue) {
  const auto bad_used = moe_meta("qwen3moe", 2, 8, 9, 0);
  EXPECT_THROW(read_decode_cost(*bad_used->parsed, {}, 2, "x"), Error);
  const auto bad_nextn = moe_meta("glm4moe", 2, 0, 0, 3);
  EXPECT_THROW(read_decode_cost(*bad_nextn->parsed, {}, 2, "x"), Error);
  const auto ok = moe_meta("llama", 2, 0, 0, 0);
  try {
    read_decode_cost(*ok->parsed, {{"blk.2.attn_q.weight", {4, 4}, 32}}, 2, "pkg");
    FAIL() << "a tensor past layer_count was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_NE(std::string(e.what()).find("blk.2.attn_q.weight"), std::string::npos) << e.what();
  }
}

// The glm4moe fixture (llama.cpp's own file): layer 0 dense, layers 1-2 MoE
// (4 experts, 2 used, 1 shared), layer 3 the NextN block.
TEST(DecodeCost, RealGlmMoeFixtureByItsOwnTensors) {
  const auto f = GgufFile::open(fs::path(SKIPPY_TEST_DATA_DIR) / "glm4moe-mtp-tiny.gguf");
  const auto c = read_decode_cost(f, decode_tensors_of(f), 4, f.name());
  EXPECT_EQ(c.expert_count, 4u);
  EXPECT_EQ(c.expert_used_count, 2u);
  EXPECT_EQ(c.nextn_layers, 1u);
  for (uint32_t l = 0; l < 3; ++l) {
    uint64_t weight = 0, active = 0;
    for (const auto& t : f.tensors()) {
      if (!std::string(t.name).starts_with("blk." + std::to_string(l) + ".")) continue;
      weight += t.bytes;
      const bool expert = std::string(t.name).find("_exps") != std::string::npos;
      active += expert ? (t.bytes * 2 + 3) / 4 : t.bytes;
    }
    EXPECT_EQ(c.layers[l].weight_bytes, weight) << l;
    EXPECT_EQ(c.layers[l].active_bytes, active) << l;
  }
  EXPECT_EQ(c.layers[0].expert_bytes, 0u);  // leading dense block
  EXPECT_GT(c.layers[1].expert_bytes, 0u);
  EXPECT_LT(c.layers[1].active_bytes, c.layers[1].weight_bytes);
  EXPECT_EQ(c.layers[3].active_bytes, 0u);
  const auto* embd = f.find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(c.embedding_bytes_per_token, embd->bytes / static_cast<uint64_t>(embd->ne[1]));
  EXPECT_EQ(c.total_bytes(), f.tensor_bytes_total());
}

// ------------------------------------------------------------ the planner

DecodeCost tp_cost(const std::vector<uint64_t>& active, uint64_t row, uint64_t head, uint64_t global) {
  DecodeCost c;
  for (uint64_t a : active) c.layers.push_back({a, a, 0, false});
  c.embedding_bytes_per_token = row;
  c.output_bytes_per_token = head;
  c.global_bytes = global;
  return c;
}

CacheShape tp_shape(const std::vector<uint64_t>& kv_per_token) {
  CacheShape s;
  s.architecture = "llama";
  for (uint32_t il = 0; il < kv_per_token.size(); ++il) {
    s.layers.push_back({il, LayerCacheKind::kAttention, 0, 0, kv_per_token[il], 0, 0});
  }
  return s;
}

uint64_t ceil_ns(uint64_t bytes, uint64_t per_second) {
  __extension__ using u128 = unsigned __int128;
  return static_cast<uint64_t>((u128{bytes} * 1000000000u + per_second - 1) / per_second);
}

TEST(TimePlan, StageAndHopCostsByHand) {
  const auto m = test::plan_manifest(10, 20, 30, {100, 100, 100, 100});
  const auto cost = tp_cost({1000000000, 1000000000, 1000000000, 1000000000}, 4096, 50000000, 1000);
  const auto shape = tp_shape({1000, 1000, 1000, 1000});
  TimePlanOptions o;
  o.context = 1000;
  o.bandwidth = {100000000000, 100000000000};
  o.links = {parse_node_link("2ms@1GB/s")};
  o.activation_bytes_per_token = 8192;
  const auto p = plan_time(catalog_artifacts_v1(m), shape, cost, o);
  ASSERT_EQ(p.stages.size(), 2u);
  EXPECT_EQ(p.stages[0].range, (LayerRange{0, 2}));
  const uint64_t kv = 2 * 1000 * 1000;
  const uint64_t s0 = ceil_ns(2000000000ull + 4096 + 1000 + kv, 100000000000) + 1300000;
  const uint64_t s1 = ceil_ns(2000000000ull + 50000000 + 1000 + kv, 100000000000) + 1300000;
  const uint64_t hop = 2000000 + ceil_ns(8192, 1000000000);
  EXPECT_EQ(p.stages[0].active_weight_bytes, 2000000000ull + 4096 + 1000);
  EXPECT_EQ(p.stages[0].kv_read_bytes, kv);
  EXPECT_EQ(p.stages[0].stage_time_ns, s0);
  EXPECT_EQ(p.stages[1].stage_time_ns, s1);
  EXPECT_EQ(p.stages[0].hop_time_ns, hop);
  EXPECT_EQ(p.stages[1].hop_time_ns, hop);  // the return to the first stage
  EXPECT_EQ(p.serial_time_ns, s0 + s1 + 2 * hop);
  EXPECT_EQ(p.time_per_token_ns, p.serial_time_ns);
  EXPECT_EQ(p.period_ns, std::max(s0, s1) + hop);
  EXPECT_NEAR(p.tokens_per_second, 1e9 / static_cast<double>(p.serial_time_ns), 1e-6);
  // One node: no hop at all.
  o.bandwidth = {100000000000};
  const auto one = plan_time(catalog_artifacts_v1(m), shape, cost, o);
  EXPECT_EQ(one.stages[0].hop_time_ns, 0u);
  EXPECT_EQ(one.serial_time_ns, ceil_ns(4000000000ull + 4096 + 50000000 + 1000 + 2 * kv, 100000000000) + 1300000);
  // Lanes: each lane's token waits max(serial, lanes x period).
  o.bandwidth = {100000000000, 100000000000};
  o.lanes = 4;
  const auto four = plan_time(catalog_artifacts_v1(m), shape, cost, o);
  EXPECT_EQ(four.time_per_token_ns, std::max(four.serial_time_ns, 4 * four.period_ns));
  EXPECT_NEAR(four.tokens_per_second, 4e9 / static_cast<double>(four.time_per_token_ns), 1e-6);
}

TEST(TimePlan, SlidingWindowLayersReadTheirWindow) {
  auto shape = tp_shape({100, 100, 100, 100});
  shape.layers[0].kind = shape.layers[2].kind = LayerCacheKind::kSlidingWindow;
  shape.layers[0].window = shape.layers[2].window = 256;
  const auto m = test::plan_manifest(1, 1, 1, {1, 1, 1, 1});
  TimePlanOptions o;
  o.context = 8192;
  o.bandwidth = {1000000000};
  const auto p = plan_time(catalog_artifacts_v1(m), shape, tp_cost({0, 0, 0, 0}, 0, 0, 0), o);
  EXPECT_EQ(p.stages[0].kv_read_bytes, 2 * 100 * 256 + 2 * 100 * 8192u);
}

struct Brute {
  uint64_t value = UINT64_MAX;   // objective
  uint64_t serial = UINT64_MAX;  // then the serial time (period objective)
  uint64_t period = UINT64_MAX;  // then the period
};

// Every ordered subset of nodes (all of them without auto) and every split.
Brute brute_force(const PackageManifest& m, const CacheShape& shape, const DecodeCost& c, const TimePlanOptions& o) {
  const uint32_t L = m.layer_count, K = static_cast<uint32_t>(o.bandwidth.size());
  Brute best;
  for (uint32_t mask = 1; mask < (1u << K); ++mask) {
    std::vector<uint32_t> nodes;
    for (uint32_t n = 0; n < K; ++n) {
      if (mask & (1u << n)) nodes.push_back(n);
    }
    if (!o.auto_stages && nodes.size() != K) continue;
    if (nodes.size() > L) continue;
    const auto k = static_cast<uint32_t>(nodes.size());
    test::each_split(L, k, [&](const std::vector<uint32_t>& cuts) {
      uint64_t serial = 0, period = 0;
      for (uint32_t i = 0; i < k; ++i) {
        const uint32_t node = nodes[i], a = cuts[i], b = cuts[i + 1];
        uint64_t w = m.shared.metadata.artifact_bytes, kv = 0, active = c.global_bytes;
        for (uint32_t l = a; l < b; ++l) w += m.layers[l].artifact_bytes, kv += layer_cache_bytes(shape.layers[l], o.context),
                                          active += c.layers[l].active_bytes;
        if (a == 0) w += m.shared.embeddings.artifact_bytes, active += c.embedding_bytes_per_token;
        if (b == L) w += m.shared.output.artifact_bytes, active += c.output_bytes_per_token;
        if (b == L && a != 0 && o.final_stage_needs_embeddings) w += m.shared.embeddings.artifact_bytes;
        if (!o.budgets.empty()) {
          const uint64_t need = w + charged_cache_bytes(o.reserves, kv) + headroom_bytes(o.reserves, o.budgets[node]);
          if (need > o.budgets[node]) return;
        }
        const NodeLink link = o.links.size() == 1 ? o.links[0] : o.links[node];
        const uint64_t hop = k > 1 ? link.latency_ns + (link.bytes_per_second ? ceil_ns(o.activation_bytes_per_token, link.bytes_per_second) : 0) : 0;
        const uint64_t stage = ceil_ns(active + kv, o.bandwidth[node]) + o.stage_overhead_ns;
        serial += stage + hop;
        period = std::max(period, stage + hop);
      }
      const Brute b{o.lanes > 1 ? period : serial, serial, period};
      if (std::tie(b.value, b.serial, b.period) < std::tie(best.value, best.serial, best.period)) best = b;
    });
  }
  return best;
}

TEST(TimePlan, MatchesBruteForceForBothObjectivesWithAndWithoutChoosingNodes) {
  std::mt19937_64 rng(33);
  int planned = 0, refused = 0, fewer = 0;
  for (int iter = 0; iter < 400; ++iter) {
    const uint32_t L = 2 + static_cast<uint32_t>(rng() % 7);
    const uint32_t K = 1 + static_cast<uint32_t>(rng() % std::min<uint32_t>(L, 4));
    std::vector<uint64_t> layers(L), active(L), kv(L);
    for (uint32_t l = 0; l < L; ++l) {
      layers[l] = (1 + rng() % 100) << 20;
      active[l] = layers[l] / (1 + rng() % 8);  // MoE layers read a fraction
      kv[l] = 1 + rng() % 4096;
    }
    const auto m = test::plan_manifest(1 << 20, (1 + rng() % 50) << 20, (1 + rng() % 50) << 20, layers);
    const auto c = tp_cost(active, 1 + rng() % 8192, (1 + rng() % 50) << 20, rng() % 4096);
    const auto shape = tp_shape(kv);
    TimePlanOptions o;
    o.context = 1 + rng() % 32768;
    o.auto_stages = rng() % 2 == 0;
    o.lanes = rng() % 3 == 0 ? 1 + static_cast<uint32_t>(rng() % 8) : 1;
    o.stage_overhead_ns = rng() % 3000000;
    o.activation_bytes_per_token = 2 * (1 + rng() % 8192);
    o.final_stage_needs_embeddings = rng() % 2 == 0;
    const bool budgets = rng() % 3 != 0;
    for (uint32_t n = 0; n < K; ++n) {
      o.bandwidth.push_back((1 + rng() % 800) * 1000000000ull);
      if (budgets) o.budgets.push_back((200 + rng() % 1800) << 20);
      o.links.push_back({rng() % 20000000, rng() % 2 ? (1 + rng() % 100) * 100000000ull : 0});
    }
    SCOPED_TRACE("iter " + std::to_string(iter));
    const Brute best = brute_force(m, shape, c, o);
    try {
      const auto p = plan_time(catalog_artifacts_v1(m), shape, c, o);
      ASSERT_NE(best.value, UINT64_MAX) << "planned a split the brute force says cannot fit";
      EXPECT_EQ(o.lanes > 1 ? p.period_ns : p.serial_time_ns, best.value);
      EXPECT_EQ(p.serial_time_ns, best.serial);
      EXPECT_EQ(p.period_ns, best.period);
      for (const auto& s : p.stages) {
        if (s.budget) {
          EXPECT_LE(s.memory_bytes, *s.budget);
        }
      }
      if (p.stages.size() < K) ++fewer;
      ++planned;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput) << e.what();
      EXPECT_EQ(best.value, UINT64_MAX) << "refused, but a split fits: " << e.what();
      ++refused;
    }
  }
  EXPECT_GT(planned, 100);  // every outcome is exercised
  EXPECT_GT(refused, 10);
  EXPECT_GT(fewer, 10);
}

TEST(TimePlan, AutoLeavesOutANodeWhoseHopCostsMoreThanItSaves) {
  // 8 layers of 1 GB active each; nodes 0 and 1 hold half each, node 2 is
  // slow: its 13 ms hop costs more than the bandwidth it adds.
  const auto m = test::plan_manifest(1 << 20, 1 << 20, 1 << 20, std::vector<uint64_t>(8, 1ull << 30));
  const auto c = tp_cost(std::vector<uint64_t>(8, 1000000000), 0, 0, 0);
  TimePlanOptions o;
  o.context = 1;
  o.bandwidth = {400000000000, 400000000000, 50000000000};
  o.budgets = {6ull << 30, 6ull << 30, 40ull << 30};  // 5 GiB usable: 4 layers each
  o.auto_stages = true;
  const auto p = plan_time(catalog_artifacts_v1(m), tp_shape(std::vector<uint64_t>(8, 1)), c, o);
  ASSERT_EQ(p.stages.size(), 2u);
  EXPECT_EQ(p.stages[0].node, 0u);
  EXPECT_EQ(p.stages[1].node, 1u);
  ASSERT_EQ(p.left_out.size(), 1u);
  EXPECT_EQ(p.left_out[0].node, 2u);
  EXPECT_NE(p.left_out[0].reason.find("hop"), std::string::npos) << p.left_out[0].reason;
  // Without auto every node is used, and the plan is slower.
  o.auto_stages = false;
  const auto all = plan_time(catalog_artifacts_v1(m), tp_shape(std::vector<uint64_t>(8, 1)), c, o);
  EXPECT_EQ(all.stages.size(), 3u);
  EXPECT_GT(all.time_per_token_ns, p.time_per_token_ns);
}

TEST(TimePlan, AMissedTargetNamesWhatWouldMeetIt) {
  const auto m = test::plan_manifest(1, 1, 1, std::vector<uint64_t>(4, 1000));
  const auto c = tp_cost(std::vector<uint64_t>(4, 100000000), 0, 0, 0);  // 100 MB per layer per token
  const auto shape = tp_shape(std::vector<uint64_t>(4, 4096));            // 4 KiB per token per layer
  TimePlanOptions o;
  o.context = 16384;
  o.bandwidth = {100000000000, 10000000000};  // node 1 is slow
  o.links = {NodeLink{1000000, 0}};           // 1 ms hops
  o.target_ns = 20000000;                     // 20 ms
  const auto p = plan_time(catalog_artifacts_v1(m), shape, c, o);
  ASSERT_TRUE(p.target_met.has_value());
  EXPECT_FALSE(*p.target_met);
  const std::string all = testing::PrintToString(p.suggestions);
  EXPECT_NE(all.find("fewer stages"), std::string::npos) << all;
  EXPECT_NE(all.find("a faster node"), std::string::npos) << all;
  const auto at = all.find("at most ");
  ASSERT_NE(at, std::string::npos) << all;
  const uint64_t ctx = std::stoull(all.substr(at + 8));
  // That context meets the target with these nodes; one token more does not.
  o.target_ns.reset();
  o.context = ctx;
  EXPECT_LE(plan_time(catalog_artifacts_v1(m), shape, c, o).time_per_token_ns, 20000000u);
  o.context = ctx + 1;
  EXPECT_GT(plan_time(catalog_artifacts_v1(m), shape, c, o).time_per_token_ns, 20000000u);
  // A target the overheads alone exceed says so.
  o.context = 1;
  o.target_ns = 4000000;
  const auto q = plan_time(catalog_artifacts_v1(m), shape, c, o);
  EXPECT_NE(testing::PrintToString(q.suggestions).find("alone take"), std::string::npos);
}

TEST(TimePlan, ParsesDurationsAndLinks) {
  EXPECT_EQ(parse_duration_ns("13ms"), 13000000u);
  EXPECT_EQ(parse_duration_ns("1.3ms"), 1300000u);
  EXPECT_EQ(parse_duration_ns("250us"), 250000u);
  EXPECT_EQ(parse_duration_ns("2s"), 2000000000u);
  EXPECT_EQ(parse_duration_ns("500ns"), 500u);
  for (const char* bad : {"13", "ms", "-1ms", "1e30s", "1msx", ""}) {
    EXPECT_THROW(parse_duration_ns(bad), Error) << bad;
  }
  const auto l = parse_node_link("2ms@10GB/s");
  EXPECT_EQ(l.latency_ns, 2000000u);
  EXPECT_EQ(l.bytes_per_second, 10000000000u);
  EXPECT_EQ(parse_node_link("5ms").bytes_per_second, 0u);
}

// ------------------------------------------------------------ the CLI

class TimePlanCli : public testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new test::TempDir();
    const auto r = test::run_cli({"write-package", (fs::path(SKIPPY_TEST_DATA_DIR) / "glm4moe-mtp-tiny.gguf").string(),
                                  "--out-dir", (tmp_->path() / "pkg").string(), "--model-id", "org/Glm-GGUF:Q4_0",
                                  "--source-revision", "0123abc", "--source-file", "glm4moe-mtp-tiny.gguf"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void TearDownTestSuite() {
    delete tmp_;
    tmp_ = nullptr;
  }
  static std::string pkg() { return (tmp_->path() / "pkg").string(); }
  static test::TempDir* tmp_;
};
test::TempDir* TimePlanCli::tmp_ = nullptr;

TEST_F(TimePlanCli, JsonReportsActiveBytesKvReadsAndTimes) {
  const auto r = test::run_cli({"plan", pkg(), "--context", "4096", "--bandwidth", "100GB/s,100GB/s", "--links",
                                "1ms@1GB/s", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["objective"], "serial");
  EXPECT_LT(j["active_bytes_per_token"].get<uint64_t>(), j["model_bytes"].get<uint64_t>());  // MoE
  ASSERT_EQ(j["stages"].size(), 2u);
  double serial = 0;
  for (const auto& s : j["stages"]) {
    EXPECT_GT(s["kv_read_bytes"].get<uint64_t>(), 0u);
    EXPECT_GT(s["stage_time_us"].get<double>(), 1300.0);
    EXPECT_GT(s["hop_time_us"].get<double>(), 1000.0);
    serial += s["stage_time_us"].get<double>() + s["hop_time_us"].get<double>();
  }
  EXPECT_NEAR(j["serial_time_per_token_us"].get<double>(), serial, 0.01);
  EXPECT_NE(j["notes"].dump().find("NextN"), std::string::npos) << j["notes"];

  const auto a = test::run_cli({"plan", pkg(), "--context", "4096", "--stages", "auto", "--bandwidth",
                                "100GB/s,100GB/s,100GB/s", "--json"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const auto ja = nlohmann::json::parse(a.out);
  EXPECT_EQ(ja["stage_count"], 1);  // a tiny model: every hop costs more than it saves
  EXPECT_EQ(ja["nodes_left_out"].size(), 2u);
}

TEST_F(TimePlanCli, AMissedTargetExitsOneWithThePlanAndWhatWouldHelp) {
  const auto r = test::run_cli({"plan", pkg(), "--context", "4096", "--bandwidth", "1GB/s,1GB/s", "--target-tpot",
                                "10ms", "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["target_met"], false);
  EXPECT_FALSE(j["suggestions"].empty());
  const auto h = test::run_cli({"plan", pkg(), "--context", "4096", "--bandwidth", "1GB/s,1GB/s", "--target-tpot", "10ms"});
  EXPECT_EQ(h.exit_code, 1);
  EXPECT_NE(h.out.find("would help:"), std::string::npos) << h.out;
}

TEST_F(TimePlanCli, UsageErrorsExitTwo) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"plan", pkg(), "--stages", "auto"},
           {"plan", pkg(), "--context", "10", "--stages", "2", "--links", "1ms"},
           {"plan", pkg(), "--context", "10", "--bandwidth", "1GB/s", "--target-tpot", "33"},
           {"plan", pkg(), "--context", "10", "--bandwidth", "1GB/s,1GB/s", "--links", "1ms,1ms,1ms"},
           {"plan", pkg(), "--context", "10", "--bandwidth", "1GB/s", "--lanes", "0"},
       }) {
    const auto r = test::run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << testing::PrintToString(args) << "\n" << r.err;
  }
}

}  // namespace skippy::time_plan_test

namespace skippy::time_plan_test {

TEST(DecodeCostCli, InspectPrintsTheModelsBytesReadPerToken) {
  const auto path = fs::path(SKIPPY_TEST_DATA_DIR) / "glm4moe-mtp-tiny.gguf";
  const auto f = GgufFile::open(path);
  const auto c = read_decode_cost(f, decode_tensors_of(f), 4, f.name());
  const auto r = test::run_cli({"inspect", path.string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["active_bytes_per_token"], c.active_bytes_per_token());
  EXPECT_EQ(j["roles"]["layers"][1]["active_bytes_per_token"], c.layers[1].active_bytes);
  EXPECT_EQ(j["roles"]["layers"][3]["active_bytes_per_token"], 0);  // NextN
  const auto h = test::run_cli({"inspect", path.string()});
  EXPECT_NE(h.out.find("read per token"), std::string::npos) << h.out;
}

}  // namespace skippy::time_plan_test
