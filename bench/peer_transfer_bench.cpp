// skippy-bench-peer: the peer-transfer benchmark's moving parts (driven by
// scripts/bench-peer.sh).
//
//   prepare      a package in a Hugging Face cache layout whose layer 0 is
//                --big bytes and layers 1..N are --part bytes of noise, and a
//                one-stage topology for --node-id
//   plain-serve  the yardstick's sender: a plain TCP server that sends the
//                file a client names (u32 index) with read(2)/write(2) in
//                1 MiB chunks, no TLS, no hashing
//   fetch        fetches artifacts at once (one thread each) over the peer
//                protocol (TLS 1.3, the server's verification cache, SHA-256
//                of the bytes received checked against the manifest) or the
//                plain TCP yardstick (no hashing), writing each to --out; prints
//                {"seconds", "bytes"} (wall time of the transfers only)
#include <CLI/CLI.hpp>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <thread>
#include <vector>

#include "skippy/error.h"
#include "util/file.h"
#include "skippy/manifest.h"
#include "skippy/peer.h"
#include "util/sha256.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
constexpr size_t kChunk = size_t{1} << 20;

[[noreturn]] void die(const std::string& what) {
  std::cerr << "skippy-bench-peer: " << what << "\n";
  std::exit(1);
}

void write_all_fd(int fd, const uint8_t* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) die(std::string("write: ") + std::strerror(errno));
    p += w;
    n -= static_cast<size_t>(w);
  }
}

// ------------------------------------------------------------------ prepare

// Writes `size` bytes of xorshift noise to `path`, returning their SHA-256.
std::string write_noise(const fs::path& path, uint64_t size, uint64_t seed) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) die(path.string() + ": " + std::strerror(errno));
  std::vector<uint8_t> buf(kChunk);
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  skippy::Sha256 sha;
  for (uint64_t done = 0; done < size;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), size - done));
    for (size_t i = 0; i + 8 <= n; i += 8) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      std::memcpy(buf.data() + i, &x, 8);
    }
    sha.update({buf.data(), n});
    write_all_fd(fd, buf.data(), n);
    done += n;
  }
  ::close(fd);
  return sha.hex_digest();
}

int prepare(const fs::path& src_pkg, const fs::path& hf, const std::string& repo, const std::string& commit, uint64_t big,
            uint64_t part, unsigned parts, const std::string& node_id, const fs::path& topology) {
  auto m = skippy::parse_manifest(skippy::read_small_file(src_pkg / "model-package.json", 16 << 20), "model-package.json");
  if (parts + 1 > m.layer_count) die("the source package has too few layers");
  std::string folder = "models--" + repo;
  folder.replace(folder.find('/'), 1, "--");
  const fs::path repo_dir = hf / folder;
  const fs::path snap = repo_dir / "snapshots" / commit;
  fs::remove_all(repo_dir);
  fs::create_directories(repo_dir / "blobs");
  auto link = [&](const std::string& rel, const std::string& sha) {
    const fs::path l = snap / rel;
    fs::create_directories(l.parent_path());
    fs::create_symlink(fs::relative(repo_dir / "blobs" / sha, l.parent_path()), l);
  };
  for (unsigned i = 0; i <= parts; ++i) {
    const uint64_t size = i == 0 ? big : part;
    const fs::path tmp = repo_dir / "blobs" / ("tmp-" + std::to_string(i));
    const std::string sha = write_noise(tmp, size, i + 1);
    fs::rename(tmp, repo_dir / "blobs" / sha);
    m.layers[i].artifact_bytes = size;
    m.layers[i].sha256 = sha;
    link(m.layers[i].path, sha);
  }
  // The other artifacts as they are.
  std::vector<const skippy::ArtifactEntry*> rest = {&m.shared.metadata, &m.shared.embeddings, &m.shared.output};
  for (unsigned i = parts + 1; i < m.layer_count; ++i) rest.push_back(&m.layers[i]);
  for (const auto* e : rest) {
    const fs::path blob = repo_dir / "blobs" / e->sha256;
    if (!fs::exists(blob)) fs::copy_file(src_pkg / e->path, blob);
    link(e->path, e->sha256);
  }
  const std::string text = skippy::serialize_manifest(m);
  const std::string msha = skippy::sha256_hex(text);
  skippy::write_file_atomic(repo_dir / "blobs" / msha, text);
  link("model-package.json", msha);
  std::ofstream t(topology);
  t << "{\"topology_id\": \"bench\", \"run_id\": \"bench-run\", \"package_ref\": \"hf://" << repo << "@" << commit
    << "\", \"manifest_sha256\": \"" << msha << "\", \"stages\": [{\"stage_id\": \"s0\", \"stage_index\": 0, \"node_id\": \""
    << node_id << "\", \"layer_start\": 0, \"layer_end\": " << m.layer_count << "}]}\n";
  if (!t) die(topology.string() + ": cannot write");
  std::cout << snap.string() << "\n";
  return 0;
}

// ------------------------------------------------------------------ plain TCP

int listen_socket(uint16_t& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 64) != 0) die("bind/listen");
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  port = ntohs(a.sin_port);
  return fd;
}

int plain_serve(const std::vector<std::string>& files) {
  uint16_t port = 0;
  const int lfd = listen_socket(port);
  std::cout << "127.0.0.1:" << port << std::endl;
  for (;;) {
    const int c = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    std::thread([c, &files] {
      uint32_t index = 0;
      if (::recv(c, &index, sizeof index, MSG_WAITALL) != sizeof index || index >= files.size()) {
        ::close(c);
        return;
      }
      const int f = ::open(files[index].c_str(), O_RDONLY | O_CLOEXEC);
      std::vector<uint8_t> buf(kChunk);
      for (;;) {
        const ssize_t n = ::read(f, buf.data(), buf.size());
        if (n <= 0) break;
        size_t off = 0;
        while (off < static_cast<size_t>(n)) {
          const ssize_t w = ::send(c, buf.data() + off, static_cast<size_t>(n) - off, MSG_NOSIGNAL);
          if (w <= 0) break;
          off += static_cast<size_t>(w);
        }
      }
      ::close(f);
      ::close(c);
    }).detach();
  }
}

uint64_t plain_fetch_one(uint16_t port, uint32_t index, const fs::path& out) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a {};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) die("connect");
  ::send(fd, &index, sizeof index, MSG_NOSIGNAL);
  const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  std::vector<uint8_t> buf(kChunk);
  uint64_t total = 0;
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    write_all_fd(o, buf.data(), static_cast<size_t>(n));
    total += static_cast<uint64_t>(n);
  }
  ::close(o);
  ::close(fd);
  return total;
}

// ------------------------------------------------------------------ peer

uint64_t peer_fetch_one(const skippy::peer::PeerClient& client, const std::string& endpoint,
                        const skippy::peer::Topology& topo, const skippy::PackageManifest& m, const std::string& rel,
                        const fs::path& out, bool hash) {
  skippy::peer::TransferRequest r;
  r.topology_id = topo.topology_id;
  r.run_id = topo.run_id;
  r.stage_id = topo.stages.front().stage_id;
  r.package_ref = topo.package_ref;
  r.manifest_sha256 = topo.manifest_sha256;
  r.rel_path = rel;
  for (const auto& l : m.layers) {
    if (l.path == rel) {
      r.expected_size = l.artifact_bytes;
      r.expected_sha256 = l.sha256;
    }
  }
  const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  skippy::Sha256 sha;
  uint64_t total = 0;
  skippy::peer::TransferSink sink;
  sink.on_bytes = [&](std::span<const uint8_t> b) {
    if (hash) sha.update(b);
    write_all_fd(o, b.data(), b.size());
    total += b.size();
  };
  client.fetch(endpoint, r, sink);
  ::close(o);
  // Verification: what arrived is what the manifest declares.
  if (total != r.expected_size || (hash && !skippy::sha256_equal(sha.hex_digest(), *r.expected_sha256))) {
    die(rel + ": wrong bytes");
  }
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"skippy-bench-peer: peer-transfer benchmark parts (scripts/bench-peer.sh)"};
  app.require_subcommand(1);
  std::string src, hf, repo = "bench/peer-layers", commit = std::string(40, 'b'), node, topology, endpoint, identity, out,
                   mode = "peer", manifest;
  uint64_t big = 1ull << 30, part = 512ull << 20;
  unsigned parts = 4;
  std::vector<std::string> files, rels;
  std::vector<uint32_t> indexes;
  auto* prep = app.add_subcommand("prepare", "Write the benchmark package into a Hugging Face cache");
  prep->add_option("--from", src, "A package written by write-package (llama-tiny-q8_0)")->required();
  prep->add_option("--hf", hf, "The Hugging Face cache root")->required();
  prep->add_option("--node-id", node, "The node of the topology's one stage")->required();
  prep->add_option("--topology", topology, "Where to write the topology")->required();
  prep->add_option("--big", big, "Bytes of layer 0");
  prep->add_option("--part", part, "Bytes of layers 1..parts");
  prep->add_option("--parts", parts, "Layers of --part bytes");
  auto* plain = app.add_subcommand("plain-serve", "Plain TCP sender");
  plain->add_option("files", files, "Files, by index")->required();
  auto* fetch = app.add_subcommand("fetch", "Fetch artifacts at once, print {seconds, bytes}");
  fetch->add_option("--mode", mode, "peer or plain");
  fetch->add_option("--endpoint", endpoint)->required();
  fetch->add_option("--out", out, "Directory for the received files")->required();
  fetch->add_option("--identity", identity, "peer: node directory");
  fetch->add_option("--topology", topology, "peer: topology file");
  fetch->add_option("--manifest", manifest, "peer: model-package.json (expected sizes and digests)");
  fetch->add_option("--rel", rels, "peer: artifact paths");
  fetch->add_option("--index", indexes, "plain: file indexes");
  bool inline_sink = false, no_hash = false;
  fetch->add_flag("--inline-sink", inline_sink, "peer: hash and write on the receiving thread (no helper thread)");
  fetch->add_flag("--no-hash", no_hash, "peer: do not hash what arrives (for the cost breakdown only)");
  CLI11_PARSE(app, argc, argv);
  try {
    if (prep->parsed()) return prepare(src, hf, repo, commit, big, part, parts, node, topology);
    if (plain->parsed()) return plain_serve(files);
    fs::create_directories(out);
    std::vector<std::future<uint64_t>> jobs;
    const auto t0 = Clock::now();
    if (mode == "plain") {
      const auto colon = endpoint.rfind(':');
      const auto port = static_cast<uint16_t>(std::stoi(endpoint.substr(colon + 1)));
      for (const auto i : indexes) {
        jobs.push_back(std::async(std::launch::async, [=] { return plain_fetch_one(port, i, fs::path(out) / std::to_string(i)); }));
      }
    } else {
      const auto topo = skippy::peer::load_topology(topology);
      const auto m = skippy::parse_manifest(skippy::read_small_file(manifest, 16 << 20), manifest);
      skippy::peer::ClientOptions co;
      co.sink_on_helper_thread = !inline_sink;
      skippy::peer::PeerClient client(skippy::peer::NodeIdentity::load(identity),
                                      skippy::peer::PeerTrust{skippy::peer::TransferMode::kTrusted, {}}, co);
      const auto t1 = Clock::now();  // (client set-up is not the transfer)
      for (const auto& rel : rels) {
        jobs.push_back(std::async(std::launch::async, [&, rel] {
          return peer_fetch_one(client, endpoint, topo, m, rel, fs::path(out) / fs::path(rel).filename(), !no_hash);
        }));
      }
      uint64_t bytes = 0;
      for (auto& j : jobs) bytes += j.get();
      const double secs = std::chrono::duration<double>(Clock::now() - t1).count();
      std::cout << "{\"seconds\": " << secs << ", \"bytes\": " << bytes << "}" << std::endl;
      return 0;
    }
    uint64_t bytes = 0;
    for (auto& j : jobs) bytes += j.get();
    const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    std::cout << "{\"seconds\": " << secs << ", \"bytes\": " << bytes << "}" << std::endl;
  } catch (const std::exception& e) {
    die(e.what());
  }
  return 0;
}
