// Owning handles for OpenSSL objects, its error queue as text, and base64:
// the one copy the signature code (src/format), the peer identities
// (src/peer) and the Hub client (src/hub) share. Internal to the library.
#pragma once

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/x509.h>

#include <memory>
#include <string>
#include <string_view>

namespace skippy::detail {

struct PkeyFree {
  void operator()(EVP_PKEY* p) const noexcept { EVP_PKEY_free(p); }
};
struct X509Free {
  void operator()(X509* p) const noexcept { X509_free(p); }
};
struct BioFree {
  void operator()(BIO* b) const noexcept { BIO_free(b); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* c) const noexcept { EVP_MD_CTX_free(c); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;
using X509Ptr = std::unique_ptr<X509, X509Free>;
using BioPtr = std::unique_ptr<BIO, BioFree>;
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, MdCtxFree>;

// The OpenSSL error queue's entries as text, "; "-separated (and clears
// the queue); "unknown OpenSSL error" when it is empty.
std::string openssl_errors();

// Standard base64 (RFC 4648, with padding) of any bytes, by OpenSSL's encoder.
std::string base64(std::string_view raw);

}  // namespace skippy::detail
