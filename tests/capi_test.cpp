// The C API, driven by a program written in C (tests/capi_test.c) against a
// real package, compared with what the C++ API says of the same stage.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "schema_v2_package.h"
#include "skippy/stage.h"
#include "skippy/gguf.h"
#include "skippy/source.h"
#include "test_util.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

test::CliResult run_c(const std::vector<std::string>& args) {
  return test::run_program(SKIPPY_CAPI_TEST_PATH, args, {"HF_HUB_OFFLINE=1", "SKIPPY_CACHE_DIR=/nonexistent-skippy"});
}

std::vector<std::string> lines_starting(const std::string& out, const std::string& prefix) {
  std::vector<std::string> v;
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);) {
    if (l.starts_with(prefix)) v.push_back(l.substr(prefix.size()));
  }
  return v;
}

TEST(CApi, AProgramInCLoadsAStageInLoadOrderVerifiesAndMaterializesIt) {
  TempDir tmp;
  const auto src = test::data_path("llama-tiny-q8_0.gguf");
  ASSERT_EQ(test::write_pkg(src, tmp / "pkg").exit_code, 0);
  const auto out = tmp / "stage.gguf";
  const auto r = run_c({(tmp / "pkg").string(), "0", "3", out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(lines_starting(r.out, "model_id "), std::vector<std::string>{"org/tiny:Q8_0"});
  EXPECT_EQ(lines_starting(r.out, "layer_count "), std::vector<std::string>{"8"});
  EXPECT_EQ(lines_starting(r.out, "commit "), std::vector<std::string>{"(none)"});
  EXPECT_EQ(lines_starting(r.out, "schema "), std::vector<std::string>{"1 (none)"});

  // The same parts, in the same order, as the C++ consumer selects.
  const auto pkg = open_local_package(tmp / "pkg");
  const auto sel = test::select_v1(pkg, {0, 3});
  const auto parts = lines_starting(r.out, "part ");
  ASSERT_EQ(parts.size(), sel.parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    const auto& p = sel.parts[i];
    std::ostringstream want;
    want << part_role_label(p) << " " << (p.layer_index ? static_cast<int64_t>(*p.layer_index) : -1) << " "
         << p.rel_path << " " << p.bytes << " " << p.sha256 << " " << p.path.string();
    EXPECT_EQ(parts[i], want.str());
  }
  EXPECT_EQ(lines_starting(r.out, "manifest_sha256 "), std::vector<std::string>{pkg.manifest_sha256});
  uint64_t total = 0;
  for (const auto& p : sel.parts) total += p.bytes;
  EXPECT_EQ(lines_starting(r.out, "verified hashed_bytes "), std::vector<std::string>{std::to_string(total)});
  ASSERT_EQ(lines_starting(r.out, "materialized "), std::vector<std::string>{out.string()});
  EXPECT_GT(GgufFile::open(out).tensors().size(), 0u);
}

TEST(CApi, ASchema2PackageOpensSelectsVerifiesAndMaterializesThroughTheSameCalls) {
  TempDir tmp;
  const auto src = test::data_path("llama-tiny-q8_0.gguf");
  const auto written = test::write_schema_v2_package(src, tmp / "pkg");
  const auto out = tmp / "stage.gguf";
  const auto r = run_c({(tmp / "pkg").string(), "2", "5", out.string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto pkg = test::local_catalog(tmp / "pkg");
  EXPECT_EQ(lines_starting(r.out, "schema "),
            std::vector<std::string>{"2 " + written.root["package_id"].get<std::string>()});
  EXPECT_EQ(lines_starting(r.out, "model_id "), std::vector<std::string>{pkg.catalog.model_id});
  EXPECT_EQ(lines_starting(r.out, "manifest_sha256 "), std::vector<std::string>{pkg.manifest_sha256});
  EXPECT_EQ(lines_starting(r.out, "layer_count "), std::vector<std::string>{"8"});
  EXPECT_EQ(lines_starting(r.out, "package_abi "), std::vector<std::string>{"0.1.41"});
  EXPECT_EQ(lines_starting(r.out, "source "),
            std::vector<std::string>{written.root["source_model"]["repo"].get<std::string>() + " " +
                                     written.root["source_model"]["revision"].get<std::string>() + " " +
                                     src.filename().string()});
  EXPECT_EQ(lines_starting(r.out, "activation_width "),
            std::vector<std::string>{std::to_string(*GgufFile::open(src).embedding_length())});
  // The carrier, then the stage's payload parts, as select_stage lists them.
  const auto stage = select_stage(pkg.catalog, {2, 5});
  const auto parts = lines_starting(r.out, "part ");
  ASSERT_EQ(parts.size(), stage.parts.size());
  uint64_t payload = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const auto& p = stage.parts[i];
    const std::string role = i == 0 ? "metadata" : p.layer_index ? "layer" : "common";
    std::ostringstream want;
    want << role << " " << (p.layer_index ? static_cast<int64_t>(*p.layer_index) : -1) << " " << p.rel_path << " " << p.bytes << " "
         << p.sha256 << " " << fs::canonical(tmp / "pkg" / p.rel_path).string();
    EXPECT_EQ(parts[i], want.str());
    if (i > 0) payload += p.bytes;
  }
  EXPECT_EQ(parts.front().substr(0, 9), "metadata ");
  EXPECT_EQ(lines_starting(r.out, "verified hashed_bytes "), std::vector<std::string>{std::to_string(payload)});
  ASSERT_EQ(lines_starting(r.out, "materialized "), std::vector<std::string>{out.string()});
  const auto g = GgufFile::open(out);
  EXPECT_EQ(g.tensors().size(), stage.tensors.size());
  EXPECT_EQ(g.find_kv("skippy.package.tensor_part"), nullptr);

  // A flipped payload byte: verify is an integrity status naming the artifact.
  const auto& where = written.tensors.at("blk.3.attn_k.weight");
  auto bytes = test::read_file(tmp / "pkg" / written.artifact_path.at(where.artifact_id));
  bytes[where.offset] ^= 0x11;
  test::write_file(tmp / "pkg" / written.artifact_path.at(where.artifact_id), bytes);
  const auto bad = run_c({(tmp / "pkg").string(), "2", "5"});
  EXPECT_EQ(bad.exit_code, 1);
  const auto err = lines_starting(bad.out, "error verify integrity: ");
  ASSERT_EQ(err.size(), 1u) << bad.out;
  EXPECT_NE(bad.out.find("\n  artifact " + where.artifact_id + " ("), std::string::npos) << bad.out;
}

TEST(CApi, ADamagedPartIsAnIntegrityStatusWithAMessage) {
  TempDir tmp;
  ASSERT_EQ(test::write_pkg(test::data_path("llama-tiny-q8_0.gguf"), tmp / "pkg").exit_code, 0);
  auto bytes = test::read_file(tmp / "pkg" / "layers" / "layer-00001.gguf");
  bytes[bytes.size() - 1] ^= 0x55;
  test::write_file(tmp / "pkg" / "layers" / "layer-00001.gguf", bytes);
  const auto r = run_c({(tmp / "pkg").string(), "1", "2"});
  EXPECT_EQ(r.exit_code, 1);
  const auto err = lines_starting(r.out, "error verify integrity: ");
  ASSERT_EQ(err.size(), 1u) << r.out;
  EXPECT_NE(err[0].find("SHA-256 verification failed"), std::string::npos) << err[0];
}

TEST(CApi, EveryMisuseIsAStatusNeverACrash) {
  TempDir tmp;
  ASSERT_EQ(test::write_pkg(test::data_path("llama-tiny-q8_0.gguf"), tmp / "pkg").exit_code, 0);
  const auto r = run_c({"--errors", (tmp / "pkg").string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(lines_starting(r.out, "open-missing "), std::vector<std::string>{"not_found message null=1"});
  EXPECT_EQ(lines_starting(r.out, "open-bad-ref "), std::vector<std::string>{"usage"});
  EXPECT_EQ(lines_starting(r.out, "open-null "), std::vector<std::string>{"usage"});
  EXPECT_EQ(lines_starting(r.out, "select-empty "), std::vector<std::string>{"usage null=1"});
  EXPECT_EQ(lines_starting(r.out, "select-past-end "), std::vector<std::string>{"invalid_input"});
  EXPECT_EQ(lines_starting(r.out, "select-undeclared-projector "), std::vector<std::string>{"invalid_input"});
  EXPECT_EQ(lines_starting(r.out, "part-out-of-range "), std::vector<std::string>{"usage"});
  EXPECT_EQ(lines_starting(r.out, "policy-bad-phase "), std::vector<std::string>{"usage null=1"});
  EXPECT_EQ(lines_starting(r.out, "policy-missing-backend "), std::vector<std::string>{"not_found"});
  EXPECT_EQ(lines_starting(r.out, "speculative-null "), std::vector<std::string>{"usage"});
}

// The generation resolvers through the C API answer what the CLI answers
// (one library behind both), for a package with a native-MTP default, of
// either schema (schema 2: its generation block read as schema 1's, no
// generation.policy: the built-in policy).
TEST(CApi, GenerationDefaultsAreTheCommandsAnswers) {
  for (const std::string schema : {"1", "2"}) {
    SCOPED_TRACE("schema " + schema);
    TempDir tmp;
    ASSERT_EQ(test::write_pkg(test::data_path("glm4moe-mtp-tiny.gguf"), tmp / "pkg", {"--schema", schema}).exit_code, 0);
    const auto pkg = (tmp / "pkg").string();
    const auto r = run_c({pkg, "0", "1"});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(lines_starting(r.out, "schema ").at(0).substr(0, 2), schema + " ") << r.out;
    EXPECT_EQ(r.out.find("error policy"), std::string::npos) << r.out;
    const auto policy = lines_starting(r.out, "policy ");
    ASSERT_EQ(policy.size(), 1u) << r.out;
    const auto c_policy = nlohmann::json::parse(policy[0]);
    // The command's --json document.
    auto command = [](const std::vector<std::string>& args) {
      const auto c = test::run_cli(args);
      EXPECT_EQ(c.exit_code, 0) << c.err;
      return nlohmann::json::parse(c.out);
    };
    const auto want_policy = command({"policy", pkg, "--phase", "prefill", "--n-tokens", "4096", "--n-kv", "131072",
                                      "--backend", "cpu", "--json"});
    EXPECT_EQ(c_policy["selected_path"], want_policy["selected_path"]);
    EXPECT_EQ(c_policy["telemetry"], want_policy["telemetry"]);
    EXPECT_EQ(c_policy["source"], want_policy["source"]);
    EXPECT_EQ(c_policy["architecture"], want_policy["architecture"]);
    EXPECT_EQ(c_policy["warnings"], want_policy["warnings"]);
    EXPECT_EQ(c_policy["phase"], "long_prefill");

    const auto spec = lines_starting(r.out, "speculative ok ");
    ASSERT_EQ(spec.size(), 1u) << r.out;
    const auto c_spec = nlohmann::json::parse(spec[0]);
    const auto want_spec = command({"speculative", pkg, "--json"});
    EXPECT_EQ(c_spec["strategy"], want_spec["strategy"]);
    EXPECT_EQ(c_spec["plan"], want_spec["plan"]);
    EXPECT_EQ(c_spec["model"], want_spec["model"]);
    EXPECT_EQ(c_spec["notes"], want_spec["notes"]);
    EXPECT_EQ(c_spec["strategy"], "mtp") << c_spec.dump();
  }
}

// #25: the C API takes trust anchors; the same refusals as the CLI, told apart by status.
TEST(CApi, TrustedSignersRefuseUnsignedForeignAndTamperedPackages) {
  TempDir tmp;
  ASSERT_EQ(test::write_pkg(test::data_path("llama-tiny-q8_0.gguf"), tmp / "pkg").exit_code, 0);
  ASSERT_EQ(test::run_cli({"identity", "init-owner", "--dir", (tmp / "owner").string()}).exit_code, 0);
  ASSERT_EQ(test::run_cli({"identity", "init-owner", "--dir", (tmp / "other").string()}).exit_code, 0);
  const std::string pkg = (tmp / "pkg").string();
  const std::string mine = (tmp / "owner" / "owner.crt").string();
  const std::string theirs = (tmp / "other" / "owner.crt").string();
  auto trusted = [&](std::vector<std::string> certs) {
    certs.insert(certs.begin(), {"--trusted", pkg});
    return run_c(certs);
  };
  // Unsigned: accepted without anchors, refused with one.
  auto r = trusted({});
  EXPECT_EQ(lines_starting(r.out, "trusted "), std::vector<std::string>{"ok signer (none)"}) << r.out;
  r = trusted({mine});
  EXPECT_EQ(lines_starting(r.out, "trusted "), std::vector<std::string>{"unauthorized signer (none)"}) << r.out;
  EXPECT_NE(r.out.find("unsigned package"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("null=1"), std::string::npos) << r.out;
  // Signed by the owner: accepted, the signer named, the stage verified.
  const auto sign = test::run_cli({"sign-package", pkg, "--owner", (tmp / "owner").string(), "--json"});
  ASSERT_EQ(sign.exit_code, 0) << sign.err;
  const std::string owner_id = nlohmann::json::parse(sign.out)["owner_id"];
  r = trusted({theirs, mine});
  EXPECT_EQ(lines_starting(r.out, "trusted "), std::vector<std::string>{"ok signer " + owner_id}) << r.out;
  EXPECT_EQ(lines_starting(r.out, "stage "), std::vector<std::string>{"verified"}) << r.out;
  // Another owner only: unauthorized.
  r = trusted({theirs});
  EXPECT_EQ(lines_starting(r.out, "trusted "), std::vector<std::string>{"unauthorized signer (none)"}) << r.out;
  EXPECT_NE(r.out.find("who is not a trusted signer"), std::string::npos) << r.out;
  // The manifest edited after signing: integrity.
  {
    std::ofstream f(tmp / "pkg" / "model-package.json", std::ios::app);
    f << " ";
  }
  r = trusted({mine});
  EXPECT_EQ(lines_starting(r.out, "trusted "), std::vector<std::string>{"integrity signer (none)"}) << r.out;
  // A certificate that is not one: invalid input, naming the file.
  r = trusted({pkg + "/model-package.json"});
  EXPECT_EQ(lines_starting(r.out, "trusted "), std::vector<std::string>{"invalid_input signer (none)"}) << r.out;
}

}  // namespace
}  // namespace skippy
