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
#include <condition_variable>
#include <cstdio>
#include <iostream>
#include <map>
#include <mutex>
#include <thread>

#include "peer/admission.h"
#include "peer/artifact_store.h"
#include "peer/channel.h"
#include "peer/protocol.h"
#include "peer/tls.h"
#include "util/env.h"
#include "skippy/error.h"
#include "skippy/source.h"

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

// The address a connection counts under for the per-address cap (an
// IPv4-mapped IPv6 address as the IPv4 one).
std::string address_of(const tcp::socket& s) {
  asio::error_code ec;
  auto a = s.remote_endpoint(ec).address();
  if (ec) return "?";
  if (a.is_v6() && a.to_v6().is_v4_mapped()) a = asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6());
  return a.to_string();
}

void default_log(std::string_view line) {
  std::string l = "serve-artifacts: " + std::string(line) + "\n";
  // One write(2) per line, so lines from several threads never interleave.
  (void)!::write(2, l.data(), l.size());
}

}  // namespace

namespace {

// What happens to connections before they authenticate, logged a few lines
// a second at most: a flood must not turn into a flood of log lines.
class PreAuthLog {
 public:
  explicit PreAuthLog(std::function<void(std::string_view)> out) : out_(std::move(out)) {}
  // One event; its line is written unless this second already had kLines.
  void event(const std::string& category, const std::string& line) {
    std::lock_guard g(mu_);
    roll();
    if (lines_ < kLines) {
      ++lines_;
      out_(line);
    } else {
      ++suppressed_[category];
    }
  }
  void flush() {
    std::lock_guard g(mu_);
    roll(true);
  }

 private:
  static constexpr unsigned kLines = 20;
  void roll(bool force = false) {
    const auto now = Clock::now();
    if (!force && now - window_ < std::chrono::seconds(1)) return;
    if (!suppressed_.empty()) {
      std::string s = "before authentication, in the last " +
                      std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(now - window_).count()) +
                      " ms, not logged one by one:";
      bool first = true;
      for (const auto& [what, n] : suppressed_) {
        s += (first ? " " : ", ") + std::to_string(n) + " " + what;
        first = false;
      }
      out_(s);
    }
    suppressed_.clear();
    lines_ = 0;
    window_ = now;
  }
  std::function<void(std::string_view)> out_;
  std::mutex mu_;
  Clock::time_point window_ = Clock::now();
  unsigned lines_ = 0;
  std::map<std::string, unsigned> suppressed_;
};

detail::AdmissionLimits admission_limits(const ServerLimits& l) {
  return {l.max_unauthenticated, l.max_unauthenticated_per_address, l.max_connections};
}

}  // namespace

struct ArtifactServer::Impl {
  Impl(NodeIdentity id, ServerOptions o)
      : identity(std::move(id)),
        opts(std::move(o)),
        trust{opts.mode, opts.trusted_owner_ids},
        ctx(detail::make_tls_context(identity, detail::TlsRole::kServer)),
        store(opts.topology, opts.hf_cache.empty() ? env::hf_hub_cache_dir() : opts.hf_cache, opts.verification_cache_dir,
              opts.trusted_signers),
        admission(admission_limits(opts.limits)),
        preauth(opts.log ? opts.log : default_log) {
    if (!opts.log) opts.log = default_log;
    store.require_trusted();  // no start on a package the trusted signers do not vouch for
    store.require_admissions();  // descriptors of another package (or tensors it lacks) refused before serving
  }

  void log(const std::string& line) const { opts.log(line); }

  awaitable<void> accept_loop();
  awaitable<void> log_flusher();
  awaitable<void> serve(std::shared_ptr<TlsChannel> ch, uint64_t id, std::string remote);
  awaitable<Decision> authorize(const wire::Request& req, const std::string& peer_node_id);

  // Threads that are busy (I/O threads in run(), verification work, the
  // preverifier), so that shutdown can wait for them, boundedly.
  class Busy {
   public:
    Busy(Impl& s, unsigned Impl::*counter) : s_(s), counter_(counter) {
      std::lock_guard g(s_.life_mu);
      ++(s_.*counter_);
    }
    ~Busy() {
      std::lock_guard g(s_.life_mu);
      --(s_.*counter_);
      s_.life_cv.notify_all();
    }
    Busy(const Busy&) = delete;
    Busy& operator=(const Busy&) = delete;

   private:
    Impl& s_;
    unsigned Impl::*counter_;
  };
  // Waits until `counter` is 0, at most `grace`; true when it is.
  bool wait_quiet(unsigned Impl::*counter, std::chrono::milliseconds grace) {
    std::unique_lock g(life_mu);
    return life_cv.wait_for(g, grace, [&] { return this->*counter == 0; });
  }

  NodeIdentity identity;
  ServerOptions opts;
  PeerTrust trust;
  detail::SslCtxPtr ctx;
  detail::ArtifactStore store;
  detail::Admission admission;
  PreAuthLog preauth;
  std::atomic<uint64_t> next_id{0};
  std::mutex mu;
  std::map<std::string, unsigned> per_peer;
  std::thread preverifier;
  std::string bound;
  std::mutex life_mu;
  std::condition_variable life_cv;
  unsigned io_busy = 0;    // I/O threads started by run() still running
  unsigned work_busy = 0;  // authorization tasks and the preverifier still running
  std::atomic<bool> abandoned{false};  // some thread was left behind: never destroy this
  // Declared last: destroyed first (pending coroutine frames reference the
  // members above when they unwind).
  asio::thread_pool blocking{2};
  asio::io_context io;
  tcp::acceptor acceptor{io};
};

namespace {

// Counts a connection (and, once known, its peer) for the limits; releases
// its admission slot when it ends.
class ConnectionSlot {
 public:
  ConnectionSlot(ArtifactServer::Impl& s, uint64_t id) : s_(s), id_(id) {}
  ~ConnectionSlot() {
    s_.admission.release(id_);
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
  uint64_t id_;
  std::string peer_;
};

}  // namespace

awaitable<Decision> ArtifactServer::Impl::authorize(const wire::Request& req, const std::string& peer_node_id) {
  co_return co_await asio::co_spawn(
      blocking,
      [this, &req, &peer_node_id]() -> awaitable<Decision> {
        const Busy busy(*this, &Impl::work_busy);
        co_return store.authorize(req, peer_node_id);
      },
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
    const std::string address = address_of(socket);
    const auto ex = socket.get_executor();
    // The handshake's deadline starts now: the watchdog runs from here.
    auto ch = std::make_shared<TlsChannel>(std::move(socket), opts.limits.handshake_timeout);
    const uint64_t id = ++next_id;
    const auto verdict = admission.admit(id, address, [weak = std::weak_ptr<TlsChannel>(ch), ex] {
      asio::post(ex, [weak] {
        if (auto c = weak.lock()) {
          c->evict("its unauthenticated slot went to a newer connection (the pool, or its address's share of it, was full)");
        }
      });
    });
    if (verdict == detail::Admission::Verdict::kAddressFull || verdict == detail::Admission::Verdict::kFull) {
      const auto n = admission.counts(address);
      preauth.event(verdict == detail::Admission::Verdict::kAddressFull ? "closed at accept (per-address limit)"
                                                                        : "closed at accept (unauthenticated pool full)",
                    remote + ": connection closed at once: " +
                        (verdict == detail::Admission::Verdict::kAddressFull
                             ? std::to_string(n.from_address) + " unauthenticated connections from " + address +
                                   " already, each past its ClientHello (limit " +
                                   std::to_string(opts.limits.max_unauthenticated_per_address) + ")"
                             : std::to_string(n.unauthenticated) + " unauthenticated connections already, none " +
                                   "from an address holding more (limit " +
                                   std::to_string(opts.limits.max_unauthenticated) + ")"));
      ch->close();
      continue;
    }
    ch->start_watchdog();
    asio::co_spawn(ex, serve(std::move(ch), id, remote), asio::detached);
  }
}

awaitable<void> ArtifactServer::Impl::log_flusher() {
  asio::steady_timer t(io);
  for (;;) {
    t.expires_after(std::chrono::seconds(1));
    asio::error_code ec;
    co_await t.async_wait(asio::redirect_error(use_awaitable, ec));
    if (ec || !acceptor.is_open()) co_return;
    preauth.flush();
  }
}

awaitable<void> ArtifactServer::Impl::serve(std::shared_ptr<TlsChannel> ch, uint64_t id, std::string remote) {
  ConnectionSlot slot(*this, id);
  {
    // Each TLS record is its own write: without this, Nagle holds a record
    // back until the previous one is acknowledged.
    asio::error_code ec;
    ch->socket().set_option(tcp::no_delay(true), ec);
  }
  // Until the handshake is done, the short handshake deadline bounds the
  // whole exchange (a ClientHello that never comes, or comes a byte at a
  // time); until the request is in, the request deadline. Neither is reset
  // by progress: a peer dripping a byte at a time cannot hold a slot longer.
  const auto accepted_at = Clock::now();
  const auto& lim = opts.limits;
  ch->set_total_deadline(accepted_at + std::min({lim.handshake_timeout, lim.request_timeout, lim.total_timeout}),
                         "the handshake deadline (" + std::to_string(lim.handshake_timeout.count()) + " ms from accept)");
  std::string who = remote;
  std::string what;
  bool authenticated = false;
  try {
    co_await ch->handshake(ctx.get(), detail::TlsRole::kServer, [this, id] { return admission.hello(id); });
    authenticated = true;
    const PeerInfo peer = detail::peer_info(ch->ssl());
    who = "peer " + short_id(peer.node_id) + " (owner " +
          (peer.owner_verified ? short_id(peer.owner_id) : std::string("unverified")) + ", " + remote + ")";
    const unsigned peer_connections = slot.set_peer(peer.node_id);
    // A peer we deal with leaves the unauthenticated pool for the
    // authenticated one when it has room, and gets the request deadline. A
    // peer we do not deal with, or one the server has no room for, stays
    // under the handshake deadline: it gets its OpenAck (or "server busy").
    const bool trusted = peer_trusted(trust, identity, peer);
    const bool admitted = trusted && admission.authenticate(id);
    if (admitted) ch->set_total_deadline(accepted_at + std::min(lim.request_timeout, lim.total_timeout));

    // The subprotocol envelope: the server says what it offers this peer.
    ch->set_phase("reading the subprotocol open");
    uint8_t type = 0;
    co_await ch->read_exact({&type, 1}, "the stream type");
    if (type != wire::kStreamTypeSubprotocol) {
      throw wire::WireError("stream type " + std::to_string(type) + " is not the subprotocol stream type (13)");
    }
    const wire::Open open = wire::decode_open(co_await detail::read_frame(*ch, wire::kMaxOpenFrameBytes, "the open"));
    const bool speaks = open.name == wire::kSubprotocolName && open.major == wire::kSubprotocolMajor;
    const bool enabled = speaks && trusted;
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
    Decision d;
    if (admitted) {
      ch->set_idle_timeout(opts.limits.idle_timeout);
      ch->set_total_deadline(accepted_at + opts.limits.total_timeout);
    }
    if (!enabled) {
      d.refusal = Refusal::kDisabled;
      d.why = opts.mode == TransferMode::kOff ? "MESH_LLM_ARTIFACT_TRANSFER is off on this node"
                                              : "the peer's owner is not trusted (mode trusted)";
    } else if (!admitted) {
      d.refusal = Refusal::kBusy;
      d.why = std::to_string(admission.counts().authenticated) + " authenticated connections open (limit " +
              std::to_string(opts.limits.max_connections) + ")";
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
    if (!authenticated) {
      // Counted, and logged a few a second: a flood of these is the attack.
      preauth.event(e.peer_kind() == PeerErrorKind::kTimeout
                        ? (ch->expired() && std::string(e.what()).starts_with("closed:") ? "evicted" : "handshake deadline")
                        : "TLS handshake failed",
                    who + ": connection ended: " + e.what());
    } else {
      log(who + ": " + (what.empty() ? std::string() : what + ": ") + "connection ended: " + e.what());
    }
  } catch (const std::exception& e) {
    log(who + ": " + (what.empty() ? std::string() : what + ": ") + "error: " + e.what());
  }
  ch->close();
}

ArtifactServer::ArtifactServer(NodeIdentity identity, ServerOptions options)
    : impl_(std::make_unique<Impl>(std::move(identity), std::move(options))) {
  auto& s = *impl_;
  const auto& l = s.opts.limits;
  if (l.max_connections == 0 || l.max_connections_per_peer == 0 || l.max_unauthenticated == 0 ||
      l.max_unauthenticated_per_address == 0) {
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
  if (!drain()) {
    // Threads stuck in the kernel still use this state: leave it to them.
    impl_->log("stopped with work still running after " + std::to_string(impl_->opts.limits.shutdown_grace.count()) +
               " ms (a read that does not return): left behind");
    if (impl_->preverifier.joinable()) impl_->preverifier.detach();
    (void)impl_.release();
    return;
  }
  auto& s = *impl_;
  if (s.preverifier.joinable()) s.preverifier.join();
  s.blocking.join();
}

bool ArtifactServer::drain() noexcept {
  auto& s = *impl_;
  stop();
  s.store.cancel();
  s.preauth.flush();
  if (s.abandoned.load()) return false;
  if (!s.wait_quiet(&Impl::work_busy, s.opts.limits.shutdown_grace)) s.abandoned.store(true);
  return !s.abandoned.load();
}

uint16_t ArtifactServer::port() const noexcept {
  asio::error_code ec;
  return impl_->acceptor.local_endpoint(ec).port();
}

std::string ArtifactServer::endpoint() const { return impl_->bound; }

void ArtifactServer::run() {
  auto& s = *impl_;
  if (s.opts.preverify && !s.preverifier.joinable()) {
    auto busy = std::make_shared<Impl::Busy>(s, &Impl::work_busy);  // counted from now, not from the thread's start
    s.preverifier = std::thread([&s, busy] { s.log(s.store.preverify()); });
  }
  asio::co_spawn(s.io, s.accept_loop(), asio::detached);
  asio::co_spawn(s.io, s.log_flusher(), asio::detached);
  unsigned n = s.opts.limits.threads ? s.opts.limits.threads : std::max(2u, std::thread::hardware_concurrency());
  std::vector<std::thread> threads;
  for (unsigned i = 1; i < n; ++i) {
    auto busy = std::make_shared<Impl::Busy>(s, &Impl::io_busy);
    threads.emplace_back([&s, busy] { s.io.run(); });
  }
  s.io.run();
  // Stopped. The other I/O threads finish the handler they are in; one
  // that does not within the grace (stuck in the kernel) is left behind.
  if (s.wait_quiet(&Impl::io_busy, s.opts.limits.shutdown_grace)) {
    for (auto& t : threads) t.join();
  } else {
    s.abandoned.store(true);
    for (auto& t : threads) t.detach();
  }
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
