// Control characters in what a stranger writes
// (refused in identity fields and paths of both schemas; escaped wherever
// the CLI prints untrusted text), and sums over declared sizes (refused,
// never wrapped). Real CLI runs on packages made from the real fixtures.
#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "schema_v2_package.h"
#include "test_util.h"

namespace skippy {
namespace hostile_text_test {

namespace fs = std::filesystem;
using test::TempDir;

const std::string kEsc = "\x1b]0;pwned\x07\x1b[2J";  // set the window title, clear the screen
const std::string kRlo = "\xe2\x80\xae";             // U+202E RIGHT-TO-LEFT OVERRIDE
const std::string kC1 = "\xc2\x9b";                  // U+009B CSI

fs::path tiny() { return test::data_path("llama-tiny-q8_0.gguf"); }

// No raw control code point reached the terminal.
void expect_no_controls(const test::CliResult& r) {
  for (const std::string* s : {&r.out, &r.err}) {
    EXPECT_EQ(s->find('\x1b'), std::string::npos) << *s;
    EXPECT_EQ(s->find('\x07'), std::string::npos) << *s;
    EXPECT_EQ(s->find(kRlo), std::string::npos) << *s;
    EXPECT_EQ(s->find(kC1), std::string::npos) << *s;
  }
}

// A schema 2 package (reference layout) whose root has `edit` applied, with
// a correct package_id for the edited root.
fs::path v2_with(const TempDir& dir, const std::string& name, std::function<void(nlohmann::ordered_json&)> edit) {
  test::SchemaV2Options o;
  o.edit_root = std::move(edit);
  o.recompute_id_after_edit = true;
  (void)test::write_schema_v2_package(tiny(), dir / name, o);
  return dir / name;
}

void edit_v1(const fs::path& pkg, const std::function<void(nlohmann::ordered_json&)>& edit) {
  auto j = nlohmann::ordered_json::parse(test::read_text(pkg / "model-package.json"));
  edit(j);
  std::ofstream(pkg / "model-package.json") << j.dump(2) << "\n";
}

TEST(HostileText, SchemaTwoIdentityFieldsWithControlsAreRefusedAndNothingRawIsPrinted) {
  TempDir dir;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"generator_version", "gen " + kEsc}, {"native_abi_version", "0.1.0" + kC1},
      {"model_id", "org/Model-GGUF" + kRlo + ":Q8_0"}};
  for (const auto& [field, value] : cases) {
    SCOPED_TRACE(field);
    const auto pkg = v2_with(dir, field, [&, f = field, v = value](nlohmann::ordered_json& j) { j[f] = v; });
    for (const std::string cmd : {"inspect", "plan"}) {
      std::vector<std::string> args = {cmd, pkg.string()};
      if (cmd == "plan") args.insert(args.end(), {"--stages", "2"});
      auto r = test::run_cli(args);
      EXPECT_EQ(r.exit_code, 1) << cmd << ": " << r.out << r.err;
      EXPECT_NE(r.err.find(field), std::string::npos) << r.err;
      EXPECT_NE(r.err.find("control character"), std::string::npos) << r.err;
      expect_no_controls(r);
    }
  }
}

TEST(HostileText, SchemaOneIdentityFieldsAndPathsWithControlsAreRefused) {
  TempDir dir;
  auto r = test::write_pkg(tiny(), dir / "v1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  fs::copy(dir / "v1", dir / "rev", fs::copy_options::recursive);
  edit_v1(dir / "rev", [](auto& j) { j["source_model"]["revision"] = "0123abc" + kRlo; });
  r = test::run_cli({"inspect", (dir / "rev").string()});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("source_model.revision"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("bidirectional control"), std::string::npos) << r.err;
  expect_no_controls(r);
  // A layer path with a bidi override (the file is there under that name).
  fs::copy(dir / "v1", dir / "path", fs::copy_options::recursive);
  const std::string evil = "layers/layer-00001" + kRlo + "fuggl.gguf";
  fs::rename(dir / "path/layers/layer-00001.gguf", dir / "path" / evil);
  edit_v1(dir / "path", [&](auto& j) { j["layers"][1]["path"] = evil; });
  r = test::run_cli({"verify", (dir / "path").string()});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("bidirectional control"), std::string::npos) << r.err;
  expect_no_controls(r);
}

TEST(HostileText, UntrustedNamesAreEscapedInHumanOutput) {
  TempDir dir;
  const fs::path evil = dir / ("model" + kEsc + kRlo + kC1 + ".gguf");
  fs::copy_file(tiny(), evil);
  auto r = test::run_cli({"inspect", evil.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_no_controls(r);
  EXPECT_NE(r.out.find("model\\u001b]0;pwned\\u0007\\u001b[2J\\u202e\\u009b.gguf"), std::string::npos) << r.out;
  // JSON output stays valid JSON and carries the name exactly.
  r = test::run_cli({"inspect", evil.string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_no_controls(r);
  EXPECT_NE(r.out.find(evil.filename().string().substr(0, 5)), std::string::npos);
  EXPECT_NE(nlohmann::json::parse(r.out).dump().find("pwned"), std::string::npos);
}

// Item 9: a declared size of 2^64-1 makes the package's byte total
// overflow: refused as invalid, never a wrapped number with exit 0.
TEST(HostileText, ByteTotalsThatOverflowAreRefused) {
  TempDir dir;
  const auto pkg = v2_with(dir, "v2", [](nlohmann::ordered_json& j) {
    for (auto& e : j["artifact_catalog"]["entries"]) {
      if (e["id"] != "metadata") {
        e["byte_size"] = UINT64_MAX;
        break;
      }
    }
  });
  auto r = test::run_cli({"inspect", pkg.string(), "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  test::expect_json_error(r, "invalid_input", "add up past 2^64");
  // Schema 1: a layer's artifact_bytes of 2^64-1.
  r = test::write_pkg(tiny(), dir / "v1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  edit_v1(dir / "v1", [](auto& j) { j["layers"][2]["artifact_bytes"] = UINT64_MAX; });
  r = test::run_cli({"inspect", (dir / "v1").string(), "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  test::expect_json_error(r, "invalid_input", "add up past 2^64");
}

}  // namespace hostile_text_test
}  // namespace skippy
