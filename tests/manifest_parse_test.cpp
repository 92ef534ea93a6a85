// model-package.json schema version 1, parsing: every rule of the spec's
// "Manifest Schema", "Consumer Validation" and "Compatibility" sections that
// concerns the manifest text, one test per rule, named after the MUST it
// checks. Generation rules: manifest_generation_test.cpp; writing the
// manifest, paths and the ABI rule: manifest_serialize_test.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "manifest_examples.h"
#include "skippy/error.h"
#include "skippy/manifest.h"

namespace skippy::manifest_tests {

namespace {

using ::testing::HasSubstr;

// ================================================================= parse: the spec's examples

TEST(ManifestParse, SpecMinimalShapeParsesWhenEveryLayerIsPresent) {
  const PackageManifest m = parse(spec_example());
  EXPECT_EQ(m.schema_version, 1u);
  EXPECT_EQ(m.model_id, "Qwen/Qwen3-235B-A22B-GGUF:UD-Q4_K_XL");
  EXPECT_EQ(m.source_model.path, "/cache/Qwen3-235B-A22B-UD-Q4_K_XL.gguf");
  EXPECT_EQ(m.source_model.distribution_id, "UD-Q4_K_XL");
  ASSERT_EQ(m.source_model.files.size(), 1u);
  EXPECT_EQ(m.source_model.files[0].size_bytes, 123u);
  EXPECT_EQ(m.layer_count, 94u);
  EXPECT_EQ(m.activation_width, 8192u);
  EXPECT_EQ(m.shared.metadata.tensor_count, 0u);
  EXPECT_EQ(m.shared.output.path, "shared/output.gguf");
  ASSERT_EQ(m.layers.size(), 94u);
  for (uint32_t i = 0; i < 94; ++i) EXPECT_EQ(m.layers[i].layer_index, i);
  ASSERT_EQ(m.projectors.size(), 1u);
  EXPECT_EQ(m.projectors[0].kind, "mmproj");
  EXPECT_EQ(m.projectors[0].tensor_count, 128u);
  EXPECT_EQ(m.skippy_abi_version, "1.2.3");
  EXPECT_EQ(m.created_at_unix_secs, 1790000000);

  ASSERT_TRUE(m.generation);
  const GenerationPolicy& p = *m.generation->policy;
  EXPECT_EQ(p.profile, "glm-dsa-v1");
  EXPECT_EQ(p.decode, "compact-flash");
  EXPECT_EQ(p.short_prefill, "dense");
  EXPECT_EQ(p.long_prefill, "sparse-chunked");
  EXPECT_EQ(p.verify, "auto");
  EXPECT_EQ(p.indexshare, "required");
  EXPECT_EQ(p.experimental.size(), 3u);
  EXPECT_EQ(p.experimental.at("moe_weighted_down"), "evidence-gated");
  EXPECT_TRUE(unsupported_policy_values(p).empty());
  const GenerationThresholds& t = *m.generation->thresholds;
  EXPECT_EQ(t.short_prefill_max_tokens, 2048u);
  EXPECT_EQ(t.compact_flash_min_kv, 1u);
  EXPECT_EQ(t.dense_mask_max_bytes, 268435456u);
  const SpeculativeDecoding& sd = *m.generation->speculative_decoding;
  EXPECT_EQ(sd.default_strategy, "mtp");
  const Strategy& mtp = sd.strategies.at("mtp");
  EXPECT_EQ(mtp.type, "native-mtp");
  EXPECT_EQ(mtp.prediction_depth, 1u);
  EXPECT_EQ(mtp.layer_indices, std::vector<uint32_t>{47});
  ASSERT_TRUE(mtp.window_policy);
  EXPECT_EQ(mtp.window_policy->default_mode, "fixed");
  EXPECT_EQ(mtp.window_policy->pipeline_depth, 1u);
  EXPECT_FALSE(unsupported_default_strategy(sd));
}

TEST(ManifestParse, SpecMinimalShapeAsPrintedIsRefusedForItsMissingLayers) {
  // The printed example lists only layer 0 of layer_count 94.
  std::string text = replace_all(kSpecMinimalShape, "<64 hex chars>", hex('c'));
  text = replace_all(text, "<source commit>", "8f4c2d1");
  expect_refused_text(text, "layers: missing layer_index 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 and 83 more");
}

TEST(ManifestParse, SpecProposersExampleParses) {
  json j = spec_example();
  j["generation"]["speculative_decoding"] = json::parse(kSpecProposersExample);
  const SpeculativeDecoding sd = *parse(j).generation->speculative_decoding;
  EXPECT_EQ(sd.default_strategy, "mtp-cache");
  EXPECT_EQ(sd.proposers.at("mtp").type, "native-mtp");
  EXPECT_EQ(sd.proposers.at("cache").ngram_max, 4u);
  EXPECT_EQ(sd.proposers.at("cache").max_proposal_tokens, 10u);
  EXPECT_EQ(sd.proposers.at("cache").history_scope, "request");
  const Strategy& s = sd.strategies.at("mtp-cache");
  EXPECT_EQ(s.type, "composite");
  EXPECT_EQ(s.primary, "mtp");
  EXPECT_EQ(s.extender, "cache");
  EXPECT_EQ(s.extension_policy->max_tokens, 8u);
  EXPECT_FALSE(s.extension_policy->initial_tokens);
}

// ================================================================= parse: top-level MUSTs

TEST(ManifestParse, MinimalManifestParsesAndOptionalFieldsDefault) {
  const PackageManifest m = parse(minimal());
  EXPECT_FALSE(m.activation_width);
  EXPECT_FALSE(m.generation);
  EXPECT_TRUE(m.projectors.empty());  // "projectors is optional and defaults to an empty list"
  EXPECT_FALSE(m.created_at_unix_secs);
  EXPECT_TRUE(m.source_model.path.empty());
  EXPECT_TRUE(m.source_model.distribution_id.empty());
}

TEST(ManifestParse, UnknownSchemaVersionMustBeRefusedNamingTheSupportedOne) {
  for (const json& v : {json(2), json(0), json(100), json(-1), json(1.0), json("1"), json(true)}) {
    SCOPED_TRACE(v.dump());
    json j = minimal();
    j["schema_version"] = v;
    expect_refused(j, "schema_version: unsupported schema version");
    try {
      parse(j);
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("supports schema_version 1 only"));
    }
  }
  json j = minimal();
  j.erase("schema_version");
  expect_refused(j, "schema_version: missing required field");
  j["schema_version"] = nullptr;
  expect_refused(j, "schema_version: missing required field");
}

TEST(ManifestParse, UnknownSchemaVersionIsRefusedBeforeAnyOtherRule) {
  // A v2 manifest of a different shape gets the version message, not a
  // complaint about some field it no longer has.
  expect_refused(json{{"schema_version", 2}, {"format", "layer-package-v2"}},
                 "schema_version: unsupported schema version 2");
}

TEST(ManifestParse, FormatMustBeLayerPackage) {
  for (const json& v : {json("layer-package-v2"), json(""), json("LAYER-PACKAGE"), json(1)}) {
    SCOPED_TRACE(v.dump());
    json j = minimal();
    j["format"] = v;
    expect_refused(j, "format: ");
  }
  json j = minimal();
  j.erase("format");
  expect_refused(j, "format: missing required field");
}

TEST(ManifestParse, ModelIdMustBeANonEmptyModelCoordinate) {
  for (const char* good : {"org/repo", "org/repo:UD-Q4_K_XL", "Qwen/Qwen3-235B-A22B-GGUF:UD-Q4_K_XL"}) {
    json j = minimal();
    j["model_id"] = good;
    EXPECT_EQ(parse(j).model_id, good);
  }
  for (const char* bad : {"", "model", "/cache/model.gguf", "./model", "org/repo/sub", "org/model.gguf",
                          "org/repo:Q4.gguf", "org/re po", "org/repo:", "/repo", "org/", "../x"}) {
    SCOPED_TRACE(bad);
    json j = minimal();
    j["model_id"] = bad;
    expect_refused(j, "model_id: ");
  }
  json j = minimal();
  j.erase("model_id");
  expect_refused(j, "model_id: missing required field");
}

// The reference runtime trims before its non-empty check: "  " is empty.
TEST(ManifestParse, IdentityFieldsMustNotBeWhitespaceOnly) {
  for (const char* key : {"repo", "revision", "primary_file", "canonical_ref", "path", "distribution_id"}) {
    for (const char* blank : {" ", "   ", "\u00a0", " \u2003 \u3000"}) {
      SCOPED_TRACE(std::string(key) + " = \"" + blank + "\"");
      json j = minimal();
      j["source_model"][key] = blank;
      if (std::string(key) == "primary_file") j["source_model"]["files"][0]["path"] = blank;
      expect_refused(j, std::string("source_model.") + key + ": must not be empty or whitespace-only");
    }
  }
  json j = minimal();
  j["model_id"] = "  ";
  expect_refused(j, "model_id: must not be empty or whitespace-only");
  // Around a value, white space is kept as written (what the field allows).
  j = minimal();
  j["source_model"]["revision"] = " 0123abcd ";
  EXPECT_EQ(parse(j).source_model.revision, " 0123abcd ");
}

TEST(ManifestParse, SourceIdentityFieldsMustBeNonEmpty) {
  for (const char* key : {"sha256", "repo", "revision", "primary_file", "canonical_ref", "files"}) {
    SCOPED_TRACE(key);
    json j = minimal();
    j["source_model"].erase(key);
    expect_refused(j, std::string("source_model.") + key + ": missing required field");
  }
  for (const char* key : {"repo", "revision", "canonical_ref", "path", "distribution_id"}) {
    SCOPED_TRACE(key);
    json j = minimal();
    j["source_model"][key] = "";
    expect_refused(j, std::string("source_model.") + key + ": must be a non-empty string");
  }
  json j = minimal();
  j["source_model"]["sha256"] = "abc";
  expect_refused(j, "source_model.sha256: not a 64-character hex digest");
  j = minimal();
  j["source_model"]["files"] = json::array();
  expect_refused(j, "source_model.files: must list at least one source file");
  j = minimal();
  j["source_model"]["primary_file"] = "other.gguf";
  expect_refused(j, "source_model.primary_file: \"other.gguf\" is not one of source_model.files");
  j = minimal();
  j["source_model"]["files"].push_back(j["source_model"]["files"][0]);
  expect_refused(j, "source_model.files[1].path: \"model-Q4_K_M.gguf\" is listed twice");
  j = minimal();
  j["source_model"]["files"][0]["size_bytes"] = 0;
  expect_refused(j, "source_model.files[0].size_bytes: must be greater than zero");
  j = minimal();
  j["source_model"]["files"][0]["path"] = "../model.gguf";
  expect_refused(j, "source_model.files[0].path: unsafe path");
  j = minimal();
  j["source_model"] = "org/model";
  expect_refused(j, "source_model: must be a JSON object");
}

TEST(ManifestParse, SharedMustIncludeMetadataEmbeddingsAndOutput) {
  for (const char* key : {"metadata", "embeddings", "output"}) {
    SCOPED_TRACE(key);
    json j = minimal();
    j["shared"].erase(key);
    expect_refused(j, std::string("shared.") + key + ": missing required field");
  }
  json j = minimal();
  j.erase("shared");
  expect_refused(j, "shared: missing required field");
}

TEST(ManifestParse, LayerCountMustBePositive) {
  json j = minimal();
  j["layer_count"] = 0;
  j["layers"] = json::array();
  expect_refused(j, "layer_count: must be at least 1");
}

TEST(ManifestParse, LayersMustHaveExactlyOneEntryPerIndexReportingMissing) {
  json j = minimal(5);
  j["layers"].erase(3);
  j["layers"].erase(1);
  expect_refused(j, "layers: missing layer_index 1, 3 (layer_count 5: exactly one entry per index 0..4");
}

TEST(ManifestParse, LayersMustNotDuplicateAnIndexReportingBoth) {
  json j = minimal(4);
  j["layers"][2]["layer_index"] = 1;
  j["layers"][2]["path"] = "layers/dup.gguf";
  expect_refused(j, "layers: duplicate layer_index 1 (layers[1], layers[2]); missing layer_index 2");
}

TEST(ManifestParse, LayerIndexMustBeBelowLayerCount) {
  json j = minimal(3);
  j["layers"][2]["layer_index"] = 3;
  expect_refused(j, "layers[2].layer_index: 3 is out of range (layer_count 3)");
}

TEST(ManifestParse, HugeLayerCountIsReportedWithoutWalkingEveryIndex) {
  json j = minimal(3);
  j["layer_count"] = 4294967295u;
  expect_refused(j, "layers: missing layer_index 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 and 4294967282 more");
}

TEST(ManifestParse, LayersAreReturnedInIndexOrder) {
  json j = minimal(4);
  std::reverse(j["layers"].begin(), j["layers"].end());
  const PackageManifest m = parse(j);
  for (uint32_t i = 0; i < 4; ++i) EXPECT_EQ(m.layers[i].layer_index, i);
  EXPECT_EQ(m.layers[3].path, "layers/layer-00003.gguf");
}

TEST(ManifestParse, ArtifactBytesMustBeGreaterThanZero) {
  json j = minimal();
  j["layers"][1]["artifact_bytes"] = 0;
  expect_refused(j, "layers[1].artifact_bytes: must be greater than zero");
  j = minimal();
  j["shared"]["metadata"]["artifact_bytes"] = 0;
  expect_refused(j, "shared.metadata.artifact_bytes: must be greater than zero");
}

TEST(ManifestParse, TensorBytesMustBeZeroExactlyWhenTensorCountIsZero) {
  json j = minimal();
  j["shared"]["metadata"]["tensor_bytes"] = 5;
  expect_refused(j, "shared.metadata.tensor_bytes: must be zero when tensor_count is zero");
  j = minimal();
  j["layers"][0]["tensor_bytes"] = 0;
  expect_refused(j, "layers[0].tensor_bytes: must be greater than zero when tensor_count is 9");
  j = minimal();
  j["layers"][0]["tensor_bytes"] = 1u << 30;
  expect_refused(j, "layers[0].tensor_bytes: 1073741824 exceeds artifact_bytes");
}

TEST(ManifestParse, ArtifactFieldsAreAllRequired) {
  for (const char* key : {"path", "tensor_count", "tensor_bytes", "artifact_bytes", "sha256"}) {
    SCOPED_TRACE(key);
    json j = minimal();
    j["layers"][2].erase(key);
    expect_refused(j, std::string("layers[2].") + key + ": missing required field");
  }
  json j = minimal();
  j["layers"][2].erase("layer_index");
  expect_refused(j, "layers[2].layer_index: missing required field");
  j = minimal();
  j["layers"][2] = "layers/layer-00002.gguf";
  expect_refused(j, "layers[2]: must be a JSON object");
}

TEST(ManifestParse, Sha256MustBe64HexDigitsEitherCase) {
  json j = minimal();
  j["layers"][0]["sha256"] = std::string(32, 'A') + std::string(32, 'f');
  EXPECT_EQ(parse(j).layers[0].sha256, std::string(32, 'a') + std::string(32, 'f'));  // one spelling inside
  for (const json& bad : {json(hex('a').substr(1)), json(hex('a') + "0"), json(std::string(63, 'a') + "g"),
                          json(""), json(42)}) {
    SCOPED_TRACE(bad.dump());
    j = minimal();
    j["layers"][2]["sha256"] = bad;
    expect_refused(j, "layers[2].sha256: ");
  }
  j = minimal();
  j["layers"][2]["sha256"] = "xyz";
  expect_refused(j, "layers[2].sha256: not a 64-character hex digest");
}

TEST(ManifestParse, ArtifactPathsMustBeSafeRelativePaths) {
  const char* hostile[] = {"",          "/etc/passwd",     "../outside.gguf", "layers/../../x.gguf",
                           "layers/..", "..",              "a\\b.gguf",       "C:\\x.gguf",
                           "c:x.gguf",  "layers//x.gguf",  "./x.gguf",        "layers/./x.gguf",
                           "layers/",   "layers/x\n.gguf"};
  for (const char* bad : hostile) {
    SCOPED_TRACE(bad);
    json j = minimal();
    j["layers"][1]["path"] = bad;
    expect_refused(j, "layers[1].path: unsafe path");
    j = minimal();
    j["shared"]["output"]["path"] = bad;
    expect_refused(j, "shared.output.path: unsafe path");
  }
  json j = minimal();
  j["layers"][1]["path"] = std::string("layers/x\0.gguf", 14);
  expect_refused(j, "layers[1].path: unsafe path");
  j = minimal();
  j["layers"][1]["path"] = 7;
  expect_refused(j, "layers[1].path: must be a string, got 7");
}

TEST(ManifestParse, ArtifactPathsMustBeDistinctAndNotTheManifest) {
  json j = minimal();
  j["layers"][2]["path"] = "layers/layer-00000.gguf";
  expect_refused(j, "layers[layer_index 2].path: \"layers/layer-00000.gguf\" is already used by layers[layer_index 0]");
  j = minimal();
  j["shared"]["output"]["path"] = "shared/metadata.gguf";
  expect_refused(j, "shared.output.path: \"shared/metadata.gguf\" is already used by shared.metadata");
  j = minimal();
  j["shared"]["metadata"]["path"] = "model-package.json";
  expect_refused(j, "shared.metadata.path: an artifact cannot be the manifest itself");
}

TEST(ManifestParse, ProjectorsAreOptionalAndMmprojIsAccepted) {
  json j = minimal();
  j["projectors"] = json::array();
  EXPECT_TRUE(parse(j).projectors.empty());
  json p = artifact("projectors/mmproj-model-f16.gguf", 128);
  p["kind"] = "mmproj";
  j["projectors"] = {p, p};
  j["projectors"][1]["path"] = "projectors/mmproj-2.gguf";
  const PackageManifest m = parse(j);
  ASSERT_EQ(m.projectors.size(), 2u);
  EXPECT_EQ(m.projectors[1].path, "projectors/mmproj-2.gguf");
}

TEST(ManifestParse, UnknownProjectorKindIsKeptForTheConsumerToDecide) {
  json p = artifact("projectors/audio.gguf", 3);
  p["kind"] = "audio-encoder";
  json j = minimal();
  j["projectors"] = json::array({p});
  const auto m = parse(j);
  ASSERT_EQ(m.projectors.size(), 1u);
  EXPECT_EQ(m.projectors[0].kind, "audio-encoder");
  EXPECT_FALSE(is_known_projector_kind("audio-encoder"));
  EXPECT_TRUE(is_known_projector_kind("mmproj"));
  j["projectors"][0]["kind"] = "";
  expect_refused(j, "projectors[0].kind: must be a non-empty projector kind");
  j["projectors"][0].erase("kind");
  expect_refused(j, "projectors[0].kind: missing required field");
}

TEST(ManifestParse, ProjectorsNeedSafePathsPositiveBytesAndValidDigests) {
  json p = artifact("projectors/mmproj.gguf", 3);
  p["kind"] = "mmproj";
  json j = minimal();
  j["projectors"] = json::array({p});
  j["projectors"][0]["path"] = "/abs/mmproj.gguf";
  expect_refused(j, "projectors[0].path: unsafe path \"/abs/mmproj.gguf\": is absolute");
  j["projectors"] = json::array({p});
  j["projectors"][0]["artifact_bytes"] = 0;
  expect_refused(j, "projectors[0].artifact_bytes: must be greater than zero");
  j["projectors"] = json::array({p});
  j["projectors"][0]["sha256"] = "zz";
  expect_refused(j, "projectors[0].sha256: not a 64-character hex digest");
  j["projectors"] = p;
  expect_refused(j, "projectors: must be a JSON array");
}

TEST(ManifestParse, NumbersMustBeNonNegativeIntegersInRange) {
  const std::pair<json, const char*> cases[] = {
      {json(1.5), "must be a non-negative integer, got 1.5"},
      {json(-1), "must be a non-negative integer, got -1"},
      {json("3"), "must be a non-negative integer, got the string \"3\""},
      {json(true), "must be a non-negative integer, got true"},
      {json(3.0), "must be a non-negative integer, got 3.0"},
      {json(nullptr), "missing required field"},
  };
  for (const auto& [value, problem] : cases) {
    SCOPED_TRACE(value.dump());
    json j = minimal();
    j["layers"][1]["tensor_count"] = value;
    expect_refused(j, std::string("layers[1].tensor_count: ") + problem);
  }
  json j = minimal();
  j["layer_count"] = uint64_t{1} << 32;
  expect_refused(j, "layer_count: must be at most 4294967295");
  j = minimal();
  j["layers"][0]["layer_index"] = -1;
  expect_refused(j, "layers[0].layer_index: must be a non-negative integer, got -1");
  // Exponent notation and values past 2^64-1 are floats to the parser.
  std::string text = minimal().dump();
  text.replace(text.find("\"layer_count\":3"), 15, "\"layer_count\":3e0");
  expect_refused_text(text, "layer_count: must be a non-negative integer");
  text = minimal().dump();
  text.replace(text.find("\"layer_count\":3"), 15, "\"layer_count\":18446744073709551616");
  expect_refused_text(text, "layer_count: must be a non-negative integer");
  j = minimal();
  j["created_at_unix_secs"] = -5;
  expect_refused(j, "created_at_unix_secs: must be a non-negative integer");
  j["created_at_unix_secs"] = uint64_t{1} << 63;
  expect_refused(j, "created_at_unix_secs: must be at most 9223372036854775807");
  j = minimal();
  j["activation_width"] = 0;
  expect_refused(j, "activation_width: must be greater than zero when present");
  j["activation_width"] = "8192";
  expect_refused(j, "activation_width: must be a non-negative integer");
}

TEST(ManifestParse, LargestValuesInRangeAreAccepted) {
  json j = minimal();
  j["layers"][0]["artifact_bytes"] = uint64_t{1} << 63;
  j["created_at_unix_secs"] = INT64_MAX;
  const PackageManifest m = parse(j);
  EXPECT_EQ(m.layers[0].artifact_bytes, uint64_t{1} << 63);
  EXPECT_EQ(m.created_at_unix_secs, INT64_MAX);
  // One artifact of 2^64-1 beside others: the package's total would wrap (#29).
  j["layers"][0]["artifact_bytes"] = UINT64_MAX;
  expect_refused(j, "artifact_bytes: the artifacts' declared sizes add up past 2^64");
}

TEST(ManifestParse, SkippyAbiVersionMustBeMajorMinorPatch) {
  for (const char* bad : {"", "1", "1.2", "1.2.3.4", "v1.2.3", "1.02.3", "1.2.3-rc1", "1..3", "1.2.",
                          " 1.2.3", "4294967296.0.0"}) {
    SCOPED_TRACE(bad);
    json j = minimal();
    j["skippy_abi_version"] = bad;
    expect_refused(j, "skippy_abi_version: ");
  }
  json j = minimal();
  j["skippy_abi_version"] = 100;
  expect_refused(j, "skippy_abi_version: must be a string, got 100");
  j.erase("skippy_abi_version");
  expect_refused(j, "skippy_abi_version: missing required field");
  j["skippy_abi_version"] = "9.9.9";  // well-formed: compatibility is the consumer's check
  EXPECT_EQ(parse(j).skippy_abi_version, "9.9.9");
}

TEST(ManifestParse, UnknownAdditiveFieldsAreIgnored) {
  json j = minimal();
  j["signature"] = {{"alg", "ed25519"}};
  j["source_model"]["license"] = "apache-2.0";
  j["shared"]["tokenizer"] = artifact("shared/tokenizer.gguf", 0);
  j["layers"][0]["role"] = "dense";
  j["layers"][1]["checksum_algorithm"] = 3;
  EXPECT_EQ(parse(j), parse(minimal()));
}

TEST(ManifestParse, NullOptionalFieldsCountAsAbsent) {
  json j = minimal();
  j["activation_width"] = nullptr;
  j["generation"] = nullptr;
  j["projectors"] = nullptr;
  j["created_at_unix_secs"] = nullptr;
  j["source_model"]["distribution_id"] = nullptr;
  EXPECT_EQ(parse(j), parse(minimal()));
}

TEST(ManifestParse, InvalidJsonIsRefusedWithTheParserPosition) {
  const std::string good = minimal().dump();
  expect_refused_text(good.substr(0, good.size() / 2), "not valid UTF-8 JSON: parse error at line 1, column");
  expect_refused_text("{\"schema_version\": 1,}", "not valid UTF-8 JSON: parse error at line 1, column 22");
  expect_refused_text("", "not valid UTF-8 JSON");
  expect_refused_text("{} {}", "not valid UTF-8 JSON");
  expect_refused_text("{\"a\": 1} // comment", "not valid UTF-8 JSON");
  // A number no JSON number type holds (found by fuzz/package_inputs_fuzz).
  expect_refused_text("{\"schema_version\": 88e5588030}", "not valid UTF-8 JSON: number overflow");
  // Not UTF-8: a Latin-1 byte inside a string, and a lone continuation byte.
  std::string latin1 = good;
  latin1.replace(latin1.find("org/model:Q4_K_M"), 3, "\xE9rg");
  expect_refused_text(latin1, "not valid UTF-8 JSON: parse error at line 1");
  expect_refused_text("{\"model_id\": \"\x80\"}", "not valid UTF-8 JSON");
}

TEST(ManifestParse, TopLevelMustBeAnObject) {
  expect_refused_text("[1, 2]", "the manifest must be a JSON object, got an array");
  expect_refused_text("\"layer-package\"", "the manifest must be a JSON object");
}

TEST(ManifestParse, DuplicateKeysAreRefused) {
  std::string text = minimal().dump();
  text.insert(1, "\"schema_version\":2,");
  expect_refused_text(text, "duplicate key \"schema_version\" in one JSON object");
  text = minimal().dump();
  const size_t at = text.find("\"path\":\"layers/layer-00001.gguf\"");
  text.insert(at, "\"path\":\"../../evil.gguf\",");
  expect_refused_text(text, "duplicate key \"path\"");
}

TEST(ManifestParse, DeepNestingIsRefused) {
  json j = minimal();
  std::string text = j.dump();
  text.insert(text.size() - 1, ",\"deep\":" + std::string(100000, '[') + std::string(100000, ']'));
  expect_refused_text(text, "JSON nesting deeper than 64 levels");
  text = j.dump();
  text.insert(text.size() - 1, ",\"ok\":" + std::string(30, '[') + std::string(30, ']'));
  EXPECT_NO_THROW(parse_manifest(text, kOrigin));
}

TEST(ManifestParse, ManifestLargerThan16MiBIsRefused) {
  std::string text = minimal().dump();
  text.insert(text.size() - 1, ",\"pad\":\"" + std::string(kManifestMaxBytes, 'x') + "\"");
  expect_refused_text(text, "manifest is " + std::to_string(text.size()) +
                                " bytes; the limit is 16777216 (16 MiB)");
}

TEST(ManifestParse, MessagesNameTheOriginGiven) {
  json j = minimal();
  j["format"] = "zip";
  try {
    parse_manifest(j.dump(), "hf://org/repo@abc/model-package.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("hf://org/repo@abc/model-package.json: format: unsupported format \"zip\""));
  }
}

}  // namespace
}  // namespace skippy::manifest_tests
