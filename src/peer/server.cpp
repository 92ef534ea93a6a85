// ArtifactServer (skippy/peer.h): asio I/O threads accept connections; each
// connection is one coroutine on its own strand, bounded by the limits;
// authorization (which may hash a file) runs on a small blocking pool.
#include "peer/asio_config.h"
#include <asio/bind_executor.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/redirect_error.hpp>
#include <asio/strand.hpp>
#include <asio/thread_pool.hpp>
#include <asio/use_awaitable.hpp>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

#include "peer/artifact_store.h"
#include "peer/channel.h"
#include "peer/protocol.h"
#include "peer/tls.h"
#include "skippy/env.h"
#include "skippy/error.h"
#include "skippy/hf_cache.h"

namespace skippy::peer {

using asio::awaitable;
using asio::use_awaitable;
using detail::Clock;
using detail::Decision;
using detail::tcp;
using detail::TlsChannel;

namespace {

constexpr size_t kSendChunk = 256 * 1024;

std::string short_id(const std::string& id) { return id.size() > 16 ? id.substr(0, 16) : id; }

std::string remote_of(const tcp::socket& s) {
  asio::error_code ec;
  const auto ep = s.remote_endpoint(ec);
  if (ec) return "?";
  return (ep.address().is_v6() ? "[" + ep.address().to_string() + "]" : ep.address().to_string()) + ":" +
         std::to_string(ep.port());
}

void default_log(std::string_view line) {
  std::string l = "serve-artifacts: " + std::string(line) + "\n";
  // One write(2) per line, so lines from several threads never interleave.
  (void)!::write(2, l.data(), l.size());
}

}  // namespace

struct ArtifactServer::Impl {
  Impl(NodeIdentity id, ServerOptions o)
      : identity(std::move(id)),
        opts(std::move(o)),
        trust{opts.mode, opts.trusted_owner_ids},
        ctx(detail::make_tls_context(identity, detail::TlsRole::kServer)),
        store(opts.topology, opts.hf_cache.empty() ? env::hf_hub_cache_dir() : opts.hf_cache, opts.verification_cache_dir) {
    if (!opts.log) opts.log = default_log;
  }

  void log(const std::string& line) const { opts.log(line); }

  awaitable<void> accept_loop();
  awaitable<void> serve(tcp::socket socket, std::string remote);
  awaitable<Decision> authorize(const wire::Request& req, const std::string& peer_node_id);

  NodeIdentity identity;
  ServerOptions opts;
  PeerTrust trust;
  detail::SslCtxPtr ctx;
  detail::ArtifactStore store;
  std::atomic<unsigned> open_connections{0};
  std::mutex mu;
  std::map<std::string, unsigned> per_peer;
  std::thread preverifier;
  std::string bound;
  // Declared last: destroyed first (pending coroutine frames reference the
  // members above when they unwind).
  asio::thread_pool blocking{2};
  asio::io_context io;
  tcp::acceptor acceptor{io};
};

namespace {

// Counts a connection (and, once known, its peer) for the limits.
class ConnectionSlot {
 public:
  explicit ConnectionSlot(ArtifactServer::Impl& s) : s_(s) {}
  ~ConnectionSlot() {
    s_.open_connections.fetch_sub(1);
    if (!peer_.empty()) {
      std::lock_guard g(s_.mu);
      if (--s_.per_peer[peer_] == 0) s_.per_peer.erase(peer_);
    }
  }
  ConnectionSlot(const ConnectionSlot&) = delete;
  ConnectionSlot& operator=(const ConnectionSlot&) = delete;
  // The number of connections this peer has open, this one included.
  unsigned set_peer(const std::string& node_id) {
    std::lock_guard g(s_.mu);
    peer_ = node_id;
    return ++s_.per_peer[peer_];
  }

 private:
  ArtifactServer::Impl& s_;
  std::string peer_;
};

}  // namespace

awaitable<Decision> ArtifactServer::Impl::authorize(const wire::Request& req, const std::string& peer_node_id) {
  co_return co_await asio::co_spawn(
      blocking, [this, &req, &peer_node_id]() -> awaitable<Decision> { co_return store.authorize(req, peer_node_id); },
      use_awaitable);
}

awaitable<void> ArtifactServer::Impl::accept_loop() {
  for (;;) {
    tcp::socket socket(asio::make_strand(io));
    asio::error_code ec;
    co_await acceptor.async_accept(socket, asio::redirect_error(use_awaitable, ec));
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
    if (ec) {
      // Out of descriptors and the like: say so, breathe, go on.
      log("accept failed: " + ec.message());
      asio::steady_timer t(io, std::chrono::milliseconds(100));
      co_await t.async_wait(asio::redirect_error(use_awaitable, ec));
      continue;
    }
    const std::string remote = remote_of(socket);
    if (open_connections.fetch_add(1) >= opts.limits.max_connections) {
      open_connections.fetch_sub(1);
      log(remote + ": connection closed at once: " + std::to_string(opts.limits.max_connections) +
          " connections already open (limit)");
      socket.close(ec);
      continue;
    }
    const auto ex = socket.get_executor();
    asio::co_spawn(ex, serve(std::move(socket), remote), asio::detached);
  }
}

awaitable<void> ArtifactServer::Impl::serve(tcp::socket socket, std::string remote) {
  ConnectionSlot slot(*this);
  {
    // Each TLS record is its own write: without this, Nagle holds a record
    // back until the previous one is acknowledged.
    asio::error_code ec;
    socket.set_option(tcp::no_delay(true), ec);
  }
  // Until the request is in, the handshake timeout bounds the whole
  // exchange, not just each silence: a peer dripping a byte at a time
  // cannot hold a slot longer than that.
  const auto accepted_at = Clock::now();
  auto ch = std::make_shared<TlsChannel>(std::move(socket), opts.limits.handshake_timeout);
  ch->set_total_deadline(accepted_at + std::min<Clock::duration>(opts.limits.handshake_timeout, opts.limits.total_timeout));
  ch->start_watchdog();
  std::string who = remote;
  std::string what;
  try {
    co_await ch->handshake(ctx.get(), detail::TlsRole::kServer);
    const PeerInfo peer = detail::peer_info(ch->ssl());
    who = "peer " + short_id(peer.node_id) + " (owner " +
          (peer.owner_verified ? short_id(peer.owner_id) : std::string("unverified")) + ", " + remote + ")";
    const unsigned peer_connections = slot.set_peer(peer.node_id);

    // The subprotocol envelope: the server says what it offers this peer.
    ch->set_phase("reading the subprotocol open");
    uint8_t type = 0;
    co_await ch->read_exact({&type, 1}, "the stream type");
    if (type != wire::kStreamTypeSubprotocol) {
      throw wire::WireError("stream type " + std::to_string(type) + " is not the subprotocol stream type (13)");
    }
    const wire::Open open = wire::decode_open(co_await detail::read_frame(*ch, wire::kMaxOpenFrameBytes, "the open"));
    const bool speaks = open.name == wire::kSubprotocolName && open.major == wire::kSubprotocolMajor;
    const bool enabled = speaks && peer_trusted(trust, identity, peer);
    wire::OpenAck ack;
    if (enabled) ack.features.emplace_back(wire::kFeatureArtifactTransfer);
    co_await detail::write_tagged_frame(*ch, std::nullopt, wire::encode(ack));
    if (!speaks) {
      log(who + ": closed: it opened " + open.name + "/" + std::to_string(open.major) + ", this server speaks " +
          std::string(wire::kSubprotocolName) + "/" + std::to_string(wire::kSubprotocolMajor));
      co_await ch->shutdown();
      ch->close();
      co_return;
    }

    ch->set_phase("reading the request");
    uint8_t kind = 0;
    if (co_await ch->read_some({&kind, 1}) == 0) {
      log(who + ": closed after the open (artifact-transfer " + (enabled ? "offered" : "not offered") + ")");
      ch->close();
      co_return;
    }
    if (kind != wire::kKindArtifactTransfer) {
      throw wire::WireError("stream kind " + std::to_string(kind) + " is not artifact transfer (3)");
    }
    const wire::Request req =
        wire::decode_request(co_await detail::read_frame(*ch, wire::kMaxRequestFrameBytes, "the request"));
    what = "stage " + req.stage_id + ", " + req.rel_path + " from byte " + std::to_string(req.offset);
    if (wire::to_hex(req.requester) != peer.node_id) {
      log(who + ": " + what + ": dropped: the request names requester " + short_id(wire::to_hex(req.requester)) +
          ", not the authenticated peer");
      ch->close();
      co_return;
    }
    ch->set_idle_timeout(opts.limits.idle_timeout);
    ch->set_total_deadline(accepted_at + opts.limits.total_timeout);

    Decision d;
    if (!enabled) {
      d.refusal = Refusal::kDisabled;
      d.why = opts.mode == TransferMode::kOff ? "MESH_LLM_ARTIFACT_TRANSFER is off on this node"
                                              : "the peer's owner is not trusted (mode trusted)";
    } else if (peer_connections > opts.limits.max_connections_per_peer) {
      d.refusal = Refusal::kBusy;
      d.why = "the peer has " + std::to_string(peer_connections) + " connections open (limit " +
              std::to_string(opts.limits.max_connections_per_peer) + ")";
    } else {
      d = co_await authorize(req, peer.node_id);
    }
    wire::Response resp;
    resp.accepted = d.accepted;
    if (d.accepted) {
      resp.offset = req.offset;
      resp.total_size = d.size;
      resp.sha256 = wire::digest_from_hex(d.sha256, "sha256");
    } else {
      resp.refusal = d.refusal;
    }
    co_await detail::write_tagged_frame(*ch, std::nullopt, wire::encode(resp));
    if (!d.accepted) {
      log(who + ": " + what + ": refused (" + std::string(refusal_text(d.refusal)) + "): " + d.why);
      co_await ch->shutdown();
      ch->close();
      co_return;
    }

    // The bytes [offset, size), raw.
    ch->set_phase("sending the artifact");
    const auto started = Clock::now();
    uint64_t pos = req.offset;
    try {
      std::vector<uint8_t> buf(d.memory ? 0 : kSendChunk);
      while (pos < d.size) {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(kSendChunk, d.size - pos));
        if (d.memory) {
          co_await ch->write_all({reinterpret_cast<const uint8_t*>(d.memory->data()) + pos, n});
        } else {
          size_t got = 0;
          while (got < n) {
            const ssize_t r = ::pread(d.file->fd, buf.data() + got, n - got, static_cast<off_t>(pos + got));
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) throw std::runtime_error("the file shrank or failed while being sent");
            got += static_cast<size_t>(r);
          }
          co_await ch->write_all({buf.data(), n});
        }
        pos += n;
      }
    } catch (const std::exception& e) {
      log(who + ": " + what + ": accepted (" + d.what + "), stopped after " + std::to_string(pos - req.offset) + " of " +
          std::to_string(d.size - req.offset) + " bytes: " + e.what());
      ch->close();
      co_return;
    }
    co_await ch->shutdown();
    const double secs = std::chrono::duration<double>(Clock::now() - started).count();
    char rate[64];
    std::snprintf(rate, sizeof rate, "%.3f s, %.1f MB/s", secs, secs > 0 ? static_cast<double>(pos - req.offset) / secs / 1e6 : 0.0);
    log(who + ": " + what + ": accepted (" + d.what + "): sent " + std::to_string(pos - req.offset) + " bytes in " + rate);
  } catch (const wire::WireError& e) {
    log(who + ": " + (what.empty() ? std::string() : what + ": ") + "dropped a malformed message: " + e.what());
  } catch (const PeerError& e) {
    log(who + ": " + (what.empty() ? std::string() : what + ": ") + "connection ended: " + e.what());
  } catch (const std::exception& e) {
    log(who + ": " + (what.empty() ? std::string() : what + ": ") + "error: " + e.what());
  }
  ch->close();
}

ArtifactServer::ArtifactServer(NodeIdentity identity, ServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(identity), std::move(options))) {
  auto& s = *impl_;
  if (s.opts.limits.max_connections == 0 || s.opts.limits.max_connections_per_peer == 0) {
    throw Error(ErrorKind::kUsage, "serve-artifacts: connection limits must be at least 1");
  }
  const auto endpoints = detail::resolve_endpoint(s.opts.listen, true);
  std::string errors;
  for (const auto& ep : endpoints) {
    asio::error_code ec;
    s.acceptor.open(ep.protocol(), ec);
    if (!ec) s.acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) s.acceptor.bind(ep, ec);
    if (!ec) s.acceptor.listen(128, ec);
    if (!ec) break;
    errors += (errors.empty() ? "" : "; ") + ep.address().to_string() + ": " + ec.message();
    s.acceptor.close(ec);
  }
  if (!s.acceptor.is_open()) throw Error(ErrorKind::kIo, "serve-artifacts: cannot listen on " + s.opts.listen + ": " + errors);
  const auto local = s.acceptor.local_endpoint();
  s.bound = (local.address().is_v6() ? "[" + local.address().to_string() + "]" : local.address().to_string()) + ":" +
            std::to_string(local.port());
}

ArtifactServer::~ArtifactServer() {
  stop();
  auto& s = *impl_;
  if (s.preverifier.joinable()) s.preverifier.join();
  s.blocking.join();
}

uint16_t ArtifactServer::port() const noexcept {
  asio::error_code ec;
  return impl_->acceptor.local_endpoint(ec).port();
}

std::string ArtifactServer::endpoint() const { return impl_->bound; }

void ArtifactServer::run() {
  auto& s = *impl_;
  if (s.opts.preverify && !s.preverifier.joinable()) {
    s.preverifier = std::thread([&s] { s.log(s.store.preverify()); });
  }
  asio::co_spawn(s.io, s.accept_loop(), asio::detached);
  unsigned n = s.opts.limits.threads ? s.opts.limits.threads : std::max(2u, std::thread::hardware_concurrency());
  std::vector<std::thread> threads;
  for (unsigned i = 1; i < n; ++i) threads.emplace_back([&s] { s.io.run(); });
  s.io.run();
  for (auto& t : threads) t.join();
}

void ArtifactServer::stop() noexcept {
  auto& s = *impl_;
  asio::post(s.io, [&s] {
    asio::error_code ec;
    s.acceptor.close(ec);
  });
  s.io.stop();
}

}  // namespace skippy::peer
