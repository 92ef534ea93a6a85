// Stage planning: plan_stages() on hand-built manifests (checked against
// brute force), parse_byte_size(), and `plan` through the real CLI.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>

#include "skippy/error.h"
#include "skippy/manifest.h"
#include "skippy/plan.h"
#include "split_enumeration.h"
#include "test_util.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using test::data_path;
using test::run_cli;

PackageManifest make_manifest(uint64_t meta, uint64_t emb, uint64_t out, const std::vector<uint64_t>& layers,
                              std::optional<uint64_t> width = 64) {
  PackageManifest m = test::plan_manifest(meta, emb, out, layers);
  m.activation_width = width;
  return m;
}

PlanOptions stages(uint32_t n) {
  PlanOptions o;
  o.stages = n;
  o.final_stage_needs_embeddings = false;  // hand-built manifests: untied unless a test says so
  return o;
}

uint64_t layer_sum(const PackageManifest& m, uint32_t a, uint32_t b) {
  uint64_t s = 0;
  for (uint32_t l = a; l < b; ++l) s += m.layers[l].artifact_bytes;
  return s;
}

// What select_stage() would load for stage i of n covering a..b.
uint64_t expected_bytes(const PackageManifest& m, uint32_t i, uint32_t n, uint32_t a, uint32_t b, bool tied = false) {
  uint64_t s = m.shared.metadata.artifact_bytes + layer_sum(m, a, b);
  if (i == 0 || (tied && i == n - 1)) s += m.shared.embeddings.artifact_bytes;
  if (i == n - 1) s += m.shared.output.artifact_bytes;
  return s;
}

using test::each_split;

void expect_contiguous(const Plan& p, uint32_t L, uint32_t n) {
  ASSERT_EQ(p.stages.size(), n);
  EXPECT_EQ(p.stages.front().range.start, 0u);
  EXPECT_EQ(p.stages.back().range.end, L);
  for (uint32_t i = 0; i < n; ++i) {
    EXPECT_EQ(p.stages[i].index, i);
    EXPECT_FALSE(p.stages[i].range.empty());
    if (i > 0) {
      EXPECT_EQ(p.stages[i].range.start, p.stages[i - 1].range.end);
    }
  }
}

TEST(Plan, BalancesUnevenLayersOptimally) {
  // Layer 2 is huge: the best 3-stage plan isolates it.
  const auto m = make_manifest(10, 100, 100, {50, 50, 400, 50, 50, 50, 50, 50});
  const auto p = plan_stages(catalog_artifacts_v1(m), stages(3));
  expect_contiguous(p, 8, 3);
  EXPECT_EQ(p.stages[1].range, (LayerRange{2, 3}));
  EXPECT_EQ(p.max_stage_bytes, 410u);
}

TEST(Plan, MatchesBruteForceOnRandomSmallCases) {
  std::mt19937_64 rng(12345);
  for (int iter = 0; iter < 300; ++iter) {
    const uint32_t L = 1 + static_cast<uint32_t>(rng() % 9);
    std::vector<uint64_t> layers(L);
    for (auto& b : layers) b = 1 + rng() % 1000;
    const bool tied = rng() % 2 == 0;
    const auto m = make_manifest(1 + rng() % 50, 1 + rng() % 800, 1 + rng() % 800, layers);
    for (uint32_t n = 1; n <= L; ++n) {
      SCOPED_TRACE("iter " + std::to_string(iter) + ", L=" + std::to_string(L) + ", n=" + std::to_string(n));
      auto o = stages(n);
      o.final_stage_needs_embeddings = tied;
      const auto p = plan_stages(catalog_artifacts_v1(m), o);
      expect_contiguous(p, L, n);
      uint64_t total = 0;
      for (const auto& s : p.stages) {
        EXPECT_EQ(s.bytes, expected_bytes(m, s.index, n, s.range.start, s.range.end, tied && n > 1));
        EXPECT_EQ(s.bytes, s.layer_bytes + s.shared_bytes);
        total += s.bytes;
      }
      EXPECT_EQ(p.total_bytes, total);
      uint64_t brute = ~uint64_t{0};
      each_split(L, n, [&](const std::vector<uint32_t>& cuts) {
        uint64_t mx = 0;
        for (uint32_t i = 0; i < n; ++i) mx = std::max(mx, expected_bytes(m, i, n, cuts[i], cuts[i + 1], tied && n > 1));
        brute = std::min(brute, mx);
      });
      EXPECT_EQ(p.max_stage_bytes, brute);
      // Deterministic.
      EXPECT_EQ(plan_stages(catalog_artifacts_v1(m), o).stages, p.stages);
    }
  }
}

TEST(Plan, NodeBudgetsAgreeWithBruteForceFeasibility) {
  std::mt19937_64 rng(777);
  int fits = 0, refused = 0;
  for (int iter = 0; iter < 400; ++iter) {
    const uint32_t L = 2 + static_cast<uint32_t>(rng() % 7);
    std::vector<uint64_t> layers(L);
    for (auto& b : layers) b = 1 + rng() % 100;
    const auto m = make_manifest(5, 1 + rng() % 80, 1 + rng() % 80, layers);
    const uint32_t n = 1 + static_cast<uint32_t>(rng() % L);
    auto o = stages(n);
    for (uint32_t i = 0; i < n; ++i) o.node_budgets.push_back(40 + rng() % 400);
    bool feasible = false;
    each_split(L, n, [&](const std::vector<uint32_t>& cuts) {
      bool ok = true;
      for (uint32_t i = 0; i < n; ++i) ok = ok && expected_bytes(m, i, n, cuts[i], cuts[i + 1]) <= o.node_budgets[i];
      feasible = feasible || ok;
    });
    SCOPED_TRACE("iter " + std::to_string(iter));
    if (feasible) {
      ++fits;
      const auto p = plan_stages(catalog_artifacts_v1(m), o);
      expect_contiguous(p, L, n);
      for (const auto& s : p.stages) {
        ASSERT_TRUE(s.budget.has_value());
        EXPECT_EQ(*s.budget, o.node_budgets[s.index]);
        EXPECT_LE(s.bytes, *s.budget);
      }
    } else {
      ++refused;
      try {
        plan_stages(catalog_artifacts_v1(m), o);
        ADD_FAILURE() << "an infeasible plan was accepted";
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
        EXPECT_NE(std::string(e.what()).find("stage"), std::string::npos) << e.what();
      }
    }
  }
  EXPECT_GT(fits, 20);
  EXPECT_GT(refused, 20);
}

TEST(Plan, RefusesMoreStagesThanLayers) {
  const auto m = make_manifest(1, 1, 1, {5, 5, 5});
  try {
    plan_stages(catalog_artifacts_v1(m), stages(4));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_NE(std::string(e.what()).find("cannot split 3 layers into 4 stages"), std::string::npos) << e.what();
  }
  try {
    plan_stages(catalog_artifacts_v1(m), stages(0));
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  }
}

TEST(Plan, OneLayerPerStageWhenStagesEqualLayers) {
  const auto m = make_manifest(3, 70, 90, {10, 20, 30, 40, 50});
  const auto p = plan_stages(catalog_artifacts_v1(m), stages(5));
  expect_contiguous(p, 5, 5);
  for (uint32_t i = 0; i < 5; ++i) EXPECT_EQ(p.stages[i].range, (LayerRange{i, i + 1}));
}

TEST(Plan, StageBytesAddSharedPartsCorrectly) {
  const auto m = make_manifest(7, 1000, 2000, {100, 100, 100, 100}, 4096);
  auto o = stages(2);
  auto p = plan_stages(catalog_artifacts_v1(m), o);
  ASSERT_EQ(p.stages.size(), 2u);
  const auto& s0 = p.stages[0];
  const auto& s1 = p.stages[1];
  EXPECT_TRUE(s0.embeddings);
  EXPECT_FALSE(s0.output);
  EXPECT_FALSE(s1.embeddings);
  EXPECT_TRUE(s1.output);
  EXPECT_EQ(s0.shared_bytes, 7u + 1000u);
  EXPECT_EQ(s1.shared_bytes, 7u + 2000u);
  EXPECT_EQ(s0.bytes, 7u + 1000u + s0.layer_bytes);
  EXPECT_EQ(s1.bytes, 7u + 2000u + s1.layer_bytes);
  EXPECT_EQ(s0.layer_bytes + s1.layer_bytes, 400u);
  // Output is heavier: the first stage takes more layers.
  EXPECT_EQ(s0.range, (LayerRange{0, 4 - 1}));
  // Activation frame: 4096 x 2 bytes, sent by every stage but the last.
  EXPECT_EQ(p.activation_frame_bytes_per_token, 8192u);
  EXPECT_EQ(s0.activation_out_bytes_per_token, 8192u);
  EXPECT_FALSE(s1.activation_out_bytes_per_token.has_value());
  o.activation_bytes_per_value = 4;
  EXPECT_EQ(plan_stages(catalog_artifacts_v1(m), o).activation_frame_bytes_per_token, 16384u);
  o.activation_bytes_per_value = 3;
  EXPECT_THROW(plan_stages(catalog_artifacts_v1(m), o), Error);

  // Tied output: the final stage loads the embeddings too.
  o = stages(2);
  o.final_stage_needs_embeddings = true;
  p = plan_stages(catalog_artifacts_v1(m), o);
  EXPECT_TRUE(p.stages[1].embeddings);
  EXPECT_EQ(p.stages[1].shared_bytes, 7u + 2000u + 1000u);
  EXPECT_TRUE(p.output_tied_to_embeddings);
  // A single stage loads them once.
  o.stages = 1;
  p = plan_stages(catalog_artifacts_v1(m), o);
  EXPECT_EQ(p.stages[0].bytes, 7u + 1000u + 2000u + 400u);
  EXPECT_TRUE(p.stages[0].embeddings && p.stages[0].output);

  // Projector on stage 0 only when asked.
  auto mp = m;
  ProjectorEntry proj;
  proj.kind = std::string(kProjectorKindMmproj);
  proj.path = "projectors/mmproj.gguf";
  proj.artifact_bytes = 555;
  mp.projectors.push_back(proj);
  o = stages(2);
  EXPECT_EQ(plan_stages(catalog_artifacts_v1(mp), o).stages[0].shared_bytes, 1007u);
  o.include_projector = true;
  p = plan_stages(catalog_artifacts_v1(mp), o);
  EXPECT_TRUE(p.stages[0].projector);
  EXPECT_EQ(p.stages[0].shared_bytes, 1007u + 555u);
}

TEST(Plan, UnknownActivationWidthIsNotedNotGuessed) {
  const auto m = make_manifest(1, 1, 1, {1, 1}, std::nullopt);
  const auto p = plan_stages(catalog_artifacts_v1(m), stages(2));
  EXPECT_FALSE(p.activation_frame_bytes_per_token.has_value());
  EXPECT_FALSE(p.stages[0].activation_out_bytes_per_token.has_value());
  ASSERT_FALSE(p.notes.empty());
  EXPECT_NE(p.notes[0].find("activation_width"), std::string::npos);
}

std::string plan_error(const PackageManifest& m, const PlanOptions& o) {
  try {
    plan_stages(catalog_artifacts_v1(m), o);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "plan was accepted";
  return "";
}

TEST(Plan, BudgetsThatCannotFitNameTheStage) {
  const auto m = make_manifest(10, 500, 100, {100, 100, 100, 100});
  // Stage 0 needs at least metadata + embeddings + layer 0 = 610 bytes.
  auto o = stages(2);
  o.node_budgets = {600, 10000};
  auto msg = plan_error(m, o);
  EXPECT_NE(msg.find("stage 0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("610 bytes > budget 600"), std::string::npos) << msg;
  EXPECT_NE(msg.find("over by 10"), std::string::npos) << msg;

  // Each stage could fit alone, but not together: the total is short.
  o.node_budgets = {700, 300};  // need 10+500+400+10+100 = 1020 > 1000
  msg = plan_error(m, o);
  EXPECT_NE(msg.find("1020 bytes in total"), std::string::npos) << msg;
  EXPECT_NE(msg.find("short by 20"), std::string::npos) << msg;

  // Enough in total, but the layers do not divide: name the worst stage.
  // Totals: stage0 = 510 + layers, stage1 = 110 + layers; 1020 needed.
  o.node_budgets = {650, 400};  // stage0 <= 650 -> 1 layer (610); stage1 then 410 > 400
  msg = plan_error(m, o);
  EXPECT_NE(msg.find("stage 1 (layers 1..4) needs 410 bytes > budget 400"), std::string::npos) << msg;

  // A uniform budget.
  o.node_budgets.clear();
  o.max_bytes_per_stage = 700;
  const auto p = plan_stages(catalog_artifacts_v1(m), o);
  EXPECT_LE(p.max_stage_bytes, 700u);
  o.max_bytes_per_stage = 600;
  msg = plan_error(m, o);
  EXPECT_NE(msg.find("stage 0 cannot fit"), std::string::npos) << msg;

  // Usage errors.
  o.node_budgets = {1, 2};
  EXPECT_THROW(plan_stages(catalog_artifacts_v1(m), o), Error);  // both kinds
  o.max_bytes_per_stage.reset();
  o.node_budgets = {1, 2, 3};
  try {
    plan_stages(catalog_artifacts_v1(m), o);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  }
}

TEST(Plan, HeterogeneousBudgetsShiftLayersToTheBiggerNode) {
  const auto m = make_manifest(0, 1, 1, std::vector<uint64_t>(10, 100));
  auto o = stages(2);
  o.node_budgets = {300, 1000};
  const auto p = plan_stages(catalog_artifacts_v1(m), o);
  EXPECT_LE(p.stages[0].bytes, 300u);
  EXPECT_LE(p.stages[1].bytes, 1000u);
  // Minimizing the fullest node: 2 layers (201/300 = 0.67) and 8 (801/1000 = 0.80)
  // beat 3 and 7 (301 > 300) and 1 and 9 (901/1000).
  EXPECT_EQ(p.stages[0].range, (LayerRange{0, 2}));
}

TEST(Plan, RefusesOverflowingByteCounts) {
  const auto m = make_manifest(1, 1, 1, {~uint64_t{0} - 1, 5});
  EXPECT_THROW(plan_stages(catalog_artifacts_v1(m), stages(2)), Error);
}

TEST(PlanByteSize, ParsesUnits) {
  EXPECT_EQ(parse_byte_size("0"), 0u);
  EXPECT_EQ(parse_byte_size("123456"), 123456u);
  EXPECT_EQ(parse_byte_size("100B"), 100u);
  EXPECT_EQ(parse_byte_size("1K"), 1024u);
  EXPECT_EQ(parse_byte_size("1k"), 1024u);
  EXPECT_EQ(parse_byte_size("1KiB"), 1024u);
  EXPECT_EQ(parse_byte_size("1KB"), 1000u);
  EXPECT_EQ(parse_byte_size("512M"), 512ull << 20);
  EXPECT_EQ(parse_byte_size("2G"), 2ull << 30);
  EXPECT_EQ(parse_byte_size("1.5GiB"), 3ull << 29);
  EXPECT_EQ(parse_byte_size("8GB"), 8'000'000'000ull);
  EXPECT_EQ(parse_byte_size("3T"), 3ull << 40);
  EXPECT_EQ(parse_byte_size("2TB"), 2'000'000'000'000ull);
  EXPECT_EQ(parse_byte_size("0.5K"), 512u);
  EXPECT_EQ(parse_byte_size("18446744073709551615"), ~uint64_t{0});
  for (const char* bad : {"", "K", "-1", "1.5", "1.", ".5K", "12Q", "1KK", "1 G", "1e3", "18446744073709551616",
                          "17000000T", "1iB"}) {
    try {
      parse_byte_size(bad);
      ADD_FAILURE() << "accepted \"" << bad << "\"";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUsage) << bad;
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

// ------------------------------------------------------------------ CLI e2e

using test::write_pkg;

using test::load_manifest;

class PlanCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new test::TempDir();
    const auto w = write_pkg(data_path("llama-tiny-q8_0.gguf"), pkg());
    ASSERT_EQ(w.exit_code, 0) << w.err;
  }
  static void TearDownTestSuite() {
    delete tmp_;
    tmp_ = nullptr;
  }
  static fs::path pkg() { return tmp_->path() / "pkg"; }
  static test::TempDir* tmp_;
};
test::TempDir* PlanCli::tmp_ = nullptr;

TEST_F(PlanCli, TwoStagesCoverTheLayersWithManifestBytes) {
  const auto m = load_manifest(pkg());
  ASSERT_EQ(m.layer_count, 8u);
  const auto r = run_cli({"plan", pkg().string(), "--stages", "2", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto& st = j["stages"];
  ASSERT_EQ(st.size(), 2u);
  const uint32_t k = st[0]["layer_end"];
  EXPECT_EQ(st[0]["layer_start"], 0);
  EXPECT_GT(k, 0u);
  EXPECT_LT(k, 8u);
  EXPECT_EQ(st[1]["layer_start"], k);
  EXPECT_EQ(st[1]["layer_end"], 8);
  const bool tied = j["output_tied_to_embeddings"];
  const uint64_t meta = m.shared.metadata.artifact_bytes, emb = m.shared.embeddings.artifact_bytes,
                 out = m.shared.output.artifact_bytes;
  EXPECT_EQ(st[0]["bytes"].get<uint64_t>(), meta + emb + layer_sum(m, 0, k));
  EXPECT_EQ(st[1]["bytes"].get<uint64_t>(), meta + layer_sum(m, k, 8) + out + (tied ? emb : 0));
  // Balanced: no other cut has a smaller largest stage.
  const uint64_t got = std::max(st[0]["bytes"].get<uint64_t>(), st[1]["bytes"].get<uint64_t>());
  for (uint32_t c = 1; c < 8; ++c) {
    const uint64_t mx = std::max(meta + emb + layer_sum(m, 0, c), meta + layer_sum(m, c, 8) + out + (tied ? emb : 0));
    EXPECT_LE(got, mx) << "cut at " << c;
  }
  EXPECT_EQ(j["activation_width"], m.activation_width ? nlohmann::json(*m.activation_width) : nlohmann::json());
  if (m.activation_width) {
    EXPECT_EQ(j["activation_frame_bytes_per_token"], *m.activation_width * 2);
  }
  EXPECT_EQ(j["layer_count"], 8);

  // Human output: a table on stdout.
  const auto h = run_cli({"plan", pkg().string(), "--stages", "2"});
  ASSERT_EQ(h.exit_code, 0) << h.err;
  EXPECT_NE(h.out.find("0.." + std::to_string(k)), std::string::npos) << h.out;
  EXPECT_NE(h.out.find(std::to_string(k) + "..8"), std::string::npos) << h.out;
}

TEST_F(PlanCli, MoreStagesThanLayersExitsOne) {
  const auto r = run_cli({"plan", pkg().string(), "--stages", "9", "--json"});
  test::expect_json_error(r, "invalid_input", "cannot split 8 layers into 9 stages");
  const auto all = run_cli({"plan", pkg().string(), "--stages", "8", "--json"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  EXPECT_EQ(nlohmann::json::parse(all.out)["stages"].size(), 8u);
}

TEST_F(PlanCli, BudgetsThatCannotFitExitOneNamingTheStage) {
  auto r = run_cli({"plan", pkg().string(), "--stages", "2", "--max-bytes", "1K"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("stage 0 cannot fit"), std::string::npos) << r.err;
  r = run_cli({"plan", pkg().string(), "--stages", "2", "--budgets", "1T,1K"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("stage 1 cannot fit"), std::string::npos) << r.err;
  r = run_cli({"plan", pkg().string(), "--stages", "2", "--max-bytes", "1T", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["stages"][0]["budget_bytes"], 1ull << 40);
}

TEST_F(PlanCli, UsageErrorsExitTwo) {
  const std::string p = pkg().string();
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"plan", p},
           {"plan", p, "--stages", "0"},
           {"plan", p, "--stages", "2", "--max-bytes", "1G", "--budgets", "1G,1G"},
           {"plan", p, "--stages", "2", "--budgets", "1G,1G,1G"},
           {"plan", p, "--stages", "2", "--max-bytes", "12Q"},
           {"plan", p, "--stages", "2", "--activation-bytes", "3"},
       }) {
    const auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << args.back() << "\n" << r.err;
  }
}

TEST_F(PlanCli, MissingPackageExitsOne) {
  const auto r = run_cli({"plan", (tmp_->path() / "nope").string(), "--stages", "2"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
}

}  // namespace
}  // namespace skippy

namespace skippy {
namespace {

// The library's plan of a package is the CLI's, tied output
// included, without the caller setting final_stage_needs_embeddings; a
// catalog of the manifest alone refuses to guess.
TEST(PlanLibrary, PlanningThePackageMatchesTheCliWithoutAskingAboutTheTie) {
  test::TempDir tmp;
  for (const char* model : {"llama-tiny-q8_0.gguf", "qwen3moe-tiny.gguf"}) {
    SCOPED_TRACE(model);
    const auto dir = tmp / (std::string(model) + ".pkg");
    ASSERT_EQ(test::write_pkg(test::data_path(model), dir).exit_code, 0);
    const OpenedPackage pkg = open_local_package(dir);
    for (uint32_t n = 1; n <= std::min(4u, test::manifest(pkg).layer_count); ++n) {
      PlanOptions o;
      o.stages = n;
      const Plan p = plan_stages(plan_package(pkg, PlanReads{.stages = n}), o);
      const auto r = test::run_cli({"plan", dir.string(), "--stages", std::to_string(n), "--json"});
      ASSERT_EQ(r.exit_code, 0) << r.err;
      const auto j = nlohmann::json::parse(r.out);
      EXPECT_EQ(p.output_tied_to_embeddings, j["output_tied_to_embeddings"].get<bool>());
      ASSERT_EQ(p.stages.size(), j["stages"].size());
      for (size_t i = 0; i < p.stages.size(); ++i) {
        EXPECT_EQ(p.stages[i].range.start, j["stages"][i]["layer_start"].get<uint32_t>()) << "stage " << i << " of " << n;
        EXPECT_EQ(p.stages[i].range.end, j["stages"][i]["layer_end"].get<uint32_t>()) << "stage " << i << " of " << n;
        EXPECT_EQ(p.stages[i].bytes, j["stages"][i]["bytes"].get<uint64_t>()) << "stage " << i << " of " << n;
      }
      if (n >= 2) {
        try {
          (void)plan_stages(catalog_artifacts_v1(test::manifest(pkg)), o);
          ADD_FAILURE() << "a manifest alone cannot say whether the output is tied";
        } catch (const Error& e) {
          EXPECT_EQ(e.kind(), ErrorKind::kUsage);
          EXPECT_NE(std::string(e.what()).find("plan_stages(package, options)"), std::string::npos) << e.what();
        }
        o.final_stage_needs_embeddings = false;  // a deliberate override is honoured
        EXPECT_FALSE(plan_stages(plan_package(pkg, PlanReads{.stages = n}), o).output_tied_to_embeddings);
      }
    }
  }
}

}  // namespace
}  // namespace skippy

namespace skippy {
namespace {

// One rule for both schemas, the difference being catalog data: a part read
// whole counts its artifact bytes, a part read by extents its tensors' bytes.
TEST(PlanCatalog, APartReadByExtentsCountsItsTensorsNotItsFile) {
  PackageManifest m = test::plan_manifest(10, 100, 100, {50, 50, 50, 50});
  m.activation_width = 64;
  PackageCatalog cat = catalog_artifacts_v1(m);
  PlanOptions o;
  o.stages = 1;
  EXPECT_EQ(plan_stages(cat, o).stages[0].layer_bytes, 200u);
  const auto layer1 = cat.artifact_index.at(m.layers[1].path);
  for (const auto& [name, bytes] : std::vector<std::pair<std::string, uint64_t>>{{"blk.1.attn_q.weight", 7}, {"blk.1.ffn_up.weight", 9}}) {
    CatalogTensor t;
    t.name = name;
    t.artifact = layer1;
    t.stored_bytes = bytes;
    t.layer = 1;
    t.role = TensorRole::kLayer;
    cat.tensors.push_back(t);
  }
  EXPECT_EQ(plan_stages(cat, o).stages[0].layer_bytes, 200u) << "listed tensors of a part read whole change nothing";
  cat.artifacts[layer1].read_whole = false;
  const auto p = plan_stages(cat, o);
  EXPECT_EQ(p.stages[0].layer_bytes, 150u + 7u + 9u);
  EXPECT_NE(testing::PrintToString(p.notes).find("tensor bytes a stage reads"), std::string::npos) << testing::PrintToString(p.notes);
}

// Both schemas take the same path: the same notes (the NextN one included),
// the tied output said at most once, on stdout; nothing on stderr.
TEST(PlanCatalog, BothSchemasSayTheSameOnStdoutOnly) {
  test::TempDir tmp;
  const auto v1 = tmp / "v1", v2 = tmp / "v2";
  ASSERT_EQ(test::write_pkg(test::data_path("glm4moe-mtp-tiny.gguf"), v1).exit_code, 0);
  const auto c = run_cli({"convert-package", v1.string(), "--to", "2", "--out-dir", v2.string(), "--uncertified"});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  // The byte and the time plan say the output is tied (the memory plan's table does not).
  const std::vector<std::pair<std::vector<std::string>, size_t>> modes = {
      {{"--stages", "2"}, 1}, {{"--stages", "2", "--context", "512"}, 0}, {{"--context", "512", "--bandwidth", "1GB/s,1GB/s"}, 1}};
  for (const auto& [mode, tied_notes] : modes) {
    std::vector<nlohmann::json> notes;
    for (const auto& pkg : {v1, v2}) {
      std::vector<std::string> args = {"plan", pkg.string()};
      args.insert(args.end(), mode.begin(), mode.end());
      SCOPED_TRACE(testing::PrintToString(args));
      const auto h = run_cli(args);
      ASSERT_EQ(h.exit_code, 0) << h.err;
      EXPECT_EQ(h.err, "");
      EXPECT_NE(h.out.find("the native MTP (NextN) block: legal"), std::string::npos) << h.out;
      size_t tied = 0;
      for (size_t at = h.out.find("tied"); at != std::string::npos; at = h.out.find("tied", at + 1)) ++tied;
      EXPECT_EQ(tied, tied_notes) << h.out;
      args.push_back("--json");
      const auto j = run_cli(args);
      ASSERT_EQ(j.exit_code, 0) << j.err;
      EXPECT_EQ(j.err, "");
      notes.push_back(nlohmann::json::parse(j.out)["notes"]);
    }
    // Schema 2 says where its width and its bytes come from, and names its
    // embeddings by tensor rather than by file; the rest is the same.
    auto same = [](const nlohmann::json& n) {
      std::vector<std::string> out;
      for (const auto& j : n) {
        const auto s = j.get<std::string>();
        if (!s.starts_with("package schema 2")) out.push_back(s.substr(0, s.find(" also loads ")));
      }
      return out;
    };
    EXPECT_EQ(same(notes[0]), same(notes[1])) << notes[0] << "\n" << notes[1];
  }
}

}  // namespace
}  // namespace skippy
