// The schema 1 manifest tests' shared helpers (manifest_examples.h).
#include "manifest_examples.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "skippy/error.h"

namespace skippy::manifest_tests {

using ::testing::HasSubstr;

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
json minimal(uint32_t layer_count) {
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
const char* const kSpecMinimalShape = R"({
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
const char* const kSpecProposersExample = R"({
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

json with_speculation(const json& sd, uint32_t layer_count) {
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

}  // namespace skippy::manifest_tests
