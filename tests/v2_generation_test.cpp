// Schema 2 through speculative, policy and validate-package (#22): each a
// second reader into the consumer code schema 1 uses, so the same model
// gives the same answer under either schema.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "skippy/error.h"
#include "format/generation_v2.h"
#include "skippy/manifest_v2.h"
#include "util/sha256.h"
#include "test_util.h"

namespace skippy {
namespace v2gen_test {

namespace fs = std::filesystem;
using nlohmann::json;
using test::TempDir;

// Schema 1 and schema 2 packages of one fixture, written by write-package.
struct BothSchemas {
  TempDir dir;
  fs::path v1 = dir / "v1";
  fs::path v2 = dir / "v2";
  explicit BothSchemas(const std::string& fixture) {
    const auto src = test::data_path(fixture);
    const auto a = test::write_pkg(src, v1);
    EXPECT_EQ(a.exit_code, 0) << a.err;
    const auto b = test::write_pkg(src, v2, {"--schema", "2"});
    EXPECT_EQ(b.exit_code, 0) << b.err;
  }
};

json run_json(const std::vector<std::string>& args, int want_exit = 0) {
  const auto r = test::run_cli(args);
  EXPECT_EQ(r.exit_code, want_exit) << r.err;
  try {
    return json::parse(r.out);
  } catch (const std::exception&) {
    ADD_FAILURE() << "not JSON: " << r.out << "\n" << r.err;
    return json::object();
  }
}

// A speculative --json document without the fields that name the target.
json plan_of(const fs::path& pkg, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"speculative", pkg.string(), "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  json doc = run_json(args);
  // The plan, without which package it came from (each package names its own).
  doc.erase("target");
  doc.erase("schema_version");
  doc.erase("package_id");
  return doc;
}

V2Generation mtp_generation(uint32_t depth, uint32_t layer) {
  V2Strategy s;
  s.type = "native-mtp";
  s.prediction_depth = depth;
  s.layer_indices = {layer};
  s.window_policy = V2WindowPolicy{"fixed", 1, 1, 1, std::nullopt};
  V2SpeculativeDecoding sd;
  sd.default_strategy = "mtp";
  sd.strategies["mtp"] = s;
  V2Generation g;
  g.speculative_decoding = sd;
  return g;
}

void flip_byte(const fs::path& file, size_t at_from_end) {
  auto bytes = test::read_file(file);
  ASSERT_GT(bytes.size(), at_from_end);
  bytes[bytes.size() - 1 - at_from_end] ^= 0x01;
  test::write_file(file, bytes);
}

}  // namespace v2gen_test

using namespace v2gen_test;

TEST(V2GenConsumers, MtpPlanIsSchema1s) {
  BothSchemas p("glm4moe-mtp-tiny.gguf");
  // The equivalent schema 1 block (convert-package --to 1 maps it with the
  // same generation_v1_of): the same document, field by field.
  const fs::path back = p.dir / "v1-from-v2";
  const auto c = test::run_cli({"convert-package", p.v2.string(), "--to", "1", "--out-dir", back.string()});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{}, {"--strategy", "mtp"}, {"--strategy", "disabled"}, {"--strategy", "auto"}}) {
    SCOPED_TRACE(extra.empty() ? "" : extra[1]);
    const json from_v2 = plan_of(p.v2, extra);
    EXPECT_EQ(plan_of(back, extra), from_v2);
    // write-package's schema 1 package of the same model: the same plan. (Its
    // window_policy also states pipeline_depth 1, which the reference's schema
    // 2 writer leaves out: the depth is then the runtime's 1, not the package's.)
    const json v1 = plan_of(p.v1, extra);
    EXPECT_EQ(v1["plan"], from_v2["plan"]);
    EXPECT_EQ(v1["strategy"], from_v2["strategy"]);
    EXPECT_EQ(v1["refusal"], from_v2["refusal"]);
  }
  const json b = plan_of(p.v2);
  // The reference writer's one native-mtp strategy, at the last layer, as the default.
  EXPECT_EQ(b["plan"]["strategy"], "mtp") << b.dump();
  EXPECT_EQ(b["plan"]["origin"], "package default") << b.dump();
  EXPECT_EQ(b["plan"]["native_mtp"]["layer_indices"], json::array({3})) << b.dump();
  // Text output too.
  const auto t1 = test::run_cli({"speculative", p.v1.string()});
  const auto t2 = test::run_cli({"speculative", p.v2.string()});
  EXPECT_EQ(t2.exit_code, 0) << t2.err;
  EXPECT_EQ(t1.out, t2.out);
}

TEST(V2GenConsumers, WithoutMtpDisabledAsSchema1) {
  BothSchemas p("llama-tiny-q8_0.gguf");
  const json a = plan_of(p.v1);
  const json b = plan_of(p.v2);
  EXPECT_EQ(a, b);
  EXPECT_EQ(b["plan"]["strategy"], "disabled") << b.dump();
  // mtp asked of a model without it: the same refusal, the same rule.
  const auto r1 = test::run_cli({"speculative", p.v1.string(), "--strategy", "mtp", "--json"});
  const auto r2 = test::run_cli({"speculative", p.v2.string(), "--strategy", "mtp", "--json"});
  EXPECT_EQ(r1.exit_code, 1);
  EXPECT_EQ(r2.exit_code, 1);
  json e1 = json::parse(r1.out), e2 = json::parse(r2.out);
  for (json* e : {&e1, &e2}) {
    for (const char* k : {"target", "schema_version", "package_id"}) e->erase(k);
  }
  EXPECT_EQ(e1, e2);
  EXPECT_TRUE(e2.contains("error")) << e2.dump();
}

TEST(V2GenConsumers, MapsToSchema1TypesFieldByField) {
  const auto g = generation_v1_of(mtp_generation(1, 3), 4, "pkg/model-package.json");
  ASSERT_TRUE(g.speculative_decoding);
  const auto& sd = *g.speculative_decoding;
  EXPECT_EQ(sd.default_strategy, "mtp");
  const auto& s = sd.strategies.at("mtp");
  EXPECT_EQ(s.type, "native-mtp");
  EXPECT_EQ(s.prediction_depth, 1u);
  EXPECT_EQ(s.layer_indices, std::vector<uint32_t>{3});
  ASSERT_TRUE(s.window_policy);
  EXPECT_EQ(s.window_policy->default_mode, "fixed");
  EXPECT_EQ(s.window_policy->max_window, 1u);
  EXPECT_FALSE(s.window_policy->pipeline_depth);
  EXPECT_FALSE(g.policy);
  EXPECT_FALSE(g.thresholds);
}

TEST(V2GenConsumers, RefusesWhatHasNoSchema1Meaning) {
  // The reference's parser accepts depth 2; schema 1's rules do not.
  try {
    (void)generation_v1_of(mtp_generation(2, 3), 4, "pkg/model-package.json");
    FAIL() << "depth 2 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    const std::string m = e.what();
    EXPECT_NE(m.find("pkg/model-package.json"), std::string::npos) << m;
    EXPECT_NE(m.find("prediction_depth"), std::string::npos) << m;
    EXPECT_NE(m.find("does not map"), std::string::npos) << m;
  }
  // A history_scope schema 1 does not know.
  V2Proposer q;
  q.type = "ngram-cache";
  q.ngram_min = 1;
  q.ngram_max = 3;
  q.max_proposal_tokens = 4;
  q.history_scope = "global";
  V2Strategy s;
  s.type = "ngram-cache";
  s.proposer = "cache";
  V2Generation g;
  g.speculative_decoding = V2SpeculativeDecoding{"ngram", {{"cache", q}}, {{"ngram", s}}};
  try {
    (void)generation_v1_of(g, 4, "pkg/model-package.json");
    FAIL() << "history_scope global accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("history_scope"), std::string::npos) << e.what();
  }
  g.speculative_decoding->proposers["cache"].history_scope = "request";
  EXPECT_NO_THROW((void)generation_v1_of(g, 4, "pkg/model-package.json"));
}

TEST(V2GenConsumers, PolicyIsBuiltinWithANote) {
  BothSchemas p("glm4moe-mtp-tiny.gguf");
  const std::vector<std::string> shape = {"--phase", "decode", "--n-tokens", "1", "--n-kv", "1024", "--json"};
  auto args = [&](const fs::path& pkg) {
    std::vector<std::string> a = {"policy", pkg.string()};
    a.insert(a.end(), shape.begin(), shape.end());
    return a;
  };
  json a = run_json(args(p.v1));
  json b = run_json(args(p.v2));
  EXPECT_EQ(a["schema_version"], 1);
  EXPECT_EQ(b["schema_version"], 2);
  ASSERT_EQ(b["notes"].size(), 1u) << b.dump();
  EXPECT_NE(b["notes"][0].get<std::string>().find("schema 2 carries no generation.policy"), std::string::npos);
  // The schema 1 package has no policy block either: the same built-in decision, also noted.
  ASSERT_EQ(a["notes"].size(), 1u) << a.dump();
  EXPECT_NE(a["notes"][0].get<std::string>().find("declares no generation.policy"), std::string::npos);
  for (const char* k : {"package", "schema_version", "notes"}) {
    a.erase(k);
    b.erase(k);
  }
  EXPECT_EQ(a, b);
  // Text: the note on stderr.
  const auto t = test::run_cli({"policy", p.v2.string(), "--phase", "prefill", "--n-tokens", "4", "--n-kv", "4"});
  EXPECT_EQ(t.exit_code, 0) << t.err;
  EXPECT_NE(t.err.find("note: package schema 2 carries no generation.policy"), std::string::npos) << t.err;
  EXPECT_NE(t.out.find("selected path"), std::string::npos) << t.out;
}

TEST(V2GenConsumers, ValidatePassesAndWritesTheResult) {
  BothSchemas p("llama-tiny-q8_0.gguf");
  const auto src = test::data_path("llama-tiny-q8_0.gguf").string();
  const json a = run_json({"validate-package", src, p.v1.string(), "--json"});
  const json b = run_json({"validate-package", src, p.v2.string(), "--json", "--write-result"});
  EXPECT_EQ(b["valid"], true) << b.dump();
  EXPECT_EQ(b["schema_version"], 2);
  EXPECT_EQ(a["schema_version"], 1);
  EXPECT_TRUE(a["package_id"].is_null());
  const auto root = parse_package_root_v2(test::read_text(p.v2 / "model-package.json"), "root");
  EXPECT_EQ(b["package_id"], root.package_id);
  EXPECT_EQ(b["artifacts_checked"], root.artifacts.size());
  EXPECT_EQ(b["problems"].size(), 0u);
  EXPECT_GT(b["hashed_bytes"].get<uint64_t>(), fs::file_size(src));
  for (const char* k : {"valid", "problems", "warnings", "artifacts_checked", "tensors_checked", "hashed_bytes",
                        "schema_version", "package_id", "wrong_source", "validation_json"}) {
    EXPECT_TRUE(a.contains(k)) << k;
    EXPECT_TRUE(b.contains(k)) << k;
  }
  EXPECT_EQ(a["tensors_checked"], b["tensors_checked"]);
  // validation.json, as for schema 1: bound to the root's bytes, valid, the source hashed.
  const json v = json::parse(test::read_text(p.v2 / "validation.json"));
  EXPECT_EQ(v["result"], "valid");
  EXPECT_EQ(v["manifest_sha256"], sha256_hex(test::read_text(p.v2 / "model-package.json")));
  ASSERT_EQ(v["source_files"].size(), 1u) << v.dump();
  EXPECT_EQ(v["source_files"][0]["name"], "llama-tiny-q8_0.gguf");
  EXPECT_EQ(v["source_files"][0]["sha256"], root.source_model.sha256);
  // The pieces of the package still verify and inspect as before.
  EXPECT_EQ(test::run_cli({"verify", p.v2.string()}).exit_code, 0);
}

TEST(V2GenConsumers, ValidateFailsAFlippedPayloadByte) {
  BothSchemas p("llama-tiny-q8_0.gguf");
  const auto src = test::data_path("llama-tiny-q8_0.gguf").string();
  flip_byte(p.v2 / "layers" / "layer-00001.gguf", 7);
  const json b = run_json({"validate-package", src, p.v2.string(), "--json", "--write-result"}, 1);
  EXPECT_EQ(b["valid"], false);
  ASSERT_FALSE(b["problems"].empty());
  EXPECT_NE(b["problems"].dump().find("layer-00001"), std::string::npos) << b.dump();
  EXPECT_TRUE(b["wrong_source"].is_null());
  const json v = json::parse(test::read_text(p.v2 / "validation.json"));
  EXPECT_EQ(v["result"], "invalid");
}

TEST(V2GenConsumers, ValidateFailsAWrongSource) {
  BothSchemas p("llama-tiny-q8_0.gguf");
  const json b = run_json(
      {"validate-package", test::data_path("llama-tiny-f16.gguf").string(), p.v2.string(), "--json"}, 1);
  EXPECT_EQ(b["valid"], false);
  ASSERT_TRUE(b["wrong_source"].is_string()) << b.dump();
  EXPECT_NE(b["wrong_source"].get<std::string>().find("not the source this package was written from"),
            std::string::npos);
  EXPECT_EQ(b["problems"][0], b["wrong_source"]);  // first
}

TEST(V2GenConsumers, ValidateFailsATamperedRoot) {
  BothSchemas p("llama-tiny-q8_0.gguf");
  const auto src = test::data_path("llama-tiny-q8_0.gguf").string();
  const fs::path root_path = p.v2 / "model-package.json";
  const std::string original = test::read_text(root_path);
  auto put = [&](const json& j) {
    const std::string t = j.dump();
    test::write_file(root_path, std::vector<uint8_t>(t.begin(), t.end()));
  };
  // The model_id changed: package_id no longer commits to the root.
  json j = json::parse(original);
  j["model_id"] = "org/other:Q8_0";
  put(j);
  json b = run_json({"validate-package", src, p.v2.string(), "--json"}, 1);
  EXPECT_EQ(b["valid"], false);
  EXPECT_NE(b["problems"].dump().find("package_id"), std::string::npos) << b.dump();
  EXPECT_EQ(b["schema_version"], 2);
  // An unknown root field, named.
  j = json::parse(original);
  j["surprise"] = 1;
  put(j);
  b = run_json({"validate-package", src, p.v2.string(), "--json"}, 1);
  EXPECT_NE(b["problems"].dump().find("surprise"), std::string::npos) << b.dump();
  // The root intact, the carrier changed: named, and nothing is trusted from it.
  put(json::parse(original));
  EXPECT_EQ(run_json({"validate-package", src, p.v2.string(), "--json"})["valid"], true);
  flip_byte(p.v2 / "shared" / "metadata.gguf", 0);
  b = run_json({"validate-package", src, p.v2.string(), "--json"}, 1);
  EXPECT_NE(b["problems"].dump().find("metadata carrier"), std::string::npos) << b.dump();
}

}  // namespace skippy
