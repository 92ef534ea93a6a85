// Strings from outside that are not UTF-8, or that hold control characters,
// never crash a command or reach a printed report raw: --json output stays
// one valid JSON document whatever the bytes (a GGUF's KVs, a path argument,
// a Hub's error body), and a tensor name with a control character is
// refused where it is read, as a stage admission descriptor refuses it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gguf/gguf_writer.h"
#include "hub_standin.h"
#include "skippy/gguf.h"
#include "test_util.h"
#include "util/file.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using test::CliResult;
using test::run_cli;
using test::TempDir;

// A copy of `src` at `out` with general.architecture set to `arch` and the
// tensor `rename_from` (if given) renamed to `rename_to`.
fs::path rewrite_gguf(const fs::path& src, const fs::path& out, const std::string& arch,
                      const std::string& rename_from = "", const std::string& rename_to = "") {
  const auto g = GgufFile::open(src);
  GgufWriter w(g.alignment());
  for (const auto& kv : g.kvs()) {
    if (kv.key == "general.architecture") {
      w.add_string("general.architecture", arch);
    } else {
      w.add_kv(std::string(kv.key), kv.value);
    }
  }
  const auto mapped = MappedFile::open(src);
  for (const auto& t : g.tensors()) {
    const std::string name = t.name == rename_from ? rename_to : std::string(t.name);
    w.add_tensor(name, t.type, t.ne, mapped, t.file_offset);
  }
  AtomicFile af(out);
  w.write(af);
  af.commit();
  return out;
}

// --json output is exactly one JSON document (a result or an error) and the
// process ended by itself, not by a signal.
void expect_one_json_document(const CliResult& r, const std::string& what) {
  EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1 || r.exit_code == 2) << what << ": exit " << r.exit_code << "\n" << r.err;
  nlohmann::json j;
  ASSERT_NO_THROW(j = nlohmann::json::parse(r.out)) << what << ": stdout is not one JSON document:\n" << r.out;
  if (r.exit_code != 0) {
    ASSERT_TRUE(j.contains("error")) << what << ": " << r.out;
    EXPECT_TRUE(j["error"]["message"].is_string());
  }
}

TEST(UntrustedText, AnArchitectureThatIsNotUtf8PrintsAsJson) {
  TempDir t;
  const auto bad = rewrite_gguf(test::data_path("llama-tiny-q8_0.gguf"), t / "bad.gguf", "ll\xff" "ama");
  expect_one_json_document(run_cli({"inspect", bad.string(), "--json"}), "inspect");
  expect_one_json_document(test::write_pkg(bad, t / "pkg"), "write-package");
  expect_one_json_document(test::write_pkg(bad, t / "pkg2", {"--schema", "2"}), "write-package --schema 2");
  if (fs::exists(t / "pkg2" / "model-package.json")) {
    expect_one_json_document(run_cli({"plan", (t / "pkg2").string(), "--stages", "2", "--json"}), "plan");
    expect_one_json_document(run_cli({"inspect", (t / "pkg2").string(), "--json"}), "inspect package");
  }
}

TEST(UntrustedText, ValidateReportQuotingANonUtf8KvSurvives) {
  TempDir t;
  const auto src = test::data_path("llama-tiny-q8_0.gguf");
  ASSERT_EQ(test::write_pkg(src, t / "pkg").exit_code, 0);
  // A source whose KV differs from the package's, with bytes that are not UTF-8.
  const auto other = rewrite_gguf(src, t / "other.gguf", "llama\xfe\xff");
  const auto r = run_cli({"validate-package", other.string(), (t / "pkg").string(), "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  nlohmann::json j;
  ASSERT_NO_THROW(j = nlohmann::json::parse(r.out)) << r.out;
  EXPECT_FALSE(j.contains("error")) << "the report itself must print, not an error about printing it: " << r.out;
  EXPECT_EQ(r.out.find("invalid UTF-8"), std::string::npos) << r.out;
}

TEST(UntrustedText, PathArgumentsThatAreNotUtf8GiveJsonErrors) {
  TempDir t;
  ASSERT_EQ(test::write_pkg(test::data_path("llama-tiny-q8_0.gguf"), t / "pkg").exit_code, 0);
  const std::string bad = (t / "n\xff\xfe").string();
  const std::string pkg = (t / "pkg").string();
  const std::vector<std::vector<std::string>> commands = {
      {"inspect", bad},
      {"select", bad, "--layers", "0..1"},
      {"verify", bad},
      {"plan", bad, "--stages", "2"},
      {"materialize", bad, "--layers", "0..1"},
      {"materialize", pkg, "--layers", "0..1", "--out", bad + "/x.gguf"},
      {"sign-package", bad, "--owner", bad},
      {"restamp-package", bad, "--native-abi-version", "0.1.64"},
      {"convert-package", bad, "--to", "2", "--out-dir", bad + "2", "--source", bad},
      {"write-package", bad, "--out-dir", bad + "3", "--model-id", "o/r:Q", "--source-revision", "abc", "--source-file", "x.gguf"},
      {"write-package", test::data_path("llama-tiny-q8_0.gguf").string(), "--out-dir", (t / "p4").string(), "--model-id",
       "o/r:Q", "--source-revision", "abc", "--source-file", "x.gguf", "--projector", bad},
      {"publish", bad, "hf://o/r"},
      {"plan", pkg, "--stages", "2", "--topology-out", bad + "/t.json", "--nodes", "a,b"},
  };
  for (auto args : commands) {
    args.push_back("--json");
    expect_one_json_document(run_cli(args, {"HF_HUB_OFFLINE=1"}), args[0] + " " + args[1]);
  }
}

TEST(UntrustedText, AHubErrorBodyThatIsNotUtf8OrIsCutMidCharacter) {
  TempDir t;
  test::HubStandin hub;
  const std::vector<std::string> env = {"HF_ENDPOINT=" + hub.endpoint(), "HF_HUB_CACHE=" + (t / "hf").string(),
                                        "HF_TOKEN=hf_test", "SKIPPY_HF_MAX_ATTEMPTS=1", "HF_HUB_OFFLINE="};
  // Raw bytes that are no UTF-8 at all.
  hub.fault({{"listener", "hub"}, {"match", "/api/"}, {"kind", "status"}, {"status", 400}, {"times", -1}, {"body_base64", "//7//g=="},
             {"headers", {{"Content-Type", "text/plain"}}}});
  // (write-package from a Hub coordinate: its first call, the model's API
  // listing, reads the error body.)
  const std::vector<std::string> from_hub = {"write-package", "org/model:Q8_0", "--out-dir", (t / "pkg").string(), "--json"};
  auto r = run_cli(from_hub, env);
  expect_one_json_document(r, "write-package (bytes)");
  EXPECT_NE(r.out.find("\ufffd"), std::string::npos) << "the body's bytes, replaced: " << r.out;
  hub.clear_faults();
  // An honest UTF-8 body whose 300th byte falls inside a character.
  std::string body = "x";  // then 200 é: 401 bytes, byte 300 inside a character
  while (body.size() < 401) body += "\xc3\xa9";
  hub.fault({{"listener", "hub"}, {"match", "/api/"}, {"kind", "status"}, {"status", 400}, {"times", -1}, {"body", body},
             {"headers", {{"Content-Type", "text/plain"}}}});
  r = run_cli(from_hub, env);
  expect_one_json_document(r, "write-package (cut)");
  EXPECT_NE(r.out.find("x\xc3\xa9\xc3\xa9"), std::string::npos) << "the body, as the reason: " << r.out;
  EXPECT_EQ(r.out.find("\\ufffd"), std::string::npos) << "a character cut in two: " << r.out;
  EXPECT_EQ(r.out.find("\\ufffd"), std::string::npos) << "a cut character: " << r.out;
}

TEST(UntrustedText, TensorNamesWithControlCharactersAreRefusedWhereRead) {
  TempDir t;
  const auto src = test::data_path("llama-tiny-q8_0.gguf");
  for (const std::string& name : {std::string("blk.0.attn_q\x1b[2J.weight"), std::string("blk.0.attn_q.w\0ght", 18),
                                 std::string("blk.0.attn_q\xe2\x80\xae.weight")}) {
    const auto bad = rewrite_gguf(src, t / "bad.gguf", "llama", "blk.0.attn_q.weight", name);
    auto r = run_cli({"inspect", bad.string(), "--json"});
    EXPECT_EQ(r.exit_code, 1) << r.out;
    test::expect_json_error(r, "invalid_input", "tensor name contains");
    r = test::write_pkg(bad, t / "pkg", {"--schema", "2", "--layout", "reference"});
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_FALSE(fs::exists(t / "pkg" / "model-package.json"));
  }
}

}  // namespace
}  // namespace skippy
