// Helpers for the peer-transfer tests: identities made by the real CLI, a
// package placed in a Hugging Face cache layout, a real serve-artifacts
// process on 127.0.0.1, and a raw TLS client that can say anything.
// Header-only (tests/CMakeLists.txt builds *_test.cpp and test_util.cpp).
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <span>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "peer/protocol.h"
#include "peer/tls.h"
#include "util/file.h"
#include "skippy/peer.h"
#include "skippy/peer_identity.h"
#include "skippy/manifest.h"
#include "util/sha256.h"
#include "test_util.h"

extern char** environ;

namespace skippy::test::peer {

namespace fs = std::filesystem;

// A whole file, read in large blocks (test::read_file goes byte by byte,
// which a sanitizer build makes slow for the tens of MiB these tests move).
inline std::vector<uint8_t> slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + p.string());
  std::vector<uint8_t> out(static_cast<size_t>(fs::file_size(p)));
  in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(out.size()));
  if (in.gcount() != static_cast<std::streamsize>(out.size())) throw std::runtime_error("short read of " + p.string());
  return out;
}

// `identity init-owner` / `issue-node` through the real CLI; the id printed.
// Writes llama-tiny-q8_0's package to `pkg` with layer 5 replaced by `bytes`
// of incompressible noise (xorshift64 from `seed`: cheap in a sanitizer
// build) and the manifest updated: a part big enough to cut, stall and
// resume. Returns the manifest as written.
inline PackageManifest write_package_with_big_layer5(const fs::path& pkg, size_t bytes, uint64_t seed) {
  const auto r = write_pkg(data_path("llama-tiny-q8_0.gguf"), pkg);
  if (r.exit_code != 0) throw std::runtime_error(r.err);
  auto manifest = parse_manifest(read_text(pkg / "model-package.json"), "model-package.json");
  std::vector<uint8_t> noise(bytes);
  uint64_t x = seed;
  for (size_t i = 0; i + 8 <= noise.size(); i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(noise.data() + i, &x, 8);
  }
  write_file(pkg / manifest.layers[5].path, noise);
  manifest.layers[5].artifact_bytes = bytes;
  manifest.layers[5].sha256 = sha256_hex(std::span<const uint8_t>(noise));
  write_file_atomic(pkg / "model-package.json", serialize_manifest(manifest));
  return manifest;
}

inline std::string make_owner(const fs::path& dir) {
  const auto r = run_cli({"identity", "init-owner", "--dir", dir.string(), "--json"});
  if (r.exit_code != 0) throw std::runtime_error("identity init-owner: " + r.err);
  return nlohmann::json::parse(r.out)["owner_id"].get<std::string>();
}
inline std::string make_node(const fs::path& owner, const fs::path& out) {
  const auto r = run_cli({"identity", "issue-node", "--owner", owner.string(), "--out", out.string(), "--json"});
  if (r.exit_code != 0) throw std::runtime_error("identity issue-node: " + r.err);
  return nlohmann::json::parse(r.out)["node_id"].get<std::string>();
}

inline fs::path repo_dir(const fs::path& hf, const std::string& repo_id) {
  std::string name = "models--" + repo_id;
  name.replace(name.find('/'), 1, "--");
  return hf / name;
}
inline fs::path snapshot_dir(const fs::path& hf, const std::string& repo_id, const std::string& commit) {
  return repo_dir(hf, repo_id) / "snapshots" / commit;
}

// Copies every file of `pkg_dir` into the cache as huggingface_hub lays it
// out: blobs/<sha256 of the bytes> and snapshots/<commit>/<path> as a
// relative symlink to it. Returns the snapshot directory.
inline fs::path place_in_hf_cache(const fs::path& pkg_dir, const fs::path& hf, const std::string& repo_id,
                                  const std::string& commit) {
  const fs::path repo = repo_dir(hf, repo_id);
  const fs::path snap = snapshot_dir(hf, repo_id, commit);
  fs::create_directories(repo / "blobs");
  for (const auto& e : fs::recursive_directory_iterator(pkg_dir)) {
    if (!e.is_regular_file()) continue;
    const fs::path rel = fs::relative(e.path(), pkg_dir);
    const std::string sha = sha256_file(e.path());
    const fs::path blob = repo / "blobs" / sha;
    if (!fs::exists(blob)) fs::copy_file(e.path(), blob);
    const fs::path link = snap / rel;
    fs::create_directories(link.parent_path());
    fs::remove(link);
    fs::create_symlink(fs::relative(blob, link.parent_path()), link);
  }
  return snap;
}

struct StageSpec {
  std::string stage_id;
  uint32_t stage_index;
  std::string node_id;
  uint32_t layer_start, layer_end;
};
inline void write_topology(const fs::path& file, const std::string& ref, const std::string& manifest_sha,
                           const std::vector<StageSpec>& stages, const std::string& topology_id = "t-1",
                           const std::string& run_id = "r-1") {
  nlohmann::json j = {{"topology_id", topology_id}, {"run_id", run_id}, {"package_ref", ref}, {"manifest_sha256", manifest_sha}};
  j["stages"] = nlohmann::json::array();
  for (const auto& s : stages) {
    j["stages"].push_back({{"stage_id", s.stage_id},
                           {"stage_index", s.stage_index},
                           {"node_id", s.node_id},
                           {"layer_start", s.layer_start},
                           {"layer_end", s.layer_end}});
  }
  const std::string text = j.dump(2);
  write_file(file, std::vector<uint8_t>(text.begin(), text.end()));
}

// `env` entries replace inherited variables of the same name.
inline std::vector<std::string> merged_env(const std::vector<std::string>& env) {
  std::vector<std::string> out;
  for (char** e = environ; *e; ++e) {
    const std::string_view kv(*e);
    const auto name = kv.substr(0, kv.find('=') + 1);
    bool overridden = false;
    for (const auto& x : env) overridden = overridden || x.starts_with(name);
    if (!overridden) out.emplace_back(kv);
  }
  out.insert(out.end(), env.begin(), env.end());
  return out;
}

// A real `serve-artifacts --json` process. Its stderr (the decision log)
// goes to a file; stdout gives the bound endpoint.
class ServerProcess {
 public:
  ServerProcess(const std::vector<std::string>& args, const std::vector<std::string>& env, const fs::path& log_file)
      : log_file_(log_file) {
    std::vector<std::string> argv_s = {SKIPPY_CLI_PATH, "serve-artifacts", "--json"};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    auto env_s = merged_env(env);
    std::vector<char*> envp;
    for (auto& e : env_s) envp.push_back(e.data());
    envp.push_back(nullptr);
    int out[2];
    if (::pipe(out) != 0) throw std::runtime_error("pipe");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    posix_spawn_file_actions_addopen(&fa, 2, log_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), envp.data()) != 0) throw std::runtime_error("spawn");
    posix_spawn_file_actions_destroy(&fa);
    ::close(out[1]);
    out_ = out[0];
    // The first stdout line: {"listening": "HOST:PORT", ...}
    std::string line;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (line.find('\n') == std::string::npos) {
      struct pollfd p {out_, POLLIN, 0};
      const int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                            deadline - std::chrono::steady_clock::now()).count());
      if (left <= 0 || ::poll(&p, 1, left) <= 0) break;
      char buf[512];
      const ssize_t n = ::read(out_, buf, sizeof buf);
      if (n <= 0) break;
      line.append(buf, static_cast<size_t>(n));
    }
    // A failure to start prints a JSON error document (several lines) instead.
    const auto first = line.substr(0, line.find('\n'));
    if (line.find('\n') == std::string::npos || !nlohmann::json::accept(first) ||
        !nlohmann::json::parse(first).contains("listening")) {
      exit_code_ = stop();
      throw std::runtime_error("serve-artifacts did not start (exit " + std::to_string(exit_code_) + "): " + log());
    }
    const auto doc = nlohmann::json::parse(first);
    endpoint_ = doc["listening"].get<std::string>();
    node_id_ = doc["node_id"].get<std::string>();
  }
  ~ServerProcess() { stop(); }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  const std::string& endpoint() const { return endpoint_; }
  const std::string& node_id() const { return node_id_; }
  pid_t pid() const { return pid_; }
  std::string log() const {
    try {
      return read_text(log_file_);
    } catch (...) {
      return {};
    }
  }
  // Waits until the log holds `needle` (the server logs a request when it
  // is done with it, which may be just after the client returns).
  bool wait_for_log(const std::string& needle, std::chrono::milliseconds timeout = std::chrono::seconds(10)) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (log().find(needle) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return log().find(needle) != std::string::npos;
  }
  void signal(int sig) const {
    if (pid_ > 0) ::kill(pid_, sig);
  }
  // SIGTERM (SIGKILL after 10 s) and the exit code; idempotent.
  int stop() {
    if (pid_ <= 0) return exit_code_;
    ::kill(pid_, SIGCONT);
    ::kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 1000; ++i) {
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      pid_ = -1;
    }
    if (out_ >= 0) ::close(out_);
    out_ = -1;
    exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return exit_code_;
  }
  // SIGKILL now: a peer that vanishes mid-transfer.
  void kill_hard() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    exit_code_ = 137;
  }

 private:
  fs::path log_file_;
  pid_t pid_ = -1;
  int out_ = -1;
  int exit_code_ = -1;
  std::string endpoint_;
  std::string node_id_;
};

// A blocking TCP connection to 127.0.0.1:port with 5 s socket timeouts.
inline int connect_tcp(const std::string& endpoint) {
  const auto colon = endpoint.rfind(':');
  const int port = std::stoi(endpoint.substr(colon + 1));
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct timeval tv {5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  struct sockaddr_in a {};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, endpoint.substr(0, colon).c_str(), &a.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    throw std::runtime_error("connect " + endpoint + ": " + std::strerror(errno));
  }
  return fd;
}

// A TLS 1.3 client written straight against OpenSSL, independent of the
// library's client: with a node identity, or with no certificate at all.
// It sends whatever bytes a test gives it.
class RawTlsClient {
 public:
  // identity_dir empty: no client certificate.
  RawTlsClient(const std::string& endpoint, const fs::path& identity_dir) {
    // OpenSSL's stock socket BIO writes with write(2): a server that already
    // closed must not kill the test binary with SIGPIPE.
    ::signal(SIGPIPE, SIG_IGN);
    ctx_ = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_min_proto_version(ctx_, TLS1_3_VERSION);
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_NONE, nullptr);
    if (!identity_dir.empty()) {
      SSL_CTX_use_certificate_chain_file(ctx_, (identity_dir / "node.crt").c_str());
      load_chain(identity_dir / "owner.crt");
      SSL_CTX_use_PrivateKey_file(ctx_, (identity_dir / "node.key").c_str(), SSL_FILETYPE_PEM);
    }
    fd_ = connect_tcp(endpoint);
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, fd_);
    handshake_ok_ = SSL_connect(ssl_) == 1;
    ERR_clear_error();
  }
  ~RawTlsClient() {
    if (ssl_) SSL_free(ssl_);
    if (fd_ >= 0) ::close(fd_);
    if (ctx_) SSL_CTX_free(ctx_);
  }
  RawTlsClient(const RawTlsClient&) = delete;
  RawTlsClient& operator=(const RawTlsClient&) = delete;

  bool handshake_ok() const { return handshake_ok_; }
  bool write(const std::vector<uint8_t>& bytes) {
    size_t n = 0;
    const bool ok = SSL_write_ex(ssl_, bytes.data(), bytes.size(), &n) == 1 && n == bytes.size();
    ERR_clear_error();
    return ok;
  }
  // Up to `max` bytes until the peer closes or fails (5 s socket timeout).
  std::vector<uint8_t> read_all(size_t max = 1 << 20) {
    std::vector<uint8_t> out;
    uint8_t buf[16384];
    while (out.size() < max) {
      size_t n = 0;
      if (SSL_read_ex(ssl_, buf, sizeof buf, &n) != 1) break;
      out.insert(out.end(), buf, buf + n);
    }
    ERR_clear_error();
    return out;
  }

 private:
  void load_chain(const fs::path& pem) {
    FILE* f = std::fopen(pem.c_str(), "r");
    if (!f) return;
    X509* c = PEM_read_X509(f, nullptr, nullptr, nullptr);
    std::fclose(f);
    if (c) {
      SSL_CTX_add1_chain_cert(ctx_, c);
      X509_free(c);
    }
  }
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  int fd_ = -1;
  bool handshake_ok_ = false;
};

// ------------------------------------------------------------ a faulty peer

// A peer that speaks the protocol (src/peer/PROTOCOL.md) with a real node
// identity and TLS context, but misbehaves on purpose for chosen paths:
// serves wrong bytes under the right SHA-256, cuts the connection after some
// bytes (once, or every time), or stops sending. Everything else it serves
// correctly from `files`. Records each request's path and offset.
class FaultyPeer {
 public:
  enum class Act { kServe, kCorrupt, kCutOnce, kCutAlways, kStall, kTrickle };
  struct Rule {
    Act act = Act::kServe;
    uint64_t at = 0;  // kCut*, kStall, kTrickle: the byte (of the whole file) where it happens
    std::chrono::milliseconds every{1000};  // kTrickle: then one byte each `every`
    bool wrong = false;                     // kTrickle: the trickled bytes are not the file's
    bool claim_requested_manifest = false;  // answer with the request's manifest SHA-256, not the bytes'
  };
  using Files = std::function<const std::vector<uint8_t>*(const std::string&)>;

  FaultyPeer(const fs::path& identity, Files files, std::map<std::string, Rule> rules)
      : files_(std::move(files)), rules_(std::move(rules)) {
    ::signal(SIGPIPE, SIG_IGN);
    ctx_ = ::skippy::peer::detail::make_tls_context(::skippy::peer::NodeIdentity::load(identity), ::skippy::peer::detail::TlsRole::kServer);
    listen_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a {};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(listen_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listen_, 64) != 0 ||
        ::getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      throw std::runtime_error("FaultyPeer: cannot listen");
    }
    endpoint_ = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~FaultyPeer() {
    {
      std::lock_guard g(mu_);
      stop_ = true;
      for (const int fd : open_) ::shutdown(fd, SHUT_RDWR);
    }
    cv_.notify_all();
    acceptor_.join();
    for (auto& t : conns_) t.join();
    ::close(listen_);
  }
  FaultyPeer(const FaultyPeer&) = delete;
  FaultyPeer& operator=(const FaultyPeer&) = delete;

  const std::string& endpoint() const { return endpoint_; }
  // (path, offset) of every request, in arrival order.
  std::vector<std::pair<std::string, uint64_t>> requests() const {
    std::lock_guard g(mu_);
    return requests_;
  }
  uint64_t trickled() const {
    std::lock_guard g(mu_);
    return trickled_;
  }
  std::vector<uint64_t> offsets_of(const std::string& path) const {
    std::vector<uint64_t> out;
    for (const auto& [p, off] : requests()) {
      if (p == path) out.push_back(off);
    }
    return out;
  }

 private:
  void accept_loop() {
    for (;;) {
      {
        std::lock_guard g(mu_);
        if (stop_) return;
      }
      struct pollfd p {listen_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int fd = ::accept4(listen_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      std::lock_guard g(mu_);
      if (stop_) {  // closing down: serve nothing more
        ::close(fd);
        return;
      }
      open_.insert(fd);
      conns_.emplace_back([this, fd] { serve(fd); });
    }
  }

  static bool read_exact(SSL* ssl, uint8_t* p, size_t n) {
    while (n > 0) {
      size_t got = 0;
      if (SSL_read_ex(ssl, p, n, &got) != 1) return false;
      p += got;
      n -= got;
    }
    return true;
  }
  static std::optional<std::vector<uint8_t>> read_frame(SSL* ssl, uint32_t cap) {
    std::array<uint8_t, 4> h{};
    if (!read_exact(ssl, h.data(), 4)) return std::nullopt;
    const uint32_t n = ::skippy::peer::wire::frame_length(h, cap, "frame");
    std::vector<uint8_t> payload(n);
    if (!read_exact(ssl, payload.data(), n)) return std::nullopt;
    return payload;
  }
  static bool write_all(SSL* ssl, std::span<const uint8_t> b) {
    while (!b.empty()) {
      size_t n = 0;
      if (SSL_write_ex(ssl, b.data(), b.size(), &n) != 1) return false;
      b = b.subspan(n);
    }
    return true;
  }

  void serve(int fd) {
    struct timeval tv {10, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    SSL* ssl = SSL_new(ctx_.get());
    SSL_set_fd(ssl, fd);
    bool clean = false;
    if (SSL_accept(ssl) == 1) {
      try {
        clean = converse(ssl, fd);
      } catch (const std::exception&) {  // a malformed frame: drop the connection
      }
    }
    if (clean) SSL_shutdown(ssl);
    SSL_free(ssl);
    std::lock_guard g(mu_);
    open_.erase(fd);
    ::close(fd);
  }

  // True when the connection may end with a TLS close_notify.
  bool converse(SSL* ssl, int fd) {
    namespace wire = ::skippy::peer::wire;
    uint8_t tag = 0;
    if (!read_exact(ssl, &tag, 1) || tag != wire::kStreamTypeSubprotocol) return false;
    const auto open = read_frame(ssl, wire::kMaxOpenFrameBytes);
    if (!open) return false;
    (void)wire::decode_open(*open);
    wire::OpenAck ack;
    ack.features.emplace_back(wire::kFeatureArtifactTransfer);
    if (!write_all(ssl, wire::frame(wire::encode(ack)))) return false;
    if (!read_exact(ssl, &tag, 1) || tag != wire::kKindArtifactTransfer) return false;
    const auto req_bytes = read_frame(ssl, wire::kMaxRequestFrameBytes);
    if (!req_bytes) return false;
    const wire::Request req = wire::decode_request(*req_bytes);
    Rule rule;
    int nth = 0;
    {
      std::lock_guard g(mu_);
      requests_.emplace_back(req.rel_path, req.offset);
      nth = ++times_[req.rel_path];
      if (rules_.count(req.rel_path)) rule = rules_.at(req.rel_path);
    }
    const std::vector<uint8_t>* bytes = files_(req.rel_path);
    wire::Response resp;
    if (!bytes || req.offset > bytes->size()) {
      resp.accepted = false;
      resp.refusal = ::skippy::peer::Refusal::kUnavailable;
      return write_all(ssl, wire::frame(wire::encode(resp)));
    }
    const uint64_t size = bytes->size();
    resp.accepted = true;
    resp.offset = req.offset;
    resp.total_size = size;
    resp.sha256 = rule.claim_requested_manifest
                      ? req.manifest_sha256  // a liar: the digest the requester wants to hear
                      : wire::digest_from_hex(::skippy::sha256_hex(std::span<const uint8_t>(*bytes)), "sha256");
    if (!write_all(ssl, wire::frame(wire::encode(resp)))) return false;
    std::vector<uint8_t> data(bytes->begin() + static_cast<ptrdiff_t>(req.offset), bytes->end());
    uint64_t end = size;
    bool cut = false, stall = false, trickle = false;
    switch (rule.act) {
      case Act::kServe:
        break;
      case Act::kCorrupt:
        if (!data.empty()) data[data.size() / 2] ^= 0x5a;  // same size: only the hash can tell
        break;
      case Act::kCutOnce:
        cut = nth == 1;
        if (cut) end = std::min(size, rule.at);
        break;
      case Act::kCutAlways:
        cut = true;
        end = std::max(req.offset, std::min(size, rule.at));
        break;
      case Act::kStall:
        stall = true;
        end = std::min(size, rule.at);
        break;
      case Act::kTrickle:
        trickle = true;
        end = std::max(req.offset, std::min(size, rule.at));
        break;
    }
    if (!write_all(ssl, std::span<const uint8_t>(data).first(static_cast<size_t>(end - req.offset)))) return false;
    if (trickle) {  // then the rest, one byte at a time, until the client gives up or we stop
      for (uint64_t pos = end; pos < size; ++pos) {
        {
          std::unique_lock g(mu_);
          if (cv_.wait_for(g, rule.every, [&] { return stop_; })) return false;
        }
        uint8_t b = data[static_cast<size_t>(pos - req.offset)];
        if (rule.wrong) b = static_cast<uint8_t>(b ^ 0xa5);
        if (!write_all(ssl, std::span<const uint8_t>(&b, 1))) return false;
        ++trickled_;
      }
      return true;
    }
    if (stall) {  // keep the connection open, send nothing more
      std::unique_lock g(mu_);
      cv_.wait(g, [&] { return stop_; });
      return false;
    }
    if (cut) {
      // FIN without close_notify, after everything written; wait for the
      // client to give up so no reset can race the bytes already sent.
      ::shutdown(fd, SHUT_WR);
      uint8_t sink[4096];
      while (::read(fd, sink, sizeof sink) > 0) {
      }
      return false;
    }
    return true;
  }

  Files files_;
  std::map<std::string, Rule> rules_;
  ::skippy::peer::detail::SslCtxPtr ctx_;
  int listen_ = -1;
  std::string endpoint_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::set<int> open_;
  std::map<std::string, int> times_;
  uint64_t trickled_ = 0;
  std::vector<std::pair<std::string, uint64_t>> requests_;
  std::thread acceptor_;
  std::vector<std::thread> conns_;
};

}  // namespace skippy::test::peer
