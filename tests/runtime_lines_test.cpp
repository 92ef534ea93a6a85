// mesh-llm's runtime lines (skippy/abi.h): which admit a package
// and why not, per line, for packages written by our tool and by the
// test-side reference writer (schema_v2_package.h); --runtime-abi with a
// rule or a line; the writers' one warning; the split roster's warning.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>

#include <nlohmann/json.hpp>

#include "schema_v2_package.h"
#include "skippy/abi.h"
#include "skippy/error.h"
#include "skippy/package.h"
#include "test_util.h"

namespace skippy {
namespace runtime_lines_test {

namespace fs = std::filesystem;
using nlohmann::ordered_json;
using test::run_cli;
using test::TempDir;

// A reviewed request-defaults file, as write-package --generation-defaults reads it.
std::string request_defaults_text() {
  const std::string rev = "9213176726f574b556790deb65791e0c5aa438b6";
  const ordered_json d = {
      {"selection", {{"default", "recommended"}}},
      {"profiles",
       {{"recommended",
         {{"temperature", 0.6},
          {"top_p", 0.9},
          {"provenance",
           {{"source_repo", "meta-llama/Llama-3.2-1B-Instruct"},
            {"revision", rev},
            {"file", "generation_config.json"},
            {"section", "Generation defaults"},
            {"url", "https://huggingface.co/meta-llama/Llama-3.2-1B-Instruct/blob/" + rev + "/generation_config.json"}}}}}}}};
  return d.dump(2);
}

void write_text(const fs::path& p, const std::string& s) { test::write_file(p, std::vector<uint8_t>(s.begin(), s.end())); }

// inspect --json's runtime_lines of `dir`, by line id.
std::map<std::string, nlohmann::json> lines_of(const fs::path& dir) {
  const auto r = run_cli({"inspect", dir.string(), "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::map<std::string, nlohmann::json> out;
  const auto doc = nlohmann::json::parse(r.out);
  for (const auto& l : doc.at("runtime_lines")) out[l.at("line").get<std::string>()] = l;
  return out;
}

struct Expect {
  bool admits;
  std::vector<std::string> refusals;  // each a substring of one refusal, in order
};

struct Case {
  std::string name;
  std::function<fs::path(const fs::path&)> write;
  std::map<std::string, Expect> by_line;  // upstream, fork, release-0.76.1
};

void check_case(const Case& c, const fs::path& dir) {
  SCOPED_TRACE(c.name);
  const auto lines = lines_of(dir);
  ASSERT_EQ(lines.size(), 3u);
  for (const auto& [id, want] : c.by_line) {
    SCOPED_TRACE(id);
    ASSERT_TRUE(lines.count(id));
    const auto& got = lines.at(id);
    EXPECT_EQ(got.at("admits").get<bool>(), want.admits) << got.dump();
    const auto refusals = got.at("refusals").get<std::vector<std::string>>();
    ASSERT_EQ(refusals.size(), want.refusals.size()) << got.dump();
    for (size_t i = 0; i < refusals.size(); ++i) EXPECT_NE(refusals[i].find(want.refusals[i]), std::string::npos) << refusals[i];
  }
}

TEST(RuntimeLines, TheTableAsTheSourcesShowIt) {
  const auto* up = find_runtime_line("upstream");
  const auto* fork = find_runtime_line("fork");
  const auto* rel = find_runtime_line("release-0.76.1");
  ASSERT_TRUE(up && fork && rel);
  EXPECT_EQ(runtime_lines().size(), 3u);
  EXPECT_EQ(up->abi_rule, AbiRule::kExact);
  EXPECT_EQ(up->abi, "0.1.57");
  EXPECT_NE(up->abi_rule_source.find("822f7e91"), std::string_view::npos);
  EXPECT_TRUE(up->accepts_publisher_fields);
  EXPECT_FALSE(up->accepts_request_defaults);
  EXPECT_EQ(fork->abi_rule, AbiRule::kProvenance);
  EXPECT_EQ(fork->abi, "0.1.64");
  EXPECT_NE(fork->abi_rule_source.find("d39f791d"), std::string_view::npos);
  EXPECT_TRUE(fork->accepts_publisher_fields);
  EXPECT_TRUE(fork->accepts_request_defaults);
  EXPECT_EQ(rel->abi_rule, AbiRule::kExact);
  EXPECT_EQ(rel->abi, "0.1.41");
  EXPECT_FALSE(rel->abi_confirmed);
  EXPECT_FALSE(rel->accepts_publisher_fields);
  EXPECT_FALSE(rel->accepts_request_defaults);
  EXPECT_EQ(rel->roster, nullptr);
  // The rosters: each line's own recipe and list.
  ASSERT_TRUE(up->roster && fork->roster);
  EXPECT_EQ(up->roster->skippy_abi, up->abi);
  EXPECT_EQ(fork->roster->skippy_abi, fork->abi);
  EXPECT_EQ(up->roster->architectures.size(), 78u);
  EXPECT_EQ(fork->roster->architectures.size(), 84u);
  EXPECT_TRUE(std::is_sorted(up->roster->architectures.begin(), up->roster->architectures.end()));
  EXPECT_TRUE(std::is_sorted(fork->roster->architectures.begin(), fork->roster->architectures.end()));
  for (const char* a : {"llama", "glm4moe", "qwen3moe"}) {
    EXPECT_TRUE(up->roster->certifies(a)) << a;
    EXPECT_TRUE(fork->roster->certifies(a)) << a;
  }
  EXPECT_FALSE(up->roster->certifies("deepseek4"));  // the fork added it
  EXPECT_TRUE(fork->roster->certifies("deepseek4"));
  EXPECT_FALSE(fork->roster->certifies("orion"));
}

TEST(RuntimeLines, EachLineJudgesOurPackagesAndTheReferenceWritersByItsRules) {
  TempDir t;
  const auto model = test::model_fixtures().front();  // llama: on both rosters
  write_text(t / "defaults.json", request_defaults_text());
  auto ours = [&](std::vector<std::string> extra) {
    return [extra, model](const fs::path& out) {
      const auto r = test::write_pkg(model, out, extra);
      EXPECT_EQ(r.exit_code, 0) << r.err;
      return out;
    };
  };
  auto oracle = [&](bool with_request_defaults) {
    return [with_request_defaults, model](const fs::path& out) {
      test::SchemaV2Options o;  // native ABI 0.1.41, as the release's writer
      if (with_request_defaults) {
        o.edit_root = [](ordered_json& root) {
          ordered_json edited;
          for (auto& [k, v] : root.items()) {
            if (k == "native_abi_version") edited["generation"] = {{"request_defaults", ordered_json::parse(request_defaults_text())}};
            edited[k] = v;
          }
          root = edited;
        };
        o.recompute_id_after_edit = true;
      }
      (void)test::write_schema_v2_package(model, out, o);
      return out;
    };
  };
  const std::string abi = "refuses native ABI";
  const std::string rd = "refuses generation.request_defaults";
  const std::string schema = "refuses package schema 1";
  const std::vector<Case> cases = {
      {"ours, schema 2 at the default ABI 0.1.64",
       ours({"--schema", "2"}),
       {{"upstream", {false, {abi}}}, {"fork", {true, {}}}, {"release-0.76.1", {false, {abi}}}}},
      {"ours, schema 2 at upstream's ABI",
       ours({"--schema", "2", "--native-abi-version", "0.1.57"}),
       {{"upstream", {true, {}}}, {"fork", {true, {}}}, {"release-0.76.1", {false, {abi}}}}},
      {"ours, schema 2 with request defaults",
       ours({"--schema", "2", "--native-abi-version", "0.1.57", "--generation-defaults", (t / "defaults.json").string()}),
       {{"upstream", {false, {rd}}}, {"fork", {true, {}}}, {"release-0.76.1", {false, {abi, rd}}}}},
      {"ours, schema 1",
       ours({}),
       {{"upstream", {false, {schema}}}, {"fork", {false, {schema}}}, {"release-0.76.1", {false, {schema}}}}},
      {"the reference writer's, ABI 0.1.41",
       oracle(false),
       {{"upstream", {false, {abi}}}, {"fork", {true, {}}}, {"release-0.76.1", {true, {}}}}},
      {"the reference writer's with request defaults",
       oracle(true),
       {{"upstream", {false, {abi, rd}}}, {"fork", {true, {}}}, {"release-0.76.1", {false, {rd}}}}},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const fs::path dir = cases[i].write(t / ("pkg" + std::to_string(i)));
    check_case(cases[i], dir);
  }
  // The human report says the same, one row per line, with the rule.
  const auto text = run_cli({"inspect", (t / "pkg2").string()});
  EXPECT_NE(text.out.find("runtime line      upstream 822f7e91 (ABI 0.1.57, exact): refuses generation.request_defaults"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("runtime line      fork d39f791d (ABI 0.1.64, provenance): admits; splits llama"), std::string::npos)
      << text.out;
  // validate-package says it too.
  const auto v = run_cli({"validate-package", model.string(), (t / "pkg2").string(), "--json"});
  ASSERT_EQ(v.exit_code, 0) << v.err;
  const auto vj = nlohmann::json::parse(v.out);
  ASSERT_EQ(vj.at("runtime_lines").size(), 3u);
  EXPECT_FALSE(vj["runtime_lines"][0]["admits"].get<bool>());
  EXPECT_TRUE(vj["runtime_lines"][1]["admits"].get<bool>());
  const auto vh = run_cli({"validate-package", model.string(), (t / "pkg2").string()});
  EXPECT_NE(vh.out.find("runtime line: release 0.76.1 (ABI 0.1.41?, exact): refuses native ABI"), std::string::npos)
      << vh.out;
}

TEST(RuntimeLines, RuntimeAbiTakesTheRuleOrALine) {
  TempDir t;
  const auto model = test::model_fixtures().front();
  write_text(t / "defaults.json", request_defaults_text());
  auto r = test::write_pkg(model, t / "pkg", {"--schema", "2", "--native-abi-version", "0.1.57", "--generation-defaults",
                                              (t / "defaults.json").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto pkg = (t / "pkg").string();
  auto select = [&](const std::string& runtime) {
    return run_cli({"select", pkg, "--layers", "0..4", "--runtime-abi", runtime, "--json"});
  };
  // X.Y.Z and X.Y.Z:exact: the exact rule.
  EXPECT_EQ(select("0.1.57").exit_code, 0);
  EXPECT_EQ(select("0.1.64").exit_code, 1);
  EXPECT_EQ(select("0.1.64:exact").exit_code, 1);
  // X.Y.Z:provenance: never refused for the ABI.
  EXPECT_EQ(select("0.1.64:provenance").exit_code, 0) << select("0.1.64:provenance").err;
  EXPECT_EQ(select("0.1.41:provenance").exit_code, 0);
  // A line: its ABI, its rule and its root fields.
  EXPECT_EQ(select("fork").exit_code, 0) << select("fork").err;
  r = select("upstream");  // the ABI matches, request_defaults does not
  EXPECT_EQ(r.exit_code, 1);
  test::expect_json_error(r, "invalid_input", "upstream 822f7e91 refuses generation.request_defaults");
  r = select("release-0.76.1");
  EXPECT_EQ(r.exit_code, 1);
  test::expect_json_error(r, "invalid_input", "release 0.76.1 refuses native ABI \"0.1.57\"");
  // The environment variable takes the same forms.
  EXPECT_EQ(run_cli({"select", pkg, "--layers", "0..4", "--json"}, {"SKIPPY_RUNTIME_ABI=0.1.64:provenance"}).exit_code, 0);
  EXPECT_EQ(run_cli({"select", pkg, "--layers", "0..4", "--json"}, {"SKIPPY_RUNTIME_ABI=upstream"}).exit_code, 1);
  // Malformed: a usage error naming the forms.
  r = select("0.1.64:loose");
  EXPECT_EQ(r.exit_code, 2);
  test::expect_json_error(r, "usage", "exact or provenance");
  r = select("nightly");
  EXPECT_EQ(r.exit_code, 2);
  test::expect_json_error(r, "usage", "upstream, fork, release-0.76.1");
  // The library's rule.
  EXPECT_FALSE(runtime_abi_refusal(2, "0.1.41", {0, 1, 64}, AbiRule::kProvenance));
  EXPECT_TRUE(runtime_abi_refusal(2, "0.1.41", {0, 1, 64}, AbiRule::kExact));
  EXPECT_TRUE(runtime_abi_refusal(1, "0.2.0", {0, 1, 64}, AbiRule::kProvenance));  // schema 1 keeps its own rule
}

TEST(RuntimeLines, WritersWarnOnceWhenALineRefusesWhatTheyWrote) {
  TempDir t;
  const auto model = test::model_fixtures().front();
  write_text(t / "defaults.json", request_defaults_text());
  auto count = [](const std::string& s, const std::string& needle) {
    size_t n = 0;
    for (size_t p = s.find(needle); p != std::string::npos; p = s.find(needle, p + 1)) ++n;
    return n;
  };
  const std::string head = "warning: mesh-llm runtime lines refusing this package: ";
  // No field a line refuses: no warning, whatever the ABI.
  auto r = test::write_pkg(model, t / "plain", {"--schema", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count(r.err, head), 0u) << r.err;
  // request_defaults: one warning naming the refusing lines and the one that admits it.
  r = test::write_pkg(model, t / "rd", {"--schema", "2", "--generation-defaults", (t / "defaults.json").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count(r.err, head), 1u) << r.err;
  EXPECT_NE(r.err.find("upstream 822f7e91 (refuses native ABI \"0.1.64\""), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("refuses generation.request_defaults"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("admitted by fork d39f791d"), std::string::npos) << r.err;
  // convert-package: to schema 2 with request defaults, and to schema 1 (no line splits schema 1).
  r = test::write_pkg(model, t / "v1", {});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_cli({"convert-package", (t / "v1").string(), "--to", "2", "--out-dir", (t / "v2").string(), "--source",
               model.string(), "--generation-defaults", (t / "defaults.json").string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count(r.err, head), 1u) << r.err;
  EXPECT_NE(r.err.find("refuses generation.request_defaults"), std::string::npos) << r.err;
  r = run_cli({"convert-package", (t / "plain").string(), "--to", "1", "--out-dir", (t / "back").string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(count(r.err, head), 1u) << r.err;
  EXPECT_NE(r.err.find("refuses package schema 1"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("admitted by none of them"), std::string::npos) << r.err;
}

// A copy of the llama fixture as another architecture (general.architecture
// and every "llama." key renamed): one no roster lists.
fs::path as_architecture(const fs::path& src, const fs::path& dir, const std::string& arch) {
  EXPECT_EQ(arch.size(), 5u);  // same length: offsets stay
  auto bytes = test::read_file(src);
  auto replace_all = [&](const std::string& from, const std::string& to) {
    size_t n = 0;
    for (auto it = bytes.begin();;) {
      it = std::search(it, bytes.end(), from.begin(), from.end());
      if (it == bytes.end()) break;
      std::copy(to.begin(), to.end(), it);
      ++n;
      it += static_cast<std::ptrdiff_t>(to.size());
    }
    return n;
  };
  std::string key = "general.architecture";
  std::string from = key, to = key;
  const uint32_t type = 8;
  const uint64_t len = 5;
  from.append(reinterpret_cast<const char*>(&type), 4).append(reinterpret_cast<const char*>(&len), 8).append("llama");
  to.append(reinterpret_cast<const char*>(&type), 4).append(reinterpret_cast<const char*>(&len), 8).append(arch);
  EXPECT_EQ(replace_all(from, to), 1u);
  EXPECT_GT(replace_all("llama.", arch + "."), 3u);
  fs::create_directories(dir);
  const auto out = dir / (arch + "-tiny.gguf");
  test::write_file(out, bytes);
  return out;
}

TEST(RuntimeLines, TheRosterWarnsWhereNoCurrentNodeSplitsTheArchitecture) {
  // The library's word.
  EXPECT_FALSE(split_roster_warning("llama"));
  EXPECT_FALSE(split_roster_warning(""));
  const auto orion = split_roster_warning("orion");
  ASSERT_TRUE(orion);
  EXPECT_NE(orion->find("upstream 822f7e91"), std::string::npos) << *orion;
  EXPECT_NE(orion->find("fork d39f791d"), std::string::npos) << *orion;
  const auto deepseek4 = split_roster_warning("deepseek4");
  ASSERT_TRUE(deepseek4);
  EXPECT_NE(deepseek4->find("upstream 822f7e91"), std::string::npos);
  EXPECT_EQ(deepseek4->find("fork d39f791d"), std::string::npos);
  // write-package, plan and inspect on a model of an architecture no roster lists.
  TempDir t;
  const auto model = as_architecture(test::model_fixtures().front(), t / "src", "orion");
  const std::string warning = "warning: architecture \"orion\" is not on the split-certification roster of";
  for (const auto& schema : {"1", "2"}) {
    SCOPED_TRACE(schema);
    const auto dir = t / (std::string("pkg") + schema);
    auto r = test::write_pkg(model, dir, {"--schema", schema});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find(warning), std::string::npos) << r.err;
    r = run_cli({"plan", dir.string(), "--stages", "2", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find(warning), std::string::npos) << r.err;
    r = run_cli({"inspect", dir.string(), "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["runtime_lines"][0]["splits"], false);
    EXPECT_EQ(j["runtime_lines"][1]["splits"], false);
    EXPECT_TRUE(j["runtime_lines"][2]["splits"].is_null());  // the release: no roster known
    r = run_cli({"inspect", dir.string()});
    EXPECT_NE(r.out.find("does not split orion (not on its roster)"), std::string::npos) << r.out;
  }
  // The fixture's own architecture: no warning.
  const auto r = test::write_pkg(test::model_fixtures().front(), t / "llama", {"--schema", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("split-certification roster"), std::string::npos) << r.err;
}

}  // namespace runtime_lines_test
}  // namespace skippy
