// Signed packages (the spec's first open question: "an optional signed
// manifest ... for deployments that do not trust the hosting backend").
//
// The manifest pins every artifact by SHA-256, so an Ed25519 signature over
// the manifest file's exact bytes authenticates the whole package. The
// signer is an owner identity (skippy/peer_identity.h: `identity
// init-owner`). The sidecar, model-package.json.sig beside the manifest, is
// a JSON document:
//
//   schema_version        1
//   owner_certificate     the signer's certificate, PEM
//   owner_id              SHA-256 of the raw Ed25519 public key (as peer ids)
//   manifest_sha256       of the signed bytes
//   signed_at_unix_secs   when
//   signature             base64 Ed25519 signature of model-package.json's bytes
//   validation_sha256     (when validation.json was present) its SHA-256, and
//   validation_signature  base64 Ed25519 signature of validation.json's bytes
//
// Both signatures verify with plain OpenSSL (README "Signed packages").
//
// Trust. Without anchors a signature is optional and only reported. With
// anchors (owner certificates: --trust-signer, SKIPPY_TRUSTED_SIGNERS) a
// package must carry a sidecar whose signature verifies over the exact bytes
// (else kIntegrity), made by an anchor's key (else kUnauthorized), with the
// sidecar's certificate and the anchor within their validity periods now
// (else kUnauthorized).
//
// Thread-safety: functions without shared state: verifying may run on any
// number of threads at once; sign_package replaces the sidecar atomically, so
// a concurrent reader sees the old one or the new one (two signers of one
// package: the last one wins).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace skippy {

inline constexpr std::string_view kSignatureFileName = "model-package.json.sig";
inline constexpr std::string_view kValidationFileName = "validation.json";
// Read whole into memory, so capped (the Hub's advertised size is
// checked against these before the first byte is downloaded).
inline constexpr uint64_t kSignatureMaxBytes = uint64_t{256} << 10;
inline constexpr uint64_t kValidationMaxBytes = uint64_t{4} << 20;
inline constexpr int kSignatureSchemaVersion = 1;

struct PackageSignature {
  std::string owner_id;            // signer: SHA-256 of the raw Ed25519 public key
  std::string owner_subject;       // the certificate's subject, for people
  std::string not_before, not_after;  // the certificate's validity, "YYYY-MM-DDTHH:MM:SSZ"
  bool certificate_valid_now = false;
  int64_t signed_at_unix_secs = 0;
  std::string manifest_sha256;
  std::optional<std::string> validation_sha256;  // when validation.json is covered
  // sign_package only: the sidecar it replaced did not verify over the
  // bytes it signed, and why (a person should know what was overwritten).
  std::optional<std::string> replaced_invalid;
};

// Signs `package_dir`/model-package.json (and validation.json when present)
// with the owner key in `owner_dir` (owner.key, owner.crt) and writes the
// sidecar atomically (an existing sidecar that does not verify is replaced,
// and said so: replaced_invalid). Refuses an owner key group or others may read, a key
// that does not match owner.crt, and a certificate outside its validity
// period. Throws Error naming the file.
PackageSignature sign_package(const std::filesystem::path& package_dir, const std::filesystem::path& owner_dir);

// Reads the sidecar in `dir` and checks it against the bytes on disk:
// nullopt when there is none. Throws Error(kIntegrity) when a signature does
// not verify over the exact bytes or a recorded digest differs (naming the
// file), Error(kInvalidInput) for a malformed sidecar. Does not judge trust.
std::optional<PackageSignature> read_package_signature(const std::filesystem::path& dir);

// The validation_sha256 the sidecar in `dir` records, when it has one and
// it is a SHA-256 (no signature is checked: read_package_signature does).
// nullopt without a sidecar or that field.
std::optional<std::string> signed_validation_sha256(const std::filesystem::path& dir);

// The trust anchors' owner ids. Refuses (kInvalidInput, naming the file) a
// certificate that is not an owner certificate: a self-signed Ed25519 CA
// certificate, as `identity init-owner` makes (the rule the peer side
// applies to owners too).
struct TrustAnchor {
  std::filesystem::path file;
  std::string owner_id;
  bool valid_now = false;
  std::string not_after;
};
std::vector<TrustAnchor> load_trust_anchors(const std::vector<std::filesystem::path>& certs);

// The consumer's rule (see the top of this file). `what` names the package
// in messages. With no anchors nothing is read or required (nullopt).
std::optional<PackageSignature> check_package_trust(const std::filesystem::path& dir,
                                                    const std::vector<std::filesystem::path>& anchors,
                                                    const std::string& what);

}  // namespace skippy
