// PeerClient (skippy/peer.h): one connection per fetch, driven by a private
// io_context on the calling thread.
#include "peer/asio_config.h"
#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "peer/channel.h"
#include "peer/client_detail.h"
#include "peer/protocol.h"
#include "peer/tls.h"
#include "skippy/error.h"
#include "util/sha256.h"

namespace skippy::peer {

using asio::awaitable;
using detail::tcp;
using detail::TlsChannel;

struct PeerClient::Impl {
  NodeIdentity identity;
  PeerTrust trust;
  ClientOptions options;
  detail::SslCtxPtr ctx;
};

namespace {

constexpr size_t kReceiveChunk = size_t{1} << 20;
constexpr size_t kSinkBuffers = 4;  // pieces the helper thread may lag behind

// Runs the sink's on_bytes on a helper thread, in order, so that hashing
// and writing earlier pieces overlap receiving and decrypting later ones.
// It owns a ring of buffers: the receiving side fills the one acquire()
// gives it (waiting while every buffer is still queued), submit()s it, and
// finish() waits for the queue to drain. Either rethrows what the sink threw.
class SinkThread {
 public:
  SinkThread(const std::function<void(std::span<const uint8_t>)>& fn, size_t buffers, size_t buffer_bytes)
      : fn_(fn), bufs_(buffers, std::vector<uint8_t>(buffer_bytes)), thread_([this] { run(); }) {}
  ~SinkThread() {
    {
      std::lock_guard g(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();  // after the pieces already submitted (the caller's bytes)
  }
  SinkThread(const SinkThread&) = delete;
  SinkThread& operator=(const SinkThread&) = delete;

  std::span<uint8_t> acquire() {
    std::unique_lock g(mu_);
    cv_.wait(g, [&] { return queue_.size() < bufs_.size() || error_; });
    if (error_) std::rethrow_exception(error_);
    auto& b = bufs_[next_++ % bufs_.size()];
    return {b.data(), b.size()};
  }
  void submit(std::span<const uint8_t> piece) {
    std::lock_guard g(mu_);
    queue_.push_back(piece);
    cv_.notify_all();
  }
  void finish() {
    std::unique_lock g(mu_);
    cv_.wait(g, [&] { return queue_.empty() || error_; });
    if (error_) std::rethrow_exception(error_);
  }
  bool failed() {
    std::lock_guard g(mu_);
    return error_ != nullptr;
  }

 private:
  void run() {
    std::unique_lock g(mu_);
    for (;;) {
      cv_.wait(g, [&] { return !queue_.empty() || stop_; });
      if (queue_.empty()) return;
      const auto piece = queue_.front();
      g.unlock();
      std::exception_ptr e;
      if (!error_) {
        try {
          fn_(piece);
        } catch (...) {
          e = std::current_exception();
        }
      }
      g.lock();
      if (e && !error_) error_ = e;
      queue_.pop_front();  // (its buffer is free again)
      cv_.notify_all();
    }
  }

  const std::function<void(std::span<const uint8_t>)>& fn_;
  std::vector<std::vector<uint8_t>> bufs_;
  size_t next_ = 0;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::span<const uint8_t>> queue_;  // submitted, oldest first; front may be in the sink
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

std::string human_rate(uint64_t bytes_per_sec) {
  char b[48];
  if (bytes_per_sec >= (uint64_t{1} << 20)) {
    std::snprintf(b, sizeof b, "%.1f MiB/s", static_cast<double>(bytes_per_sec) / (1 << 20));
  } else if (bytes_per_sec >= 1024) {
    std::snprintf(b, sizeof b, "%.1f KiB/s", static_cast<double>(bytes_per_sec) / 1024);
  } else {
    std::snprintf(b, sizeof b, "%llu B/s", static_cast<unsigned long long>(bytes_per_sec));
  }
  return b;
}
std::string seconds(detail::Clock::duration d) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f s", std::chrono::duration<double>(d).count());
  return b;
}

// The slowest body we wait for (ClientOptions::min_rate, rate_window):
// back-to-back windows, each of which must bring min_rate * rate_window
// bytes (or the rest of the file) before it ends; a window that does
// starts the next one at once. On top, one deadline for the whole body,
// bytes / min_rate + 2 windows. Both are the channel's total deadline (the
// watchdog enforces it while nothing arrives); time spent waiting for the
// sink moves both later, as it is not the peer's slowness.
class RateGuard {
 public:
  RateGuard(TlsChannel& ch, const ClientOptions& o, uint64_t remaining, const std::string& rel)
      : ch_(ch), rate_(o.min_rate), window_(o.rate_window), total_(remaining), remaining_(remaining), rel_(rel) {
    if (!on()) return;
    const auto now = detail::Clock::now();
    const auto body_ms = std::chrono::milliseconds(static_cast<int64_t>(
        std::min<long double>(static_cast<long double>(remaining) * 1000 / static_cast<long double>(rate_), 1e15L)));
    overall_ = now + body_ms + 2 * window_;
    overall_budget_ = body_ms + 2 * window_;
    start_window(now);
    ch_.set_total_deadline(std::min(window_end_, overall_));
  }
  bool on() const noexcept { return rate_ > 0 && window_.count() > 0; }
  void arrived(uint64_t n) {
    if (!on()) return;
    remaining_ -= std::min(n, remaining_);
    in_window_ += n;
    if (in_window_ >= target_ && remaining_ > 0) {
      start_window(detail::Clock::now());
      ch_.extend_total_deadline(std::min(window_end_, overall_));
    }
  }
  // Time the receiver spent waiting for the sink.
  void paused(detail::Clock::duration d) {
    if (!on() || d < std::chrono::milliseconds(1)) return;
    window_end_ += d;
    overall_ += d;
    ch_.extend_total_deadline(std::min(window_end_, overall_));
  }
  // A timeout of the channel that is this guard's: the words for it.
  std::optional<PeerError> tripped(const PeerError& e) const {
    if (!on() || e.peer_kind() != PeerErrorKind::kTimeout) return std::nullopt;
    const auto now = detail::Clock::now();
    const uint64_t got = total_ - remaining_;
    const std::string progress = " (" + std::to_string(got) + " of " + std::to_string(total_) + " bytes of " + rel_ +
                                 " received)";
    if (now >= overall_) {
      return PeerError(PeerErrorKind::kTimeout, "timed out: the transfer's deadline of " + seconds(overall_budget_) +
                                                    " (its size at the minimum rate of " + human_rate(rate_) +
                                                    ", plus two windows) passed" + progress);
    }
    if (now >= window_end_) {
      return PeerError(PeerErrorKind::kTimeout,
                       "too slow: " + std::to_string(in_window_) + " bytes in the last " + seconds(now - window_start_) +
                           ", under the minimum rate of " + human_rate(rate_) + " averaged over " + seconds(window_) +
                           progress);
    }
    return std::nullopt;
  }

 private:
  void start_window(detail::Clock::time_point now) {
    window_start_ = now;
    window_end_ = now + window_;
    in_window_ = 0;
    const long double per_window = static_cast<long double>(rate_) * static_cast<long double>(window_.count()) / 1000;
    target_ = std::min<uint64_t>(remaining_, static_cast<uint64_t>(std::max<long double>(1, per_window)));
  }
  TlsChannel& ch_;
  const uint64_t rate_;
  const std::chrono::milliseconds window_;
  const uint64_t total_;
  uint64_t remaining_;
  const std::string rel_;
  detail::Clock::time_point overall_{}, window_start_{}, window_end_{};
  detail::Clock::duration overall_budget_{};
  uint64_t in_window_ = 0, target_ = 0;
};

// Closes the channel however the session ends (the watchdog holds it too).
struct CloseOnExit {
  std::shared_ptr<TlsChannel> ch;
  ~CloseOnExit() { ch->close(); }
};

awaitable<TransferAnswer> session(const PeerClient::Impl& c, std::vector<tcp::endpoint> endpoints, const wire::Request* req,
                                  const TransferSink* sink, std::vector<std::string>* features) {
  tcp::socket socket(co_await asio::this_coro::executor);
  auto ch = std::make_shared<TlsChannel>(std::move(socket), c.options.connect_timeout);
  // connect_timeout bounds connecting and the handshake together.
  ch->set_total_deadline(detail::Clock::now() + c.options.connect_timeout);
  ch->start_watchdog();
  CloseOnExit closer{ch};
  TransferAnswer answer;
  try {
    co_await ch->connect(endpoints);
    co_await ch->handshake(c.ctx.get(), detail::TlsRole::kClient);
    ch->set_total_deadline(detail::Clock::time_point::max());
    ch->set_idle_timeout(c.options.idle_timeout);
    answer.server = detail::peer_info(ch->ssl());
    const PeerInfo& server = answer.server;
    if (c.options.expected_server_node_id && server.node_id != *c.options.expected_server_node_id) {
      throw PeerError(PeerErrorKind::kUntrusted, "the peer is node " + server.node_id + ", expected " +
                                                     *c.options.expected_server_node_id);
    }
    if (!peer_trusted(c.trust, c.identity, server)) {
      throw PeerError(PeerErrorKind::kUntrusted,
                      "the peer (node " + server.node_id.substr(0, 16) + ", owner " +
                          (server.owner_verified ? server.owner_id.substr(0, 16) : std::string("unverified")) +
                          ") is not trusted in mode " + std::string(transfer_mode_name(c.trust.mode)) +
                          (c.identity.owner_verified() ? std::string() : " (our own owner certificate does not verify)"));
    }

    ch->set_phase("opening the subprotocol");
    wire::Open open;
    open.features.emplace_back(wire::kFeatureArtifactTransfer);
    co_await detail::write_tagged_frame(*ch, wire::kStreamTypeSubprotocol, wire::encode(open));
    const wire::OpenAck ack =
        wire::decode_open_ack(co_await detail::read_frame(*ch, wire::kMaxOpenFrameBytes, "the open acknowledgement"));
    if (ack.name != wire::kSubprotocolName || ack.major != wire::kSubprotocolMajor) {
      throw PeerError(PeerErrorKind::kProtocol, "the peer speaks " + ack.name + "/" + std::to_string(ack.major) + ", not " +
                                                    std::string(wire::kSubprotocolName) + "/" +
                                                    std::to_string(wire::kSubprotocolMajor));
    }
    if (features) *features = ack.features;
    if (!req) {
      co_await ch->shutdown();
      co_return answer;
    }
    if (!ack.has_feature(wire::kFeatureArtifactTransfer)) {
      co_await ch->shutdown();  // a clean goodbye: we do not use what is not offered
      throw PeerError(PeerErrorKind::kFeatureUnavailable,
                      "the peer does not offer artifact-transfer to this node (transfer is off there, or it does not "
                      "trust our owner)");
    }

    co_await detail::write_tagged_frame(*ch, wire::kKindArtifactTransfer, wire::encode(*req));
    ch->set_phase("waiting for the answer");
    const wire::Response resp =
        wire::decode_response(co_await detail::read_frame(*ch, wire::kMaxResponseFrameBytes, "the answer"));
    if (!resp.accepted) {
      throw PeerError(PeerErrorKind::kRefused, "the peer refused " + req->rel_path + ": " + std::string(refusal_text(resp.refusal)),
                      resp.refusal);
    }
    // The answer must be about what we asked.
    if (resp.offset != req->offset) {
      throw PeerError(PeerErrorKind::kProtocol, "the peer answered from byte " + std::to_string(resp.offset) +
                                                    ", we asked from " + std::to_string(req->offset));
    }
    if (req->expected_size && resp.total_size != *req->expected_size) {
      throw PeerError(PeerErrorKind::kProtocol, "the peer offers " + std::to_string(resp.total_size) + " bytes of " +
                                                    req->rel_path + ", the manifest says " +
                                                    std::to_string(*req->expected_size));
    }
    if (req->expected_sha256 && resp.sha256 != *req->expected_sha256) {
      throw PeerError(PeerErrorKind::kProtocol, "the peer offers " + req->rel_path + " with SHA-256 " +
                                                    wire::to_hex(resp.sha256) + ", the manifest says " +
                                                    wire::to_hex(*req->expected_sha256));
    }
    answer.offset = resp.offset;
    answer.total_size = resp.total_size;
    answer.sha256 = wire::to_hex(resp.sha256);
    if (sink->on_accept) sink->on_accept(answer);

    ch->set_phase("receiving the artifact");
    uint64_t remaining = resp.total_size - resp.offset;
    const uint64_t expected = remaining;
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(kReceiveChunk, std::max<uint64_t>(remaining, 1)));
    auto closed_early = [&] {
      return PeerError(PeerErrorKind::kTransport, "the peer closed the connection after " +
                                                      std::to_string(expected - remaining) + " of " +
                                                      std::to_string(expected) + " bytes of " + req->rel_path);
    };
    RateGuard rate(*ch, c.options, remaining, req->rel_path);
    try {
      if (c.options.sink_on_helper_thread && sink->on_bytes && remaining > 0) {
        // Whole 1 MiB pieces to the helper (fewer hand-overs), four in flight.
        SinkThread helper(sink->on_bytes, kSinkBuffers, chunk);
        while (remaining > 0) {
          const auto waited = detail::Clock::now();
          const auto buf = helper.acquire();  // may wait for the sink
          ch->touch();                         // which is not the peer's idleness
          rate.paused(detail::Clock::now() - waited);
          const size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), remaining));
          size_t got = 0;
          bool eof = false;
          try {
            while (got < want && !eof) {
              const size_t n = co_await ch->read_some(buf.subspan(got, want - got));
              eof = n == 0;
              got += n;
              rate.arrived(n);
            }
          } catch (...) {
            // The stream broke mid-piece: what arrived is still the caller's.
            if (got > 0) helper.submit(buf.first(got));
            if (!helper.failed()) helper.finish();
            throw;
          }
          if (got > 0) helper.submit(buf.first(got));
          remaining -= got;
          if (eof) {
            helper.finish();
            throw closed_early();
          }
        }
        helper.finish();
      } else {
        std::vector<uint8_t> buf(chunk);
        while (remaining > 0) {
          const size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), remaining));
          const size_t n = co_await ch->read_some({buf.data(), want});
          if (n == 0) throw closed_early();
          rate.arrived(n);
          const auto sinking = detail::Clock::now();
          if (sink->on_bytes) sink->on_bytes({buf.data(), n});
          ch->touch();  // the sink's time is not the peer's idleness
          rate.paused(detail::Clock::now() - sinking);
          remaining -= n;
        }
      }
    } catch (const PeerError& e) {
      if (auto slow = rate.tripped(e)) throw *slow;
      throw;
    }
    co_await ch->shutdown();
  } catch (const wire::WireError& e) {
    throw PeerError(PeerErrorKind::kProtocol, std::string("malformed message from the peer: ") + e.what());
  }
  co_return answer;
}

TransferAnswer run_session(const PeerClient::Impl& c, std::string_view endpoint, const wire::Request* req,
                           const TransferSink* sink, std::vector<std::string>* features) {
  const auto endpoints = detail::resolve_endpoint(endpoint, false);
  asio::io_context io(1);
  std::exception_ptr error;
  TransferAnswer answer;
  asio::co_spawn(io, session(c, endpoints, req, sink, features), [&](std::exception_ptr e, TransferAnswer a) {
    error = e;
    answer = std::move(a);
  });
  io.run();
  if (error) std::rethrow_exception(error);
  return answer;
}

}  // namespace

TransferRequest transfer_request(const Topology& topology, const TopologyStage& stage, const PeerArtifact& artifact,
                                 uint64_t offset) {
  TransferRequest r = manifest_request(topology, stage, offset);
  r.rel_path = artifact.rel_path;
  r.expected_size = artifact.bytes;
  r.expected_sha256 = artifact.sha256;
  return r;
}

TransferRequest manifest_request(const Topology& topology, const TopologyStage& stage, uint64_t offset) {
  TransferRequest r;
  r.topology_id = topology.topology_id;
  r.run_id = topology.run_id;
  r.stage_id = stage.stage_id;
  r.package_ref = topology.package_ref;
  r.manifest_sha256 = topology.manifest_sha256;
  r.rel_path = std::string(kManifestFileName);
  r.offset = offset;
  r.expected_sha256 = topology.manifest_sha256;
  return r;
}

PeerClient::PeerClient(NodeIdentity identity, PeerTrust trust, ClientOptions options) {
  if (trust.mode == TransferMode::kOff) {
    throw_invalid("peer transfer is off (MESH_LLM_ARTIFACT_TRANSFER is unset or not trusted/open): do not use a peer");
  }
  auto ctx = detail::make_tls_context(identity, detail::TlsRole::kClient);
  impl_ = std::make_unique<Impl>(Impl{std::move(identity), std::move(trust), std::move(options), std::move(ctx)});
}

PeerClient::~PeerClient() = default;
PeerClient::PeerClient(PeerClient&&) noexcept = default;
PeerClient& PeerClient::operator=(PeerClient&&) noexcept = default;

const NodeIdentity& PeerClient::identity() const noexcept { return impl_->identity; }

TransferAnswer PeerClient::fetch(std::string_view endpoint, const TransferRequest& request, const TransferSink& sink) const {
  wire::Request req;
  try {
    req.requester = wire::digest_from_hex(impl_->identity.node_id(), "node id");
    req.topology_id = request.topology_id;
    req.run_id = request.run_id;
    req.stage_id = request.stage_id;
    req.package_ref = request.package_ref;
    req.manifest_sha256 = wire::digest_from_hex(request.manifest_sha256, "manifest_sha256");
    req.rel_path = request.rel_path;
    req.offset = request.offset;
    req.expected_size = request.expected_size;
    if (request.expected_sha256) req.expected_sha256 = wire::digest_from_hex(*request.expected_sha256, "expected_sha256");
    (void)wire::encode(req);  // the same rules the server applies
  } catch (const wire::WireError& e) {
    throw Error(ErrorKind::kUsage, "peer transfer request for " + request.rel_path + ": " + e.what());
  }
  return detail::fetch_wire(*this, endpoint, req, sink);
}

std::vector<std::string> PeerClient::features(std::string_view endpoint) const {
  std::vector<std::string> out;
  run_session(*impl_, endpoint, nullptr, nullptr, &out);
  return out;
}

namespace detail {

TransferAnswer fetch_wire(const PeerClient& client, std::string_view endpoint, const wire::Request& request,
                          const TransferSink& sink) {
  return run_session(client.impl(), endpoint, &request, &sink, nullptr);
}

}  // namespace detail

}  // namespace skippy::peer
