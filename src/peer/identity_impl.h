// OpenSSL handles behind NodeIdentity, and the certificate checks shared by
// the identity commands and the TLS layer. Internal to src/peer.
#pragma once

#include <openssl/evp.h>
#include <openssl/x509.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "skippy/peer_identity.h"
#include "util/openssl_handles.h"
#include "util/owner_certificate.h"

namespace skippy::peer::detail {

using skippy::detail::openssl_errors;
using skippy::detail::PkeyPtr;
using skippy::detail::X509Ptr;

// The owner-certificate rule and its helpers (one home for the peer side
// and the package signer).
using skippy::detail::check_owner_certificate;
using skippy::detail::ed25519_fingerprint;
using skippy::detail::owner_issued;
using skippy::detail::within_validity;

// The identity a certificate chain proves, once TLS has shown the peer holds
// the leaf's key. The leaf must be an Ed25519 certificate within its
// validity period (else nullopt, with the reason in *why). The owner is
// verified when some other certificate of the chain is an owner
// certificate (util/owner_certificate.h) within its validity period that
// issued and signed the leaf.
struct ChainIdentity {
  std::string node_id;
  std::string owner_id;        // empty when no owner certificate verified
  bool owner_verified = false;
};
std::optional<ChainIdentity> identify_chain(X509* leaf, STACK_OF(X509)* chain, std::string* why);

}  // namespace skippy::peer::detail

namespace skippy::peer {

struct NodeIdentity::Impl {
  std::filesystem::path dir;
  std::string node_id;
  std::string owner_id;
  bool owner_verified = false;
  detail::PkeyPtr key;
  detail::X509Ptr cert;
  detail::X509Ptr owner_cert;  // null when the directory has no owner.crt
};

}  // namespace skippy::peer
