// model-package.json schema version 1, writing it (stable, spec-ordered,
// never an invalid manifest), and the two rules it rests on: safe relative
// paths and the runtime ABI version.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "manifest_examples.h"
#include "skippy/error.h"
#include "skippy/manifest.h"

namespace skippy::manifest_tests {

namespace {

using ::testing::HasSubstr;

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
}  // namespace skippy::manifest_tests
