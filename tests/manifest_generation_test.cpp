// model-package.json schema version 1, the generation block: every rule of
// the spec's "Generation Defaults" and "Speculative Decoding" sections that
// concerns the manifest text, one test per rule, named after the MUST it checks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "manifest_examples.h"
#include "skippy/error.h"
#include "skippy/manifest.h"

namespace skippy::manifest_tests {

namespace {

using ::testing::HasSubstr;

TEST(ManifestGeneration, EmptyGenerationObjectsAreAccepted) {
  json j = minimal();
  j["generation"] = json::object();
  EXPECT_EQ(parse(j).generation, GenerationDefaults{});
  j["generation"] = {{"policy", json::object()}, {"thresholds", json::object()},
                     {"speculative_decoding", json::object()}};
  const GenerationDefaults g = *parse(j).generation;
  EXPECT_EQ(g.policy, GenerationPolicy{});
  EXPECT_EQ(g.speculative_decoding, SpeculativeDecoding{});
}

TEST(ManifestGeneration, GenerationObjectsMustBeObjects) {
  json j = minimal();
  j["generation"] = "glm-dsa-v1";
  expect_refused(j, "generation: must be a JSON object");
  j["generation"] = {{"policy", json::array()}};
  expect_refused(j, "generation.policy: must be a JSON object");
  j["generation"] = {{"thresholds", 5}};
  expect_refused(j, "generation.thresholds: must be a JSON object");
  j["generation"] = {{"speculative_decoding", true}};
  expect_refused(j, "generation.speculative_decoding: must be a JSON object");
}

TEST(ManifestGeneration, NativeMtpPredictionDepthMustBe1) {
  json sd = {{"strategies", {{"mtp", mtp_proposer()}}}};
  sd["strategies"]["mtp"]["prediction_depth"] = 2;
  expect_refused(with_speculation(sd), kSd + "strategies.mtp.prediction_depth: must be 1 for the current native MTP runtime, got 2");
  sd = {{"proposers", {{"mtp", mtp_proposer()}}}};
  sd["proposers"]["mtp"]["prediction_depth"] = 0;
  expect_refused(with_speculation(sd), kSd + "proposers.mtp.prediction_depth: must be 1");
  sd["proposers"]["mtp"].erase("prediction_depth");
  expect_refused(with_speculation(sd), kSd + "proposers.mtp.prediction_depth: missing required field");
}

TEST(ManifestGeneration, NativeMtpLayerIndicesMustBePackageLayers) {
  json sd = {{"proposers", {{"mtp", mtp_proposer()}}}};
  expect_refused(with_speculation(sd, 47), kSd + "proposers.mtp.layer_indices[0]: 47 is not a package layer index (layer_count 47)");
  EXPECT_NO_THROW(parse(with_speculation(sd, 48)));
  sd["proposers"]["mtp"]["layer_indices"] = json::array();
  expect_refused(with_speculation(sd), kSd + "proposers.mtp.layer_indices: must list at least one package layer index");
  sd["proposers"]["mtp"]["layer_indices"] = {46, 46};
  expect_refused(with_speculation(sd), kSd + "proposers.mtp.layer_indices[1]: duplicate layer index 46");
  sd["proposers"]["mtp"]["layer_indices"] = {-1};
  expect_refused(with_speculation(sd), kSd + "proposers.mtp.layer_indices[0]: must be a non-negative integer");
  sd["proposers"]["mtp"]["layer_indices"] = 47;
  expect_refused(with_speculation(sd), kSd + "proposers.mtp.layer_indices: must be a JSON array");
  sd["proposers"]["mtp"].erase("layer_indices");
  expect_refused(with_speculation(sd), kSd + "proposers.mtp.layer_indices: missing required field");
}

TEST(ManifestGeneration, NgramProposersRequireNgramMinAndMaxWithMinAtMostMax) {
  for (const char* key : {"ngram_min", "ngram_max"}) {
    json sd = {{"proposers", {{"cache", cache_proposer()}}}};
    sd["proposers"]["cache"].erase(key);
    expect_refused(with_speculation(sd), kSd + "proposers.cache." + key + ": missing required field");
  }
  json sd = {{"proposers", {{"suffix", suffix_proposer()}}}};
  sd["proposers"]["suffix"]["ngram_min"] = 9;
  sd["proposers"]["suffix"]["ngram_max"] = 8;
  expect_refused(with_speculation(sd), kSd + "proposers.suffix.ngram_min: 9 exceeds ngram_max 8");
}

TEST(ManifestGeneration, NgramProposersMustUseRequestHistoryScope) {
  for (const json& proposer : {cache_proposer(), suffix_proposer()}) {
    json sd = {{"proposers", {{"p", proposer}}}};
    sd["proposers"]["p"]["history_scope"] = "global";
    expect_refused(with_speculation(sd), kSd + "proposers.p.history_scope: must be \"request\"");
    sd["proposers"]["p"].erase("history_scope");
    expect_refused(with_speculation(sd), kSd + "proposers.p.history_scope: missing required field");
  }
}

TEST(ManifestGeneration, NgramCacheMaxMustBeAtMost4) {
  json sd = {{"proposers", {{"cache", cache_proposer()}}}};
  sd["proposers"]["cache"]["ngram_max"] = 5;
  expect_refused(with_speculation(sd), kSd + "proposers.cache.ngram_max: 5 is out of range: ngram-cache needs 1 <= ngram_min <= ngram_max <= 4");
  sd["proposers"]["cache"]["ngram_max"] = 4;
  sd["proposers"]["cache"]["ngram_min"] = 0;
  expect_refused(with_speculation(sd), kSd + "proposers.cache.ngram_min: 0 is out of range");
  sd["proposers"]["cache"]["ngram_min"] = 1;
  EXPECT_NO_THROW(parse(with_speculation(sd)));
}

TEST(ManifestGeneration, NgramSuffixMustSatisfy3LeMinLeMaxLe64) {
  json sd = {{"proposers", {{"suffix", suffix_proposer()}}}};
  sd["proposers"]["suffix"]["ngram_min"] = 2;
  expect_refused(with_speculation(sd), kSd + "proposers.suffix.ngram_min: 2 is out of range: ngram-suffix needs 3 <= ngram_min <= ngram_max <= 64");
  sd["proposers"]["suffix"]["ngram_min"] = 3;
  sd["proposers"]["suffix"]["ngram_max"] = 65;
  expect_refused(with_speculation(sd), kSd + "proposers.suffix.ngram_max: 65 is out of range");
  sd["proposers"]["suffix"]["ngram_max"] = 3;
  EXPECT_NO_THROW(parse(with_speculation(sd)));
}

TEST(ManifestGeneration, MaxProposalTokensMustBePositive) {
  json sd = {{"proposers", {{"cache", cache_proposer()}}}};
  sd["proposers"]["cache"]["max_proposal_tokens"] = 0;
  expect_refused(with_speculation(sd), kSd + "proposers.cache.max_proposal_tokens: must be at least 1");
  sd["proposers"]["cache"]["max_proposal_tokens"] = 100;  // independent of ngram_max
  EXPECT_NO_THROW(parse(with_speculation(sd)));
}

TEST(ManifestGeneration, CompositeMustUseNativeMtpPrimaryAndNgramExtender) {
  const json proposers = {{"mtp", mtp_proposer()}, {"cache", cache_proposer()}, {"suffix", suffix_proposer()}};
  json sd = {{"proposers", proposers},
             {"strategies", {{"c", {{"type", "composite"}, {"primary", "mtp"}, {"extender", "suffix"}}}}}};
  EXPECT_NO_THROW(parse(with_speculation(sd)));
  sd["strategies"]["c"]["primary"] = "cache";
  expect_refused(with_speculation(sd), kSd + "strategies.c.primary: proposer \"cache\" has type \"ngram-cache\"; a composite primary must be native-mtp");
  sd["strategies"]["c"]["primary"] = "mtp";
  sd["strategies"]["c"]["extender"] = "mtp";
  expect_refused(with_speculation(sd), kSd + "strategies.c.extender: proposer \"mtp\" has type \"native-mtp\"; a composite extender must be an N-gram proposer");
  sd["strategies"]["c"]["extender"] = "nowhere";
  expect_refused(with_speculation(sd), kSd + "strategies.c.extender: names undeclared proposer \"nowhere\"");
  sd["strategies"]["c"].erase("extender");
  expect_refused(with_speculation(sd), kSd + "strategies.c.extender: missing required field");
  sd["strategies"]["c"]["extender"] = "cache";
  sd["strategies"]["c"].erase("primary");
  expect_refused(with_speculation(sd), kSd + "strategies.c.primary: missing required field");
}

TEST(ManifestGeneration, CompositeExtensionPolicyBoundsTheTail) {
  json sd = {{"proposers", {{"mtp", mtp_proposer()}, {"cache", cache_proposer()}}},
             {"strategies", {{"c", {{"type", "composite"}, {"primary", "mtp"}, {"extender", "cache"}}}}}};
  sd["strategies"]["c"]["extension_policy"] = {{"initial_tokens", 9}, {"max_tokens", 8}};
  expect_refused(with_speculation(sd), kSd + "strategies.c.extension_policy.initial_tokens: 9 exceeds max_tokens 8");
  sd["strategies"]["c"]["extension_policy"] = {{"max_tokens", 0}};
  expect_refused(with_speculation(sd), kSd + "strategies.c.extension_policy.max_tokens: must be at least 1");
  sd["strategies"]["c"]["extension_policy"] = {{"tail_backoff_proposals", -2}};
  expect_refused(with_speculation(sd), kSd + "strategies.c.extension_policy.tail_backoff_proposals: must be a non-negative integer");
}

TEST(ManifestGeneration, StrategyReferencesMustNameDeclaredProposersOfTheSameType) {
  json sd = {{"proposers", {{"mtp", mtp_proposer()}, {"cache", cache_proposer()}}},
             {"strategies", {{"mtp", {{"type", "native-mtp"}, {"proposer", "mtp"}}},
                             {"ngram-cache", {{"type", "ngram-cache"}, {"proposer", "cache"}}}}}};
  EXPECT_NO_THROW(parse(with_speculation(sd)));
  sd["strategies"]["mtp"]["proposer"] = "cache";
  expect_refused(with_speculation(sd), kSd + "strategies.mtp.proposer: proposer \"cache\" has type \"ngram-cache\"; a native-mtp strategy needs a native-mtp proposer");
  sd["strategies"]["mtp"]["proposer"] = "missing";
  expect_refused(with_speculation(sd), kSd + "strategies.mtp.proposer: names undeclared proposer \"missing\"");
  // Without a proposer reference, the strategy is its own source.
  sd["strategies"]["mtp"] = {{"type", "native-mtp"}, {"layer_indices", {47}}};
  expect_refused(with_speculation(sd), kSd + "strategies.mtp.prediction_depth: missing required field");
}

TEST(ManifestGeneration, WindowPolicyPipelineDepthMustBePositive) {
  json sd = {{"strategies", {{"mtp", mtp_proposer()}}}};
  sd["strategies"]["mtp"]["window_policy"] = {{"pipeline_depth", 0}};
  expect_refused(with_speculation(sd), kSd + "strategies.mtp.window_policy.pipeline_depth: must be a positive integer, got 0");
  sd["strategies"]["mtp"]["window_policy"] = {{"pipeline_depth", 1.5}};
  expect_refused(with_speculation(sd), kSd + "strategies.mtp.window_policy.pipeline_depth: must be a non-negative integer, got 1.5");
  sd["strategies"]["mtp"]["window_policy"] = {{"pipeline_depth", 3}};
  EXPECT_EQ(parse(with_speculation(sd)).generation->speculative_decoding->strategies.at("mtp").window_policy->pipeline_depth, 3u);
}

TEST(ManifestGeneration, WindowPolicyBoundsMustBeOrdered) {
  json sd = {{"strategies", {{"mtp", mtp_proposer()}}}};
  sd["strategies"]["mtp"]["window_policy"] = {{"min_window", 4}, {"max_window", 2}};
  expect_refused(with_speculation(sd), kSd + "strategies.mtp.window_policy.min_window: exceeds max_window");
  sd["strategies"]["mtp"]["window_policy"] = {{"initial_window", 8}, {"max_window", 2}};
  expect_refused(with_speculation(sd), kSd + "strategies.mtp.window_policy.initial_window: exceeds max_window");
  sd["strategies"]["mtp"]["window_policy"] = {{"initial_window", 1}, {"min_window", 2}};
  expect_refused(with_speculation(sd), kSd + "strategies.mtp.window_policy.initial_window: is below min_window");
}

TEST(ManifestGeneration, DefaultMustNameADeclaredStrategy) {
  json sd = {{"default", "mtp"}};
  expect_refused(with_speculation(sd), kSd + "default: \"mtp\" is not a declared strategy");
  sd["default"] = "";
  expect_refused(with_speculation(sd), kSd + "default: must be a non-empty string");
  sd = {{"default", "mtp"}, {"proposers", {{"mtp", mtp_proposer()}}}};  // a proposer is not a strategy
  expect_refused(with_speculation(sd), kSd + "default: \"mtp\" is not a declared strategy");
}

TEST(ManifestGeneration, OperatorKeywordsAreNotPackageStrategyIds) {
  for (const char* id : {"auto", "disabled"}) {
    json sd = {{"strategies", {{id, mtp_proposer()}}}};
    expect_refused(with_speculation(sd), kSd + "strategies." + id + ": \"" + id + "\" is an operator keyword");
  }
}

TEST(ManifestGeneration, UnknownStrategyTypeIsKeptAndOnlyUnsupportedAsDefault) {
  // "Consumers that do not recognize a strategy type MUST ignore it unless it
  // is the declared default": parse keeps it (even with fields it would
  // refuse on a known type), and the default case is reported.
  json draft = {{"type", "draft-model"},
                {"draft_model", "org/draft:Q8_0"},
                {"window_policy", {{"default", "adaptive"}, {"min_window", 0}}}};
  json sd = {{"default", "mtp"}, {"strategies", {{"mtp", mtp_proposer()}, {"draft", draft}}}};
  SpeculativeDecoding parsed = *parse(with_speculation(sd)).generation->speculative_decoding;
  const Strategy& d = parsed.strategies.at("draft");
  EXPECT_EQ(d.type, "draft-model");
  EXPECT_FALSE(d.window_policy);  // opaque: every field but type is in extra
  EXPECT_EQ(d.extra.at("draft_model"), "org/draft:Q8_0");
  EXPECT_EQ(d.extra.at("window_policy").at("default"), "adaptive");
  EXPECT_FALSE(is_known_strategy_type("draft-model"));
  EXPECT_FALSE(unsupported_default_strategy(parsed));

  sd["default"] = "draft";
  parsed = *parse(with_speculation(sd)).generation->speculative_decoding;
  const auto reason = unsupported_default_strategy(parsed);
  ASSERT_TRUE(reason);
  EXPECT_EQ(*reason, kSd + "default: strategy \"draft\" has unsupported type \"draft-model\"");
}

TEST(ManifestGeneration, UnknownProposerTypeIsKeptButKnownStrategiesCannotUseIt) {
  json sd = {{"proposers", {{"d", {{"type", "draft-model"}, {"draft_model", "org/d"}}}}}};
  const SpeculativeDecoding parsed = *parse(with_speculation(sd)).generation->speculative_decoding;
  EXPECT_EQ(parsed.proposers.at("d").type, "draft-model");
  EXPECT_EQ(parsed.proposers.at("d").extra.at("draft_model"), "org/d");
  sd["strategies"] = {{"mtp", {{"type", "native-mtp"}, {"proposer", "d"}}}};
  expect_refused(with_speculation(sd), kSd + "strategies.mtp.proposer: proposer \"d\" has type \"draft-model\"");
}

TEST(ManifestGeneration, TypeIsRequired) {
  json sd = {{"strategies", {{"mtp", {{"prediction_depth", 1}}}}}};
  expect_refused(with_speculation(sd), kSd + "strategies.mtp.type: missing required field");
  sd = {{"proposers", {{"p", {{"type", ""}}}}}};
  expect_refused(with_speculation(sd), kSd + "proposers.p.type: must be a non-empty string");
}

TEST(ManifestGeneration, SpecFieldsThatDoNotApplyToTheTypeAreRefused) {
  json sd = {{"proposers", {{"mtp", mtp_proposer()}}}};
  sd["proposers"]["mtp"]["ngram_max"] = 4;
  expect_refused(with_speculation(sd), kSd + "proposers.mtp.ngram_max: does not apply to type \"native-mtp\"");
  sd = {{"proposers", {{"cache", cache_proposer()}}}};
  sd["proposers"]["cache"]["layer_indices"] = {1};
  expect_refused(with_speculation(sd), kSd + "proposers.cache.layer_indices: does not apply to type \"ngram-cache\"");
  sd = {{"proposers", {{"mtp", mtp_proposer()}, {"cache", cache_proposer()}}},
        {"strategies", {{"c", {{"type", "composite"}, {"primary", "mtp"}, {"extender", "cache"}, {"ngram_max", 3}}}}}};
  expect_refused(with_speculation(sd), kSd + "strategies.c.ngram_max: does not apply to type \"composite\"");
}

TEST(ManifestGeneration, PolicyValuesMustBeNonEmptyStrings) {
  json j = minimal();
  j["generation"] = {{"policy", {{"decode", 1}}}};
  expect_refused(j, "generation.policy.decode: must be a string, got 1");
  j["generation"] = {{"policy", {{"profile", ""}}}};
  expect_refused(j, "generation.policy.profile: must be a non-empty string");
  j["generation"] = {{"policy", {{"experimental", {{"selected_row_flash", true}}}}}};
  expect_refused(j, "generation.policy.experimental.selected_row_flash: must be a string, got true");
  j["generation"] = {{"policy", {{"experimental", "evidence-gated"}}}};
  expect_refused(j, "generation.policy.experimental: must be a JSON object");
}

TEST(ManifestGeneration, UnknownPolicyValuesParseButAreReportedUnsupported) {
  // "Consumers MUST NOT silently reinterpret unknown policy values as a
  // supported path": parse keeps them; unsupported_policy_values names them.
  json j = minimal();
  j["generation"] = {{"policy",
                      {{"profile", "glm-dsa-v2"},
                       {"decode", "turbo-flash"},
                       {"short_prefill", "dense"},
                       {"long_prefill", "sparse-chunked"},
                       {"verify", "sparse-verify"},
                       {"indexshare", "optional"},
                       {"experimental",
                        {{"selected_row_flash", "enabled"}, {"new_switch", "evidence-gated"}}},
                       {"prefill_chunking", "auto"}}}};
  const GenerationPolicy p = *parse(j).generation->policy;
  EXPECT_EQ(p.decode, "turbo-flash");
  EXPECT_EQ(p.extra.at("prefill_chunking"), "auto");
  EXPECT_THAT(unsupported_policy_values(p),
              ::testing::ElementsAre(
                  "generation.policy.profile: unknown profile \"glm-dsa-v2\"",
                  "generation.policy.decode: unknown phase value \"turbo-flash\"",
                  "generation.policy.verify: unknown phase value \"sparse-verify\"",
                  "generation.policy.indexshare: unknown indexshare value \"optional\"",
                  "generation.policy.experimental.new_switch: unknown experimental switch (value \"evidence-gated\")",
                  "generation.policy.experimental.selected_row_flash: unknown experimental value \"enabled\"",
                  "generation.policy.prefill_chunking: unknown policy field"));
}

TEST(ManifestGeneration, KnownVocabulariesAreTheSpecs) {
  auto as_vec = [](std::span<const std::string_view> s) { return std::vector<std::string_view>(s.begin(), s.end()); };
  EXPECT_THAT(as_vec(known_policy_profiles()), ::testing::ElementsAre("glm-dsa-v1"));
  EXPECT_THAT(as_vec(known_phase_values()),
              ::testing::ElementsAre("auto", "dense", "direct-sparse", "compact-flash", "sparse-chunked", "fallback"));
  EXPECT_THAT(as_vec(known_indexshare_values()), ::testing::ElementsAre("required"));
  EXPECT_THAT(as_vec(known_experimental_switches()),
              ::testing::ElementsAre("selected_row_flash", "moe_weighted_down", "moe_merged_shared_gate_up"));
  EXPECT_THAT(as_vec(known_experimental_values()), ::testing::ElementsAre("evidence-gated"));
  EXPECT_THAT(as_vec(known_proposer_types()), ::testing::ElementsAre("native-mtp", "ngram-cache", "ngram-suffix"));
  EXPECT_TRUE(is_known_strategy_type("composite"));
}

TEST(ManifestGeneration, ThresholdsMustBeNonNegativeIntegersAndUnknownOnesAreKept) {
  json j = minimal();
  j["generation"] = {{"thresholds", {{"dense_mask_max_bytes", -1}}}};
  expect_refused(j, "generation.thresholds.dense_mask_max_bytes: must be a non-negative integer, got -1");
  j["generation"] = {{"thresholds", {{"short_prefill_max_tokens", 20.5}}}};
  expect_refused(j, "generation.thresholds.short_prefill_max_tokens: must be a non-negative integer, got 20.5");
  j["generation"] = {{"thresholds", {{"compact_flash_min_kv", 0}, {"topk_sideband_max_bytes", 3.5}}}};
  const GenerationThresholds t = *parse(j).generation->thresholds;
  EXPECT_EQ(t.compact_flash_min_kv, 0u);
  EXPECT_EQ(t.extra.at("topk_sideband_max_bytes"), 3.5);
}

// Generation is policy, not tensor layout: by default (every consumer) a
// block that breaks its rules is set aside with its error, not refused.
TEST(ManifestGeneration, ConsumersSetABrokenGenerationBlockAside) {
  json j = minimal();
  j["generation"] = {{"thresholds", {{"short_prefill_max_tokens", "big"}}}};
  const std::string why =
      "model-package.json: generation.thresholds.short_prefill_max_tokens: must be a non-negative integer";
  expect_refused(j, "generation.thresholds.short_prefill_max_tokens: must be a non-negative integer");
  const PackageManifest m = parse_manifest(j.dump(), kOrigin);
  EXPECT_FALSE(m.generation);
  ASSERT_TRUE(m.generation_problem);
  EXPECT_THAT(*m.generation_problem, HasSubstr(why));
  EXPECT_EQ(m.layers.size(), 3u);
  expect_serialize_refused(m, "generation: was set aside when read");
  // Everything else is still refused as before.
  j["layer_count"] = 0;
  EXPECT_THROW(parse_manifest(j.dump(), kOrigin), Error);
  // A valid block has no problem.
  j = minimal();
  j["generation"] = {{"thresholds", {{"short_prefill_max_tokens", 2048}}}};
  EXPECT_FALSE(parse_manifest(j.dump(), kOrigin).generation_problem);
}

TEST(ManifestGeneration, FieldsOutsideTheSchemaAndDeepPipelinesAreNamed) {
  json j = with_speculation(json::parse(R"({"default": "mtp", "strategies": {"mtp": {"type": "native-mtp",
      "prediction_depth": 1, "layer_indices": [47], "window_policy": {"pipeline_depth": 2}},
      "flat": {"type": "native-mtp", "prediction_depth": 1, "layer_indices": [47],
      "window_policy": {"pipeline_depth": 1}}}})"));
  j["generation"]["metal"] = {{"simdgroups", 4}};
  j["generation"]["glm_dsa"] = {{"x", 1}};
  const auto g = *parse(j).generation;
  EXPECT_THAT(generation_fields_outside_schema(g),
              ::testing::ElementsAre(HasSubstr("generation.glm_dsa: not a generation field"),
                                     HasSubstr("generation.metal: not a generation field")));
  EXPECT_THAT(pipeline_depths_needing_evidence(*g.speculative_decoding),
              ::testing::ElementsAre(HasSubstr(
                  "generation.speculative_decoding.strategies.mtp.window_policy.pipeline_depth: 2 in a package default")));
}

}  // namespace
}  // namespace skippy::manifest_tests
