// What a new user meets first: a mistyped command is named with
// the nearest one, --json may come before the command, a source that is not
// understood says what it looks like, a flag's error blames the flag, and
// write-package's advice to run validate-package works as printed.
#include <sstream>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "hub_standin.h"
#include "test_util.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using test::run_cli;

std::vector<uint8_t> to_bytes(const std::string& s) { return {s.begin(), s.end()}; }

TEST(Newcomer, AnUnknownCommandIsNamedWithTheNearestOne) {
  auto r = run_cli({"inspct", test::data_path("llama-tiny-q8_0.gguf").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown command \"inspct\"; did you mean \"inspect\"?"), std::string::npos) << r.err;
  r = run_cli({"frobnicate", "--json"});
  test::expect_json_error(r, "usage", "unknown command \"frobnicate\"");
  EXPECT_EQ(r.out.find("did you mean"), std::string::npos) << "nothing is near: " << r.out;
  EXPECT_NE(r.out.find("write-package"), std::string::npos) << "the commands are listed: " << r.out;
}

TEST(Newcomer, JsonBeforeTheCommandIsTheCommandsFlag) {
  const auto r = run_cli({"--json", "inspect", test::data_path("llama-tiny-q8_0.gguf").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["architecture"], "llama");
}

TEST(Newcomer, WritePackageSaysWhatItUnderstoodOfTheSource) {
  test::TempDir tmp;
  const std::string out = (tmp / "pkg").string();
  struct Case {
    std::string source, says;
  };
  for (const auto& c : std::vector<Case>{
           {"org/llama-tiny-GGUF", "needs its distribution: org/llama-tiny-GGUF:DIST"},
           {"hf://org/repo:Q8_0", "is a package reference (hf://)"},
           {(tmp / "missing.gguf").string(), "no such file"},
           {test::data_path("llama-tiny-q8_0.gguf").string(), "is a local file: a local source needs explicit provenance"},
       }) {
    const auto r = run_cli({"write-package", c.source, "--out-dir", out});
    EXPECT_NE(r.exit_code, 0) << c.source;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << c.source << ": " << r.err;
  }
  EXPECT_FALSE(fs::exists(out));
}

TEST(Newcomer, FlagErrorsBlameTheFlag) {
  test::TempDir tmp;
  auto r = run_cli({"write-package", test::data_path("llama-tiny-q8_0.gguf").string(), "--out-dir", (tmp / "p").string(),
                    "--model-id", "tiny", "--source-revision", "abc", "--source-file", "llama-tiny-q8_0.gguf"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--model-id \"tiny\" is not a model coordinate"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("model-package.json"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(tmp / "p"));
  r = run_cli({"plan", (tmp / "p").string(), "--stages", "two"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--stages: must be a number from 1 to 1000000, not \"two\""), std::string::npos) << r.err;
}

TEST(Newcomer, ValidatePackageTakesTheHubSourceWriteNamesInItsAdvice) {
  test::HubStandin hub;
  test::TempDir tmp;
  fs::copy_file(test::data_path("llama-tiny-q8_0.gguf"), tmp / "Tiny-Q8_0.gguf");
  fs::create_directories(tmp / "model");
  fs::rename(tmp / "Tiny-Q8_0.gguf", tmp / "model" / "Tiny-Q8_0.gguf");
  hub.publish("org/Tiny-GGUF", tmp / "model");
  const std::vector<std::string> env = {"HF_ENDPOINT=" + hub.endpoint(), "HF_HUB_CACHE=" + (tmp / "hf").string(),
                                        "HF_HOME=" + (tmp / "hfhome").string(),
                                        "SKIPPY_CACHE_DIR=" + (tmp / "skippy").string(), "HF_TOKEN="};
  const std::string out = (tmp / "pkg").string();
  const auto w = run_cli({"write-package", "org/Tiny-GGUF:Q8_0", "--out-dir", out}, env);
  ASSERT_EQ(w.exit_code, 0) << w.err;
  const std::string advice = "skippy-model-package validate-package org/Tiny-GGUF:Q8_0 " + out;
  EXPECT_NE(w.out.find(advice), std::string::npos) << w.out;
  // The advice, run as printed (from the cache: no download needed).
  const auto v = run_cli({"validate-package", "org/Tiny-GGUF:Q8_0", out, "--json"}, env);
  ASSERT_EQ(v.exit_code, 0) << v.out << v.err;
  EXPECT_EQ(nlohmann::json::parse(v.out)["valid"], true);
  // A coordinate of another distribution is checked as that model: not the source.
  const auto bad = run_cli({"validate-package", "org/Tiny-GGUF:Q4_0", out}, env);
  EXPECT_EQ(bad.exit_code, 1) << bad.err;
  EXPECT_NE(bad.err.find("Q4_0"), std::string::npos) << bad.err;
}

TEST(Newcomer, PlanSaysWhenTheLastStageHoldsOnlyTheNextNBlock) {
  test::TempDir tmp;
  const auto pkg = tmp / "pkg";
  ASSERT_EQ(test::write_pkg(test::data_path("glm4moe-mtp-tiny.gguf"), pkg).exit_code, 0);
  auto notes = [&](const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"plan", pkg.string(), "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out)["notes"].dump();
  };
  // 4 layers, the last (3) is the NextN block: two stages by bytes put it alone.
  EXPECT_NE(notes({"--stages", "2"}).find("holds only layer 3, the native MTP (NextN) block"), std::string::npos);
  EXPECT_NE(notes({"--stages", "2", "--context", "64"}).find("native MTP (NextN) block"), std::string::npos);
  EXPECT_EQ(notes({"--stages", "1"}).find("NextN"), std::string::npos);
}

TEST(Newcomer, TheExampleConfigWorksWithTheMtpPackageAsDocumented) {
  test::TempDir tmp;
  const auto pkg = tmp / "pkg";
  const auto w = run_cli({"write-package", test::data_path("glm4moe-mtp-tiny.gguf").string(), "--out-dir", pkg.string(),
                          "--model-id", "org/GLM-MTP-Tiny-GGUF:Q8_0", "--source-revision", "0123abc", "--source-file",
                          "glm4moe-mtp-tiny.gguf"});
  ASSERT_EQ(w.exit_code, 0) << w.err;
  const std::string config = std::string(SKIPPY_SOURCE_DIR) + "/examples/config.toml";
  const auto r = run_cli({"speculative", pkg.string(), "--config", config, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["strategy"], "mtp");
  EXPECT_EQ(r.err.find("note:"), std::string::npos) << "the example needs no correction: " << r.err;
  EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;
  // The --help example, as written.
  const auto h = run_cli({"speculative", pkg.string(), "--strategy", "mtp", "--config", config});
  EXPECT_EQ(h.exit_code, 0) << h.err;
}

TEST(Newcomer, AnOwnersDirectoryGivenAsANodeIdentityIsNamedAsSuch) {
  test::TempDir tmp;
  const std::string owner = (tmp / "owner").string();
  ASSERT_EQ(run_cli({"identity", "init-owner", "--dir", owner}).exit_code, 0);
  const std::string h40(40, 'a'), h64(64, 'b');
  test::write_file(tmp / "topology.json",
                   to_bytes("{\"topology_id\": \"t\", \"run_id\": \"r\", \"package_ref\": \"hf://org/x@" + h40 +
                                  "\", \"manifest_sha256\": \"" + h64 + "\", \"stages\": [{\"stage_id\": \"s0\", "
                                  "\"stage_index\": 0, \"node_id\": \"" + h64 + "\", \"layer_start\": 0, \"layer_end\": 1}]}"));
  const auto r = run_cli({"serve-artifacts", "--listen", "127.0.0.1:0", "--topology", (tmp / "topology.json").string(),
                          "--identity", owner, "--mode", "trusted"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("is an owner's directory"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("identity issue-node --owner " + owner), std::string::npos) << r.err;
}

TEST(Newcomer, TheUserAgentCarriesTheVersion) {
  test::HubStandin hub;
  test::TempDir tmp;
  (void)run_cli({"fetch", "hf://org/none@main"}, {"HF_ENDPOINT=" + hub.endpoint(), "HF_HUB_CACHE=" + (tmp / "hf").string(),
                                                  "SKIPPY_HF_MAX_ATTEMPTS=1"});
  const auto v = run_cli({"--version"});
  const std::string version = v.out.substr(v.out.rfind(' ') + 1, v.out.find_last_not_of(" \n") - v.out.rfind(' '));
  const auto log = hub.log();
  ASSERT_FALSE(log.empty());
  for (const auto& r : log) EXPECT_EQ(r.user_agent.value_or(""), "skippy-model-package/" + version) << r.path;
}

}  // namespace
// README's command table has a row for every command the CLI lists.
TEST(Newcomer, TheReadmeCommandTableHasEveryCommand) {
  const auto help = run_cli({"--help"});
  ASSERT_EQ(help.exit_code, 0) << help.err;
  const std::string readme = test::read_text(std::string(SKIPPY_SOURCE_DIR) + "/README.md");
  const auto from = help.out.find("Subcommands:");
  ASSERT_NE(from, std::string::npos) << help.out;
  std::istringstream lines(help.out.substr(from));
  std::string line;
  std::getline(lines, line);
  size_t commands = 0;
  while (std::getline(lines, line)) {
    if (line.size() < 3 || line[0] != ' ' || line[2] == ' ') break;
    const std::string name = line.substr(2, line.find(' ', 2) - 2);
    ++commands;
    EXPECT_NE(readme.find("| `" + name), std::string::npos) << name << " has no row in README's command table";
  }
  EXPECT_GE(commands, 16u);
}

// A required flag's help does not describe a default.
TEST(Newcomer, RestampsRequiredFlagHasNoDefault) {
  const auto r = run_cli({"restamp-package", "--help"});
  ASSERT_EQ(r.exit_code, 0);
  const auto at = r.out.find("--native-abi-version TEXT REQUIRED");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string described = r.out.substr(at, r.out.find("--sign", at) - at);
  EXPECT_EQ(described.find("default"), std::string::npos) << described;
}

}  // namespace skippy
