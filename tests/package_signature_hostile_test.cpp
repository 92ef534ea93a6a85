// Hostile signature sidecars: the signature must
// be the canonical base64 of exactly 64 bytes, and the sidecar's JSON is
// read as strictly as the schema 2 root (no key twice, no field it does not
// declare, nothing after the owner certificate). Real CLI, real files.
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace skippy::test::package_signature_hostile_test {

namespace fs = std::filesystem;

std::string b64(const std::string& raw) {
  std::string out(4 * ((raw.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(raw.data()), static_cast<int>(raw.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

std::string unb64(const std::string& s) {
  std::string out(s.size(), '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(s.data()), static_cast<int>(s.size()));
  out.resize(static_cast<size_t>(n) - (s.ends_with("==") ? 2 : s.ends_with("=") ? 1 : 0));
  return out;
}

class SignatureHostile : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir();
    ASSERT_EQ(write_pkg(data_path("llama-tiny-q8_0.gguf"), pkg()).exit_code, 0);
    ASSERT_EQ(run_cli({"identity", "init-owner", "--dir", owner().string()}).exit_code, 0);
    ASSERT_EQ(run_cli({"identity", "init-owner", "--dir", (dir_->path() / "other").string()}).exit_code, 0);
    ASSERT_EQ(run_cli({"sign-package", pkg().string(), "--owner", owner().string()}).exit_code, 0);
    good_ = new std::string(read_text(sidecar()));
  }
  static void TearDownTestSuite() {
    delete good_;
    delete dir_;
  }
  void TearDown() override { std::ofstream(sidecar(), std::ios::trunc) << *good_; }
  static fs::path pkg() { return dir_->path() / "pkg"; }
  static fs::path owner() { return dir_->path() / "owner"; }
  static fs::path sidecar() { return pkg() / "model-package.json.sig"; }
  static nlohmann::json good() { return nlohmann::json::parse(*good_); }
  static void write_sidecar(const std::string& text) { std::ofstream(sidecar(), std::ios::trunc) << text; }
  static CliResult select() {
    return run_cli({"select", pkg().string(), "--layers", "0..4", "--json", "--trust-signer", (owner() / "owner.crt").string()});
  }
  static TempDir* dir_;
  static std::string* good_;
};
TempDir* SignatureHostile::dir_ = nullptr;
std::string* SignatureHostile::good_ = nullptr;

TEST_F(SignatureHostile, TheUntouchedSidecarVerifies) { EXPECT_EQ(select().exit_code, 0) << select().err; }

TEST_F(SignatureHostile, ASignatureWithTrailingBytesIsRefused) {
  // Before #29 the decoder kept the first 64 bytes of 65 or 66.
  const std::string sig = unb64(good()["signature"].get<std::string>());
  ASSERT_EQ(sig.size(), 64u);
  for (const std::string& tail : {std::string("\x01"), std::string("\x01\x02")}) {
    auto doc = good();
    doc["signature"] = b64(sig + tail);
    ASSERT_EQ(doc["signature"].get<std::string>().size(), 88u);  // what the old length check let through
    write_sidecar(doc.dump(2));
    expect_json_error(select(), "integrity", "\"signature\" is not the canonical base64 of a 64-byte Ed25519 signature");
  }
}

TEST_F(SignatureHostile, NonCanonicalBase64IsRefused) {
  // The same 64 bytes, spelled with non-zero padding bits: 'A' (0) -> 'B' (1)
  // or the like in the last significant character.
  std::string text = good()["signature"].get<std::string>();
  ASSERT_TRUE(text.ends_with("=="));
  static const std::string kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const size_t v = kAlphabet.find(text[85]);
  text[85] = kAlphabet[v ^ 1];
  ASSERT_EQ(unb64(text), unb64(good()["signature"].get<std::string>()));  // decodes to the very signature
  auto doc = good();
  doc["signature"] = text;
  write_sidecar(doc.dump(2));
  expect_json_error(select(), "integrity", "is not the canonical base64");
}

TEST_F(SignatureHostile, ADuplicateSignatureKeyIsRefused) {
  // A bad signature first, the good one last: the DOM kept the last.
  std::string text = *good_;
  const auto at = text.find("\"signature\":");
  ASSERT_NE(at, std::string::npos);
  text.insert(at, "\"signature\": \"" + b64(std::string(64, 'x')) + "\",\n  ");
  write_sidecar(text);
  expect_json_error(select(), "invalid_input", "duplicate key \"signature\" in one JSON object");
}

TEST_F(SignatureHostile, AnUnknownFieldIsRefused) {
  auto doc = good();
  doc["note"] = "trust me";
  write_sidecar(doc.dump(2));
  expect_json_error(select(), "invalid_input", "note: unknown field");
}

TEST_F(SignatureHostile, ASecondPemBlockAfterTheOwnerCertificateIsRefused) {
  auto doc = good();
  const std::string other = read_text(dir_->path() / "other" / "owner.crt");
  doc["owner_certificate"] = doc["owner_certificate"].get<std::string>() + other;
  write_sidecar(doc.dump(2));
  expect_json_error(select(), "invalid_input", "\"owner_certificate\" must be exactly one PEM certificate");
}

}  // namespace skippy::test::package_signature_hostile_test
