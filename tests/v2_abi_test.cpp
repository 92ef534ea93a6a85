// The runtime ABI of package schema 2 (skippy/abi.h, skippy/package_convert.h):
// written by --native-abi-version, checked by --runtime-abi /
// SKIPPY_RUNTIME_ABI / the C API with the runtime's own rule per schema, and
// moved by restamp-package, which changes the root alone.
#include <gtest/gtest.h>

#include <map>

#include <nlohmann/json.hpp>

#include "hub_standin.h"
#include "skippy/abi.h"
#include "skippy/stage.h"
#include "skippy/error.h"
#include "skippy/manifest_v2.h"
#include "skippy/package_convert.h"
#include "util/sha256.h"
#include "skippy/skippy.h"
#include "test_util.h"

namespace skippy {
namespace v2abi_test {

namespace fs = std::filesystem;
using test::run_cli;
using test::TempDir;

// Every file under `dir` (relative path -> SHA-256), model-package.json and
// the model card (README.md, which names the package_id) aside.
std::map<std::string, std::string> files_but_root(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    const auto rel = fs::relative(e.path(), dir).string();
    if (rel == "model-package.json" || rel == "README.md") continue;
    out[rel] = sha256_hex(test::read_text(e.path()));
  }
  return out;
}

fs::path write_v2(const fs::path& out, const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"--schema", "2"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = test::write_pkg(test::model_fixtures().front(), out, args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return out;
}

TEST(V2Abi, TheRuntimeRulePerSchema) {
  // Schema 2: the exact string.
  EXPECT_FALSE(runtime_abi_refusal(2, "0.1.64", {0, 1, 64}));
  EXPECT_TRUE(runtime_abi_refusal(2, "0.1.41", {0, 1, 64}));
  EXPECT_TRUE(runtime_abi_refusal(2, "0.1.65", {0, 1, 64}));
  EXPECT_TRUE(runtime_abi_refusal(2, "0.1.064", {0, 1, 64}));  // mesh-llm compares strings
  // Schema 1: same major, minor no newer; the patch ignored.
  EXPECT_FALSE(runtime_abi_refusal(1, "0.1.39", {0, 1, 64}));
  EXPECT_FALSE(runtime_abi_refusal(1, "0.1.99", {0, 1, 0}));
  EXPECT_TRUE(runtime_abi_refusal(1, "0.2.0", {0, 1, 64}));
  EXPECT_TRUE(runtime_abi_refusal(1, "1.0.0", {0, 1, 64}));
  EXPECT_TRUE(runtime_abi_refusal(1, "x", {0, 1, 64}));
  try {
    check_runtime_abi(2, "0.1.41", {0, 1, 64}, "pkg-v2");
    FAIL() << "admitted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("0.1.41"), std::string::npos) << m;
    EXPECT_NE(m.find("0.1.64"), std::string::npos) << m;
    EXPECT_NE(m.find("skippy-model-package restamp-package pkg-v2 --native-abi-version 0.1.64"), std::string::npos) << m;
  }
  EXPECT_EQ(native_abi_version_to_write(""), format_abi_version(kDefaultNativeAbiV2));
  EXPECT_EQ(native_abi_version_to_write("0.1.41"), "0.1.41");
  EXPECT_THROW(native_abi_version_to_write("0.1"), Error);
  EXPECT_THROW(native_abi_version_to_write("v0.1.64"), Error);
}

TEST(V2Abi, WrittenAtTheDefaultOrTheFlagAndShownByInspect) {
  TempDir t;
  const auto def = write_v2(t / "default");
  EXPECT_EQ(test::root_v2(def).native_abi_version, "0.1.64");
  const auto old = write_v2(t / "old", {"--native-abi-version", "0.1.41"});
  EXPECT_EQ(test::root_v2(old).native_abi_version, "0.1.41");
  const auto ins = run_cli({"inspect", old.string(), "--json"});
  ASSERT_EQ(ins.exit_code, 0) << ins.err;
  const auto j = nlohmann::json::parse(ins.out);
  EXPECT_EQ(j["native_abi_version"], "0.1.41");
  EXPECT_EQ(j["abi"]["rules"]["upstream"], "exact");
  EXPECT_EQ(j["abi"]["rules"]["fork"], "provenance");
  EXPECT_EQ(j["abi"]["writer_default"], "0.1.64");
  const auto text = run_cli({"inspect", old.string()});
  EXPECT_NE(text.out.find("native ABI        0.1.41"), std::string::npos) << text.out;
  // A malformed version, or the flag on schema 1, is a usage error before anything is written.
  auto bad = test::write_pkg(test::model_fixtures().front(), t / "bad", {"--schema", "2", "--native-abi-version", "0.1"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  test::expect_json_error(bad, "usage", "--native-abi-version");
  EXPECT_FALSE(fs::exists(t / "bad" / "model-package.json"));
  bad = test::write_pkg(test::model_fixtures().front(), t / "bad1", {"--native-abi-version", "0.1.64"});
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  test::expect_json_error(bad, "usage", "--native-abi-version goes with --schema 2");
  const auto help = run_cli({"write-package", "--help"});
  EXPECT_NE(help.out.find("--native-abi-version"), std::string::npos);
  EXPECT_NE(help.out.find("default 0.1.64"), std::string::npos);
}

TEST(V2Abi, SelectFetchMaterializeApplyTheRuntimeRule) {
  TempDir t;
  const auto pkg = write_v2(t / "pkg", {"--native-abi-version", "0.1.64"});
  // Admitted at 0.1.64, by the flag and by the variable.
  auto r = run_cli({"select", pkg.string(), "--layers", "0..1", "--json", "--runtime-abi", "0.1.64"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = run_cli({"select", pkg.string(), "--layers", "0..1", "--json"}, {"SKIPPY_RUNTIME_ABI=0.1.64"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // Refused at 0.1.41, both versions and the fix named.
  r = run_cli({"select", pkg.string(), "--layers", "0..1", "--json", "--runtime-abi", "0.1.41"});
  EXPECT_EQ(r.exit_code, 1);
  test::expect_json_error(r, "invalid_input",
                          "native ABI \"0.1.64\", the runtime's ABI is 0.1.41");
  EXPECT_NE(r.err.find("restamp-package " + pkg.string() + " --native-abi-version 0.1.41"), std::string::npos) << r.err;
  r = run_cli({"select", pkg.string(), "--layers", "0..1", "--json"}, {"SKIPPY_RUNTIME_ABI=0.1.41"});
  EXPECT_EQ(r.exit_code, 1);
  // The flag wins over the variable.
  r = run_cli({"select", pkg.string(), "--layers", "0..1", "--json", "--runtime-abi", "0.1.64"},
              {"SKIPPY_RUNTIME_ABI=0.1.41"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // A malformed runtime ABI is a usage error.
  r = run_cli({"select", pkg.string(), "--layers", "0..1", "--json", "--runtime-abi", "latest"});
  EXPECT_EQ(r.exit_code, 2);
  test::expect_json_error(r, "usage", "--runtime-abi");
  // materialize: refused before a byte is written.
  r = run_cli({"materialize", pkg.string(), "--layers", "0..1", "--out", (t / "s.gguf").string(), "--json",
               "--runtime-abi", "0.1.41"});
  EXPECT_EQ(r.exit_code, 1);
  test::expect_json_error(r, "invalid_input", "0.1.41");
  EXPECT_FALSE(fs::exists(t / "s.gguf"));
  r = run_cli({"materialize", pkg.string(), "--layers", "0..1", "--out", (t / "s.gguf").string(), "--json",
               "--runtime-abi", "0.1.64"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // fetch takes the flag (an hf:// package: tests/v2_publish_test.cpp's stand-in is not needed to see
  // the option parse; a local directory is refused as fetch always refuses it).
  r = run_cli({"fetch", pkg.string(), "--runtime-abi", "0.1.64", "--json"});
  EXPECT_EQ(r.exit_code, 2);
  test::expect_json_error(r, "usage", "fetch takes an hf://");
  // Schema 1: same major, minor not newer.
  const auto v1 = t / "v1";
  ASSERT_EQ(test::write_pkg(test::model_fixtures().front(), v1).exit_code, 0);
  r = run_cli({"select", v1.string(), "--layers", "0..1", "--json", "--runtime-abi", "0.1.0"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = run_cli({"select", v1.string(), "--layers", "0..1", "--json", "--runtime-abi", "0.2.7"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = run_cli({"select", v1.string(), "--layers", "0..1", "--json", "--runtime-abi", "1.0.0"});
  EXPECT_EQ(r.exit_code, 1);
  test::expect_json_error(r, "invalid_input", "schema 1 declares skippy ABI \"0.1.39\", the runtime's ABI is 1.0.0");
}

// The stand-in answering as the Hub does for a fetch, and the environment
// that points a CLI run at it with empty caches under `dir`.
std::vector<std::string> hub_env(test::HubStandin& hub, const fs::path& dir) {
  hub.configure({{"token", "hf_test"}, {"url_ttl_secs", 3600}, {"reject_unknown_tokens", false},
                 {"resolve_cache_redirect", false}});
  return {"HF_ENDPOINT=" + hub.endpoint(), "HF_HUB_CACHE=" + (dir / "hf").string(), "HF_HOME=" + (dir / "hfhome").string(),
          "SKIPPY_CACHE_DIR=" + (dir / "skippy").string(), "HF_TOKEN=", "HF_HUB_OFFLINE="};
}

TEST(V2Abi, FetchFromTheHubIsRefusedBeforeAnyPayload) {
  TempDir t;
  const auto pkg = write_v2(t / "pkg", {"--native-abi-version", "0.1.64"});
  test::HubStandin hub;
  const std::string commit = hub.publish("org/v2-abi", pkg);
  const auto env = hub_env(hub, t.path());
  const std::string ref = "hf://org/v2-abi@" + commit;
  hub.clear_log();
  auto r = run_cli({"fetch", ref, "--json", "--runtime-abi", "0.1.41"}, env);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  test::expect_json_error(r, "invalid_input", "the runtime's ABI is 0.1.41");
  EXPECT_NE(r.err.find("restamp-package DIR --native-abi-version 0.1.41"), std::string::npos) << r.err;
  // No part left the stand-in (by path through the Hub, by SHA-256 through
  // its storage).
  const auto root = parse_package_root_v2(test::read_text(pkg / "model-package.json"), "root");
  auto parts_served = [&] {
    size_t n = 0;
    for (const auto& q : hub.log()) {
      if (q.method != "GET" || q.bytes_sent == 0) continue;
      for (const auto& a : root.artifacts) {
        if (q.path.ends_with("/" + a.path) || q.path.ends_with("/" + a.sha256)) ++n;
      }
    }
    return n;
  };
  // The root alone decides: not even the carrier is read.
  EXPECT_EQ(parts_served(), 0u);
  r = run_cli({"fetch", ref, "--json", "--runtime-abi", "0.1.64"}, env);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GE(parts_served(), root.artifacts.size()) << "the log names files as this test counts them";
}

// fetch --admission with a descriptor of another package: the root's
// package_id decides, and not one artifact (the carrier included) is served.
TEST(V2Abi, AFetchWithAForeignAdmissionDescriptorReadsOnlyTheRoot) {
  TempDir t;
  const auto pkg = write_v2(t / "pkg", {"--native-abi-version", "0.1.64"});
  auto sel = run_cli({"select", pkg.string(), "--layers", "0..2", "--json"});
  ASSERT_EQ(sel.exit_code, 0) << sel.err;
  auto descriptor = nlohmann::json::parse(sel.out)["stage_admission"];
  ASSERT_TRUE(descriptor.is_object()) << sel.out;
  descriptor["package_id"] = "sha256:" + std::string(64, '0');
  const auto file = t / "foreign.json";
  test::write_file(file, [&] {
    const std::string d = descriptor.dump();
    return std::vector<uint8_t>(d.begin(), d.end());
  }());
  test::HubStandin hub;
  const std::string commit = hub.publish("org/v2-foreign", pkg);
  const auto env = hub_env(hub, t.path());
  hub.clear_log();
  const auto r = run_cli({"fetch", "hf://org/v2-foreign@" + commit, "--admission", file.string(), "--json"}, env);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  test::expect_json_error(r, "invalid_input", "(a descriptor for another package)");
  const auto root = parse_package_root_v2(test::read_text(pkg / "model-package.json"), "root");
  size_t served = 0;
  for (const auto& q : hub.log()) {
    if (q.method != "GET" || q.bytes_sent == 0) continue;
    for (const auto& a : root.artifacts) {
      if (q.path.ends_with("/" + a.path) || q.path.ends_with("/" + a.sha256)) {
        ++served;
        ADD_FAILURE() << "served before the refusal: " << q.path;
      }
    }
  }
  EXPECT_EQ(served, 0u);
}

TEST(V2Abi, TheCApiChecksByArgumentOrVariable) {
  TempDir t;
  const auto pkg = write_v2(t / "pkg", {"--native-abi-version", "0.1.64"});
  skippy_package* p = nullptr;
  ASSERT_EQ(skippy_package_open(pkg.c_str(), &p), SKIPPY_OK) << skippy_last_error();
  EXPECT_EQ(skippy_package_check_runtime_abi(p, "0.1.64"), SKIPPY_OK) << skippy_last_error();
  EXPECT_EQ(skippy_package_check_runtime_abi(p, "0.1.41"), SKIPPY_ERR_INVALID_INPUT);
  const std::string why = skippy_last_error();
  EXPECT_NE(why.find("restamp-package"), std::string::npos) << why;
  EXPECT_EQ(skippy_package_check_runtime_abi(p, "zero"), SKIPPY_ERR_USAGE);
  EXPECT_EQ(skippy_package_check_runtime_abi(nullptr, "0.1.64"), SKIPPY_ERR_USAGE);
  // NULL: the variable, else no check.
  ::unsetenv("SKIPPY_RUNTIME_ABI");
  EXPECT_EQ(skippy_package_check_runtime_abi(p, nullptr), SKIPPY_OK);
  ::setenv("SKIPPY_RUNTIME_ABI", "0.1.41", 1);
  EXPECT_EQ(skippy_package_check_runtime_abi(p, nullptr), SKIPPY_ERR_INVALID_INPUT);
  EXPECT_EQ(skippy_package_check_runtime_abi(p, ""), SKIPPY_ERR_INVALID_INPUT);
  ::unsetenv("SKIPPY_RUNTIME_ABI");
  skippy_package_close(p);
}

TEST(V2Abi, RestampChangesOnlyTheRootAndStaysVerifiable) {
  TempDir t;
  const auto pkg = write_v2(t / "pkg", {"--native-abi-version", "0.1.64"});
  const auto v = run_cli({"validate-package", test::model_fixtures().front().string(), pkg.string(), "--write-result"});
  ASSERT_EQ(v.exit_code, 0) << v.out << v.err;
  ASSERT_EQ(run_cli({"identity", "init-owner", "--dir", (t / "owner").string()}).exit_code, 0);
  ASSERT_EQ(run_cli({"sign-package", pkg.string(), "--owner", (t / "owner").string()}).exit_code, 0);
  ASSERT_TRUE(fs::exists(pkg / "model-package.json.sig"));
  ASSERT_TRUE(fs::exists(pkg / "validation.json"));
  const auto before_root = parse_package_root_v2(test::read_text(pkg / "model-package.json"), "before");
  auto before = files_but_root(pkg);
  before.erase("model-package.json.sig");
  before.erase("validation.json");

  auto r = run_cli({"restamp-package", pkg.string(), "--native-abi-version", "0.1.41", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["changed"]);
  EXPECT_EQ(j["old_native_abi_version"], "0.1.64");
  EXPECT_EQ(j["native_abi_version"], "0.1.41");
  EXPECT_EQ(j["old_package_id"], before_root.package_id);
  ASSERT_EQ(j["removed"].size(), 2u) << j.dump();
  // Every artifact byte for byte; the signature and verdict of the old bytes gone.
  EXPECT_EQ(files_but_root(pkg), before);
  EXPECT_FALSE(fs::exists(pkg / "model-package.json.sig"));
  EXPECT_FALSE(fs::exists(pkg / "validation.json"));
  // The root differs in native_abi_version and package_id alone.
  auto after_root = parse_package_root_v2(test::read_text(pkg / "model-package.json"), "after");
  EXPECT_EQ(after_root.native_abi_version, "0.1.41");
  EXPECT_EQ(after_root.package_id, j["package_id"]);
  EXPECT_NE(after_root.package_id, before_root.package_id);
  EXPECT_EQ(after_root.package_id, compute_package_id_v2(after_root));
  after_root.native_abi_version = before_root.native_abi_version;
  after_root.package_id = before_root.package_id;
  EXPECT_EQ(after_root, before_root);
  // Verifiable, admitted at the new ABI, refused at the old one.
  r = run_cli({"verify", pkg.string(), "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = run_cli({"validate-package", test::model_fixtures().front().string(), pkg.string(), "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(run_cli({"select", pkg.string(), "--layers", "0..1", "--runtime-abi", "0.1.41"}).exit_code, 0);
  EXPECT_EQ(run_cli({"select", pkg.string(), "--layers", "0..1", "--runtime-abi", "0.1.64"}).exit_code, 1);
  // Already there: nothing written.
  const auto mtime = fs::last_write_time(pkg / "model-package.json");
  r = run_cli({"restamp-package", pkg.string(), "--native-abi-version", "0.1.41", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(nlohmann::json::parse(r.out)["changed"]);
  EXPECT_EQ(fs::last_write_time(pkg / "model-package.json"), mtime);
  // --sign signs the new root; the signature verifies for a trusting consumer.
  r = run_cli({"restamp-package", pkg.string(), "--native-abi-version", "0.1.64", "--sign", (t / "owner").string(),
               "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(nlohmann::json::parse(r.out)["signed_by"].is_null());
  r = run_cli({"select", pkg.string(), "--layers", "0..1", "--runtime-abi", "0.1.64", "--trust-signer",
               (t / "owner" / "owner.crt").string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // The round trip restores the original package_id (created_at is not hashed).
  EXPECT_EQ(test::local_catalog(pkg).catalog.package_id, before_root.package_id);
}

TEST(V2Abi, RestampRefusesWhatItCannotRestamp) {
  TempDir t;
  const auto v1 = t / "v1";
  ASSERT_EQ(test::write_pkg(test::model_fixtures().front(), v1).exit_code, 0);
  const auto before = test::read_text(v1 / "model-package.json");
  auto r = run_cli({"restamp-package", v1.string(), "--native-abi-version", "0.1.64", "--json"});
  EXPECT_EQ(r.exit_code, 1);
  test::expect_json_error(r, "invalid_input", "package schema 1");
  EXPECT_EQ(test::read_text(v1 / "model-package.json"), before);
  const auto pkg = write_v2(t / "pkg");
  r = run_cli({"restamp-package", pkg.string(), "--native-abi-version", "0.1", "--json"});
  EXPECT_EQ(r.exit_code, 2);
  test::expect_json_error(r, "usage", "--native-abi-version");
  r = run_cli({"restamp-package", (t / "none").string(), "--native-abi-version", "0.1.64", "--json"});
  EXPECT_EQ(r.exit_code, 1);
  // A root whose package_id does not match is refused, not re-stamped into validity.
  auto text = test::read_text(pkg / "model-package.json");
  const auto at = text.find("\"model_id\":\"");
  ASSERT_NE(at, std::string::npos);
  text.insert(at + 12, "x");
  test::write_file(pkg / "model-package.json", std::vector<uint8_t>(text.begin(), text.end()));
  r = run_cli({"restamp-package", pkg.string(), "--native-abi-version", "0.1.41", "--json"});
  EXPECT_EQ(r.exit_code, 1);
  test::expect_json_error(r, "invalid_input", "package_id");
  EXPECT_EQ(test::read_text(pkg / "model-package.json"), text);
}

}  // namespace v2abi_test
}  // namespace skippy
