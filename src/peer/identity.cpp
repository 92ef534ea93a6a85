#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>

#include "peer/identity_impl.h"
#include "skippy/error.h"
#include "util/file.h"
#include "util/sha256.h"

namespace skippy::peer {
namespace detail {

std::optional<ChainIdentity> identify_chain(X509* leaf, STACK_OF(X509)* chain, std::string* why) {
  auto fail = [&](const char* reason) -> std::optional<ChainIdentity> {
    if (why) *why = reason;
    return std::nullopt;
  };
  if (leaf == nullptr) return fail("no certificate");
  const auto node_id = ed25519_fingerprint(X509_get0_pubkey(leaf));
  if (!node_id) return fail("the certificate's key is not Ed25519");
  if (!within_validity(leaf)) return fail("the certificate is expired or not yet valid");
  ChainIdentity id;
  id.node_id = *node_id;
  const int n = chain ? sk_X509_num(chain) : 0;
  for (int i = 0; i < n; ++i) {
    X509* c = sk_X509_value(chain, i);
    if (c == leaf || X509_cmp(c, leaf) == 0) continue;
    if (!owner_issued(c, leaf)) continue;
    if (auto owner = ed25519_fingerprint(X509_get0_pubkey(c)); owner && *owner != id.node_id) {
      id.owner_id = *owner;
      id.owner_verified = true;
      break;
    }
  }
  return id;
}

}  // namespace detail

namespace {

namespace fs = std::filesystem;
using detail::openssl_errors;
using detail::PkeyPtr;
using detail::X509Ptr;

constexpr long kOwnerValidityDays = 20 * 365;
constexpr long kNodeValidityDays = 10 * 365;

[[noreturn]] void fail_ssl(const std::string& what) { throw_invalid(what + ": " + openssl_errors()); }

using skippy::detail::BioPtr;

std::string bio_text(BIO* b) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(b, &data);
  return n > 0 ? std::string(data, static_cast<size_t>(n)) : std::string();
}

PkeyPtr generate_ed25519() {
  PkeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519"));
  if (!key) fail_ssl("cannot generate an Ed25519 key");
  return key;
}

std::string fingerprint_or_throw(const EVP_PKEY* key, const std::string& what) {
  auto fp = detail::ed25519_fingerprint(key);
  if (!fp) throw_invalid(what + ": not an Ed25519 key");
  return *fp;
}

void add_ext(X509* cert, X509* issuer, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value);
  if (ext == nullptr) fail_ssl(std::string("certificate extension ") + value);
  const int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  if (ok != 1) fail_ssl(std::string("certificate extension ") + value);
}

// A v3 certificate for `subject_key`, named `cn`, signed by `issuer_key`
// (issuer == nullptr: self-signed).
X509Ptr make_certificate(EVP_PKEY* subject_key, const std::string& cn, X509* issuer, EVP_PKEY* issuer_key, bool ca,
                         long days) {
  X509Ptr cert(X509_new());
  if (!cert) fail_ssl("X509_new");
  X509_set_version(cert.get(), 2);
  // A random positive 127-bit serial (RFC 5280: at most 20 octets, unique per issuer).
  uint8_t serial[16];
  if (RAND_bytes(serial, sizeof serial) != 1) fail_ssl("RAND_bytes");
  serial[0] &= 0x7f;
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  if (bn == nullptr || BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert.get())) == nullptr) {
    BN_free(bn);
    fail_ssl("certificate serial");
  }
  BN_free(bn);
  // Valid from an hour ago (clock skew between nodes) for `days`.
  if (X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600) == nullptr ||
      X509_time_adj_ex(X509_getm_notAfter(cert.get()), static_cast<int>(days), 0, nullptr) == nullptr) {
    fail_ssl("certificate validity");
  }
  // Names are for people reading certificates; ids come from the keys.
  X509_NAME* name = X509_get_subject_name(cert.get());
  if (X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("skippy-model-package"),
                                 -1, -1, 0) != 1 ||
      X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1, 0) != 1) {
    fail_ssl("certificate subject");
  }
  X509_set_issuer_name(cert.get(), issuer ? X509_get_subject_name(issuer) : name);
  if (X509_set_pubkey(cert.get(), subject_key) != 1) fail_ssl("certificate key");
  X509* iss = issuer ? issuer : cert.get();
  if (ca) {
    add_ext(cert.get(), iss, NID_basic_constraints, "critical,CA:TRUE,pathlen:0");
    add_ext(cert.get(), iss, NID_key_usage, "critical,keyCertSign,cRLSign,digitalSignature");
  } else {
    add_ext(cert.get(), iss, NID_basic_constraints, "critical,CA:FALSE");
    add_ext(cert.get(), iss, NID_key_usage, "critical,digitalSignature");
    add_ext(cert.get(), iss, NID_ext_key_usage, "serverAuth,clientAuth");
  }
  add_ext(cert.get(), iss, NID_subject_key_identifier, "hash");
  add_ext(cert.get(), iss, NID_authority_key_identifier, "keyid:always");
  // Ed25519 signs the message itself: no digest (NULL md).
  if (X509_sign(cert.get(), issuer_key, nullptr) <= 0) fail_ssl("signing the certificate");
  return cert;
}

std::string key_pem(EVP_PKEY* key) {
  BioPtr b(BIO_new(BIO_s_mem()));
  if (!b || PEM_write_bio_PrivateKey(b.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) fail_ssl("key PEM");
  return bio_text(b.get());
}

void write_private(const fs::path& path, const std::string& pem) {
  AtomicFile f(path);
  // Before any byte of the key: the temporary is created 0644.
  if (::fchmod(f.fd(), 0600) != 0) throw_io(f.temp_path().string() + ": cannot chmod 600");
  f.write_all({reinterpret_cast<const uint8_t*>(pem.data()), pem.size()});
  f.commit();
}

void write_public(const fs::path& path, const std::string& pem) { write_file_atomic(path, pem); }

// A directory for a new identity: created 0700 if missing; refused when it
// already holds a key.
void prepare_dir(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    fs::create_directories(dir, ec);
    if (ec) throw Error(ErrorKind::kIo, dir.string() + ": cannot create: " + ec.message());
    fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace, ec);
  } else if (!fs::is_directory(dir, ec)) {
    throw_invalid(dir.string() + ": not a directory");
  }
  for (const auto name : {kOwnerKeyFile, kNodeKeyFile}) {
    if (fs::exists(fs::symlink_status(dir / std::string(name), ec))) {
      throw_invalid(dir.string() + ": already holds an identity (" + std::string(name) +
                    "); refusing to overwrite it. Use a new directory.");
    }
  }
}


X509Ptr load_cert(const fs::path& path) { return skippy::detail::load_certificate(path, ""); }

PkeyPtr load_private_key(const fs::path& path) { return skippy::detail::load_ed25519_private_key(path, ""); }

std::string not_after_text(const X509* cert) { return skippy::detail::certificate_time_text(X509_get0_notAfter(cert)); }

bool node_verifies(X509* node, X509* owner) {
  STACK_OF(X509)* chain = sk_X509_new_null();
  sk_X509_push(chain, owner);
  std::string why;
  const auto id = detail::identify_chain(node, chain, &why);
  sk_X509_free(chain);
  return id && id->owner_verified;
}

}  // namespace

bool is_peer_id(std::string_view id) noexcept {
  return id.size() == 64 && id.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

IdentityInfo init_owner(const fs::path& dir) {
  prepare_dir(dir);
  PkeyPtr key = generate_ed25519();
  const std::string id = fingerprint_or_throw(key.get(), "new owner key");
  X509Ptr cert = make_certificate(key.get(), "skippy owner " + id.substr(0, 16), nullptr, key.get(), true, kOwnerValidityDays);
  write_private(dir / std::string(kOwnerKeyFile), key_pem(key.get()));
  write_public(dir / std::string(kOwnerCertFile), skippy::detail::certificate_pem(cert.get()));
  return show_identity(dir);
}

IdentityInfo issue_node(const fs::path& owner_dir, const fs::path& out_dir) {
  const fs::path owner_cert_path = owner_dir / std::string(kOwnerCertFile);
  PkeyPtr owner_key = load_private_key(owner_dir / std::string(kOwnerKeyFile));
  X509Ptr owner_cert = load_cert(owner_cert_path);
  detail::check_owner_certificate(owner_cert.get(), owner_cert_path.string());
  if (X509_check_private_key(owner_cert.get(), owner_key.get()) != 1) {
    ERR_clear_error();
    throw_invalid((owner_dir / std::string(kOwnerKeyFile)).string() + ": does not match " + owner_cert_path.string());
  }
  prepare_dir(out_dir);
  PkeyPtr key = generate_ed25519();
  const std::string id = fingerprint_or_throw(key.get(), "new node key");
  X509Ptr cert = make_certificate(key.get(), "skippy node " + id.substr(0, 32), owner_cert.get(), owner_key.get(), false, kNodeValidityDays);
  write_private(out_dir / std::string(kNodeKeyFile), key_pem(key.get()));
  write_public(out_dir / std::string(kNodeCertFile), skippy::detail::certificate_pem(cert.get()));
  write_public(out_dir / std::string(kOwnerCertFile), skippy::detail::certificate_pem(owner_cert.get()));
  return show_identity(out_dir);
}

IdentityInfo show_identity(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw_not_found(dir.string() + ": no such identity directory");
  IdentityInfo info;
  const fs::path node_cert = dir / std::string(kNodeCertFile);
  const fs::path owner_cert = dir / std::string(kOwnerCertFile);
  if (fs::exists(node_cert, ec)) {
    info.kind = IdentityInfo::Kind::kNode;
    info.certificate = node_cert;
    X509Ptr cert = load_cert(node_cert);
    info.node_id = fingerprint_or_throw(X509_get0_pubkey(cert.get()), node_cert.string());
    info.not_after = not_after_text(cert.get());
    if (fs::exists(owner_cert, ec)) {
      X509Ptr owner = load_cert(owner_cert);
      info.owner_id = fingerprint_or_throw(X509_get0_pubkey(owner.get()), owner_cert.string());
      info.owner_verified = node_verifies(cert.get(), owner.get());
    }
    return info;
  }
  if (!fs::exists(owner_cert, ec)) {
    throw_not_found(dir.string() + ": holds neither " + std::string(kNodeCertFile) + " nor " + std::string(kOwnerCertFile) +
                    " (create one with `identity init-owner` or `identity issue-node`)");
  }
  info.kind = IdentityInfo::Kind::kOwner;
  info.certificate = owner_cert;
  X509Ptr cert = load_cert(owner_cert);
  info.owner_id = detail::check_owner_certificate(cert.get(), owner_cert.string());
  info.owner_verified = true;
  info.not_after = not_after_text(cert.get());
  return info;
}

std::string owner_id_of_certificate(const fs::path& cert_file) {
  X509Ptr cert = load_cert(cert_file);
  return detail::check_owner_certificate(cert.get(), cert_file.string());
}

NodeIdentity NodeIdentity::load(const fs::path& dir) {
  auto impl = std::make_shared<Impl>();
  impl->dir = dir;
  const fs::path cert_path = dir / std::string(kNodeCertFile);
  const fs::path key_path = dir / std::string(kNodeKeyFile);
  std::error_code exists_ec;
  if (!fs::exists(cert_path, exists_ec) && fs::exists(dir / std::string(kOwnerKeyFile), exists_ec)) {
    throw Error(ErrorKind::kUsage, dir.string() + " is an owner's directory (" + std::string(kOwnerKeyFile) + ", " +
                                       std::string(kOwnerCertFile) +
                                       "), not a node identity: make one with skippy-model-package identity "
                                       "issue-node --owner " + dir.string() + " --out NODE_DIR, and pass NODE_DIR");
  }
  impl->cert = load_cert(cert_path);
  impl->key = load_private_key(key_path);
  if (X509_check_private_key(impl->cert.get(), impl->key.get()) != 1) {
    ERR_clear_error();
    throw_invalid(key_path.string() + ": does not match " + cert_path.string());
  }
  impl->node_id = fingerprint_or_throw(X509_get0_pubkey(impl->cert.get()), cert_path.string());
  if (!detail::within_validity(impl->cert.get())) {
    throw_invalid(cert_path.string() + ": expired or not yet valid (not after " + not_after_text(impl->cert.get()) +
                  "); issue a new one with `identity issue-node`");
  }
  const fs::path owner_path = dir / std::string(kOwnerCertFile);
  std::error_code ec;
  if (fs::exists(owner_path, ec)) {
    impl->owner_cert = load_cert(owner_path);
    impl->owner_id = fingerprint_or_throw(X509_get0_pubkey(impl->owner_cert.get()), owner_path.string());
    impl->owner_verified = node_verifies(impl->cert.get(), impl->owner_cert.get());
  }
  NodeIdentity id;
  id.impl_ = std::move(impl);
  return id;
}

const std::string& NodeIdentity::node_id() const noexcept { return impl_->node_id; }
const std::string& NodeIdentity::owner_id() const noexcept { return impl_->owner_id; }
bool NodeIdentity::owner_verified() const noexcept { return impl_->owner_verified; }
const fs::path& NodeIdentity::dir() const noexcept { return impl_->dir; }

}  // namespace skippy::peer
