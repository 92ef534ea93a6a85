// Signed packages (#25 part 1): sign-package, the OpenSSL recipe, and the
// consumer's refusals with trusted signers, through the real CLI.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "util/sha256.h"
#include "expired_owner.h"
#include "test_util.h"

namespace skippy::test::package_signature_test {

namespace fs = std::filesystem;

struct Fixture {
  TempDir tmp;
  fs::path pkg = tmp / "pkg";
  fs::path owner = tmp / "owner";
  fs::path other = tmp / "other";
  Fixture() {
    EXPECT_EQ(write_pkg(data_path("llama-tiny-q8_0.gguf"), pkg).exit_code, 0);
    EXPECT_EQ(run_cli({"identity", "init-owner", "--dir", owner.string()}).exit_code, 0);
    EXPECT_EQ(run_cli({"identity", "init-owner", "--dir", other.string()}).exit_code, 0);
  }
  CliResult select_with(const fs::path& anchor) {
    return run_cli({"select", pkg.string(), "--layers", "0..4", "--json", "--trust-signer", anchor.string()});
  }
};

nlohmann::json sidecar(const fs::path& pkg) { return nlohmann::json::parse(read_text(pkg / "model-package.json.sig")); }

std::vector<uint8_t> unbase64(const std::string& s) {
  std::vector<uint8_t> out(s.size());
  const int n = EVP_DecodeBlock(out.data(), reinterpret_cast<const unsigned char*>(s.data()), static_cast<int>(s.size()));
  out.resize(static_cast<size_t>(n) - (s.ends_with("==") ? 2 : s.ends_with("=") ? 1 : 0));
  return out;
}

// Writes pkg's sidecar as sign-package would, signed with the key of
// `owner_dir` by OpenSSL here (for owners sign-package refuses).
void sign_by_hand(const fs::path& owner_dir, const fs::path& pkg) {
  const std::string manifest = read_text(pkg / "model-package.json");
  FILE* kf = std::fopen((owner_dir / "owner.key").c_str(), "r");
  EVP_PKEY* key = PEM_read_PrivateKey(kf, nullptr, nullptr, nullptr);
  std::fclose(kf);
  ASSERT_NE(key, nullptr);
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  unsigned char sig[64];
  size_t len = sizeof sig;
  ASSERT_EQ(EVP_DigestSignInit(ctx, nullptr, nullptr, nullptr, key), 1);
  ASSERT_EQ(EVP_DigestSign(ctx, sig, &len, reinterpret_cast<const unsigned char*>(manifest.data()), manifest.size()), 1);
  EVP_MD_CTX_free(ctx);
  EVP_PKEY_free(key);
  std::string b64(100, '\0');
  b64.resize(static_cast<size_t>(EVP_EncodeBlock(reinterpret_cast<unsigned char*>(b64.data()), sig, static_cast<int>(len))));
  const nlohmann::json doc = {{"schema_version", 1},
                              {"owner_certificate", read_text(owner_dir / "owner.crt")},
                              {"manifest_sha256", sha256_hex(manifest)},
                              {"signed_at_unix_secs", 1},
                              {"signature", b64}};
  std::ofstream(pkg / "model-package.json.sig", std::ios::trunc) << doc.dump(2);
}

TEST(PackageSignature, SignsAndVerifiesWithThePlainOpenSslRecipe) {
  Fixture f;
  const auto r = run_cli({"sign-package", f.pkg.string(), "--owner", f.owner.string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto doc = sidecar(f.pkg);
  EXPECT_EQ(doc["schema_version"], 1);
  EXPECT_EQ(doc["manifest_sha256"], sha256_hex(read_text(f.pkg / "model-package.json")));
  std::ofstream(f.tmp / "cert.pem") << doc["owner_certificate"].get<std::string>();
  write_file(f.tmp / "sig.bin", unbase64(doc["signature"].get<std::string>()));
  const auto pub = run_program("openssl", {"x509", "-in", (f.tmp / "cert.pem").string(), "-pubkey", "-noout"});
  ASSERT_EQ(pub.exit_code, 0) << pub.err;
  std::ofstream(f.tmp / "pub.pem") << pub.out;
  const auto v = run_program("openssl", {"pkeyutl", "-verify", "-pubin", "-inkey", (f.tmp / "pub.pem").string(), "-rawin",
                                         "-in", (f.pkg / "model-package.json").string(), "-sigfile", (f.tmp / "sig.bin").string()});
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  EXPECT_NE(v.out.find("Signature Verified Successfully"), std::string::npos) << v.out;
  // The recipe fails on other bytes: it is not a test that cannot fail.
  std::ofstream(f.tmp / "other.json") << read_text(f.pkg / "model-package.json") << " ";
  const auto bad = run_program("openssl", {"pkeyutl", "-verify", "-pubin", "-inkey", (f.tmp / "pub.pem").string(), "-rawin",
                                           "-in", (f.tmp / "other.json").string(), "-sigfile", (f.tmp / "sig.bin").string()});
  EXPECT_NE(bad.exit_code, 0);
  // Trusted signer: accepted; inspect names the signer.
  EXPECT_EQ(f.select_with(f.owner / "owner.crt").exit_code, 0);
  const auto ins = run_cli({"inspect", f.pkg.string(), "--json"});
  ASSERT_EQ(ins.exit_code, 0) << ins.err;
  const auto sig = nlohmann::json::parse(ins.out)["signature"];
  EXPECT_EQ(sig["present"], true);
  EXPECT_EQ(sig["verifies"], true);
  EXPECT_EQ(sig["owner_id"], doc["owner_id"]);
}

TEST(PackageSignature, TamperedManifestWithConsistentDigestsIsAnIntegrityError) {
  Fixture f;
  ASSERT_EQ(run_cli({"sign-package", f.pkg.string(), "--owner", f.owner.string()}).exit_code, 0);
  // The attacker edits the manifest and re-hashes it into the sidecar: the digests agree, the signature does not.
  auto manifest = nlohmann::json::parse(read_text(f.pkg / "model-package.json"));
  manifest["model_id"] = "evil/model:Q8_0";
  const std::string text = manifest.dump(2) + "\n";
  std::ofstream(f.pkg / "model-package.json", std::ios::trunc) << text;
  auto doc = sidecar(f.pkg);
  doc["manifest_sha256"] = sha256_hex(text);
  std::ofstream(f.pkg / "model-package.json.sig", std::ios::trunc) << doc.dump(2);
  expect_json_error(f.select_with(f.owner / "owner.crt"), "integrity", "signature does not verify over the exact bytes");
  // Without an anchor inspect still says it does not verify.
  const auto ins = run_cli({"inspect", f.pkg.string(), "--json"});
  ASSERT_EQ(ins.exit_code, 0) << ins.err;
  EXPECT_EQ(nlohmann::json::parse(ins.out)["signature"]["verifies"], false);
}

TEST(PackageSignature, AnotherOwnersSignatureIsUnauthorized) {
  Fixture f;
  ASSERT_EQ(run_cli({"sign-package", f.pkg.string(), "--owner", f.other.string()}).exit_code, 0);
  expect_json_error(f.select_with(f.owner / "owner.crt"), "unauthorized", "who is not a trusted signer");
}

TEST(PackageSignature, UnsignedIsRefusedWithAnAnchorAndAcceptedWithout) {
  Fixture f;
  expect_json_error(f.select_with(f.owner / "owner.crt"), "unauthorized", "unsigned package");
  const auto env_anchor = run_cli({"verify", f.pkg.string(), "--json"}, {"SKIPPY_TRUSTED_SIGNERS=" + (f.owner / "owner.crt").string()});
  expect_json_error(env_anchor, "unauthorized", "unsigned package");
  EXPECT_EQ(run_cli({"select", f.pkg.string(), "--layers", "0..4", "--json"}).exit_code, 0);
  const auto ins = run_cli({"inspect", f.pkg.string(), "--json"});
  EXPECT_EQ(nlohmann::json::parse(ins.out)["signature"]["present"], false);
}

TEST(PackageSignature, ExpiredOwnerCertificateIsRefused) {
  Fixture f;
  test::make_expired_owner(f.tmp / "expired");
  // Signing with it is refused...
  const auto sign = run_cli({"sign-package", f.pkg.string(), "--owner", (f.tmp / "expired").string(), "--json"});
  expect_json_error(sign, "invalid_input", "expired or not yet valid");
  // ...and a sidecar it made (while it was valid: written here with
  // OpenSSL, as sign-package would have) is refused by the consumer.
  sign_by_hand(f.tmp / "expired", f.pkg);
  expect_json_error(f.select_with(f.tmp / "expired" / "owner.crt"), "unauthorized", "expired or not yet valid");
  // The same sidecar without an anchor: accepted (signatures optional), and inspect says the certificate is not valid now.
  EXPECT_EQ(run_cli({"select", f.pkg.string(), "--layers", "0..4", "--json"}).exit_code, 0);
  const auto ins = run_cli({"inspect", f.pkg.string(), "--json"});
  EXPECT_EQ(nlohmann::json::parse(ins.out)["signature"]["certificate_valid_now"], false);
}

// An owner certificate signs node certificates, so it is a CA (as
// `identity init-owner` makes it). The signer side and the peer side apply
// the one rule: a self-signed certificate with CA:FALSE is no owner, as a
// signer, a signature's certificate, a trust anchor or a node's issuer.
TEST(PackageSignature, ANonCaCertificateIsRefusedAsASigner) {
  Fixture f;
  test::make_non_ca_owner(f.tmp / "leafy");
  const auto sign = run_cli({"sign-package", f.pkg.string(), "--owner", (f.tmp / "leafy").string(), "--json"});
  expect_json_error(sign, "invalid_input", "not a CA certificate");
  EXPECT_FALSE(fs::exists(f.pkg / "model-package.json.sig")) << "nothing signed";
  // A sidecar signed with its key (by hand) is refused, with or without an anchor.
  sign_by_hand(f.tmp / "leafy", f.pkg);
  const auto ins = nlohmann::json::parse(run_cli({"inspect", f.pkg.string(), "--json"}).out)["signature"];
  EXPECT_EQ(ins["verifies"], false);
  EXPECT_NE(ins["error"].get<std::string>().find("not a CA certificate"), std::string::npos) << ins;
  expect_json_error(f.select_with(f.owner / "owner.crt"), "invalid_input", "not a CA certificate");
  // As a trusted signer's certificate it is refused before any package is read.
  ASSERT_EQ(run_cli({"sign-package", f.pkg.string(), "--owner", f.owner.string()}).exit_code, 0);
  expect_json_error(f.select_with(f.tmp / "leafy" / "owner.crt"), "invalid_input", "not a CA certificate");
  // And the peer side: it issues no node.
  const auto node = run_cli({"identity", "issue-node", "--owner", (f.tmp / "leafy").string(), "--out",
                             (f.tmp / "node").string(), "--json"});
  expect_json_error(node, "invalid_input", "not a CA certificate");
  // The same hand-made owner as a CA signs and is trusted: the refusal is the CA rule, not the hand.
  test::make_owner_by_hand(f.tmp / "ca", {});
  ASSERT_EQ(run_cli({"sign-package", f.pkg.string(), "--owner", (f.tmp / "ca").string()}).exit_code, 0);
  EXPECT_EQ(f.select_with(f.tmp / "ca" / "owner.crt").exit_code, 0) << f.select_with(f.tmp / "ca" / "owner.crt").err;
}

}  // namespace skippy::test::package_signature_test
