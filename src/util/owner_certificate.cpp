#include "util/owner_certificate.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <ctime>
#include <span>

#include "skippy/error.h"
#include "util/file.h"
#include "util/sha256.h"

namespace skippy::detail {

std::optional<std::string> ed25519_fingerprint(const EVP_PKEY* key) {
  if (key == nullptr || EVP_PKEY_get_id(key) != EVP_PKEY_ED25519) return std::nullopt;
  uint8_t raw[32];
  size_t len = sizeof raw;
  if (EVP_PKEY_get_raw_public_key(key, raw, &len) != 1 || len != sizeof raw) {
    ERR_clear_error();
    return std::nullopt;
  }
  return sha256_hex(std::span<const uint8_t>(raw, len));
}

bool within_validity(const X509* cert) {
  return X509_cmp_current_time(X509_get0_notBefore(cert)) < 0 && X509_cmp_current_time(X509_get0_notAfter(cert)) > 0;
}

std::string certificate_time_text(const ASN1_TIME* t) {
  struct tm tm {};
  if (ASN1_TIME_to_tm(t, &tm) != 1) return {};
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

X509Ptr parse_certificate_pem(const std::string& pem, const std::string& what) {
  BioPtr b(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  X509Ptr cert(b ? PEM_read_bio_X509(b.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!cert) throw_invalid(what + ": not a PEM certificate: " + openssl_errors());
  return cert;
}

std::string certificate_pem(X509* cert) {
  BioPtr b(BIO_new(BIO_s_mem()));
  if (!b || PEM_write_bio_X509(b.get(), cert) != 1) throw_invalid("certificate PEM: " + openssl_errors());
  char* data = nullptr;
  const long n = BIO_get_mem_data(b.get(), &data);
  return n > 0 ? std::string(data, static_cast<size_t>(n)) : std::string();
}

std::optional<std::string> owner_certificate_problem(X509* cert) {
  EVP_PKEY* key = X509_get0_pubkey(cert);
  if (!ed25519_fingerprint(key)) return "not an Ed25519 certificate";
  const bool self_signed = X509_check_issued(cert, cert) == X509_V_OK && X509_verify(cert, key) == 1;
  const bool ca = X509_check_ca(cert) == 1;  // basicConstraints CA:TRUE (not a v1 or keyUsage-only guess)
  ERR_clear_error();
  if (!self_signed) return "not a self-signed owner certificate (make one with `identity init-owner`)";
  if (!ca) return "not a CA certificate (an owner certificate signs node certificates; make one with `identity init-owner`)";
  return std::nullopt;
}

std::string check_owner_certificate(X509* cert, const std::string& what) {
  if (auto problem = owner_certificate_problem(cert)) throw_invalid(what + ": " + *problem);
  return *ed25519_fingerprint(X509_get0_pubkey(cert));
}

X509Ptr load_certificate(const std::filesystem::path& path, const std::string& missing_hint) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw_not_found(path.string() + ": missing" + missing_hint);
  return parse_certificate_pem(read_small_file(path, kMaxPemBytes), path.string());
}

PkeyPtr load_ed25519_private_key(const std::filesystem::path& path, const std::string& missing_hint) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) throw_not_found(path.string() + ": missing" + missing_hint);
    throw_io(path.string() + ": cannot stat");
  }
  if (!S_ISREG(st.st_mode)) throw_invalid(path.string() + ": not a regular file");
  if ((st.st_mode & 0077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    throw_invalid(path.string() + ": permissions " + mode +
                  " are too open: group or others may access this private key, so it is refused. Fix: chmod 600 " +
                  path.string());
  }
  const std::string pem = read_small_file(path, kMaxPemBytes);
  BioPtr b(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  PkeyPtr key(b ? PEM_read_bio_PrivateKey(b.get(), nullptr, nullptr, nullptr) : nullptr);
  if (!key) throw_invalid(path.string() + ": not a PEM private key: " + openssl_errors());
  if (EVP_PKEY_get_id(key.get()) != EVP_PKEY_ED25519) throw_invalid(path.string() + ": not an Ed25519 key");
  return key;
}

bool owner_issued(X509* owner, X509* leaf) {
  if (owner_certificate_problem(owner) || !within_validity(owner)) return false;
  const bool ok = X509_check_issued(owner, leaf) == X509_V_OK && X509_verify(leaf, X509_get0_pubkey(owner)) == 1;
  ERR_clear_error();
  return ok;
}

}  // namespace skippy::detail
