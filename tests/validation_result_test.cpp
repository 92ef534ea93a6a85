// validation.json (#25): write-package --validate and validate-package
// --write-result leave it in the package, bound to the manifest's SHA-256;
// inspect shows it and says when it no longer matches; the signature
// sidecar covers it, so an edited one fails trust. Through the real CLI.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "util/sha256.h"
#include "skippy/version.h"
#include "test_util.h"

namespace skippy::test::validation_result_test {

namespace fs = std::filesystem;
using nlohmann::json;

json read_json(const fs::path& p) { return json::parse(read_text(p)); }

json inspect(const fs::path& pkg) {
  const auto r = run_cli({"inspect", pkg.string(), "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json::parse(r.out);
}

TEST(ValidationResult, WriteValidateLeavesItBoundToTheManifestAndTheSource) {
  TempDir tmp;
  const fs::path src = data_path("llama-tiny-q8_0.gguf");
  const auto w = write_pkg(src, tmp / "pkg", {"--validate"});
  ASSERT_EQ(w.exit_code, 0) << w.err;
  EXPECT_EQ(json::parse(w.out)["validation_json"], (tmp / "pkg" / "validation.json").string());
  const auto v = read_json(tmp / "pkg" / "validation.json");
  EXPECT_EQ(v["schema_version"], 1);
  EXPECT_EQ(v["tool"]["name"], "skippy-model-package");
  EXPECT_EQ(v["tool"]["version"], std::string(library_version()));
  EXPECT_EQ(v["command"], "write-package --validate");
  EXPECT_EQ(v["manifest_sha256"], sha256_hex(read_text(tmp / "pkg" / "model-package.json")));
  ASSERT_EQ(v["source_files"].size(), 1u);
  EXPECT_EQ(v["source_files"][0]["name"], "llama-tiny-q8_0.gguf");
  EXPECT_EQ(v["source_files"][0]["sha256"], sha256_file(src));
  EXPECT_EQ(v["source_files"][0]["size"], fs::file_size(src));
  EXPECT_EQ(v["result"], "valid");
  EXPECT_TRUE(v["problems"].empty());
  EXPECT_GE(v["checks"].size(), 10u);
  EXPECT_GT(v["tensors_checked"].get<uint64_t>(), 0u);
  EXPECT_GT(v["validated_at_unix_secs"].get<int64_t>(), 1700000000);
  EXPECT_EQ(v["validated_at"].get<std::string>().size(), 20u);
  // Declared nowhere in the manifest.
  EXPECT_EQ(read_text(tmp / "pkg" / "model-package.json").find("validation.json"), std::string::npos);
  // No temporary left beside it (written atomically).
  for (const auto& e : fs::directory_iterator(tmp / "pkg")) EXPECT_FALSE(e.path().filename().string().starts_with(".")) << e.path();

  const auto i = inspect(tmp / "pkg");
  EXPECT_EQ(i["validation"]["present"], true);
  EXPECT_EQ(i["validation"]["result"], "valid");
  EXPECT_EQ(i["validation"]["matches_manifest"], true);
  EXPECT_EQ(i["validation"]["covered_by_signature"], false);
  const auto text = run_cli({"inspect", (tmp / "pkg").string()});
  EXPECT_NE(text.out.find("validation.json   valid (write-package --validate"), std::string::npos) << text.out;

  // Without --validate there is none.
  ASSERT_EQ(write_pkg(src, tmp / "plain").exit_code, 0);
  EXPECT_FALSE(fs::exists(tmp / "plain" / "validation.json"));
  EXPECT_EQ(inspect(tmp / "plain")["validation"]["present"], false);
}

// Read as strictly as every JSON a stranger writes: a key twice (two
// verdicts in one file) leaves it unreadable, not read as the last one.
TEST(ValidationResult, ADuplicateKeyMakesItUnreadable) {
  TempDir tmp;
  ASSERT_EQ(write_pkg(data_path("llama-tiny-q8_0.gguf"), tmp / "pkg", {"--validate"}).exit_code, 0);
  const fs::path file = tmp / "pkg" / "validation.json";
  EXPECT_EQ(inspect(tmp / "pkg")["validation"]["result"], "valid");
  std::string text = read_text(file);
  const size_t brace = text.rfind('}');
  ASSERT_NE(brace, std::string::npos);
  text.insert(brace, ", \"result\": \"valid\"");
  std::ofstream(file, std::ios::trunc) << text;
  const auto i = inspect(tmp / "pkg");
  EXPECT_EQ(i["validation"]["present"], true);
  EXPECT_FALSE(i["validation"].contains("result")) << i["validation"];
  EXPECT_NE(i["validation"]["error"].get<std::string>().find("duplicate key \"result\""), std::string::npos) << i["validation"];
}

TEST(ValidationResult, AnEditedManifestNoLongerMatchesAndInspectSaysSo) {
  TempDir tmp;
  ASSERT_EQ(write_pkg(data_path("llama-tiny-q8_0.gguf"), tmp / "pkg", {"--validate"}).exit_code, 0);
  auto manifest = json::parse(read_text(tmp / "pkg" / "model-package.json"));
  manifest["model_id"] = "org/other:Q8_0";
  std::ofstream(tmp / "pkg" / "model-package.json", std::ios::trunc) << manifest.dump(2) << "\n";
  const auto i = inspect(tmp / "pkg");
  EXPECT_EQ(i["validation"]["matches_manifest"], false);
  bool warned = false;
  for (const auto& w : i["warnings"]) warned = warned || w.get<std::string>().find("describes another manifest") != std::string::npos;
  EXPECT_TRUE(warned) << i["warnings"].dump();
  const auto text = run_cli({"inspect", (tmp / "pkg").string()});
  EXPECT_NE(text.out.find("DOES NOT MATCH this manifest"), std::string::npos) << text.out;
}

TEST(ValidationResult, ValidatePackageWriteResultRecordsInvalidToo) {
  TempDir tmp;
  ASSERT_EQ(write_pkg(data_path("llama-tiny-q8_0.gguf"), tmp / "pkg").exit_code, 0);
  // Valid against its source.
  auto r = run_cli({"validate-package", data_path("llama-tiny-q8_0.gguf").string(), (tmp / "pkg").string(), "--write-result", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["validation_json"], (tmp / "pkg" / "validation.json").string());
  auto v = read_json(tmp / "pkg" / "validation.json");
  EXPECT_EQ(v["result"], "valid");
  EXPECT_EQ(v["command"], "validate-package --write-result");
  // Against another file: invalid, the problems recorded, exit 1.
  r = run_cli({"validate-package", data_path("llama-tiny-f16.gguf").string(), (tmp / "pkg").string(), "--write-result"});
  EXPECT_EQ(r.exit_code, 1);
  v = read_json(tmp / "pkg" / "validation.json");
  EXPECT_EQ(v["result"], "invalid");
  ASSERT_FALSE(v["problems"].empty());
  EXPECT_NE(v["problems"][0].get<std::string>().find("not the source the package was written from"), std::string::npos);
  EXPECT_EQ(v["source_files"][0]["name"], "llama-tiny-f16.gguf");
  EXPECT_EQ(v["source_files"][0]["sha256"], sha256_file(data_path("llama-tiny-f16.gguf")));
  // Without --write-result nothing is written.
  fs::remove(tmp / "pkg" / "validation.json");
  ASSERT_EQ(run_cli({"validate-package", data_path("llama-tiny-q8_0.gguf").string(), (tmp / "pkg").string()}).exit_code, 0);
  EXPECT_FALSE(fs::exists(tmp / "pkg" / "validation.json"));
}

TEST(ValidationResult, TheSignatureCoversItAndAnEditedOneFailsTrust) {
  TempDir tmp;
  ASSERT_EQ(write_pkg(data_path("llama-tiny-q8_0.gguf"), tmp / "pkg", {"--validate"}).exit_code, 0);
  ASSERT_EQ(run_cli({"identity", "init-owner", "--dir", (tmp / "owner").string()}).exit_code, 0);
  ASSERT_EQ(run_cli({"sign-package", (tmp / "pkg").string(), "--owner", (tmp / "owner").string()}).exit_code, 0);
  const auto sidecar = read_json(tmp / "pkg" / "model-package.json.sig");
  EXPECT_EQ(sidecar["validation_sha256"], sha256_file(tmp / "pkg" / "validation.json"));
  const std::string anchor = (tmp / "owner" / "owner.crt").string();
  const std::vector<std::string> select = {"select", (tmp / "pkg").string(), "--layers", "0..2", "--json", "--trust-signer", anchor};
  ASSERT_EQ(run_cli(select).exit_code, 0);
  EXPECT_EQ(inspect(tmp / "pkg")["validation"]["covered_by_signature"], true);

  // An "improved" verdict: the digest no longer matches the signed one.
  auto v = read_json(tmp / "pkg" / "validation.json");
  v["problems"] = json::array();
  v["result"] = "valid";
  v["tool"]["version"] = "9.9.9";
  std::ofstream(tmp / "pkg" / "validation.json", std::ios::trunc) << v.dump(2) << "\n";
  expect_json_error(run_cli(select), "integrity", "validation.json");
  // Re-hashed into the sidecar too: the digests agree, the signature does not.
  auto doc = sidecar;
  doc["validation_sha256"] = sha256_file(tmp / "pkg" / "validation.json");
  std::ofstream(tmp / "pkg" / "model-package.json.sig", std::ios::trunc) << doc.dump(2);
  expect_json_error(run_cli(select), "integrity", "signature does not verify over the exact bytes of");
  EXPECT_EQ(inspect(tmp / "pkg")["signature"]["verifies"], false);
  // Removed altogether: the sidecar signs a file that is missing.
  fs::remove(tmp / "pkg" / "validation.json");
  expect_json_error(run_cli(select), "integrity", "which is missing");

  // validate-package --write-result on a signed package says to sign again.
  std::ofstream(tmp / "pkg" / "model-package.json.sig", std::ios::trunc) << sidecar.dump(2);
  const auto again = run_cli({"validate-package", data_path("llama-tiny-q8_0.gguf").string(), (tmp / "pkg").string(), "--write-result"});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.err.find("sign it again with sign-package"), std::string::npos) << again.err;
}

TEST(ValidationResult, RewritingThePackageDropsTheOldVerdictAndSignature) {
  TempDir tmp;
  ASSERT_EQ(write_pkg(data_path("llama-tiny-q8_0.gguf"), tmp / "pkg", {"--validate"}).exit_code, 0);
  ASSERT_EQ(run_cli({"identity", "init-owner", "--dir", (tmp / "owner").string()}).exit_code, 0);
  ASSERT_EQ(run_cli({"sign-package", (tmp / "pkg").string(), "--owner", (tmp / "owner").string()}).exit_code, 0);
  ASSERT_EQ(write_pkg(data_path("llama-tiny-f16.gguf"), tmp / "pkg", {"--force"}).exit_code, 0);
  EXPECT_FALSE(fs::exists(tmp / "pkg" / "validation.json"));
  EXPECT_FALSE(fs::exists(tmp / "pkg" / "model-package.json.sig"));
  // write-package --validate --sign: both, the sidecar covering the verdict.
  const auto w = write_pkg(data_path("llama-tiny-f16.gguf"), tmp / "pkg",
                           {"--force", "--validate", "--sign", (tmp / "owner").string()});
  ASSERT_EQ(w.exit_code, 0) << w.err;
  EXPECT_FALSE(json::parse(w.out)["signed_by"].is_null());
  EXPECT_EQ(read_json(tmp / "pkg" / "model-package.json.sig")["validation_sha256"], sha256_file(tmp / "pkg" / "validation.json"));
  EXPECT_EQ(run_cli({"verify", (tmp / "pkg").string(), "--json", "--trust-signer", (tmp / "owner" / "owner.crt").string()}).exit_code, 0);
}

}  // namespace skippy::test::validation_result_test
