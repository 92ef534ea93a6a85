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

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "skippy/file.h"
#include "skippy/manifest.h"
#include "skippy/sha256.h"
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

}  // namespace skippy::test::peer
