// Who a peer is ("Transport and identity"). Every node has an
// Ed25519 key and an X.509 certificate; an owner is a signing key whose
// self-signed certificate signs the certificates of its nodes.
//
// Ids. A node id is the fingerprint of the node's public key; an owner id is
// the fingerprint of the owner's public key. Fingerprint := lowercase hex of
// SHA-256 over the raw 32-byte Ed25519 public key (RFC 8032 encoding, the
// bytes EVP_PKEY_get_raw_public_key returns) — 64 characters. Certificates
// can be reissued without changing an id; a new key is a new id.
//
// Directories (each file written atomically: temporary name, fsync, rename;
// private keys mode 0600, directories created 0700):
//   owner dir:  owner.key (PKCS#8 PEM), owner.crt (self-signed, CA:TRUE, pathlen 0)
//   node dir:   node.key (PKCS#8 PEM), node.crt (signed by the owner, CA:FALSE,
//               serverAuth + clientAuth), owner.crt (the owner's certificate,
//               sent with node.crt so peers can verify the owner)
// Loading a private key refuses a file that group or others may access
// (any of mode 0077), naming the file and the chmod that fixes it.
//
// Thread-safety: free functions are safe to call concurrently on different
// directories; NodeIdentity is immutable and safe to share.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace skippy::peer {

inline constexpr std::string_view kOwnerKeyFile = "owner.key";
inline constexpr std::string_view kOwnerCertFile = "owner.crt";
inline constexpr std::string_view kNodeKeyFile = "node.key";
inline constexpr std::string_view kNodeCertFile = "node.crt";

// 64 lowercase hex digits: the shape of a node or owner id.
bool is_peer_id(std::string_view id) noexcept;

struct IdentityInfo {
  enum class Kind { kOwner, kNode };
  Kind kind = Kind::kNode;
  std::string node_id;          // empty for an owner directory
  std::string owner_id;         // the owner's id (for a node: of the owner.crt beside it)
  bool owner_verified = false;  // node: node.crt verifies under owner.crt, which is
                                // self-signed and a CA; owner: owner.crt is self-signed
  std::string not_after;        // the directory's certificate expiry, "YYYY-MM-DDTHH:MM:SSZ"
  std::filesystem::path certificate;  // node.crt or owner.crt
};

// Creates an owner signing key and its self-signed certificate in `dir`
// (created if missing). Refuses a directory that already holds an owner or
// node identity. Throws Error(kInvalidInput / kIo) naming the file.
IdentityInfo init_owner(const std::filesystem::path& dir);

// Creates a node key in `out_dir` with a certificate signed by the owner in
// `owner_dir`, and copies owner.crt beside it. Refuses an out_dir that
// already holds an identity, and an owner key that group or others may read.
IdentityInfo issue_node(const std::filesystem::path& owner_dir, const std::filesystem::path& out_dir);

// What `dir` holds (a node dir when node.crt is present, else an owner dir),
// from the certificates only: no private key is read.
IdentityInfo show_identity(const std::filesystem::path& dir);

// The owner id of an owner certificate file (PEM), for --trust-owner.
// Refuses a certificate that is not a self-signed Ed25519 CA certificate.
std::string owner_id_of_certificate(const std::filesystem::path& cert_file);

// A node's identity loaded for TLS: key, certificate and owner certificate.
class NodeIdentity {
 public:
  // Reads a node directory. Checks: node.key is private (mode & 0077 == 0),
  // an Ed25519 key matching node.crt; node.crt is within its validity
  // period. owner_verified() says whether node.crt verifies under the
  // owner.crt beside it (a node without a verified owner can still use
  // MESH_LLM_ARTIFACT_TRANSFER=open). Throws Error naming the file.
  static NodeIdentity load(const std::filesystem::path& dir);

  const std::string& node_id() const noexcept;
  const std::string& owner_id() const noexcept;  // empty when there is no owner.crt
  bool owner_verified() const noexcept;
  const std::filesystem::path& dir() const noexcept;

  struct Impl;  // OpenSSL handles (src/peer/identity_impl.h)
  const Impl& impl() const noexcept { return *impl_; }

 private:
  std::shared_ptr<const Impl> impl_;
};

}  // namespace skippy::peer
