// Peer cache transfer (spec: "Peer Cache Transfer"): a worker of
// a split run fetches the artifacts of its stage from the node that
// coordinates the run, over TCP + TLS 1.3 with mutual authentication
// (peer_identity.h), before it falls back to the Hub.
//
//   PeerClient::fetch     one artifact from one peer, streamed to a sink
//   make_peer_remote      the peer as a Remote of the source layer
//                         (source.h), asked before the Hub
//   make_peer_sources     `fetch --peer`'s chain: cache, peer, Hub, with
//                         the trust policy
//   ArtifactServer        serve-artifacts: serves the package in the local
//                         Hugging Face cache to the stages of a topology
//
// The wire format is in src/peer/PROTOCOL.md. Nothing a server says reveals
// its inventory, paths, cache roots or tokens: a refusal is one of the four
// fixed reasons below, and the reason behind it stays in the server's log.
//
// Thread-safety: PeerClient is thread-safe (fetch() on several threads at
// once); an ArtifactServer runs on its own I/O threads, and stop() may be
// called from any thread; the Remote of make_peer_remote is used as source.h
// says; option structs are plain values.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "skippy/error.h"
#include "skippy/source.h"
#include "skippy/peer_identity.h"
#include "skippy/peer_topology.h"

namespace skippy::peer {

// ------------------------------------------------------------------ modes

// MESH_LLM_ARTIFACT_TRANSFER (case-insensitive):
//   1, true, on, yes, open, any, public                          -> kOpen
//   trusted, trust, owner, owners, same-owner, allowlist          -> kTrusted
//   anything else, empty or unset                                  -> kOff (the default)
enum class TransferMode { kOff, kTrusted, kOpen };
inline constexpr const char* kTransferModeEnv = "MESH_LLM_ARTIFACT_TRANSFER";
TransferMode parse_transfer_mode(std::string_view value) noexcept;
TransferMode transfer_mode_from_env() noexcept;
std::string_view transfer_mode_name(TransferMode m) noexcept;  // "off", "trusted", "open"

// Whom a node deals with. kOpen: any authenticated peer. kTrusted: a peer
// whose certificate verifies under an owner certificate, that owner being
// ours (and ours verified) or one of trusted_owner_ids. kOff: nobody.
struct PeerTrust {
  TransferMode mode = TransferMode::kOff;
  std::vector<std::string> trusted_owner_ids;  // owner_id_of_certificate() of each --trust-owner
};

// What TLS proved about the other side.
struct PeerInfo {
  std::string node_id;
  std::string owner_id;         // empty when no owner certificate verified
  bool owner_verified = false;
};

// True when `peer` may transfer with `local` under `trust`.
bool peer_trusted(const PeerTrust& trust, const NodeIdentity& local, const PeerInfo& peer);

// ----------------------------------------------------------------- errors

// Why a server refused (the only words a refusal carries).
enum class Refusal : uint8_t {
  kDisabled = 1,       // "artifact transfer disabled"
  kUnavailable = 2,    // "artifact unavailable"
  kInvalidOffset = 3,  // "invalid transfer offset"
  kBusy = 4,           // "server busy"
};
std::string_view refusal_text(Refusal r) noexcept;

enum class PeerErrorKind {
  kRefused,             // the server answered with a Refusal
  kFeatureUnavailable,  // the server does not offer artifact-transfer to us
  kUntrusted,           // the server's identity does not satisfy our PeerTrust
  kTimeout,             // connect, or no progress within the idle timeout
  kTransport,           // TCP/TLS failure, or the stream ended early
  kClosedEarly,         // the server closed the connection before answering our ClientHello
                        // (how its caps before authentication refuse): asked again like "server busy"
  kProtocol,            // the server said something malformed or inconsistent
};

// Every failure of PeerClient::fetch. kind() is ErrorKind::kIo; the bytes
// already given to the sink stay the caller's (resume from them).
class PeerError : public Error {
 public:
  PeerError(PeerErrorKind peer_kind, const std::string& message, std::optional<Refusal> refusal = std::nullopt)
      : Error(ErrorKind::kIo, message), peer_kind_(peer_kind), refusal_(refusal) {}
  PeerErrorKind peer_kind() const noexcept { return peer_kind_; }
  std::optional<Refusal> refusal() const noexcept { return refusal_; }

 private:
  PeerErrorKind peer_kind_;
  std::optional<Refusal> refusal_;
};

// ----------------------------------------------------------------- client

struct TransferRequest {
  std::string topology_id;
  std::string run_id;
  std::string stage_id;
  std::string package_ref;       // hf://ns/repo@<40-hex commit>
  std::string manifest_sha256;   // 64 hex (the topology's)
  std::string rel_path;          // "model-package.json" or a manifest-declared path
  uint64_t offset = 0;           // resume: the length of the caller's partial file
  std::optional<uint64_t> expected_size;        // the manifest's artifact_bytes
  std::optional<std::string> expected_sha256;   // the manifest's sha256 (64 hex)
};

// The request for `artifact` (from stage_artifacts) of `stage`, with the
// manifest's size and SHA-256 as expectations; and the request for
// model-package.json itself (expected SHA-256: the topology's).
TransferRequest transfer_request(const Topology& topology, const TopologyStage& stage, const PeerArtifact& artifact,
                                 uint64_t offset = 0);
TransferRequest manifest_request(const Topology& topology, const TopologyStage& stage, uint64_t offset = 0);

struct TransferAnswer {
  uint64_t offset = 0;       // where the bytes given to the sink start
  uint64_t total_size = 0;   // of the whole artifact
  std::string sha256;        // of the whole artifact, lowercase hex (the server's word:
                             // the caller verifies what it wrote)
  PeerInfo server;
};

struct ClientOptions {
  std::chrono::milliseconds connect_timeout{30'000};  // TCP connect + TLS handshake
  std::chrono::milliseconds idle_timeout{30'000};     // any read or write making no progress
  // The slowest transfer we wait for: after the answer, each
  // window of `rate_window` must bring min_rate * rate_window bytes (or the
  // rest of the file), else PeerErrorKind::kTimeout "slower than ...". And
  // the whole body must arrive within (bytes / min_rate) + 2 * rate_window.
  // Time spent in the sink does not count. min_rate 0: no such limit.
  uint64_t min_rate = uint64_t{1} << 20;           // bytes per second (env::peer_min_rate())
  std::chrono::milliseconds rate_window{10'000};   // (env::peer_rate_window_ms())
  // When set, the server must be this node (else PeerErrorKind::kUntrusted).
  std::optional<std::string> expected_server_node_id;
  // Run TransferSink::on_bytes on a helper thread (one call at a time, in
  // order), so that hashing and writing a piece overlap receiving and
  // decrypting the next. With false it runs on the calling thread.
  bool sink_on_helper_thread = true;
};

// Callbacks of one transfer. on_accept runs once on the calling thread,
// before any byte, with the accepted answer (throw from it to abandon the
// transfer). on_bytes receives [offset, total_size) in order, in pieces of
// up to 1 MiB; the span is valid during the call only. By default it runs on
// a helper thread (ClientOptions::sink_on_helper_thread), never two calls at
// once, and fetch() returns only after the last call has returned. An
// exception thrown by either ends the transfer and propagates unchanged from
// fetch(). Time spent in the sink does not count against the idle timeout.
struct TransferSink {
  std::function<void(const TransferAnswer&)> on_accept;
  std::function<void(std::span<const uint8_t>)> on_bytes;
};

// A node's client side. Thread-safe: fetch() may run on several threads at
// once (one connection each).
class PeerClient {
 public:
  // Throws Error(kInvalidInput) when trust.mode is kOff (transfer is off:
  // do not use a peer) or the TLS context cannot be built.
  PeerClient(NodeIdentity identity, PeerTrust trust, ClientOptions options = {});
  ~PeerClient();
  PeerClient(PeerClient&&) noexcept;
  PeerClient& operator=(PeerClient&&) noexcept;

  // Fetches one artifact from `endpoint` ("HOST:PORT"; [v6]:port too):
  // connects, authenticates both sides, checks that the server offers
  // artifact-transfer, sends the request (requester = our node id) and, on
  // acceptance, streams the bytes to the sink. Checks that the answer agrees
  // with the request (offset, expected size and SHA-256 when given) and that
  // exactly total_size - offset bytes arrive. Throws PeerError.
  TransferAnswer fetch(std::string_view endpoint, const TransferRequest& request, const TransferSink& sink) const;

  // Connects and returns what the server offers us (its features), without
  // requesting anything. Throws PeerError.
  std::vector<std::string> features(std::string_view endpoint) const;

  const NodeIdentity& identity() const noexcept;

  struct Impl;  // src/peer/client.cpp
  const Impl& impl() const noexcept { return *impl_; }

 private:
  std::unique_ptr<Impl> impl_;
};

// ------------------------------------------------------ the peer as a source

struct PeerRemoteOptions {
  std::string endpoint;          // the coordinator's serve-artifacts, "HOST:PORT"
  Topology topology;             // the active split topology (package_ref pins a commit)
  std::string stage_id;          // our stage in it (assigned to the client's node)
  unsigned parallel_transfers = 4;   // files at once (one connection each)
  unsigned max_attempts = 3;     // per file: a connection that drops after bytes
                                 // arrived is asked again from where it stopped
  // "server busy", and a connection the server closed before answering
  // our ClientHello (its caps before authentication): asked again after
  // busy_backoff, doubling (with jitter), up to busy_attempts in all; then
  // the file goes to the next remote.
  unsigned busy_attempts = 5;
  std::chrono::milliseconds busy_backoff{250};
  // Where each retry is said, one line each (default: stderr, whether or
  // not it is a terminal). Retries are never silent.
  std::function<void(std::string_view)> log;
};

// The peer as a Remote (skippy/source.h) named "peer", to put before the Hub
// in Sources::remotes. It serves one package, the topology's, at its commit:
// resolve_commit answers only that commit, list() is nullopt (a peer is not
// a discovery service). fetch():
//   - model-package.json: asked for with the topology's SHA-256 (at most
//     kManifestMaxBytes, held in memory, then written through the blob
//     writer);
//   - every other file: only one in stage_artifacts() of our stage (with
//     the stage's admission descriptor when the topology's stage has one,
//     as the server binds it), computed from the snapshot's manifest, which
//     must hash to the
//     topology's manifest_sha256; asked for with the manifest's size and
//     SHA-256, several at once;
//   - bytes enter the cache through the source layer's blob writer (the
//     same one as the Hub's, so a partial file either left is resumed by
//     the other): blobs/<sha256>.incomplete, resumed from its length, the
//     size and SHA-256 checked before the rename and the snapshot link.
// Each failure is that file's RemoteOutcome::error, naming the peer and the
// reason (refused and why, not offered to us, untrusted server, timeout,
// dropped connection, wrong bytes, not among the stage's parts), so the
// source layer asks the next remote and keeps the reason as a note. A
// failure that makes the peer itself unusable (not offered, untrusted,
// transfer disabled, timeout, unreachable) is remembered: later files are
// not asked of it, with the same reason. fetch() never throws Error.
//
// Throws Error(kUsage) when the stage is not in the topology or is assigned
// to another node than the client's, Error(kInvalidInput) when the
// topology's package_ref does not pin a 40-hex commit.
std::shared_ptr<Remote> make_peer_remote(PeerClient client, PeerRemoteOptions options);

// ------------------------------------------- a worker's sources (fetch --peer)

// What a worker of a split run is told: where the coordinator serves, the
// topology and its stage in it, its identity, whom else it trusts.
struct PeerSourcesOptions {
  std::string endpoint;                                  // the coordinator's serve-artifacts, "HOST:PORT"
  std::filesystem::path topology_file;                   // named in messages
  Topology topology;                                     // load_topology(topology_file)
  std::string stage_id;                                  // our stage in it
  std::filesystem::path identity_dir;                    // node.key, node.crt, owner.crt
  std::vector<std::filesystem::path> trusted_owner_certs;  // --trust-owner: their nodes are trusted too
  std::chrono::milliseconds connect_timeout{30'000};
  std::chrono::milliseconds idle_timeout{30'000};
  std::optional<uint64_t> min_rate;                      // else env::peer_min_rate()
  std::optional<std::chrono::milliseconds> rate_window;  // else env::peer_rate_window_ms()
};

struct PeerSources {
  Sources sources;                    // the cache, the peer, then `fallback` (unless HF_HUB_OFFLINE=1)
  std::vector<std::string> warnings;  // e.g. our node does not verify under its owner: no peer is trusted
};

// The source chain of a worker that asks its coordinator first: the Hugging
// Face cache (env::hf_hub_cache_dir()), the peer (make_peer_remote), then
// the `fallback` remotes (the Hub's, hub.h: make_hub_remote), which
// HF_HUB_OFFLINE=1 leaves out. The trust policy: asking a peer is the
// opt-in, so the server must be of our owner or of a trusted owner
// (kTrusted), unless MESH_LLM_ARTIFACT_TRANSFER=open says any authenticated
// node will do. Checks first that `ref` is the topology's package:
// Error(kInvalidInput) when its package_ref pins no commit, Error(kUsage)
// when `ref` names another repository or another commit; the identity and
// certificates' errors are NodeIdentity::load's and owner_id_of_certificate's.
PeerSources make_peer_sources(const HfRef& ref, const PeerSourcesOptions& options,
                              std::vector<std::shared_ptr<Remote>> fallback);

// ----------------------------------------------------------------- server

// Caps hold before authentication: a connection is
// "unauthenticated" from accept until its TLS handshake is done and its peer
// is one we deal with (PeerTrust); those have their own pool, their own
// short deadline and a cap per address, so a flood of them never takes the
// capacity of authenticated peers (src/peer/admission.h has the rule).
struct ServerLimits {
  unsigned max_connections = 64;            // authenticated peers at once; beyond: "server busy"
  unsigned max_connections_per_peer = 16;   // from one node; beyond: "server busy"
  unsigned max_unauthenticated = 32;        // in the handshake at once; when full, a newcomer takes
                                            // the slot of the address holding the most, or is closed
  unsigned max_unauthenticated_per_address = 8;  // from one IP address; beyond, a newcomer takes the slot of
                                                 // that address's oldest silent one, or is closed
  std::chrono::milliseconds handshake_timeout{3'000};   // TCP accept to a finished TLS handshake
                                                        // (ClientHello included)
  std::chrono::milliseconds request_timeout{10'000};    // TCP accept to a complete request
  std::chrono::milliseconds idle_timeout{30'000};       // no progress reading or writing
  std::chrono::milliseconds total_timeout{3'600'000};   // a whole connection
  std::chrono::milliseconds shutdown_grace{2'000};      // stop(): how long drain() waits for busy threads
  unsigned threads = 0;                     // I/O threads; 0 = hardware concurrency (>= 2)
};

struct ServerOptions {
  std::string listen = "127.0.0.1:0";       // HOST:PORT (port 0: any free port)
  Topology topology;
  TransferMode mode = TransferMode::kOff;
  std::vector<std::string> trusted_owner_ids;
  // Signed packages (not peer trust): owner certificates the package
  // must be signed by. With any, the constructor throws (kUnauthorized,
  // kIntegrity, kNotFound) unless the cached package's sidecar verifies and
  // names one of them, and requests are refused whenever a re-read
  // manifest fails that check.
  std::vector<std::filesystem::path> trusted_signers;
  std::filesystem::path hf_cache;           // default: env::hf_hub_cache_dir()
  std::optional<std::filesystem::path> verification_cache_dir;  // default: verify.h's
  ServerLimits limits;
  // Verify the package's artifacts present in the cache at start (in the
  // background), so the first request for a large part does not wait for
  // its hash.
  bool preverify = true;
  // One line per decision (default: stderr).
  std::function<void(std::string_view)> log;
};

// serve-artifacts. Authorization, in order (the first failure refuses):
//   1. the mode, and for kTrusted the peer's verified owner -> "disabled";
//   2. the requester id equals the TLS peer (else the request is dropped,
//      no answer, like any malformed request);
//   3. the ref is hf://ns/repo@<40-hex commit> and is the topology's; the
//      topology and run ids and the manifest SHA-256 are the topology's;
//      the stage exists and is assigned to the requester;
//   4. the path is model-package.json (at most 16 MiB, hashing to the
//      topology's SHA-256), its signature sidecar model-package.json.sig or
//      validation.json (served from the snapshot like the manifest, to
//      every stage; at most 4 MiB), or in stage_artifacts() of that stage
//      (for a stage with an admission descriptor: what it requires), with the
//      request's expected size and SHA-256 (if any) equal to the manifest's;
//   5. the file resolves (symlinks included) inside the repo folder of the
//      Hugging Face cache, is a regular file of the declared size, and its
//      SHA-256 matches through the verification cache (verify.h); a damaged
//      file is never served;
//   6. offset <= size, else "invalid transfer offset".
// Anything else in 3-5 is "artifact unavailable".
class ArtifactServer {
 public:
  // Binds the listening socket (so port() is known) and checks the
  // options: throws Error(kInvalidInput) for a topology whose package_ref
  // does not pin a commit, Error(kIo) when the address cannot be bound.
  // A topology stage with an admission descriptor (TopologyStage::admission)
  // needs the package schema 2 in the cache now: the descriptor is checked
  // against it (check_stage_admission, on the catalog of the verified
  // carrier) before anything is served, and the constructor throws
  // Error(kNotFound) without the package, Error(kInvalidInput) for a
  // schema 1 package or a descriptor of another package_id, naming a tensor
  // or sidecar the package lacks.
  ArtifactServer(NodeIdentity identity, ServerOptions options);
  ~ArtifactServer();
  ArtifactServer(const ArtifactServer&) = delete;
  ArtifactServer& operator=(const ArtifactServer&) = delete;

  uint16_t port() const noexcept;
  std::string endpoint() const;  // "HOST:PORT" actually bound
  // Serves until stop() (from any thread, or a signal handler thread).
  // Returns within limits.shutdown_grace of stop() whatever the I/O threads
  // are doing (one stuck in the kernel is left behind, see drain()).
  void run();
  void stop() noexcept;
  // stop(), then waits up to limits.shutdown_grace for the threads that
  // verify and authorize (and preverify) to finish. True: all did, the
  // destructor is quick. False: some are stuck (a read the kernel does not
  // return from); the destructor then leaves them, and this object's state,
  // behind rather than wait, and the process should exit soon (with
  // _exit: they may still be using libraries that exit() tears down).
  bool drain() noexcept;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// serve-artifacts' run: ignores SIGPIPE and blocks SIGINT and SIGTERM in
// the calling thread before the server starts its threads (they inherit
// the mask), binds the server, calls `on_listening` with it, and serves
// until one of those signals arrives; run() then returns within
// limits.shutdown_grace. Returns drain()'s answer: false when work was still
// running after the grace (left behind: the process should leave at once,
// with _exit). Throws the constructor's errors.
bool serve_until_signalled(const NodeIdentity& identity, ServerOptions options,
                           const std::function<void(const ArtifactServer&)>& on_listening);

}  // namespace skippy::peer
