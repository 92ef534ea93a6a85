#include "peer/asio_config.h"
#include "peer/channel.h"

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/redirect_error.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/io_context.hpp>
#include <openssl/err.h>

#include <utility>

#include "peer/protocol.h"

namespace skippy::peer::detail {

using asio::awaitable;
using asio::use_awaitable;

TlsChannel::TlsChannel(tcp::socket socket, std::chrono::milliseconds idle)
    : socket_(std::move(socket)), timer_(socket_.get_executor()), idle_(idle) {
  touch();
}

TlsChannel::~TlsChannel() { close(); }

void TlsChannel::start_watchdog() { asio::co_spawn(socket_.get_executor(), watch(shared_from_this()), asio::detached); }

// The watchdog sleeps until the earliest deadline it knew of; when a
// deadline may move earlier it is woken to recompute (touch() only ever
// moves the idle deadline later, which the watchdog notices on waking).
void TlsChannel::set_idle_timeout(std::chrono::milliseconds idle) {
  idle_ = idle;
  touch();
  timer_.cancel();
}

void TlsChannel::set_total_deadline(Clock::time_point deadline, std::string why) {
  total_deadline_ = deadline;
  total_why_ = std::move(why);
  timer_.cancel();
}

void TlsChannel::evict(const char* why) noexcept {
  if (closed_ || expired_) return;
  evicted_ = why;
  expired_ = true;
  asio::error_code ec;
  socket_.cancel(ec);
  timer_.cancel();
}

awaitable<void> TlsChannel::watch(std::shared_ptr<TlsChannel> self) {
  while (!self->closed_ && !self->expired_) {
    const auto deadline = std::min(self->idle_deadline_, self->total_deadline_);
    if (Clock::now() >= deadline) {
      self->expired_ = true;
      asio::error_code ec;
      self->socket_.cancel(ec);
      co_return;
    }
    self->timer_.expires_at(deadline);
    asio::error_code ec;
    co_await self->timer_.async_wait(asio::redirect_error(use_awaitable, ec));
  }
}

void TlsChannel::throw_timeout() const {
  if (evicted_) throw PeerError(PeerErrorKind::kTimeout, std::string("closed: ") + evicted_ + " while " + phase_);
  const bool total = Clock::now() >= total_deadline_;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(idle_).count();
  throw PeerError(PeerErrorKind::kTimeout,
                  total ? std::string("timed out: ") + (total_why_.empty() ? std::string("the connection's time limit") : total_why_) +
                              " passed while " + phase_
                        : "timed out: no progress for " + std::to_string(ms) + " ms while " + phase_);
}

awaitable<void> TlsChannel::wait(tcp::socket::wait_type what) {
  if (expired_) throw_timeout();
  if (closed_) throw PeerError(PeerErrorKind::kTransport, "connection closed");
  asio::error_code ec;
  co_await socket_.async_wait(what, asio::redirect_error(use_awaitable, ec));
  if (expired_) throw_timeout();
  if (ec) throw PeerError(PeerErrorKind::kTransport, std::string("socket error while ") + phase_ + ": " + ec.message());
}

awaitable<void> TlsChannel::connect(const std::vector<tcp::endpoint>& endpoints) {
  std::string errors;
  for (const auto& ep : endpoints) {
    asio::error_code ec;
    if (socket_.is_open()) socket_.close(ec);
    co_await socket_.async_connect(ep, asio::redirect_error(use_awaitable, ec));
    if (expired_) throw_timeout();
    if (!ec) {
      socket_.set_option(tcp::no_delay(true), ec);
      touch();
      co_return;
    }
    if (!errors.empty()) errors += "; ";
    errors += ep.address().to_string() + ":" + std::to_string(ep.port()) + ": " + ec.message();
  }
  throw PeerError(PeerErrorKind::kTransport, "cannot connect: " + (errors.empty() ? std::string("no address") : errors));
}

awaitable<void> TlsChannel::handshake(SSL_CTX* ctx, TlsRole role, std::function<bool()> on_hello) {
  asio::error_code ec;
  socket_.non_blocking(true, ec);
  if (ec) throw PeerError(PeerErrorKind::kTransport, "socket: " + ec.message());
  ssl_ = new_tls_session(ctx, socket_.native_handle(), role);
  // The ClientHello gate (tls.cpp): asked within SSL_do_handshake only, so
  // the pointer to this frame's `on_hello` is never used after it.
  struct GateScope {
    SSL* ssl;
    ~GateScope() { SSL_set_app_data(ssl, nullptr); }
  } gate_scope{ssl_.get()};
  if (on_hello) SSL_set_app_data(ssl_.get(), &on_hello);
  set_phase("in the TLS handshake");
  for (;;) {
    ERR_clear_error();
    errno = 0;
    const int r = SSL_do_handshake(ssl_.get());
    if (r == 1) break;
    const int e = SSL_get_error(ssl_.get(), r);
    if (e == SSL_ERROR_WANT_CLIENT_HELLO_CB) {
      evict("its unauthenticated slot went to a newer connection before its ClientHello was answered");
      throw_timeout();
    }
    if (e == SSL_ERROR_WANT_READ) {
      co_await wait(tcp::socket::wait_read);
    } else if (e == SSL_ERROR_WANT_WRITE) {
      co_await wait(tcp::socket::wait_write);
    } else {
      // A server that closes the connection before it answers our
      // ClientHello at all: what its caps before authentication do (closed
      // at accept, or the slot given to another). Worth asking again later.
      const bool eof = e == SSL_ERROR_SYSCALL ||
                       (e == SSL_ERROR_SSL && ERR_GET_REASON(ERR_peek_last_error()) == SSL_R_UNEXPECTED_EOF_WHILE_READING);
      if (role == TlsRole::kClient && eof && SSL_get_state(ssl_.get()) == TLS_ST_CW_CLNT_HELLO) {
        const std::string text = tls_error_text(ssl_.get(), r, "TLS handshake failed");
        throw PeerError(PeerErrorKind::kClosedEarly,
                        "the peer closed the connection before answering our TLS ClientHello (its connection limits?): " +
                            text);
      }
      throw PeerError(PeerErrorKind::kTransport, tls_error_text(ssl_.get(), r, "TLS handshake failed"));
    }
  }
  touch();
}

awaitable<size_t> TlsChannel::read_some(std::span<uint8_t> buf) {
  size_t got = 0;
  while (got < buf.size()) {
    size_t n = 0;
    ERR_clear_error();
    errno = 0;
    const int r = SSL_read_ex(ssl_.get(), buf.data() + got, buf.size() - got, &n);
    if (r == 1) {
      got += n;
      touch();
      continue;
    }
    const int e = SSL_get_error(ssl_.get(), r);
    if (e == SSL_ERROR_WANT_READ) {
      if (got > 0) break;  // hand over what is here rather than wait
      co_await wait(tcp::socket::wait_read);
    } else if (e == SSL_ERROR_WANT_WRITE) {
      if (got > 0) break;
      co_await wait(tcp::socket::wait_write);
    } else if (e == SSL_ERROR_ZERO_RETURN) {
      break;
    } else {
      if (got > 0) break;  // report the error on the next call
      throw PeerError(PeerErrorKind::kTransport, tls_error_text(ssl_.get(), r, (std::string("TLS read failed while ") + phase_).c_str()));
    }
  }
  co_return got;
}

awaitable<void> TlsChannel::read_exact(std::span<uint8_t> buf, const char* what) {
  size_t done = 0;
  while (done < buf.size()) {
    const size_t n = co_await read_some(buf.subspan(done));
    if (n == 0) {
      throw PeerError(PeerErrorKind::kTransport, std::string("the peer closed the connection in the middle of ") + what +
                                                     " (" + std::to_string(done) + " of " + std::to_string(buf.size()) +
                                                     " bytes)");
    }
    done += n;
  }
}

awaitable<void> TlsChannel::write_all(std::span<const uint8_t> data) {
  while (!data.empty()) {
    size_t n = 0;
    ERR_clear_error();
    errno = 0;
    const int r = SSL_write_ex(ssl_.get(), data.data(), data.size(), &n);
    if (r == 1) {
      data = data.subspan(n);
      touch();
      continue;
    }
    const int e = SSL_get_error(ssl_.get(), r);
    if (e == SSL_ERROR_WANT_WRITE) {
      co_await wait(tcp::socket::wait_write);
    } else if (e == SSL_ERROR_WANT_READ) {
      co_await wait(tcp::socket::wait_read);
    } else {
      throw PeerError(PeerErrorKind::kTransport, tls_error_text(ssl_.get(), r, (std::string("TLS write failed while ") + phase_).c_str()));
    }
  }
}

awaitable<void> TlsChannel::shutdown() noexcept {
  if (!ssl_ || closed_ || expired_) co_return;
  try {
    for (int i = 0; i < 4; ++i) {
      ERR_clear_error();
      const int r = SSL_shutdown(ssl_.get());
      if (r >= 0) break;  // close_notify sent (we do not wait for the peer's)
      const int e = SSL_get_error(ssl_.get(), r);
      if (e != SSL_ERROR_WANT_WRITE) break;
      co_await wait(tcp::socket::wait_write);
    }
  } catch (...) {
  }
  ERR_clear_error();
}

void TlsChannel::close() noexcept {
  if (closed_) return;
  closed_ = true;
  asio::error_code ec;
  timer_.cancel();
  socket_.close(ec);
}

std::vector<tcp::endpoint> resolve_endpoint(std::string_view text, bool passive) {
  const auto usage = [&](const char* problem) {
    return Error(ErrorKind::kUsage, "endpoint \"" + std::string(text) + "\": " + problem + " (expected HOST:PORT)");
  };
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos || colon == 0) throw usage("no HOST:PORT");
  std::string host(text.substr(0, colon));
  const std::string_view port_text = text.substr(colon + 1);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) throw usage("empty host");
  unsigned port = 0;
  if (port_text.empty() || port_text.size() > 5 || port_text.find_first_not_of("0123456789") != std::string_view::npos) {
    throw usage("the port is not a number");
  }
  port = static_cast<unsigned>(std::stoul(std::string(port_text)));
  if (port > 65535 || (port == 0 && !passive)) throw usage("the port is not in 1..65535");
  asio::error_code ec;
  const auto addr = asio::ip::make_address(host, ec);
  if (!ec) return {tcp::endpoint(addr, static_cast<uint16_t>(port))};
  asio::io_context io;
  tcp::resolver resolver(io);
  const auto results = resolver.resolve(host, std::to_string(port), ec);
  if (ec || results.empty()) {
    throw PeerError(PeerErrorKind::kTransport, "cannot resolve " + host + ": " + (ec ? ec.message() : "no address"));
  }
  std::vector<tcp::endpoint> out;
  for (const auto& r : results) out.push_back(r.endpoint());
  return out;
}

awaitable<std::vector<uint8_t>> read_frame(TlsChannel& ch, uint32_t cap, const char* what) {
  std::array<uint8_t, 4> header{};
  co_await ch.read_exact(header, what);
  const uint32_t n = wire::frame_length(header, cap, what);
  std::vector<uint8_t> payload(n);
  co_await ch.read_exact(payload, what);
  co_return payload;
}

awaitable<void> write_tagged_frame(TlsChannel& ch, std::optional<uint8_t> tag, std::span<const uint8_t> payload) {
  std::vector<uint8_t> out;
  if (tag) out.push_back(*tag);
  const auto f = wire::frame(payload);
  out.insert(out.end(), f.begin(), f.end());
  co_await ch.write_all(out);
}

}  // namespace skippy::peer::detail
