// Owner certificates, one rule for every reader: a package's signer
// (src/format/package_signature.cpp) and a peer's owner (src/peer) are the
// same kind of certificate, made by `identity init-owner`. Internal to the
// library.
#pragma once

#include <openssl/asn1.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "util/openssl_handles.h"

namespace skippy::detail {

// Lowercase hex SHA-256 of the raw Ed25519 public key (a node or owner id);
// nullopt when `key` is not an Ed25519 key.
std::optional<std::string> ed25519_fingerprint(const EVP_PKEY* key);

// True when `cert` is within its validity period now.
bool within_validity(const X509* cert);

// An ASN.1 time as "YYYY-MM-DDTHH:MM:SSZ"; empty when it cannot be read.
std::string certificate_time_text(const ASN1_TIME* t);

// One PEM certificate from `pem` (refused, naming `what`, when there is none).
X509Ptr parse_certificate_pem(const std::string& pem, const std::string& what);
// `cert` as PEM text.
std::string certificate_pem(X509* cert);

// What is wrong with `cert` as an owner certificate, or nullopt when it is
// one: an Ed25519 key, self-signed, and a CA (CA:TRUE: an owner
// certificate signs node certificates). Validity in time is checked by the
// caller, who knows whether an expired owner is fatal.
std::optional<std::string> owner_certificate_problem(X509* cert);

// The owner id of `cert`, which must be an owner certificate (else
// kInvalidInput "<what>: <problem>").
std::string check_owner_certificate(X509* cert, const std::string& what);

// The largest key or certificate file read.
inline constexpr uint64_t kMaxPemBytes = 64 * 1024;

// One PEM certificate from a file (kNotFound "<path>: missing<missing_hint>"
// when there is none).
X509Ptr load_certificate(const std::filesystem::path& path, const std::string& missing_hint);

// An Ed25519 private key from a PEM file, refused when group or others may
// access it (with the chmod that fixes it), when it is missing
// (kNotFound, "<path>: missing<missing_hint>") or not a regular file.
PkeyPtr load_ed25519_private_key(const std::filesystem::path& path, const std::string& missing_hint);

// `owner` is an owner certificate within its validity period that issued
// and signed `leaf`.
bool owner_issued(X509* owner, X509* leaf);

}  // namespace skippy::detail
