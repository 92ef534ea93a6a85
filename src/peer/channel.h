// One TLS connection driven by asio coroutines, with deadlines. Internal to
// src/peer.
//
// OpenSSL works directly on the non-blocking socket (no memory BIOs, no
// extra copy): each call that would block waits for readiness with
// socket::async_wait. A watchdog coroutine on the same executor enforces
// two deadlines: idle (no progress for `idle`, re-armed by every byte moved)
// and total (a whole connection). When one passes it cancels the socket's
// pending wait and every later operation throws PeerError(kTimeout).
//
// Not thread-safe: one connection's coroutines run on one strand (server)
// or one thread (client).
#pragma once

#include "peer/asio_config.h"

#include <asio/awaitable.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/steady_timer.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "peer/tls.h"

namespace skippy::peer::detail {

using Clock = std::chrono::steady_clock;
using tcp = asio::ip::tcp;

class TlsChannel : public std::enable_shared_from_this<TlsChannel> {
 public:
  // `idle` applies from now; the total deadline is unset (never).
  TlsChannel(tcp::socket socket, std::chrono::milliseconds idle);
  ~TlsChannel();
  TlsChannel(const TlsChannel&) = delete;
  TlsChannel& operator=(const TlsChannel&) = delete;

  // Starts the watchdog (once, right after construction by make_shared).
  void start_watchdog();
  void set_idle_timeout(std::chrono::milliseconds idle);  // and counts from now
  // `why`, when given, is what a timeout at that deadline says ("the
  // handshake deadline"); else "the connection's time limit".
  void set_total_deadline(Clock::time_point deadline, std::string why = {});
  // Moves the total deadline later without waking the watchdog (it
  // recomputes when it wakes at the earlier one).
  void extend_total_deadline(Clock::time_point deadline) noexcept {
    if (deadline > total_deadline_) total_deadline_ = deadline;
  }
  Clock::time_point total_deadline() const noexcept { return total_deadline_; }
  bool expired() const noexcept { return expired_; }
  // Ends the connection now, from its own strand: every pending and later
  // operation throws PeerError(kTimeout) saying `why` (a literal).
  void evict(const char* why) noexcept;
  // Restarts the idle clock: after time spent away from the peer (a slow
  // sink, a long authorization), which is not the peer's idleness.
  void touch() noexcept { idle_deadline_ = Clock::now() + idle_; }
  // Names what the connection is doing, for timeout messages ("reading", ...).
  void set_phase(const char* phase) noexcept { phase_ = phase; }

  tcp::socket& socket() noexcept { return socket_; }
  SSL* ssl() const noexcept { return ssl_.get(); }

  // Client: connects to the first endpoint that accepts.
  asio::awaitable<void> connect(const std::vector<tcp::endpoint>& endpoints);
  // Creates the TLS session on the connected socket and runs the handshake.
  // `on_hello` (server) runs on the ClientHello, before it is answered:
  // false ends the connection there, nothing sent (the slot it held was
  // given to another meanwhile), as evict() would.
  asio::awaitable<void> handshake(SSL_CTX* ctx, TlsRole role, std::function<bool()> on_hello = {});

  // At least one byte, as many as are ready (up to buf.size()); 0 when the
  // peer closed cleanly (close_notify).
  asio::awaitable<size_t> read_some(std::span<uint8_t> buf);
  // Exactly buf.size() bytes; an early end is PeerError(kTransport) naming `what`.
  asio::awaitable<void> read_exact(std::span<uint8_t> buf, const char* what);
  asio::awaitable<void> write_all(std::span<const uint8_t> data);
  // Sends close_notify (best effort, bounded by the deadlines; never throws).
  asio::awaitable<void> shutdown() noexcept;
  // Stops the watchdog and closes the socket.
  void close() noexcept;

 private:
  asio::awaitable<void> wait(tcp::socket::wait_type what);
  [[noreturn]] void throw_timeout() const;
  static asio::awaitable<void> watch(std::shared_ptr<TlsChannel> self);

  tcp::socket socket_;
  asio::steady_timer timer_;
  SslPtr ssl_;
  Clock::duration idle_;
  Clock::time_point idle_deadline_;
  Clock::time_point total_deadline_ = Clock::time_point::max();
  std::string total_why_;
  const char* evicted_ = nullptr;
  bool expired_ = false;
  bool closed_ = false;
  const char* phase_ = "connecting";
};

// "HOST:PORT" (a name, an IPv4 address, or [IPv6]:PORT) as endpoints to
// try in order. Port 0 is allowed only when `passive` (a listening
// address). Throws Error(kUsage) for a malformed endpoint,
// PeerError(kTransport) when the name does not resolve.
std::vector<tcp::endpoint> resolve_endpoint(std::string_view text, bool passive);

// A control frame: u32 LE length (1..cap) and its payload. Throws
// wire::WireError for a bad length, PeerError for transport failures.
asio::awaitable<std::vector<uint8_t>> read_frame(TlsChannel& ch, uint32_t cap, const char* what);
// One byte, then a frame, sent in one write.
asio::awaitable<void> write_tagged_frame(TlsChannel& ch, std::optional<uint8_t> tag, std::span<const uint8_t> payload);

}  // namespace skippy::peer::detail
