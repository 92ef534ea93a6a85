// model-package.json schema version 1: every rule of the spec's "Manifest
// Schema", "Generation Defaults", "Speculative Decoding", "Consumer
// Validation" and "Compatibility" sections that concerns the manifest text,
// one test per rule, named after the MUST it checks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "skippy/error.h"
#include "skippy/manifest.h"

namespace skippy {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

constexpr std::string_view kOrigin = "model-package.json";

std::string hex(char c) { return std::string(64, c); }

json artifact(const std::string& path, uint64_t tensors) {
  return {{"path", path},
          {"tensor_count", tensors},
          {"tensor_bytes", tensors * 100},
          {"artifact_bytes", 4096 + tensors * 100},
          {"sha256", hex('a')}};
}

json layer(uint32_t index) {
  char name[32];
  std::snprintf(name, sizeof name, "layers/layer-%05u.gguf", index);
  json l = artifact(name, 9);
  l["layer_index"] = index;
  return l;
}

json layers(uint32_t count) {
  json out = json::array();
  for (uint32_t i = 0; i < count; ++i) out.push_back(layer(i));
  return out;
}

// The smallest valid manifest: three layers, no optional fields.
json minimal(uint32_t layer_count = 3) {
  return {{"schema_version", 1},
          {"model_id", "org/model:Q4_K_M"},
          {"source_model",
           {{"sha256", hex('b')},
            {"repo", "org/model"},
            {"revision", "0123abcd"},
            {"primary_file", "model-Q4_K_M.gguf"},
            {"canonical_ref", "org/model:Q4_K_M"},
            {"files", {{{"path", "model-Q4_K_M.gguf"}, {"size_bytes", 123456}, {"sha256", hex('b')}}}}}},
          {"format", "layer-package"},
          {"layer_count", layer_count},
          {"shared",
           {{"metadata", artifact("shared/metadata.gguf", 0)},
            {"embeddings", artifact("shared/embeddings.gguf", 1)},
            {"output", artifact("shared/output.gguf", 2)}}},
          {"layers", layers(layer_count)},
          {"skippy_abi_version", "0.1.39"}};
}

// The strict reading: every rule refused (generation included).
PackageManifest parse(const json& j) { return parse_manifest(j.dump(), kOrigin, GenerationProblems::kRefuse); }

// The manifest must be refused with a message "model-package.json: <needle>...".
void expect_refused_text(const std::string& text, const std::string& needle) {
  try {
    parse_manifest(text, kOrigin, GenerationProblems::kRefuse);
    ADD_FAILURE() << "accepted; expected refusal containing: " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput) << e.what();
    EXPECT_THAT(e.what(), HasSubstr(std::string(kOrigin) + ": " + needle));
  }
}

void expect_refused(const json& j, const std::string& needle) { expect_refused_text(j.dump(), needle); }

void expect_serialize_refused(const PackageManifest& m, const std::string& needle) {
  try {
    serialize_manifest(m);
    ADD_FAILURE() << "serialized; expected refusal containing: " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput) << e.what();
    EXPECT_THAT(e.what(), HasSubstr(needle));
  }
}

// ---------------------------------------------------------------- the spec's own examples

// "Manifest Schema" minimal shape, verbatim but for the placeholders.
constexpr const char* kSpecMinimalShape = R"({
  "schema_version": 1,
  "model_id": "Qwen/Qwen3-235B-A22B-GGUF:UD-Q4_K_XL",
  "source_model": {
    "path": "/cache/Qwen3-235B-A22B-UD-Q4_K_XL.gguf",
    "sha256": "<64 hex chars>",
    "repo": "Qwen/Qwen3-235B-A22B-GGUF",
    "revision": "<source commit>",
    "primary_file": "Qwen3-235B-A22B-UD-Q4_K_XL.gguf",
    "canonical_ref": "Qwen/Qwen3-235B-A22B-GGUF:UD-Q4_K_XL",
    "distribution_id": "UD-Q4_K_XL",
    "files": [
      {
        "path": "Qwen3-235B-A22B-UD-Q4_K_XL.gguf",
        "size_bytes": 123,
        "sha256": "<64 hex chars>"
      }
    ]
  },
  "format": "layer-package",
  "layer_count": 94,
  "activation_width": 8192,
  "shared": {
    "metadata": {
      "path": "shared/metadata.gguf",
      "tensor_count": 0,
      "tensor_bytes": 0,
      "artifact_bytes": 123,
      "sha256": "<64 hex chars>"
    },
    "embeddings": {
      "path": "shared/embeddings.gguf",
      "tensor_count": 4,
      "tensor_bytes": 123,
      "artifact_bytes": 123,
      "sha256": "<64 hex chars>"
    },
    "output": {
      "path": "shared/output.gguf",
      "tensor_count": 4,
      "tensor_bytes": 123,
      "artifact_bytes": 123,
      "sha256": "<64 hex chars>"
    }
  },
  "generation": {
    "policy": {
      "profile": "glm-dsa-v1",
      "decode": "compact-flash",
      "short_prefill": "dense",
      "long_prefill": "sparse-chunked",
      "verify": "auto",
      "indexshare": "required",
      "experimental": {
        "selected_row_flash": "evidence-gated",
        "moe_weighted_down": "evidence-gated",
        "moe_merged_shared_gate_up": "evidence-gated"
      }
    },
    "thresholds": {
      "short_prefill_max_tokens": 2048,
      "compact_flash_min_kv": 1,
      "dense_mask_max_bytes": 268435456
    },
    "speculative_decoding": {
      "default": "mtp",
      "strategies": {
        "mtp": {
          "type": "native-mtp",
          "prediction_depth": 1,
          "layer_indices": [47],
          "window_policy": {
            "default": "fixed",
            "initial_window": 1,
            "min_window": 1,
            "max_window": 1,
            "pipeline_depth": 1
          }
        }
      }
    }
  },
  "layers": [
    {
      "layer_index": 0,
      "path": "layers/layer-00000.gguf",
      "tensor_count": 32,
      "tensor_bytes": 123,
      "artifact_bytes": 123,
      "sha256": "<64 hex chars>"
    }
  ],
  "projectors": [
    {
      "kind": "mmproj",
      "path": "projectors/mmproj-model-f16.gguf",
      "tensor_count": 128,
      "tensor_bytes": 123,
      "artifact_bytes": 123,
      "sha256": "<64 hex chars>"
    }
  ],
  "skippy_abi_version": "1.2.3",
  "created_at_unix_secs": 1790000000
})";

// "Speculative Decoding": proposers plus a composite strategy, verbatim.
constexpr const char* kSpecProposersExample = R"({
  "default": "mtp-cache",
  "proposers": {
    "mtp": {
      "type": "native-mtp",
      "prediction_depth": 1,
      "layer_indices": [47]
    },
    "cache": {
      "type": "ngram-cache",
      "ngram_min": 2,
      "ngram_max": 4,
      "max_proposal_tokens": 10,
      "history_scope": "request"
    }
  },
  "strategies": {
    "mtp-cache": {
      "type": "composite",
      "primary": "mtp",
      "extender": "cache",
      "extension_policy": {
        "max_tokens": 8
      }
    }
  }
})";

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size())) {
    s.replace(pos, from.size(), to);
  }
  return s;
}

// The spec's minimal shape with its placeholders filled and, because the
// example lists only layer 0 of 94, every layer present.
json spec_example() {
  std::string text = replace_all(kSpecMinimalShape, "<64 hex chars>", hex('c'));
  text = replace_all(text, "<source commit>", "8f4c2d1");
  json j = json::parse(text);
  j["layers"] = layers(94);
  return j;
}

// A manifest using every generation field the spec names, plus unknown
// fields at every generation level (which must survive a round trip).
json full_generation_example() {
  json j = spec_example();
  json sd = json::parse(kSpecProposersExample);
  sd["proposers"]["suffix"] = {{"type", "ngram-suffix"},
                               {"ngram_min", 3},
                               {"ngram_max", 64},
                               {"max_proposal_tokens", 16},
                               {"history_scope", "request"}};
  sd["proposers"]["cache"]["future_hint"] = true;
  sd["proposers"]["draft-src"] = {{"type", "draft-model"}, {"draft_model", "org/draft:Q8_0"}};
  sd["strategies"]["mtp-cache"]["extension_policy"] = {
      {"initial_tokens", 2}, {"max_tokens", 8}, {"tail_backoff_proposals", 4}, {"cooldown", 3}};
  sd["strategies"]["mtp"] = j["generation"]["speculative_decoding"]["strategies"]["mtp"];
  sd["strategies"]["mtp"]["note"] = "inline native-mtp shape from the spec";
  sd["strategies"]["mtp"]["window_policy"]["adaptive_gain"] = 0.5;
  sd["strategies"]["mtp-ref"] = {{"type", "native-mtp"}, {"proposer", "mtp"}};
  sd["strategies"]["ngram-cache"] = {{"type", "ngram-cache"}, {"proposer", "cache"}};
  sd["strategies"]["ngram-suffix"] = {{"type", "ngram-suffix"}, {"proposer", "suffix"}};
  sd["strategies"]["mtp-suffix"] = {{"type", "composite"},
                                    {"primary", "mtp"},
                                    {"extender", "suffix"},
                                    {"extension_policy", {{"initial_tokens", 4}, {"max_tokens", 32}}},
                                    {"window_policy", {{"pipeline_depth", 2}}}};
  sd["strategies"]["draft"] = {{"type", "draft-model"},
                               {"draft_model", "org/draft:Q8_0"},
                               {"window_policy", {{"default", "adaptive"}, {"min_window", 0}}}};
  sd["verify_window_cap"] = 8;
  j["generation"]["speculative_decoding"] = sd;
  j["generation"]["policy"]["prefill_chunking"] = "auto";
  j["generation"]["thresholds"]["topk_sideband_max_bytes"] = 6291456;
  j["generation"]["future_object"] = {{"a", json::array({1, 2.5, "x", nullptr})}};
  return j;
}

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

// ================================================================= generation

json with_speculation(const json& sd, uint32_t layer_count = 48) {
  json j = minimal(layer_count);
  j["generation"] = {{"speculative_decoding", sd}};
  return j;
}

json mtp_proposer() { return {{"type", "native-mtp"}, {"prediction_depth", 1}, {"layer_indices", {47}}}; }

json cache_proposer() {
  return {{"type", "ngram-cache"}, {"ngram_min", 2}, {"ngram_max", 4}, {"history_scope", "request"}};
}

json suffix_proposer() {
  return {{"type", "ngram-suffix"}, {"ngram_min", 3}, {"ngram_max", 64}, {"history_scope", "request"}};
}

const std::string kSd = "generation.speculative_decoding.";

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

// ================================================================= serialize

TEST(ManifestSerialize, FullManifestRoundTripsWithEveryGenerationField) {
  const PackageManifest m = parse(full_generation_example());
  const std::string text = serialize_manifest(m);
  const PackageManifest again = parse_manifest(text, kOrigin);
  EXPECT_EQ(again, m);
  EXPECT_EQ(serialize_manifest(again), text);  // stable

  // Unknown generation fields survived, at every level.
  const GenerationDefaults& g = *again.generation;
  EXPECT_EQ(g.extra.at("future_object").at("a")[1], 2.5);
  EXPECT_EQ(g.policy->extra.at("prefill_chunking"), "auto");
  EXPECT_EQ(g.thresholds->extra.at("topk_sideband_max_bytes"), 6291456);
  const SpeculativeDecoding& sd = *g.speculative_decoding;
  EXPECT_EQ(sd.extra.at("verify_window_cap"), 8);
  EXPECT_EQ(sd.proposers.at("cache").extra.at("future_hint"), true);
  EXPECT_EQ(sd.proposers.at("draft-src").extra.at("draft_model"), "org/draft:Q8_0");
  EXPECT_EQ(sd.strategies.at("mtp").extra.at("note"), "inline native-mtp shape from the spec");
  EXPECT_EQ(sd.strategies.at("mtp").window_policy->extra.at("adaptive_gain"), 0.5);
  EXPECT_EQ(sd.strategies.at("mtp-cache").extension_policy->extra.at("cooldown"), 3);
  EXPECT_EQ(sd.strategies.at("mtp-cache").extension_policy->initial_tokens, 2u);
  EXPECT_EQ(sd.strategies.at("mtp-cache").extension_policy->tail_backoff_proposals, 4u);
  EXPECT_EQ(sd.strategies.at("mtp-suffix").window_policy->pipeline_depth, 2u);
  EXPECT_EQ(sd.strategies.at("mtp-ref").proposer, "mtp");
  EXPECT_EQ(sd.strategies.at("draft").extra.at("window_policy").at("min_window"), 0);
  EXPECT_EQ(sd.proposers.at("suffix").ngram_max, 64u);

  // And the JSON carries the same values as the input, field for field.
  json expected = full_generation_example();
  EXPECT_EQ(json::parse(text), expected);
}

TEST(ManifestSerialize, OutputIsStablePrettyJsonInTheSpecsKeyOrder) {
  json j = minimal(1);
  j["activation_width"] = 4096;
  j["created_at_unix_secs"] = 1790000000;
  const std::string text = serialize_manifest(parse(j));
  const std::string a = hex('a');
  const std::string b = hex('b');
  const std::string expected = R"({
  "schema_version": 1,
  "model_id": "org/model:Q4_K_M",
  "source_model": {
    "sha256": ")" + b + R"(",
    "repo": "org/model",
    "revision": "0123abcd",
    "primary_file": "model-Q4_K_M.gguf",
    "canonical_ref": "org/model:Q4_K_M",
    "files": [
      {
        "path": "model-Q4_K_M.gguf",
        "size_bytes": 123456,
        "sha256": ")" + b + R"("
      }
    ]
  },
  "format": "layer-package",
  "layer_count": 1,
  "activation_width": 4096,
  "shared": {
    "metadata": {
      "path": "shared/metadata.gguf",
      "tensor_count": 0,
      "tensor_bytes": 0,
      "artifact_bytes": 4096,
      "sha256": ")" + a + R"("
    },
    "embeddings": {
      "path": "shared/embeddings.gguf",
      "tensor_count": 1,
      "tensor_bytes": 100,
      "artifact_bytes": 4196,
      "sha256": ")" + a + R"("
    },
    "output": {
      "path": "shared/output.gguf",
      "tensor_count": 2,
      "tensor_bytes": 200,
      "artifact_bytes": 4296,
      "sha256": ")" + a + R"("
    }
  },
  "layers": [
    {
      "layer_index": 0,
      "path": "layers/layer-00000.gguf",
      "tensor_count": 9,
      "tensor_bytes": 900,
      "artifact_bytes": 4996,
      "sha256": ")" + a + R"("
    }
  ],
  "skippy_abi_version": "0.1.39",
  "created_at_unix_secs": 1790000000
}
)";
  EXPECT_EQ(text, expected);
}

TEST(ManifestSerialize, SpecExampleKeepsTheSpecsKeyOrder) {
  // Serializing the spec's own example reproduces its text (but for the
  // layers the example elides).
  json j = spec_example();
  j["layers"] = layers(94);
  const std::string text = serialize_manifest(parse(j));
  std::string spec = replace_all(kSpecMinimalShape, "<64 hex chars>", hex('c'));
  spec = replace_all(spec, "<source commit>", "8f4c2d1");
  const size_t cut = spec.find("  \"layers\": [");
  EXPECT_EQ(text.substr(0, cut), spec.substr(0, cut));
  const size_t tail = spec.find("  \"projectors\": [");
  EXPECT_EQ(text.substr(text.find("  \"projectors\": [")), spec.substr(tail) + "\n");
}

TEST(ManifestSerialize, WriterManifestBuiltInCodeRoundTrips) {
  PackageManifest m;
  m.model_id = "org/repo:Q8_0";
  m.source_model.sha256 = hex('1');
  m.source_model.repo = "org/repo";
  m.source_model.revision = "main-sha";
  m.source_model.primary_file = "repo-Q8_0.gguf";
  m.source_model.canonical_ref = "org/repo:Q8_0";
  m.source_model.distribution_id = "Q8_0";
  m.source_model.files = {{"repo-Q8_0.gguf", 99, hex('1')}};
  m.layer_count = 2;
  m.shared.metadata = {"shared/metadata.gguf", 0, 0, 10, hex('2')};
  m.shared.embeddings = {"shared/embeddings.gguf", 1, 5, 10, hex('3')};
  m.shared.output = {"shared/output.gguf", 1, 5, 10, hex('4')};
  for (uint32_t i = 0; i < 2; ++i) {
    LayerEntry l;
    l.layer_index = i;
    l.path = "layers/layer-0000" + std::to_string(i) + ".gguf";
    l.tensor_count = 3;
    l.tensor_bytes = 7;
    l.artifact_bytes = 9;
    l.sha256 = hex('5');
    m.layers.push_back(l);
  }
  m.skippy_abi_version = format_abi_version(kRuntimeAbiVersion);
  m.created_at_unix_secs = 0;
  GenerationDefaults g;
  g.speculative_decoding.emplace();
  Strategy mtp;
  mtp.type = std::string(kNativeMtp);
  mtp.prediction_depth = 1;
  mtp.layer_indices = std::vector<uint32_t>{1};
  mtp.window_policy = WindowPolicy{"fixed", 1, 1, 1, 1, nlohmann::json::object()};
  g.speculative_decoding->strategies["mtp"] = mtp;
  g.speculative_decoding->default_strategy = "mtp";
  m.generation = g;
  EXPECT_EQ(parse_manifest(serialize_manifest(m), kOrigin), m);
}

TEST(ManifestSerialize, AbsentOptionalsAreOmitted) {
  const std::string text = serialize_manifest(parse(minimal()));
  for (const char* key : {"activation_width", "generation", "projectors", "created_at_unix_secs",
                          "distribution_id", "\"path\": \"/"}) {
    EXPECT_EQ(text.find(key), std::string::npos) << key;
  }
  json j = minimal();
  j["generation"] = {{"policy", {{"decode", "dense"}}}};
  const std::string g = serialize_manifest(parse(j));
  EXPECT_THAT(g, HasSubstr("\"generation\": {\n    \"policy\": {\n      \"decode\": \"dense\"\n    }\n  }"));
}

TEST(ManifestSerialize, LayersAreWrittenInIndexOrderWhateverTheInputOrder) {
  PackageManifest m = parse(minimal(3));
  std::swap(m.layers[0], m.layers[2]);
  const std::string text = serialize_manifest(m);
  EXPECT_LT(text.find("layer-00000"), text.find("layer-00001"));
  EXPECT_LT(text.find("layer-00001"), text.find("layer-00002"));
  EXPECT_EQ(text, serialize_manifest(parse(minimal(3))));
}

TEST(ManifestSerialize, InvalidManifestsAreNeverWritten) {
  PackageManifest m = parse(minimal());
  m.layers[1].sha256 = "nope";
  expect_serialize_refused(m, "model-package.json: layers[1].sha256: not a 64-character hex digest");
  m = parse(minimal());
  m.layers.pop_back();
  expect_serialize_refused(m, "model-package.json: layers: missing layer_index 2");
  m = parse(minimal());
  m.schema_version = 2;
  expect_serialize_refused(m, "schema_version: unsupported schema version 2");
  m = parse(minimal());
  m.shared.output.path = "../out.gguf";
  expect_serialize_refused(m, "shared.output.path: unsafe path");
  m = parse(minimal());
  m.created_at_unix_secs = -1;
  expect_serialize_refused(m, "created_at_unix_secs: must be a non-negative integer");
  m = parse(minimal());
  m.model_id = "org/m\xff";
  expect_serialize_refused(m, "model-package.json: a string field is not valid UTF-8");
}

TEST(ManifestSerialize, ExtraMustNotShadowKnownFields) {
  json j = minimal();
  j["generation"] = {{"policy", {{"decode", "dense"}}}};
  PackageManifest m = parse(j);
  m.generation->policy->extra["decode"] = "dense";
  expect_serialize_refused(m, "generation.policy.decode: is a known field; set the struct member, not extra");
  m = parse(j);
  m.generation->extra = json::array();
  expect_serialize_refused(m, "generation: extra (unknown fields) must be a JSON object");
}

TEST(ManifestSerialize, UnknownTypeStrategiesCarryTheirFieldsInExtra) {
  json sd = {{"strategies", {{"d", {{"type", "draft-model"}, {"draft_model", "org/d"}}}}}};
  PackageManifest m = parse(with_speculation(sd));
  EXPECT_EQ(parse_manifest(serialize_manifest(m), kOrigin), m);
  m.generation->speculative_decoding->strategies.at("d").window_policy = WindowPolicy{};
  expect_serialize_refused(m, "strategies.d: type \"draft-model\" is not one this runtime knows");
}

// ================================================================= paths and ABI

TEST(ManifestPath, SafeRelativePathsAreAccepted) {
  for (const char* ok : {"a", "shared/metadata.gguf", "layers/layer-00000.gguf", "projectors/mmproj-model-f16.gguf",
                         "a/b/c/d.gguf", "..a", "a..", "a/..b/c", ".hidden", "name with space.gguf",
                         "unicode/\xc3\xa9.gguf", "dir/ab:c"}) {
    EXPECT_TRUE(is_safe_relative_path(ok)) << ok;
    EXPECT_NO_THROW(check_safe_relative_path(ok, "p"));
  }
}

TEST(ManifestPath, UnsafePathsAreRejectedWithAReason) {
  const std::pair<std::string, const char*> cases[] = {
      {"", "empty"},
      {"/abs", "is absolute"},
      {"//server/share", "is absolute"},
      {"..", "escapes the package root"},
      {"../x", "escapes the package root"},
      {"a/../../x", "escapes the package root"},
      {"a/..", "escapes the package root"},
      {"a\\b", "contains a backslash"},
      {"..\\x", "contains a backslash"},
      {std::string("a\0b", 3), "contains a NUL byte"},
      {"a\tb", "contains a control character"},
      {"a\x7f", "contains a control character"},
      {"C:", "starts with a drive prefix"},
      {"C:x.gguf", "starts with a drive prefix"},
      {"z:/x", "starts with a drive prefix"},
      {"a:b", "starts with a drive prefix"},
      {".", "contains a \".\" component"},
      {"./a", "contains a \".\" component"},
      {"a/./b", "contains a \".\" component"},
      {"a//b", "contains an empty component"},
      {"a/", "ends with '/'"},
      {std::string(4097, 'a'), "longer than 4096 bytes"},
      {std::string(256, 'a'), "has a component longer than 255 bytes"},
  };
  for (const auto& [path, reason] : cases) {
    EXPECT_FALSE(is_safe_relative_path(path)) << path;
    try {
      check_safe_relative_path(path, "layers[0].path");
      ADD_FAILURE() << "accepted " << path;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
      EXPECT_THAT(e.what(), HasSubstr("layers[0].path: unsafe path "));
      EXPECT_THAT(e.what(), HasSubstr(reason));
    }
  }
}

TEST(ManifestAbi, ParsesOnlyMajorMinorPatch) {
  EXPECT_EQ(parse_abi_version("1.2.3"), (AbiVersion{1, 2, 3}));
  EXPECT_EQ(parse_abi_version("0.0.0"), (AbiVersion{0, 0, 0}));
  EXPECT_EQ(parse_abi_version("4294967295.10.0"), (AbiVersion{4294967295u, 10, 0}));
  for (const char* bad : {"", "1", "1.2", "1.2.3.4", "01.2.3", "1.2.3 ", "+1.2.3", "-1.2.3", "1.2.x",
                          "4294967296.0.0", "99999999999.0.0", "1.2.3-rc1", "..", "1..2"}) {
    EXPECT_FALSE(parse_abi_version(bad)) << bad;
  }
  EXPECT_EQ(format_abi_version({1, 0, 0}), "1.0.0");
  EXPECT_EQ(format_abi_version(kRuntimeAbiVersion), "0.1.39");
}

TEST(ManifestAbi, CompatibleMeansSameMajorAndMinorNoNewerThanRuntime) {
  const AbiVersion runtime{1, 2, 3};
  EXPECT_TRUE(abi_compatible({1, 2, 3}, runtime));
  EXPECT_TRUE(abi_compatible({1, 0, 9}, runtime));
  EXPECT_TRUE(abi_compatible({1, 2, 99}, runtime));  // patch does not matter
  EXPECT_FALSE(abi_compatible({1, 3, 0}, runtime));  // newer minor: refuse
  EXPECT_FALSE(abi_compatible({2, 0, 0}, runtime));  // other major: refuse
  EXPECT_FALSE(abi_compatible({0, 2, 3}, runtime));
  EXPECT_TRUE(abi_compatible(kRuntimeAbiVersion, kRuntimeAbiVersion));
}

}  // namespace
}  // namespace skippy
