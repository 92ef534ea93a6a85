// See expired_owner.h.
#include "expired_owner.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <cstdio>

namespace skippy::test {

namespace fs = std::filesystem;

void make_owner_by_hand(const fs::path& dir, const HandMadeOwner& shape) {
  fs::create_directories(dir);
  EVP_PKEY* key = EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519");
  X509* cert = X509_new();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 7);
  X509_gmtime_adj(X509_getm_notBefore(cert), shape.expired ? -3 * 86400 : -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert), shape.expired ? -86400 : 86400);
  X509_NAME* name = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("hand-made owner"), -1, -1, 0);
  X509_set_issuer_name(cert, name);
  X509_set_pubkey(cert, key);
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, cert, cert, nullptr, nullptr, 0);
  X509_EXTENSION* bc = X509V3_EXT_conf_nid(nullptr, &ctx, NID_basic_constraints, shape.ca ? "critical,CA:TRUE" : "critical,CA:FALSE");
  ASSERT_NE(bc, nullptr);
  X509_add_ext(cert, bc, -1);
  X509_EXTENSION_free(bc);
  ASSERT_GT(X509_sign(cert, key, nullptr), 0);
  FILE* k = std::fopen((dir / "owner.key").c_str(), "w");
  PEM_write_PrivateKey(k, key, nullptr, nullptr, 0, nullptr, nullptr);
  std::fclose(k);
  fs::permissions(dir / "owner.key", fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::replace);
  FILE* c = std::fopen((dir / "owner.crt").c_str(), "w");
  PEM_write_X509(c, cert);
  std::fclose(c);
  X509_free(cert);
  EVP_PKEY_free(key);
}

}  // namespace skippy::test
