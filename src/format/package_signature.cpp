// Signed packages: the sidecar model-package.json.sig (skippy/package_signature.h).
#include "format/json_output.h"
#include "util/openssl_handles.h"
#include "util/owner_certificate.h"
#include "skippy/package_signature.h"
#include "skippy/package_layout.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>

#include "format/manifest_json.h"
#include "skippy/error.h"
#include "util/file.h"
#include "skippy/manifest.h"
#include "util/sha256.h"

namespace skippy {
namespace package_signature_detail {

namespace fs = std::filesystem;

using detail::BioPtr;
using detail::MdCtxPtr;
using detail::base64;
using detail::PkeyPtr;
using detail::X509Ptr;
using detail::openssl_errors;
using detail::within_validity;
// The owner-certificate rule, shared with the peer side.
using detail::certificate_pem;
using detail::certificate_time_text;
using detail::check_owner_certificate;
using detail::parse_certificate_pem;

// The sidecar's JSON, strictly: a key twice in one object or a field it
// does not declare is refused (a duplicate "signature", bad
// first and good last, was accepted).
nlohmann::json parse_sidecar_json(const std::string& text, const std::string& where) {
  const manifest_detail::FieldReader r(where);
  nlohmann::json doc = manifest_detail::parse_strict_json(text, r, 8);
  if (!doc.is_object()) throw_invalid(where + ": not a JSON object");
  // Its fields; any other is refused (as the schema 2 root refuses fields it
  // does not declare).
  for (const auto& [k, v] : doc.items()) {
    if (!manifest_detail::is_one_of(k, {"schema_version", "owner_id", "owner_certificate", "manifest_sha256",
                                        "signed_at_unix_secs", "signature", "validation_sha256", "validation_signature"})) {
      r.fail(manifest_detail::field_path("", k), "unknown field");
    }
  }
  return doc;
}

std::string subject_of(const X509* cert) {
  char buf[256];
  X509_NAME_oneline(X509_get_subject_name(cert), buf, sizeof buf);
  return buf;
}

// The canonical base64 of exactly 64 bytes (an Ed25519 signature); nullopt
// for anything else. EVP_DecodeBlock does not strip padding (88 characters
// always give 66 bytes) and takes non-zero padding bits and surrounding
// whitespace: so the 64 bytes must encode back to the very text (else a 65-
// or 66-byte signature would verify on its first 64).
std::optional<std::string> unbase64_signature(const std::string& text) {
  if (text.size() != 88) return std::nullopt;
  std::string out(66, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()), static_cast<int>(text.size()));
  if (n != 66) return std::nullopt;
  out.resize(64);
  if (base64(out) != text) return std::nullopt;
  return out;
}

std::string ed25519_sign(EVP_PKEY* key, const std::string& msg) {
  MdCtxPtr ctx(EVP_MD_CTX_new());
  uint8_t sig[64];
  size_t len = sizeof sig;
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key) != 1 ||
      EVP_DigestSign(ctx.get(), sig, &len, reinterpret_cast<const uint8_t*>(msg.data()), msg.size()) != 1) {
    throw_invalid("Ed25519 signing failed: " + openssl_errors());
  }
  return std::string(reinterpret_cast<const char*>(sig), len);
}

bool ed25519_verify(EVP_PKEY* key, const std::string& msg, const std::string& sig) {
  MdCtxPtr ctx(EVP_MD_CTX_new());
  const bool ok = ctx && EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key) == 1 &&
                  EVP_DigestVerify(ctx.get(), reinterpret_cast<const uint8_t*>(sig.data()), sig.size(),
                                   reinterpret_cast<const uint8_t*>(msg.data()), msg.size()) == 1;
  ERR_clear_error();
  return ok;
}

PkeyPtr load_owner_key(const fs::path& path) {
  return detail::load_ed25519_private_key(path, " (an owner directory holds owner.key and owner.crt)");
}

std::optional<std::string> read_if_present(const fs::path& path, uint64_t max_bytes) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec))) return std::nullopt;
  return read_small_file(path, max_bytes);
}

PackageSignature describe(X509* cert, const std::string& owner_id) {
  PackageSignature s;
  s.owner_id = owner_id;
  s.owner_subject = subject_of(cert);
  s.not_before = certificate_time_text(X509_get0_notBefore(cert));
  s.not_after = certificate_time_text(X509_get0_notAfter(cert));
  s.certificate_valid_now = within_validity(cert);
  return s;
}

}  // namespace package_signature_detail


PackageSignature sign_package(const std::filesystem::path& package_dir, const std::filesystem::path& owner_dir) {
  using namespace package_signature_detail;
  refuse_hf_cache_snapshot(package_dir, "sign-package");
  const fs::path key_path = owner_dir / "owner.key";
  const fs::path cert_path = owner_dir / "owner.crt";
  std::error_code ec;
  if (!fs::is_directory(owner_dir, ec)) throw_not_found(owner_dir.string() + ": no such owner directory");
  PkeyPtr key = load_owner_key(key_path);
  X509Ptr cert = detail::load_certificate(cert_path, "");
  const std::string owner_id = check_owner_certificate(cert.get(), cert_path.string());
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    throw_invalid(key_path.string() + ": does not match " + cert_path.string());
  }
  if (!within_validity(cert.get())) {
    throw_invalid(cert_path.string() + ": expired or not yet valid (" + certificate_time_text(X509_get0_notBefore(cert.get())) +
                  " to " + certificate_time_text(X509_get0_notAfter(cert.get())) + "); a signature made with it would be refused");
  }
  const fs::path manifest_path = package_dir / std::string(kManifestFileName);
  if (!fs::exists(manifest_path, ec)) throw_not_found(manifest_path.string() + ": missing (not a package directory)");
  const std::string manifest = read_small_file(manifest_path, kManifestMaxBytes);
  const auto validation = read_if_present(package_dir / std::string(kValidationFileName), kValidationMaxBytes);

  PackageSignature out = describe(cert.get(), owner_id);
  try {
    (void)read_package_signature(package_dir);
  } catch (const Error& e) {
    out.replaced_invalid = e.what();
  }
  out.signed_at_unix_secs = static_cast<int64_t>(std::time(nullptr));
  out.manifest_sha256 = sha256_hex(manifest);
  nlohmann::ordered_json doc = {
      {"schema_version", kSignatureSchemaVersion},
      {"owner_id", owner_id},
      {"owner_certificate", certificate_pem(cert.get())},
      {"manifest_sha256", out.manifest_sha256},
      {"signed_at_unix_secs", out.signed_at_unix_secs},
      {"signature", base64(ed25519_sign(key.get(), manifest))},
  };
  if (validation) {
    out.validation_sha256 = sha256_hex(*validation);
    doc["validation_sha256"] = *out.validation_sha256;
    doc["validation_signature"] = base64(ed25519_sign(key.get(), *validation));
  }
  write_file_atomic(package_dir / std::string(kSignatureFileName), json_output(doc, 2) + "\n");
  return out;
}

std::optional<PackageSignature> read_package_signature(const std::filesystem::path& dir) {
  using namespace package_signature_detail;
  const fs::path sidecar_path = dir / std::string(kSignatureFileName);
  const auto text = read_if_present(sidecar_path, kSignatureMaxBytes);
  if (!text) return std::nullopt;
  const std::string where = sidecar_path.string();
  const nlohmann::json doc = parse_sidecar_json(*text, where);
  auto str = [&](const char* key) -> std::string {
    if (!doc.contains(key) || !doc[key].is_string()) throw_invalid(where + ": \"" + key + "\" must be a string");
    return doc[key].get<std::string>();
  };
  if (!doc.contains("schema_version") || doc["schema_version"] != kSignatureSchemaVersion) {
    throw_invalid(where + ": schema_version must be " + std::to_string(kSignatureSchemaVersion));
  }
  if (!doc.contains("signed_at_unix_secs") || !doc["signed_at_unix_secs"].is_number_integer()) {
    throw_invalid(where + ": \"signed_at_unix_secs\" must be an integer");
  }
  const std::string cert_pem = str("owner_certificate");
  X509Ptr cert = parse_certificate_pem(cert_pem, where + " owner_certificate");
  if (certificate_pem(cert.get()) != cert_pem) {
    // One certificate, as `sign` writes it: nothing before or after it (a
    // second PEM block would ride along unsigned).
    throw_invalid(where + ": \"owner_certificate\" must be exactly one PEM certificate, with nothing before or after it");
  }
  const std::string owner_id = check_owner_certificate(cert.get(), where + " owner_certificate");
  if (doc.contains("owner_id") && doc["owner_id"] != owner_id) {
    throw_integrity(where + ": owner_id " + doc["owner_id"].dump() + " is not the certificate's key (" + owner_id + ")");
  }
  PackageSignature out = describe(cert.get(), owner_id);
  out.signed_at_unix_secs = doc["signed_at_unix_secs"].get<int64_t>();
  EVP_PKEY* key = X509_get0_pubkey(cert.get());

  auto check = [&](const fs::path& file, uint64_t max_bytes, const std::string& digest_key, const std::string& sig_key) {
    const auto bytes = read_if_present(file, max_bytes);
    if (!bytes) throw_integrity(where + " signs " + file.filename().string() + ", which is missing from " + dir.string());
    const std::string digest = sha256_hex(*bytes);
    if (str(digest_key.c_str()) != digest) {
      throw_integrity(file.string() + ": SHA-256 " + digest + " is not the signed " + digest_key + " " +
                      str(digest_key.c_str()) + " recorded in " + where + " (the file changed after signing)");
    }
    const auto sig = unbase64_signature(str(sig_key.c_str()));
    if (!sig) {
      throw_integrity(where + ": \"" + sig_key + "\" is not the canonical base64 of a 64-byte Ed25519 signature");
    }
    if (!ed25519_verify(key, *bytes, *sig)) {
      throw_integrity(where + ": the signature does not verify over the exact bytes of " + file.string() +
                      " with the key of owner " + owner_id);
    }
    return digest;
  };
  out.manifest_sha256 = check(dir / std::string(kManifestFileName), kManifestMaxBytes, "manifest_sha256", "signature");
  if (doc.contains("validation_sha256")) {
    out.validation_sha256 =
        check(dir / std::string(kValidationFileName), kValidationMaxBytes, "validation_sha256", "validation_signature");
  } else if (fs::exists(dir / std::string(kValidationFileName))) {
    // Not fatal by itself: the manifest is signed; validation.json is not covered.
    out.validation_sha256 = std::nullopt;
  }
  return out;
}

std::optional<std::string> signed_validation_sha256(const std::filesystem::path& dir) {
  using namespace package_signature_detail;
  const auto text = read_if_present(dir / std::string(kSignatureFileName), kSignatureMaxBytes);
  if (!text) return std::nullopt;
  nlohmann::json doc;
  try {
    doc = parse_sidecar_json(*text, dir.string());
  } catch (const Error&) {
    return std::nullopt;  // read_package_signature says what is wrong with it
  }
  if (!doc.contains("validation_sha256") || !doc["validation_sha256"].is_string()) return std::nullopt;
  const std::string digest = doc["validation_sha256"].get<std::string>();
  if (!is_sha256_hex(digest)) return std::nullopt;
  return digest;
}

std::vector<TrustAnchor> load_trust_anchors(const std::vector<std::filesystem::path>& certs) {
  using namespace package_signature_detail;
  std::vector<TrustAnchor> out;
  for (const auto& file : certs) {
    X509Ptr cert = detail::load_certificate(file, " (a trusted signer's owner.crt)");
    TrustAnchor a;
    a.file = file;
    a.owner_id = check_owner_certificate(cert.get(), file.string());
    a.valid_now = within_validity(cert.get());
    a.not_after = certificate_time_text(X509_get0_notAfter(cert.get()));
    out.push_back(std::move(a));
  }
  return out;
}

std::optional<PackageSignature> check_package_trust(const std::filesystem::path& dir, const std::vector<std::filesystem::path>& anchors,
                                                    const std::string& what) {
  using namespace package_signature_detail;
  if (anchors.empty()) return std::nullopt;
  const auto trusted = load_trust_anchors(anchors);
  std::string names;
  for (const auto& a : trusted) names += (names.empty() ? "" : ", ") + a.owner_id.substr(0, 16) + " (" + a.file.string() + ")";
  std::optional<PackageSignature> sig;
  try {
    sig = read_package_signature(dir);
  } catch (const Error& e) {
    throw Error(e.kind(), what + ": signature check failed: " + e.what());
  }
  if (!sig) {
    throw Error(ErrorKind::kUnauthorized, what + ": unsigned package (no " + std::string(kSignatureFileName) +
                                              ") refused: trusted signers are configured (" + names + ")");
  }
  const TrustAnchor* match = nullptr;
  for (const auto& a : trusted) {
    if (a.owner_id == sig->owner_id) match = &a;
  }
  if (match == nullptr) {
    throw Error(ErrorKind::kUnauthorized, what + ": signed by owner " + sig->owner_id + ", who is not a trusted signer (" +
                                              names + ")");
  }
  if (!sig->certificate_valid_now) {
    throw Error(ErrorKind::kUnauthorized, what + ": the signer's certificate (owner " + sig->owner_id +
                                              ") is expired or not yet valid: " + sig->not_before + " to " + sig->not_after);
  }
  if (!match->valid_now) {
    throw Error(ErrorKind::kUnauthorized, match->file.string() + ": the trusted signer's certificate is expired or not yet valid (not after " +
                                              match->not_after + ")");
  }
  return sig;
}

}  // namespace skippy
