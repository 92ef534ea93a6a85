// The stage admission message as nodes exchange it (skippy/stage_admission.h
// StageAdmissionMessage): select --json emits every field the package and
// the stage determine, compared with values derived here by hand from the
// reference's rules for every fixture; --admission takes the full message and
// checks it by the reference's rules in their order.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <set>

#include <nlohmann/json.hpp>

#include "skippy/error.h"
#include "skippy/gguf.h"
#include "skippy/model_source.h"
#include "skippy/stage_admission.h"
#include "test_util.h"

namespace skippy {
namespace admission_message_test {

namespace fs = std::filesystem;
using nlohmann::json;
using test::run_cli;
using test::TempDir;

// The resident tensors of stage a..b of a schema 2 package of `model`, by the
// reference's rules written out here: a layer's tensors on the stage holding
// it, the NextN block's only on the final stage; token_embd on the first
// (and the last when the output is tied), output and output_norm on the last,
// any other layerless tensor on every stage.
std::vector<std::string> by_hand(const fs::path& model, uint32_t a, uint32_t b, uint32_t layers) {
  const auto source = ModelSource::open(model);  // every shard of a split model
  std::set<uint32_t> nextn;
  bool tied = true;
  for (const auto& t : source.tensors()) {
    const std::string n(t.info->name);
    if (n == "output.weight") tied = false;
    if (n.starts_with("blk.") && n.find(".nextn.") != std::string::npos) nextn.insert(static_cast<uint32_t>(std::stoul(n.substr(4))));
  }
  std::vector<std::string> out;
  for (const auto& t : source.tensors()) {
    const std::string n(t.info->name);
    bool keep = false;
    if (n.starts_with("blk.")) {
      const auto layer = static_cast<uint32_t>(std::stoul(n.substr(4)));
      keep = nextn.contains(layer) ? b == layers : (layer >= a && layer < b);
    } else if (n.starts_with("token_embd.")) {
      keep = a == 0 || (tied && b == layers);
    } else if (n.starts_with("output")) {
      keep = b == layers;
    } else {
      keep = true;
    }
    if (keep) out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string hex64(char c) { return std::string(64, c); }

json full_message(const json& emitted) {
  json m = emitted;
  m["plan_id"] = "skippy-plan:v1:" + hex64('d');
  m["execution_contract"] = "";
  m["profiles"] = json::array({{{"profile_id", "decode"},
                                {"graph_identity", "graph-a"},
                                {"profile_identity", "profile-a"},
                                {"slice_identity", "slice-a"},
                                {"source_snapshot_identity", "snapshot-a"},
                                {"graph_configuration_id", "config-a"},
                                {"backend_id", "cpu"},
                                {"activation_imports", json::array({"x"})},
                                {"activation_exports", json::array({"y"})},
                                {"activation_import_bindings", json::array({"bx"})},
                                {"activation_export_bindings", json::array({"by"})}}});
  return m;
}

TEST(AdmissionMessage, SelectEmitsEveryFieldThePackageAndStageDetermineForEveryFixture) {
  TempDir t;
  size_t i = 0;
  for (const auto& model : test::model_fixtures()) {
    SCOPED_TRACE(model.filename().string());
    const fs::path dir = t / ("pkg" + std::to_string(i++));
    ASSERT_EQ(test::write_pkg(model, dir, {"--schema", "2"}).exit_code, 0);
    const auto root = json::parse(test::read_text(dir / "model-package.json"));
    const uint32_t layers = root["layer_count"].get<uint32_t>();
    for (const auto& [a, b] : {std::pair<uint32_t, uint32_t>{0, layers / 2}, {layers / 2, layers}}) {
      SCOPED_TRACE(std::to_string(a) + ".." + std::to_string(b));
      const auto r = run_cli({"select", dir.string(), "--layers", std::to_string(a) + ".." + std::to_string(b), "--json"});
      ASSERT_EQ(r.exit_code, 0) << r.err;
      const auto j = json::parse(r.out);
      const auto& m = j.at("stage_admission_message");
      EXPECT_EQ(m.at("version"), 1);
      EXPECT_EQ(m.at("package_id"), root["package_id"]);
      EXPECT_EQ(m.at("layer_start"), a);
      EXPECT_EQ(m.at("layer_end"), b);
      EXPECT_EQ(m.at("resident_tensor_ids").get<std::vector<std::string>>(), by_hand(model, a, b, layers));
      EXPECT_EQ(m.at("resident_tensor_ids"), j.at("stage_admission").at("resident_tensor_ids"));
      EXPECT_EQ(m.at("sidecars"), json::array());
      EXPECT_TRUE(m.at("plan_id").is_null());
      EXPECT_TRUE(m.at("execution_contract").is_null());
      EXPECT_TRUE(m.at("profiles").is_null());
      std::vector<std::string> fields;
      for (const auto& u : j.at("stage_admission_message_underived")) fields.push_back(u.at("field"));
      EXPECT_EQ(fields, (std::vector<std::string>{"plan_id", "execution_contract", "profiles"}));
    }
  }
}

TEST(AdmissionMessage, TheFullMessageIsAcceptedAndCheckedInTheReferencesOrder) {
  TempDir t;
  const fs::path dir = t / "pkg";
  ASSERT_EQ(test::write_pkg(test::model_fixtures().front(), dir, {"--schema", "2"}).exit_code, 0);
  auto r = run_cli({"select", dir.string(), "--layers", "0..4", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json good = full_message(json::parse(r.out).at("stage_admission_message"));
  auto try_message = [&](const json& m) {
    test::write_file(t / "msg.json", [&] {
      const auto s = m.dump();
      return std::vector<uint8_t>(s.begin(), s.end());
    }());
    return run_cli({"select", dir.string(), "--admission", (t / "msg.json").string(), "--json"});
  };
  r = try_message(good);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j.at("selected_by"), "admission");
  EXPECT_EQ(j.at("stage_admission_message").at("plan_id"), good["plan_id"]);  // the input's own, echoed
  EXPECT_EQ(j.at("stage_admission_message").at("profiles"), good["profiles"]);
  EXPECT_EQ(j.at("stage_admission_message_underived"), json::array());
  // Each rule, and the order: with two faults the reference's earlier rule speaks.
  struct Bad {
    std::function<void(json&)> edit;
    std::string needle;
  };
  const std::vector<Bad> bad = {
      {[](json& m) { m["version"] = 2; m["plan_id"] = "x"; }, "version: 2: unsupported descriptor version"},
      {[](json& m) { m["package_id"] = "sha256:" + hex64('A'); m["plan_id"] = "x"; }, "package_id must be a canonical sha256 digest"},
      {[](json& m) { m["plan_id"] = "skippy-plan:v2:" + hex64('d'); m["layer_end"] = 0; }, "plan_id must be a canonical native semantic digest"},
      {[](json& m) { m["layer_start"] = 4; m["layer_end"] = 4; m["profiles"] = json::array(); }, "layer range must be non-empty"},
      {[](json& m) { m["resident_tensor_ids"] = json::array(); m["profiles"] = json::array(); }, "resident tensor ids must be non-empty"},
      {[](json& m) { m["resident_tensor_ids"][1] = ""; }, "resident_tensor_ids[1]: resident tensor ids must be non-empty, strictly sorted"},
      {[](json& m) { std::swap(m["resident_tensor_ids"][0], m["resident_tensor_ids"][1]); }, "strictly sorted, and unique"},
      {[](json& m) { m["profiles"] = json::array(); }, "profiles must be non-empty, strictly sorted by profile_id"},
      {[](json& m) { m["profiles"].push_back(m["profiles"][0]); }, "profiles[1]: profiles must be non-empty, strictly sorted"},
      {[](json& m) { m["profiles"][0]["slice_identity"] = ""; }, "profile identities are required"},
      {[](json& m) { m["profiles"][0]["activation_import_bindings"] = json::array(); }, "must be paired, non-empty, and unique"},
      {[](json& m) { m["sidecars"] = json::array({{{"kind", "mmproj"}, {"artifact_id", ""}}}); }, "sidecar kind and artifact_id are required"},
      {[](json& m) { m["sidecars"] = json::array({{{"kind", "audio"}, {"artifact_id", "a"}}}); }, "sidecar kind and artifact_id are required"},
      {[](json& m) { m["sidecars"] = json::array({{{"kind", "mmproj"}, {"artifact_id", "b"}}, {{"kind", 1}, {"artifact_id", "a"}}}); },
       "sidecars[1]: sidecars must be strictly sorted and unique"},
      {[](json& m) { m["surprise"] = true; }, "surprise: not a stage admission message field"},
      // Then the package's checks: its package_id, then its tensors.
      {[](json& m) { m["package_id"] = "sha256:" + hex64('a'); }, "does not match the package's"},
      {[](json& m) { m["resident_tensor_ids"].push_back("zz.unknown"); }, "unknown tensor \"zz.unknown\""},
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    SCOPED_TRACE(i);
    json m = good;
    bad[i].edit(m);
    r = try_message(m);
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    test::expect_json_error(r, "invalid_input", bad[i].needle);
  }
}

TEST(AdmissionMessage, TheLibraryRoundTripsTheJsonForm) {
  StageAdmissionMessage m;
  m.descriptor.package_id = "sha256:" + hex64('c');
  m.descriptor.resident_tensor_ids = {"a", "b"};
  m.descriptor.sidecars = {V2Sidecar{"mmproj", "mm", std::nullopt}};
  m.plan_id = "skippy-plan:v1:" + hex64('e');
  m.execution_contract = R"({"version":1})";
  m.layer_start = 0;
  m.layer_end = 2;
  m.profiles = std::vector<StageAdmissionProfile>{{"decode", "g", "p", "s", "ss", "gc", "cpu", {}, {"out"}, {}, {"bout"}}};
  const std::string text = stage_admission_message_json(m);
  // Members in the message's field order.
  std::vector<std::string> keys;
  const auto doc = nlohmann::ordered_json::parse(text);
  for (const auto& [k, v] : doc.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"version", "package_id", "plan_id", "execution_contract", "layer_start",
                                            "layer_end", "resident_tensor_ids", "sidecars", "profiles"}));
  EXPECT_TRUE(is_stage_admission_message(text));
  EXPECT_FALSE(is_stage_admission_message(R"({"package_id":"x"})"));
  EXPECT_EQ(parse_stage_admission_message(text, "m.json"), m);
}

}  // namespace admission_message_test
}  // namespace skippy
