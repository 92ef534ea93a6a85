#include "peer/tls.h"

#include <openssl/err.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "peer/identity_impl.h"

namespace skippy::peer::detail {
namespace {

// A socket BIO whose writes never raise SIGPIPE: the stock one calls
// write(2), which kills a process whose peer closed the connection unless
// the whole process ignores SIGPIPE — not a library's call to make.
int write_nosignal(BIO* b, const char* data, int len) {
  int fd = -1;
  BIO_get_fd(b, &fd);
  BIO_clear_retry_flags(b);
  if (fd < 0 || len < 0) return -1;
  const ssize_t n = ::send(fd, data, static_cast<size_t>(len), MSG_NOSIGNAL);
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) BIO_set_retry_write(b);
    return -1;
  }
  return static_cast<int>(n);
}

const BIO_METHOD* socket_method() {
  static BIO_METHOD* method = [] {
    const BIO_METHOD* base = BIO_s_socket();
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR, "skippy socket");
    if (m == nullptr) return m;
    BIO_meth_set_create(m, BIO_meth_get_create(base));
    BIO_meth_set_destroy(m, BIO_meth_get_destroy(base));
    BIO_meth_set_ctrl(m, BIO_meth_get_ctrl(base));
    BIO_meth_set_read(m, BIO_meth_get_read(base));
    BIO_meth_set_write(m, write_nosignal);
    return m;
  }();
  return method;
}

// OpenSSL's chain verification is replaced by ours: the leaf must be an
// Ed25519 certificate within its validity period. Owner and trust are the
// caller's decision once the handshake is done (peer_info).
int verify_certificate(X509_STORE_CTX* store, void*) {
  X509* leaf = X509_STORE_CTX_get0_cert(store);
  std::string why;
  if (!identify_chain(leaf, X509_STORE_CTX_get0_untrusted(store), &why)) {
    X509_STORE_CTX_set_error(store, X509_V_ERR_APPLICATION_VERIFICATION);
    return 0;
  }
  return 1;
}

}  // namespace

std::string tls_error_text(SSL* ssl, int ret, const char* what) {
  const int e = ssl ? SSL_get_error(ssl, ret) : SSL_ERROR_SSL;
  std::string out = what;
  if (e == SSL_ERROR_SYSCALL) {
    out += errno != 0 ? std::string(": ") + std::strerror(errno) : std::string(": connection closed by the peer");
  } else if (e == SSL_ERROR_SSL) {
    const unsigned long code = ERR_peek_last_error();
    if (code != 0) {
      char buf[256];
      ERR_error_string_n(code, buf, sizeof buf);
      out += std::string(": ") + buf;
    } else {
      out += ": TLS failure";
    }
  } else {
    out += ": TLS error " + std::to_string(e);
  }
  ERR_clear_error();
  return out;
}

namespace {

// The server asks its gate (the session's app data, set by
// TlsChannel::handshake) before it answers a ClientHello: when the gate says
// no, the handshake stops there (SSL_ERROR_WANT_CLIENT_HELLO_CB) with
// nothing sent.
int client_hello_gate(SSL* s, int* /*alert*/, void* /*arg*/) {
  const auto* gate = static_cast<const std::function<bool()>*>(SSL_get_app_data(s));
  return gate == nullptr || (*gate)() ? SSL_CLIENT_HELLO_SUCCESS : SSL_CLIENT_HELLO_RETRY;
}

}  // namespace

SslCtxPtr make_tls_context(const NodeIdentity& identity, TlsRole role) {
  const auto& id = identity.impl();
  const std::string where = identity.dir().string();
  SslCtxPtr ctx(SSL_CTX_new(role == TlsRole::kServer ? TLS_server_method() : TLS_client_method()));
  auto check = [&](bool ok, const char* what) {
    if (!ok) throw_invalid(where + ": TLS setup (" + what + "): " + openssl_errors());
  };
  check(ctx != nullptr, "SSL_CTX_new");
  SSL_CTX* c = ctx.get();
  check(SSL_CTX_set_min_proto_version(c, TLS1_3_VERSION) == 1, "TLS 1.3 only");
  check(SSL_CTX_set_max_proto_version(c, TLS1_3_VERSION) == 1, "TLS 1.3 only");
  check(SSL_CTX_set_ciphersuites(c, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256") == 1,
        "cipher suites");
  check(SSL_CTX_set1_sigalgs_list(c, "ed25519") == 1, "signature algorithms");
  check(SSL_CTX_use_certificate(c, id.cert.get()) == 1, "node certificate");
  check(SSL_CTX_use_PrivateKey(c, id.key.get()) == 1, "node key");
  check(SSL_CTX_check_private_key(c) == 1, "key matches certificate");
  if (id.owner_cert) check(SSL_CTX_add1_chain_cert(c, id.owner_cert.get()) == 1, "owner certificate");
  SSL_CTX_set_verify(c, SSL_VERIFY_PEER | (role == TlsRole::kServer ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0), nullptr);
  SSL_CTX_set_cert_verify_callback(c, verify_certificate, nullptr);
  if (role == TlsRole::kServer) SSL_CTX_set_client_hello_cb(c, client_hello_gate, nullptr);
  SSL_CTX_set_options(c, SSL_OP_NO_COMPRESSION | SSL_OP_NO_TICKET | SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_OFF);
  if (role == TlsRole::kServer) SSL_CTX_set_num_tickets(c, 0);
  // Partial writes let the caller see progress record by record; read-ahead
  // with a large buffer pulls many records per recv(2).
  SSL_CTX_set_mode(c, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  SSL_CTX_set_read_ahead(c, 1);
  SSL_CTX_set_default_read_buffer_len(c, 256 * 1024);
  return ctx;
}

SslPtr new_tls_session(SSL_CTX* ctx, int fd, TlsRole role) {
  SslPtr ssl(SSL_new(ctx));
  if (!ssl) throw PeerError(PeerErrorKind::kTransport, "TLS: SSL_new: " + openssl_errors());
  BIO* bio = BIO_new(socket_method());
  if (bio == nullptr) throw PeerError(PeerErrorKind::kTransport, "TLS: BIO_new: " + openssl_errors());
  BIO_set_fd(bio, fd, BIO_NOCLOSE);
  SSL_set_bio(ssl.get(), bio, bio);
  if (role == TlsRole::kServer) {
    SSL_set_accept_state(ssl.get());
  } else {
    SSL_set_connect_state(ssl.get());
  }
  return ssl;
}

PeerInfo peer_info(SSL* ssl) {
  X509* leaf = SSL_get0_peer_certificate(ssl);
  std::string why;
  const auto id = identify_chain(leaf, SSL_get_peer_cert_chain(ssl), &why);
  if (!id) throw PeerError(PeerErrorKind::kTransport, "TLS: the peer is not authenticated: " + why);
  return {id->node_id, id->owner_id, id->owner_verified};
}

}  // namespace skippy::peer::detail
