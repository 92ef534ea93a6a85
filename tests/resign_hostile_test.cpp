// A signature vouches only for what was checked: restamp-package --sign
// refuses a package whose signature no longer verifies or whose artifacts
// differ from the root (an attacker who edits a layer, writes its new digest
// into the root and recomputes the package_id must not get it re-signed),
// and sign-package says when it replaces a signature that did not verify.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "skippy/manifest_v2.h"
#include "test_util.h"
#include "util/sha256.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using test::run_cli;
using test::TempDir;

struct SignedV2 {
  fs::path pkg, owner;
};

SignedV2 signed_v2(const TempDir& t) {
  SignedV2 s{t / "pkg", t / "owner"};
  const auto w = test::write_pkg(test::data_path("llama-tiny-q8_0.gguf"), s.pkg,
                                 {"--schema", "2", "--native-abi-version", "0.1.64"});
  EXPECT_EQ(w.exit_code, 0) << w.err;
  EXPECT_EQ(run_cli({"identity", "init-owner", "--dir", s.owner.string()}).exit_code, 0);
  const auto r = run_cli({"sign-package", s.pkg.string(), "--owner", s.owner.string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return s;
}

// Flips one byte of the artifact at `path` (relative) and, when
// `rewrite_root`, writes its new digest into the root with a correct
// package_id: what an attacker holding the files but not the key can do.
void tamper_layer(const fs::path& pkg, const std::string& rel, bool rewrite_root) {
  auto bytes = test::read_file(pkg / rel);
  ASSERT_GT(bytes.size(), 100u);
  bytes[bytes.size() - 7] ^= 0x5a;
  fs::remove(pkg / rel);  // the file may be hard-linked: replace, never write through
  test::write_file(pkg / rel, bytes);
  if (!rewrite_root) return;
  auto root = parse_package_root_v2(test::read_text(pkg / "model-package.json"), "root");
  bool found = false;
  for (auto& a : root.artifacts) {
    if (a.path != rel) continue;
    a.sha256 = sha256_hex(std::span<const uint8_t>(bytes));
    found = true;
  }
  ASSERT_TRUE(found) << rel;
  root.package_id = compute_package_id_v2(root);
  const std::string text = package_root_v2_json(root);
  test::write_file(pkg / "model-package.json", std::vector<uint8_t>(text.begin(), text.end()));
}

TEST(ResignHostile, RestampSignRefusesARootEditedAfterSigning) {
  TempDir t;
  const auto s = signed_v2(t);
  const std::string trust = (s.owner / "owner.crt").string();
  tamper_layer(s.pkg, "layers/layer-00002.gguf", /*rewrite_root=*/true);
  // The consumer refuses the tampered package...
  auto r = run_cli({"verify", s.pkg.string(), "--trust-signer", trust, "--json"});
  ASSERT_EQ(r.exit_code, 1) << r.out;
  const std::string root_before = test::read_text(s.pkg / "model-package.json");
  const std::string sig_before = test::read_text(s.pkg / "model-package.json.sig");
  // ...and restamp --sign must not make it trusted.
  r = run_cli({"restamp-package", s.pkg.string(), "--native-abi-version", "0.1.65", "--sign", s.owner.string(), "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  test::expect_json_error(r, "integrity", "signature does not verify");
  EXPECT_EQ(test::read_text(s.pkg / "model-package.json"), root_before);
  EXPECT_EQ(test::read_text(s.pkg / "model-package.json.sig"), sig_before);
  r = run_cli({"verify", s.pkg.string(), "--trust-signer", trust, "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  r = run_cli({"select", s.pkg.string(), "--layers", "0..4", "--runtime-abi", "0.1.65", "--trust-signer", trust});
  EXPECT_EQ(r.exit_code, 1) << r.out;
}

TEST(ResignHostile, RestampSignRefusesArtifactsThatDifferFromTheRoot) {
  TempDir t;
  const auto s = signed_v2(t);
  // Without a signature to check, the artifacts still must match the root.
  fs::remove(s.pkg / "model-package.json.sig");
  tamper_layer(s.pkg, "layers/layer-00005.gguf", /*rewrite_root=*/false);
  const std::string root_before = test::read_text(s.pkg / "model-package.json");
  auto r = run_cli({"restamp-package", s.pkg.string(), "--native-abi-version", "0.1.65", "--sign", s.owner.string(), "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  test::expect_json_error(r, "integrity", "1 of ");
  EXPECT_NE(r.out.find("layers/layer-00005.gguf"), std::string::npos) << r.out;
  EXPECT_EQ(test::read_text(s.pkg / "model-package.json"), root_before);
  EXPECT_FALSE(fs::exists(s.pkg / "model-package.json.sig"));
  // Without --sign nothing is vouched for: the re-stamp itself goes ahead.
  r = run_cli({"restamp-package", s.pkg.string(), "--native-abi-version", "0.1.65", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(ResignHostile, RestampSignSignsAnIntactPackage) {
  TempDir t;
  const auto s = signed_v2(t);
  auto r = run_cli({"restamp-package", s.pkg.string(), "--native-abi-version", "0.1.65", "--sign", s.owner.string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(nlohmann::json::parse(r.out)["signed_by"].is_null());
  r = run_cli({"verify", s.pkg.string(), "--trust-signer", (s.owner / "owner.crt").string(), "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(ResignHostile, SignPackageSaysItReplacesASignatureThatDidNotVerify) {
  TempDir t;
  const auto s = signed_v2(t);
  auto r = run_cli({"sign-package", s.pkg.string(), "--owner", s.owner.string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(nlohmann::json::parse(r.out)["replaced_invalid_signature"].is_null()) << r.out;
  EXPECT_EQ(r.err.find("did not verify"), std::string::npos) << r.err;
  tamper_layer(s.pkg, "layers/layer-00002.gguf", /*rewrite_root=*/true);
  r = run_cli({"sign-package", s.pkg.string(), "--owner", s.owner.string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j["replaced_invalid_signature"].is_string()) << r.out;
  EXPECT_NE(j["replaced_invalid_signature"].get<std::string>().find("model-package.json"), std::string::npos);
  EXPECT_NE(r.err.find("warning: replaced a signature that did not verify"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace skippy
