// TLS 1.3 contexts for peer transfer: mutual authentication with the
// identities of peer_identity.h. Internal to src/peer.
//
// Both sides: TLS 1.3 only; AES-128-GCM preferred (then AES-256-GCM,
// ChaCha20-Poly1305); Ed25519 signatures only; no session tickets or
// resumption; no renegotiation (TLS 1.3 has none). Each side presents its
// node.crt with owner.crt as chain. The peer's certificate is required and
// checked by our own rule (identify_chain): an Ed25519 certificate within
// its validity period; TLS itself proves the peer holds its key. Whether the
// peer is one we deal with (owner verified, trusted) is decided after the
// handshake from peer_info(), by the caller.
#pragma once

#include <openssl/ssl.h>

#include <memory>

#include "skippy/peer.h"
#include "skippy/peer_identity.h"

namespace skippy::peer::detail {

struct SslCtxFree {
  void operator()(SSL_CTX* c) const noexcept { SSL_CTX_free(c); }
};
struct SslFree {
  void operator()(SSL* s) const noexcept { SSL_free(s); }
};
using SslCtxPtr = std::unique_ptr<SSL_CTX, SslCtxFree>;
using SslPtr = std::unique_ptr<SSL, SslFree>;

enum class TlsRole { kClient, kServer };

// Throws Error(kInvalidInput) naming the identity directory when OpenSSL
// refuses the key or certificates.
SslCtxPtr make_tls_context(const NodeIdentity& identity, TlsRole role);

// An SSL for a connected, non-blocking socket. Writes use send(MSG_NOSIGNAL):
// a peer that vanished is an error, never SIGPIPE.
SslPtr new_tls_session(SSL_CTX* ctx, int fd, TlsRole role);

// The authenticated peer of a finished handshake. Throws
// PeerError(kTransport) if there is none (cannot happen after a successful
// handshake with our contexts).
PeerInfo peer_info(SSL* ssl);

// The last OpenSSL error of this thread as text, plus `what`.
std::string tls_error_text(SSL* ssl, int ret, const char* what);

}  // namespace skippy::peer::detail
