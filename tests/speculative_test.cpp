// Speculative-decoding plans (spec: "Speculative Decoding", "Native MTP
// strategy rules"): each rule of the spec's table, operator selection,
// precedence (CLI, model entry, global defaults in config.toml), through the
// library and the real CLI.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "skippy/error.h"
#include "skippy/speculative.h"
#include "test_util.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using test::run_cli;

Proposer mtp_proposer(std::vector<uint32_t> layers = {3}) {
  Proposer p;
  p.type = "native-mtp";
  p.prediction_depth = 1;
  p.layer_indices = std::move(layers);
  return p;
}

Proposer ngram_proposer(const std::string& type, uint64_t lo, uint64_t hi, std::optional<uint64_t> max_tokens) {
  Proposer p;
  p.type = type;
  p.ngram_min = lo;
  p.ngram_max = hi;
  p.max_proposal_tokens = max_tokens;
  p.history_scope = "request";
  return p;
}

Strategy refers(const std::string& type, const std::string& proposer) {
  Strategy s;
  s.type = type;
  s.proposer = proposer;
  return s;
}

Strategy composite(const std::string& primary, const std::string& extender, std::optional<uint64_t> max_tokens) {
  Strategy s;
  s.type = "composite";
  s.primary = primary;
  s.extender = extender;
  if (max_tokens) s.extension_policy = ExtensionPolicy{std::nullopt, max_tokens, std::nullopt, json::object()};
  return s;
}

// The spec's full product menu on a 4-layer model whose layer 3 holds NextN.
SpeculativeDecoding menu(const std::string& default_strategy = "mtp-cache") {
  SpeculativeDecoding sd;
  sd.default_strategy = default_strategy;
  sd.proposers["mtp"] = mtp_proposer();
  sd.proposers["cache"] = ngram_proposer("ngram-cache", 2, 4, 10);
  sd.proposers["suffix"] = ngram_proposer("ngram-suffix", 4, 32, 16);
  sd.strategies["mtp"] = refers("native-mtp", "mtp");
  sd.strategies["ngram-cache"] = refers("ngram-cache", "cache");
  sd.strategies["ngram-suffix"] = refers("ngram-suffix", "suffix");
  sd.strategies["mtp-cache"] = composite("mtp", "cache", 8);
  sd.strategies["mtp-suffix"] = composite("mtp", "suffix", std::nullopt);
  return sd;
}

SpeculativeModel package(const SpeculativeDecoding* sd, std::set<uint32_t> nextn = {3}) {
  SpeculativeModel m;
  m.package = sd;
  m.layer_count = 4;
  m.nextn_layers = std::move(nextn);
  return m;
}

SpeculativeModel gguf(std::set<uint32_t> nextn = {3}) {
  SpeculativeModel m;
  m.direct_gguf = true;
  m.layer_count = 4;
  m.nextn_layers = std::move(nextn);
  return m;
}

LayeredSettings cli(SpeculativeSettings s) { return layer_settings(s, nullptr, {}); }
LayeredSettings strategy(const std::string& name) {
  SpeculativeSettings s;
  s.strategy = name;
  return cli(s);
}

void expect_refused(const SpeculativeResolution& r, const std::string& rule, const std::string& needle = "") {
  ASSERT_TRUE(r.refusal) << (r.plan ? "planned " + r.plan->strategy : "");
  EXPECT_FALSE(r.plan);
  EXPECT_EQ(r.refusal->rule, rule) << r.refusal->message;
  EXPECT_NE(r.refusal->message.find(needle), std::string::npos) << r.refusal->message;
}

// ----------------------------------------------------- the spec's rule table

TEST(SpeculativeRules, PredictionDepthMustBe1) {
  auto sd = menu("mtp");
  sd.proposers["mtp"].prediction_depth = 2;
  expect_refused(resolve_speculative(package(&sd), cli({})), "prediction_depth", "exactly 1 token");
}

TEST(SpeculativeRules, LayerIndicesMustHoldNextnTensorsInThisPackage) {
  auto sd = menu("mtp");
  sd.proposers["mtp"].layer_indices = std::vector<uint32_t>{2};
  const auto r = resolve_speculative(package(&sd, {3}), cli({}));
  expect_refused(r, "layer_indices_hold_nextn", "layer 2 holds no NextN");
  // Only what the plan uses is refused; the rest is a warning.
  const auto d = resolve_speculative(package(&sd, {3}), strategy("ngram-cache"));
  ASSERT_TRUE(d.plan);
  ASSERT_FALSE(d.warnings.empty());
  EXPECT_NE(d.warnings[0].find("layer_indices"), std::string::npos);
}

TEST(SpeculativeRules, HistoryScopeMustBeRequest) {
  auto sd = menu("ngram-cache");
  sd.proposers["cache"].history_scope = "session";
  expect_refused(resolve_speculative(package(&sd), cli({})), "history_scope", "one request");
}

TEST(SpeculativeRules, NgramCacheMatchWindowIsAtMost4) {
  SpeculativeSettings s;
  s.strategy = "ngram-cache";
  s.ngram_min = 2;
  s.ngram_max = 5;
  expect_refused(resolve_speculative(gguf(), cli(s)), "ngram_cache_window", "<= 4");
  s.ngram_max = 4;
  EXPECT_TRUE(resolve_speculative(gguf(), cli(s)).plan);
}

TEST(SpeculativeRules, NgramSuffixBoundsAre3To64) {
  SpeculativeSettings s;
  s.strategy = "ngram-suffix";
  s.ngram_min = 2;
  s.ngram_max = 32;
  expect_refused(resolve_speculative(gguf(), cli(s)), "ngram_suffix_bounds", "3 <= ngram_min");
  s.ngram_min = 8;
  s.ngram_max = 65;
  expect_refused(resolve_speculative(gguf(), cli(s)), "ngram_suffix_bounds");
  s.ngram_max = 4;
  expect_refused(resolve_speculative(gguf(), cli(s)), "ngram_suffix_bounds");  // min above max
  s.ngram_min = 3;
  s.ngram_max = 64;
  EXPECT_TRUE(resolve_speculative(gguf(), cli(s)).plan);
}

TEST(SpeculativeRules, CompositeIsANativeMtpPrimaryAndAnNgramExtender) {
  const auto sd = menu();
  const auto r = resolve_speculative(package(&sd), cli({}));
  ASSERT_TRUE(r.plan) << r.refusal->message;
  const auto& p = *r.plan;
  EXPECT_EQ(p.strategy, "mtp-cache");
  EXPECT_EQ(p.kind, PlanKind::kMtpWithNgram);
  ASSERT_TRUE(p.native_mtp && p.ngram && p.extension && p.verify_window);
  EXPECT_EQ(p.native_mtp->layer_indices, std::vector<uint32_t>{3});
  EXPECT_EQ(p.ngram->type, "ngram-cache");
  EXPECT_EQ(p.ngram->max_proposal_tokens, 10u);
  EXPECT_EQ(p.extension->max_tokens, 8u);
  EXPECT_EQ(p.verify_window->max_tokens, 9u) << "one MTP token plus the tail, verified in one window";
  // The shape itself is parse_manifest's rule (SpeculativeCli.
  // ManifestRulesRefuseBeforeAnyPlan); a hand-built struct is refused too.
  auto bad = menu();
  bad.strategies["mtp-cache"].primary = "cache";
  expect_refused(resolve_speculative(package(&bad), cli({})), "composite_shape", "native-mtp");
  bad = menu();
  bad.strategies["mtp-cache"].extender = "mtp";
  expect_refused(resolve_speculative(package(&bad), cli({})), "composite_shape", "N-gram");
  bad.strategies["mtp-cache"].extender = "undeclared";
  expect_refused(resolve_speculative(package(&bad), cli({})), "composite_shape");
}

TEST(SpeculativeRules, PipelineDepthIs1To64) {
  auto sd = menu("mtp");
  sd.strategies["mtp"].window_policy = WindowPolicy{};
  sd.strategies["mtp"].window_policy->pipeline_depth = 65;
  expect_refused(resolve_speculative(package(&sd), cli({})), "pipeline_depth", "1..64");
  sd.strategies["mtp"].window_policy->pipeline_depth = 64;
  auto r = resolve_speculative(package(&sd), cli({}));
  ASSERT_TRUE(r.plan);
  EXPECT_EQ(r.plan->verify_window->pipeline_depth, 64u);
  SpeculativeSettings s;
  s.verify_window_pipeline_depth = 0;
  expect_refused(resolve_speculative(package(&sd), cli(s)), "pipeline_depth");
  sd.strategies["mtp"].window_policy.reset();
  r = resolve_speculative(package(&sd), cli({}));
  EXPECT_EQ(r.plan->verify_window->pipeline_depth, 1u) << "omitted: the legacy depth of 1";
}

TEST(SpeculativeRules, ExtensionBoundsHoldTheTail) {
  auto sd = menu();
  sd.strategies["mtp-cache"].extension_policy->max_tokens = 65;
  sd.proposers["cache"].max_proposal_tokens = 64;
  expect_refused(resolve_speculative(package(&sd), cli({})), "extension_bounds");
  sd = menu("mtp-suffix");  // no extension_policy: the tail is the extender's budget
  auto r = resolve_speculative(package(&sd), cli({}));
  ASSERT_TRUE(r.plan);
  EXPECT_EQ(r.plan->extension->max_tokens, 16u);
  EXPECT_EQ(r.plan->extension->initial_tokens, 16u);
  SpeculativeSettings s;
  s.extension_max_tokens = 4;
  s.extension_initial_tokens = 2;
  s.extension_tail_backoff_proposals = 5;
  r = resolve_speculative(package(&sd), cli(s));
  ASSERT_TRUE(r.plan);
  EXPECT_EQ(r.plan->extension->max_tokens, 4u);
  EXPECT_EQ(r.plan->extension->initial_tokens, 2u);
  EXPECT_EQ(r.plan->extension->tail_backoff_proposals, 5u);
  s.extension_initial_tokens = 9;
  expect_refused(resolve_speculative(package(&sd), cli(s)), "operator_value", "extension_initial_tokens");
}

TEST(SpeculativeRules, MaxProposalTokensIsBounded) {
  auto sd = menu("ngram-suffix");
  sd.proposers["suffix"].max_proposal_tokens = 65;
  expect_refused(resolve_speculative(package(&sd), cli({})), "max_proposal_tokens");
}

TEST(SpeculativeRules, UnknownStrategyTypesAreIgnoredUnlessTheyAreTheDefault) {
  auto sd = menu("mtp");
  Strategy draft;
  draft.type = "draft-model";
  draft.extra = {{"draft_model", "org/draft:Q8_0"}};
  sd.strategies["draft"] = draft;
  auto r = resolve_speculative(package(&sd), cli({}));
  ASSERT_TRUE(r.plan) << "ignored: not the default";
  EXPECT_EQ(r.plan->strategy, "mtp");
  sd.default_strategy = "draft";
  expect_refused(resolve_speculative(package(&sd), cli({})), "strategy_type_supported", "draft-model");
  sd.default_strategy = "mtp";
  expect_refused(resolve_speculative(package(&sd), strategy("draft")), "strategy_type_supported");
}

TEST(SpeculativeRules, NativeMtpWindowShouldStayFixedTo1) {
  auto sd = menu("mtp");
  sd.strategies["mtp"].window_policy = WindowPolicy{};
  sd.strategies["mtp"].window_policy->max_window = 4;
  const auto r = resolve_speculative(package(&sd), cli({}));
  ASSERT_TRUE(r.plan);
  EXPECT_EQ(r.plan->verify_window->max_tokens, 1u);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("fixed to 1"), std::string::npos);
}

// ------------------------------------------------------- operator selection

TEST(OperatorSelection, AutoUsesThePackageDefaultThenTheRuntimeDefault) {
  const auto sd = menu();
  auto r = resolve_speculative(package(&sd), cli({}));
  EXPECT_EQ(r.requested, "auto");
  EXPECT_EQ(r.plan->strategy, "mtp-cache");
  EXPECT_EQ(r.plan->origin, "package default");
  auto nodefault = menu();
  nodefault.default_strategy.reset();
  r = resolve_speculative(package(&nodefault), cli({}));
  EXPECT_EQ(r.plan->kind, PlanKind::kDisabled);
  EXPECT_EQ(r.plan->origin, "runtime default");
  r = resolve_speculative(gguf(), cli({}));
  EXPECT_EQ(r.plan->kind, PlanKind::kDisabled) << "a direct GGUF speculates only when asked";
}

TEST(OperatorSelection, MtpForcesDirectNativeMtp) {
  const auto sd = menu();
  auto r = resolve_speculative(package(&sd), strategy("mtp"));
  ASSERT_TRUE(r.plan);
  EXPECT_EQ(r.plan->kind, PlanKind::kNativeMtpOnly);
  EXPECT_FALSE(r.plan->ngram);
  auto only_proposer = menu();
  only_proposer.strategies.erase("mtp");
  r = resolve_speculative(package(&only_proposer), strategy("mtp"));
  ASSERT_TRUE(r.plan) << "the package's native-mtp proposer serves mtp";
  EXPECT_EQ(r.plan->native_mtp->proposer, "mtp");
  r = resolve_speculative(gguf({3}), strategy("mtp"));
  ASSERT_TRUE(r.plan);
  EXPECT_EQ(r.plan->native_mtp->layer_indices, std::vector<uint32_t>{3});
  expect_refused(resolve_speculative(gguf({}), strategy("mtp")), "native_mtp_available");
  SpeculativeDecoding none;
  expect_refused(resolve_speculative(package(&none), strategy("mtp")), "native_mtp_available");
}

TEST(OperatorSelection, DisabledDisablesSpeculation) {
  const auto sd = menu();
  const auto r = resolve_speculative(package(&sd), strategy("disabled"));
  ASSERT_TRUE(r.plan);
  EXPECT_EQ(r.plan->strategy, "disabled");
  EXPECT_EQ(r.plan->kind, PlanKind::kDisabled);
  EXPECT_FALSE(r.plan->verify_window);
}

TEST(OperatorSelection, LegacyNativeMtpN1IsNormalisedToMtp) {
  const auto sd = menu();
  const auto r = resolve_speculative(package(&sd), strategy("native-mtp-n1"));
  ASSERT_TRUE(r.plan);
  EXPECT_EQ(r.plan->strategy, "mtp");
  EXPECT_EQ(r.requested, "native-mtp-n1");
  ASSERT_FALSE(r.notes.empty());
  EXPECT_NE(r.notes[0].find("normalised"), std::string::npos);
}

TEST(OperatorSelection, ANamedStrategyCannotBeInventedOutsideItsPackage) {
  const auto sd = menu();
  EXPECT_EQ(resolve_speculative(package(&sd), strategy("mtp-suffix")).plan->strategy, "mtp-suffix");
  expect_refused(resolve_speculative(package(&sd), strategy("mtp-lookahead")), "strategy_declared",
                 "cannot be invented");
  SpeculativeDecoding mtp_only;
  mtp_only.default_strategy = "mtp";
  mtp_only.proposers["mtp"] = mtp_proposer();
  mtp_only.strategies["mtp"] = refers("native-mtp", "mtp");
  expect_refused(resolve_speculative(package(&mtp_only), strategy("ngram-cache")), "strategy_declared");
  expect_refused(resolve_speculative(gguf(), strategy("mtp-cache")), "strategy_declared", "direct GGUF");
}

TEST(OperatorSelection, DirectGgufNgramProposersNeedValidBounds) {
  expect_refused(resolve_speculative(gguf(), strategy("ngram-suffix")), "ngram_bounds_required");
  SpeculativeSettings s;
  s.strategy = "ngram-suffix";
  s.ngram_min = 4;
  s.ngram_max = 32;
  auto r = resolve_speculative(gguf(), cli(s));
  ASSERT_TRUE(r.plan);
  EXPECT_EQ(r.plan->ngram->type, "ngram-suffix");
  EXPECT_EQ(r.plan->ngram->history_scope, "request");
  EXPECT_EQ(r.plan->ngram->max_proposal_tokens, kDefaultMaxProposalTokens);
  EXPECT_EQ(r.plan->verify_window->max_tokens, kDefaultMaxProposalTokens);
  s.ngram_proposer = "cache";
  expect_refused(resolve_speculative(gguf(), cli(s)), "ngram_proposer_matches");
  s.ngram_proposer.reset();
  s.ngram_max_proposal_tokens = 0;
  expect_refused(resolve_speculative(gguf(), cli(s)), "operator_value");
}

// -------------------------------------------------------------- precedence

TEST(SpeculativePrecedence, CliThenSelectedModelEntryThenGlobalDefaults) {
  const auto cfg = parse_operator_config(R"(
version = 1
[defaults.speculative]
strategy = "disabled"
verify_window_pipeline_depth = 2
ngram_max_proposal_tokens = 9

[[models]]
model = "org/glm:Q8_0"
ctx_size = 8192

[models.speculative]
strategy = "mtp-cache"
ngram_max_proposal_tokens = 6
)",
                                         "config.toml");
  ASSERT_EQ(cfg.models.size(), 1u);
  SpeculativeSettings flags;
  flags.verify_window_pipeline_depth = 3;
  const auto layered = layer_settings(flags, &cfg.models.at("org/glm:Q8_0"), cfg.defaults);
  EXPECT_EQ(layered.sources.at("strategy"), "model");
  EXPECT_EQ(layered.sources.at("ngram_max_proposal_tokens"), "model");
  EXPECT_EQ(layered.sources.at("verify_window_pipeline_depth"), "cli");
  const auto sd = menu("mtp");
  const auto r = resolve_speculative(package(&sd), layered);
  ASSERT_TRUE(r.plan) << r.refusal->message;
  EXPECT_EQ(r.plan->strategy, "mtp-cache");
  EXPECT_EQ(r.plan->ngram->max_proposal_tokens, 6u);
  EXPECT_EQ(r.plan->verify_window->pipeline_depth, 3u);
  EXPECT_EQ(r.field_sources.at("strategy"), "model");
  EXPECT_EQ(r.field_sources.at("verify_window.pipeline_depth"), "cli");
  // Another model: the global defaults apply.
  const auto other = resolve_speculative(package(&sd), layer_settings({}, nullptr, cfg.defaults));
  EXPECT_EQ(other.plan->strategy, "disabled");
}

TEST(SpeculativePrecedence, OperatorSettingsTightenPackageBoundsNeverWiden) {
  const auto sd = menu("mtp-suffix");
  SpeculativeSettings s;
  s.ngram_min = 2;    // looser than the package's 4
  s.ngram_max = 16;   // tighter than 32
  s.ngram_max_proposal_tokens = 40;  // looser than 16
  const auto r = resolve_speculative(package(&sd), cli(s));
  ASSERT_TRUE(r.plan);
  EXPECT_EQ(r.plan->ngram->ngram_min, 4u);
  EXPECT_EQ(r.plan->ngram->ngram_max, 16u);
  EXPECT_EQ(r.plan->ngram->max_proposal_tokens, 16u);
  EXPECT_EQ(r.notes.size(), 2u) << "each widening attempt is noted";
  s = {};
  s.ngram_proposer = "cache";
  expect_refused(resolve_speculative(package(&sd), cli(s)), "ngram_proposer_matches");
  s = {};
  s.verify_window_min_tokens = 20;
  expect_refused(resolve_speculative(package(&sd), cli(s)), "verify_window_bounds");
}

// ---------------------------------------------------------------- config.toml

TEST(OperatorConfig, ErrorsNameTheFileAndTheProblem) {
  auto refused = [](const std::string& text, const std::string& needle) {
    try {
      parse_operator_config(text, "/etc/mesh/config.toml");
      ADD_FAILURE() << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("/etc/mesh/config.toml"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  refused("[defaults.speculative\nstrategy = 1", "not valid TOML");
  refused("[defaults.speculative]\nstrategy = 1\n", "defaults.speculative.strategy (line 2");
  refused("[defaults.speculative]\nngram_min = -3\n", "must not be negative");
  refused("[defaults.speculative]\nngram_min = \"4\"\n", "expected an integer");
  refused("defaults = 3\n", "defaults");
  refused("[[models]]\nctx_size = 1\n", "models[0].model");
  refused("[[models]]\nmodel = \"a/b\"\n[[models]]\nmodel = \"a/b\"\n", "a second entry");
  refused(std::string(2'000'000, '#'), "limit");
  const auto cfg = parse_operator_config("[defaults.speculative]\nfuture_knob = true\n[server]\nport = 1\n", "c.toml");
  ASSERT_EQ(cfg.warnings.size(), 1u) << "unknown speculative keys warn; other tables are not ours";
  EXPECT_NE(cfg.warnings[0].find("future_knob"), std::string::npos);
}

// ------------------------------------------------------------ the real CLI

// Packages written from the glm4moe fixture (NextN tensors in layer 3).
fs::path glm_package(const fs::path& dir, const std::function<void(json&)>& edit = {}) {
  static test::TempDir base;
  static const fs::path made = [] {
    const auto r = test::write_pkg(test::data_path("glm4moe-mtp-tiny.gguf"), base / "pkg");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return base / "pkg";
  }();
  const auto dst = dir / "pkg";
  fs::create_directories(dir);
  fs::copy(made, dst, fs::copy_options::recursive);
  if (edit) {
    auto j = json::parse(test::read_text(dst / "model-package.json"));
    edit(j);
    const auto s = j.dump(2);
    test::write_file(dst / "model-package.json", std::vector<uint8_t>(s.begin(), s.end()));
  }
  return dst;
}

TEST(SpeculativeCli, TheWritersPackageResolvesToNativeMtpOnLayer3) {
  test::TempDir tmp;
  const auto r = run_cli({"speculative", glm_package(tmp.path()).string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["strategy"], "mtp");
  EXPECT_EQ(j["plan"]["kind"], "native-mtp");
  EXPECT_EQ(j["plan"]["native_mtp"]["proposer"], "mtp");
  EXPECT_EQ(j["plan"]["native_mtp"]["layer_indices"], json::array({3}));
  EXPECT_EQ(j["plan"]["verify_window"], json({{"min_tokens", 1}, {"max_tokens", 1}, {"pipeline_depth", 1}}));
  const auto h = run_cli({"speculative", glm_package(tmp / "h").string()});
  EXPECT_EQ(h.exit_code, 0);
  EXPECT_NE(h.out.find("layers 3"), std::string::npos) << h.out;
}

TEST(SpeculativeCli, LayerIndicesWithoutNextnTensorsAreRefusedNamingTheRule) {
  test::TempDir tmp;
  const auto pkg = glm_package(tmp.path(), [](json& j) {
    j["generation"]["speculative_decoding"]["proposers"]["mtp"]["layer_indices"] = json::array({2});
  });
  const auto r = run_cli({"speculative", pkg.string(), "--json"});
  EXPECT_EQ(r.exit_code, 1);
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["error"]["kind"], "refused");
  EXPECT_EQ(j["error"]["rule"], "layer_indices_hold_nextn");
  EXPECT_TRUE(j["strategy"].is_null());
  EXPECT_NE(r.err.find("rule layer_indices_hold_nextn"), std::string::npos) << r.err;
  // Disabled needs no MTP: it runs, with a warning about the package.
  const auto d = run_cli({"speculative", pkg.string(), "--strategy", "disabled", "--json"});
  EXPECT_EQ(d.exit_code, 0) << d.err;
  EXPECT_NE(d.err.find("warning:"), std::string::npos);
}

TEST(SpeculativeCli, ManifestRulesRefuseBeforeAnyPlan) {
  // prediction_depth 2, history_scope "user", ngram-cache ngram_max 5: parse_manifest's rules.
  const std::vector<std::pair<std::function<void(json&)>, std::string>> cases = {
      {[](json& j) { j["generation"]["speculative_decoding"]["proposers"]["mtp"]["prediction_depth"] = 2; },
       "prediction_depth"},
      {[](json& j) {
         j["generation"]["speculative_decoding"]["proposers"]["c"] = {
             {"type", "ngram-cache"}, {"ngram_min", 1}, {"ngram_max", 4}, {"history_scope", "user"}};
       },
       "history_scope"},
      {[](json& j) {
         j["generation"]["speculative_decoding"]["proposers"]["c"] = {
             {"type", "ngram-cache"}, {"ngram_min", 1}, {"ngram_max", 5}, {"history_scope", "request"}};
       },
       "ngram_max"},
      {[](json& j) {
         auto& sd = j["generation"]["speculative_decoding"];
         sd["proposers"]["c"] = {{"type", "ngram-cache"}, {"ngram_min", 1}, {"ngram_max", 4}, {"history_scope", "request"}};
         sd["strategies"]["bad"] = {{"type", "composite"}, {"primary", "c"}, {"extender", "c"}};
       },
       "primary"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    test::TempDir tmp;
    const auto r = run_cli({"speculative", glm_package(tmp.path(), cases[i].first).string(), "--json"});
    EXPECT_EQ(r.exit_code, 1) << i;
    EXPECT_EQ(json::parse(r.out)["error"]["kind"], "invalid_input") << r.out;
    EXPECT_NE(r.err.find(cases[i].second), std::string::npos) << r.err;
  }
}

TEST(SpeculativeCli, ConfigPrecedenceAndDirectGguf) {
  test::TempDir tmp;
  // The package leaves pipeline_depth to the operator (a depth it declares
  // is a bound operators only tighten: SpecEdges.OperatorVerifyWindow...).
  const auto pkg = glm_package(tmp.path(), [](json& j) {
    j["generation"]["speculative_decoding"]["strategies"]["mtp"]["window_policy"].erase("pipeline_depth");
  });
  const auto cfg = tmp / "config.toml";
  const std::string text =
      "[defaults.speculative]\nstrategy = \"mtp\"\nverify_window_pipeline_depth = 2\n"
      "[[models]]\nmodel = \"org/tiny:Q8_0\"\n[models.speculative]\nverify_window_pipeline_depth = 4\n";
  test::write_file(cfg, std::vector<uint8_t>(text.begin(), text.end()));
  auto r = run_cli({"speculative", pkg.string(), "--config", cfg.string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = json::parse(r.out);
  EXPECT_EQ(j["plan"]["verify_window"]["pipeline_depth"], 4) << "the package's model entry";
  EXPECT_EQ(j["field_sources"]["strategy"], "defaults");
  r = run_cli({"speculative", pkg.string(), "--config", cfg.string(), "--verify-window-pipeline-depth", "3", "--json"});
  EXPECT_EQ(json::parse(r.out)["plan"]["verify_window"]["pipeline_depth"], 3) << "the CLI flag";
  r = run_cli({"speculative", pkg.string(), "--config", cfg.string(), "--model", "org/other:Q4", "--json"});
  EXPECT_EQ(json::parse(r.out)["plan"]["verify_window"]["pipeline_depth"], 2) << "global defaults";
  r = run_cli({"speculative", pkg.string(), "--strategy", "mtp-cache", "--json"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(json::parse(r.out)["error"]["rule"], "strategy_declared");
  // Direct GGUF: N-gram proposers with operator bounds; mtp from the GGUF's NextN layer.
  const auto gguf_path = test::data_path("glm4moe-mtp-tiny.gguf").string();
  r = run_cli({"speculative", gguf_path, "--strategy", "ngram-cache", "--ngram-min", "2", "--ngram-max", "4",
               "--ngram-max-proposal-tokens", "6", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = json::parse(r.out);
  EXPECT_EQ(j["plan"]["ngram"]["max_proposal_tokens"], 6);
  EXPECT_EQ(j["plan"]["ngram"]["history_scope"], "request");
  r = run_cli({"speculative", gguf_path, "--strategy", "native-mtp-n1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["plan"]["native_mtp"]["layer_indices"], json::array({3}));
  r = run_cli({"speculative", test::data_path("llama-tiny-q8_0.gguf").string(), "--strategy", "mtp", "--json"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(json::parse(r.out)["error"]["rule"], "native_mtp_available");
  // A broken config names the file.
  test::write_file(tmp / "bad.toml", {'[', 'x'});
  r = run_cli({"speculative", pkg.string(), "--config", (tmp / "bad.toml").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("bad.toml"), std::string::npos) << r.err;
  EXPECT_EQ(run_cli({"speculative", pkg.string(), "--ngram-min", "x"}).exit_code, 2);
  EXPECT_NE(run_cli({"speculative", "--help"}).out.find("Example"), std::string::npos);
}

}  // namespace
}  // namespace skippy
