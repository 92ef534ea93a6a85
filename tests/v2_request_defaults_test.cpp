// generation.request_defaults of package schema 2 (the reference format
// crate's GenerationRequestDefaults): read, checked by the reference's rules,
// hashed into the package_id as serde_json writes it, shown, written by
// --generation-defaults and dropped (said) by convert-package --to 1.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "schema_v2_package.h"
#include "skippy/stage.h"
#include "skippy/error.h"
#include "skippy/manifest_v2.h"
#include "test_util.h"

namespace skippy {
namespace v2rd_test {

namespace fs = std::filesystem;
using nlohmann::ordered_json;
using test::run_cli;
using test::TempDir;

constexpr const char* kRev = "9213176726f574b556790deb65791e0c5aa438b6";

ordered_json profile(double temperature) {
  return ordered_json{
      {"temperature", temperature},
      {"top_p", 0.9},
      {"provenance",
       {{"source_repo", "meta-llama/Llama-3.2-1B-Instruct"},
        {"revision", kRev},
        {"file", "generation_config.json"},
        {"section", "Generation defaults"},
        {"url", std::string("https://huggingface.co/meta-llama/Llama-3.2-1B-Instruct/blob/") + kRev +
                    "/generation_config.json"}}}};
}

ordered_json defaults() {
  return ordered_json{{"selection", {{"default", "recommended"}}}, {"profiles", {{"recommended", profile(0.6)}}}};
}

// A reference-layout package whose root carries `rd` (package_id recomputed
// by the test-side writer's own route).
test::SchemaV2Package package_with(const fs::path& dir, const ordered_json& rd) {
  test::SchemaV2Options o;
  o.edit_root = [rd](ordered_json& root) {
    ordered_json out;
    for (auto& [k, v] : root.items()) {
      if (k == "native_abi_version") out["generation"] = {{"request_defaults", rd}};
      out[k] = v;
    }
    root = out;
  };
  o.recompute_id_after_edit = true;
  return test::write_schema_v2_package(test::model_fixtures().front(), dir, o);
}

std::string root_with(const ordered_json& rd) {
  TempDir t;
  const auto p = package_with(t.path(), rd);
  return test::read_text(t.path() / "model-package.json");
}

TEST(V2RequestDefaults, ReadWithThePackageIdOfTheSecondRoute) {
  TempDir t;
  auto rd = defaults();
  rd["selection"]["reasoning_enabled"] = "thinking";
  auto thinking = profile(1.0);
  thinking["top_k"] = 20;
  thinking["max_tokens"] = 32768;
  thinking["stop"] = {"</s>"};
  thinking["seed"] = 7;
  thinking["logit_bias"] = {{"13", -1.5}, {"2", 100.0}};
  thinking["dry"] = {{"multiplier", 0.8}, {"sequence_breakers", {"\n"}}};
  thinking["xtc"] = {{"probability", 0.5}, {"threshold", 0.1}};
  thinking["samplers"] = {"top_k", "top_p", "temperature"};
  thinking["sampler_sequence"] = "kpt";
  thinking["ignore_eos"] = false;
  thinking["reasoning"] = {{"enabled", "on"}, {"format", "deepseek-legacy"}, {"budget", "high"}};
  rd["profiles"]["thinking"] = thinking;
  const auto written = package_with(t.path(), rd);
  const auto opened = test::local_catalog(t.path());  // the package_id recomputed and compared
  const auto root = test::root_v2(opened);
  const auto& d = *root.generation->request_defaults;
  EXPECT_EQ(d.selection_default, "recommended");
  EXPECT_EQ(d.reasoning_enabled, "thinking");
  ASSERT_EQ(d.profiles.size(), 2u);
  const auto& p = d.profiles.at("thinking");
  EXPECT_EQ(p.temperature, 1.0);
  EXPECT_EQ(p.top_k, 20);
  EXPECT_EQ(p.max_tokens, 32768u);
  EXPECT_EQ(p.seed, 7u);
  EXPECT_EQ(p.logit_bias->at("2"), 100.0);
  EXPECT_EQ(p.reasoning->budget_level, "high");
  EXPECT_EQ(p.provenance.revision, kRev);
  // Serialized back in the reference's order: the same bytes, the same id.
  EXPECT_EQ(compute_package_id_v2(test::root_v2(opened)), written.root["package_id"].get<std::string>());
  // inspect shows them, both ways.
  const auto ins = run_cli({"inspect", t.path().string(), "--json"});
  ASSERT_EQ(ins.exit_code, 0) << ins.err;
  const auto j = nlohmann::json::parse(ins.out);
  EXPECT_EQ(j["request_defaults"]["profiles"]["recommended"]["temperature"], 0.6);
  EXPECT_EQ(j["request_defaults"]["selection"]["reasoning_enabled"], "thinking");
  const auto text = run_cli({"inspect", t.path().string()});
  EXPECT_NE(text.out.find("request defaults  recommended (default): temperature 0.6, top_p 0.9 "
                          "(meta-llama/Llama-3.2-1B-Instruct@9213176 generation_config.json)"),
            std::string::npos)
      << text.out;
  // speculative reports them beside (not inside) its plan.
  const auto sp = run_cli({"speculative", t.path().string(), "--json"});
  EXPECT_EQ(nlohmann::json::parse(sp.out)["request_defaults"]["selection"]["default"], "recommended") << sp.err;
}

TEST(V2RequestDefaults, FloatsAreHashedAsSerdeJsonWritesThem) {
  // serde_json writes f64 with ryu: 1 -> 1.0, 1e-5 -> 0.00001, 1e-6 -> 1e-6,
  // 1e16 -> 1e16, 1e15 -> 1000000000000000.0, 2.5e-7 -> 2.5e-7.
  auto rd = defaults();
  rd["profiles"]["recommended"]["temperature"] = 1;
  rd["profiles"]["recommended"]["top_p"] = 0.00001;
  rd["profiles"]["recommended"]["min_p"] = 0.000001;
  rd["profiles"]["recommended"]["dynatemp_range"] = 1e16;
  rd["profiles"]["recommended"]["dynatemp_exponent"] = 1e15;
  rd["profiles"]["recommended"]["mirostat_entropy"] = 2.5e-7;
  const auto root = parse_package_root_v2(root_with(defaults()), "root");
  PackageRootV2 r = root;
  r.generation->request_defaults = parse_request_defaults_v2(rd.dump(), "defaults.json");
  const std::string bytes = package_root_v2_json(r);
  for (const char* want : {"\"temperature\":1.0,", "\"top_p\":0.00001,", "\"min_p\":1e-6,", "\"dynatemp_range\":1e16,",
                           "\"dynatemp_exponent\":1000000000000000.0,", "\"mirostat_entropy\":2.5e-7,"}) {
    EXPECT_NE(bytes.find(want), std::string::npos) << want << " in " << bytes;
  }
}

struct Tamper {
  const char* what;
  std::function<void(ordered_json&)> edit;
  const char* needle;
};

TEST(V2RequestDefaults, TheReferencesRulesRefuseTamperedCopies) {
  const std::vector<Tamper> cases = {
      {"temperature above 100", [](ordered_json& d) { d["profiles"]["recommended"]["temperature"] = 101; },
       "profiles[recommended].temperature: value must be within 0..=100"},
      {"top_p above 1", [](ordered_json& d) { d["profiles"]["recommended"]["top_p"] = 1.5; }, "top_p: value must be within 0..=1"},
      {"negative top_k", [](ordered_json& d) { d["profiles"]["recommended"]["top_k"] = -1; }, "top_k must be greater"},
      {"a float top_k", [](ordered_json& d) { d["profiles"]["recommended"]["top_k"] = 1.5; }, "expected an integer"},
      {"seed past u32", [](ordered_json& d) { d["profiles"]["recommended"]["seed"] = 4294967296ull; }, "seed must fit"},
      {"a negative token id", [](ordered_json& d) { d["profiles"]["recommended"]["logit_bias"] = {{"-1", 1}}; },
       "logit_bias[-1]"},
      {"zero max_tokens", [](ordered_json& d) { d["profiles"]["recommended"]["max_tokens"] = 0; }, "max_tokens must be greater"},
      {"an unknown sampler", [](ordered_json& d) { d["profiles"]["recommended"]["samplers"] = {"beam"}; }, "unsupported sampler"},
      {"an unknown sequence code", [](ordered_json& d) { d["profiles"]["recommended"]["sampler_sequence"] = "kz"; },
       "unsupported code"},
      {"a long DRY breaker",
       [](ordered_json& d) { d["profiles"]["recommended"]["dry"] = {{"sequence_breakers", {"0123456789abcdef"}}}; },
       "shorter than 16 bytes"},
      {"an unknown budget level",
       [](ordered_json& d) { d["profiles"]["recommended"]["reasoning"] = {{"budget", "extreme"}}; }, "unknown variant"},
      {"an unknown field", [](ordered_json& d) { d["profiles"]["recommended"]["beam_width"] = 4; },
       "profiles[recommended].beam_width: unknown field"},
      {"no provenance", [](ordered_json& d) { d["profiles"]["recommended"].erase("provenance"); }, "provenance"},
      {"a branch as revision",
       [](ordered_json& d) { d["profiles"]["recommended"]["provenance"]["revision"] = "main"; },
       "immutable 40-character"},
      {"a url without the revision",
       [](ordered_json& d) {
         d["profiles"]["recommended"]["provenance"]["url"] = "https://huggingface.co/x/blob/main/generation_config.json";
       },
       "must contain the exact revision"},
      {"an ftp url",
       [](ordered_json& d) {
         d["profiles"]["recommended"]["provenance"]["url"] = std::string("ftp://h/") + kRev;
       },
       "http or https"},
      {"an undeclared selection", [](ordered_json& d) { d["selection"]["reasoning_disabled"] = "fast"; },
       "references undeclared generation profile"},
      {"no profiles", [](ordered_json& d) { d["profiles"] = ordered_json::object(); d["selection"]["default"] = "x"; },
       "at least one generation profile"},
      {"a profile name with a space",
       [](ordered_json& d) {
         d["profiles"]["a b"] = d["profiles"]["recommended"];
       },
       "unsupported characters"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    auto rd = defaults();
    c.edit(rd);
    try {
      (void)parse_package_root_v2(root_with(rd), "model-package.json");
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
      EXPECT_NE(std::string(e.what()).find(c.needle), std::string::npos) << e.what();
    }
    EXPECT_THROW(parse_request_defaults_v2(rd.dump(), "defaults.json"), Error);
  }
}

TEST(V2RequestDefaults, WrittenByGenerationDefaultsAndDroppedByConversionToSchemaOne) {
  TempDir t;
  test::write_file(t / "defaults.json", [] {
    const auto s = defaults().dump(2);
    return std::vector<uint8_t>(s.begin(), s.end());
  }());
  auto r = test::write_pkg(test::model_fixtures().front(), t / "pkg",
                           {"--schema", "2", "--generation-defaults", (t / "defaults.json").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto opened = test::local_catalog(t / "pkg");
  ASSERT_TRUE(test::root_v2(opened).generation);
  EXPECT_EQ(test::root_v2(opened).generation->request_defaults,
            parse_request_defaults_v2(defaults().dump(), "defaults.json"));
  r = run_cli({"convert-package", (t / "pkg").string(), "--to", "1", "--out-dir", (t / "v1").string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto dropped = nlohmann::json::parse(r.out)["dropped"].dump();
  EXPECT_NE(dropped.find("generation.request_defaults"), std::string::npos) << dropped;
  // A file that breaks the rules is refused before anything is written, naming the file.
  auto bad = defaults();
  bad["profiles"]["recommended"]["temperature"] = -1;
  const auto s = bad.dump();
  test::write_file(t / "bad.json", std::vector<uint8_t>(s.begin(), s.end()));
  r = test::write_pkg(test::model_fixtures().front(), t / "pkg2",
                      {"--schema", "2", "--generation-defaults", (t / "bad.json").string()});
  EXPECT_EQ(r.exit_code, 1);
  test::expect_json_error(r, "invalid_input", "bad.json: generation.request_defaults.profiles[recommended].temperature");
  EXPECT_FALSE(fs::exists(t / "pkg2" / "model-package.json"));
  r = test::write_pkg(test::model_fixtures().front(), t / "pkg3", {"--generation-defaults", (t / "defaults.json").string()});
  EXPECT_EQ(r.exit_code, 2);
}

}  // namespace v2rd_test
}  // namespace skippy
