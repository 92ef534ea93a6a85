#include "hub_standin.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace skippy::test {

namespace {

void ensure_curl() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) throw std::runtime_error("curl_global_init failed");
  });
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  static_cast<std::string*>(user)->append(data, size * n);
  return size * n;
}

size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* headers = static_cast<std::map<std::string, std::string>*>(user);
  std::string line(data, size * n);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.pop_back();
  if (line.rfind("HTTP/", 0) == 0) {
    headers->clear();  // a new response (e.g. after 100 Continue)
  } else if (const auto colon = line.find(':'); colon != std::string::npos) {
    std::string name = line.substr(0, colon);
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    std::string value = line.substr(colon + 1);
    const auto first = value.find_first_not_of(" \t");
    value = first == std::string::npos ? "" : value.substr(first);
    (*headers)[name] = value;
  }
  return size * n;
}

void kill_and_reap(pid_t pid) {
  if (pid <= 0) return;
  ::kill(pid, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno != EINTR)) return;
    if (std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(pid, SIGKILL);
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

HubStandin::HubStandin() {
  const std::string script = (std::filesystem::path(SKIPPY_SOURCE_DIR) / "tests" / "hub" / "hub_standin.mjs").string();
  int in_pipe[2], out_pipe[2];
  if (::pipe2(in_pipe, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
    ::close(in_pipe[0]);
    ::close(in_pipe[1]);
    throw std::runtime_error("pipe failed");
  }
  // Look node up on PATH here: between fork and exec only async-signal-safe
  // calls (execvp may allocate).
  std::string node;
  if (const char* path_env = std::getenv("PATH")) {
    std::string paths = path_env;
    for (size_t start = 0; start <= paths.size();) {
      const size_t end = std::min(paths.find(':', start), paths.size());
      const std::string dir = end > start ? paths.substr(start, end - start) : ".";
      const std::string cand = dir + "/node";
      if (::access(cand.c_str(), X_OK) == 0) {
        node = cand;
        break;
      }
      start = end + 1;
    }
  }
  if (node.empty()) throw std::runtime_error("node not found on PATH (needed for the hub stand-in)");
  std::vector<char*> argv = {node.data(), const_cast<char*>(script.c_str()), nullptr};
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    for (int fd : {in_pipe[0], in_pipe[1], out_pipe[0], out_pipe[1]}) ::close(fd);
    throw std::runtime_error("fork failed");
  }
  if (pid == 0) {
    // Belt and braces: stdin EOF already ends it when this process dies.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(in_pipe[0], 0);   // dup2 clears FD_CLOEXEC on the copies
    ::dup2(out_pipe[1], 1);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  pid_ = pid;
  stdin_fd_ = in_pipe[1];
  stdout_fd_ = out_pipe[0];

  // The ready line: {"endpoint":"http://127.0.0.1:P1","storage":"http://127.0.0.1:P2"}
  std::string line;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  try {
    while (line.find('\n') == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) throw std::runtime_error("hub stand-in did not become ready within 15 s");
      pollfd pfd{stdout_fd_, POLLIN, 0};
      const int pr = ::poll(&pfd, 1, static_cast<int>(left.count()));
      if (pr < 0 && errno == EINTR) continue;
      if (pr <= 0) continue;
      char buf[4096];
      const ssize_t n = ::read(stdout_fd_, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw std::runtime_error("hub stand-in exited before it was ready (is node on PATH?): " + script);
      line.append(buf, static_cast<size_t>(n));
    }
    const auto ready = nlohmann::json::parse(line.substr(0, line.find('\n')));
    endpoint_ = ready.at("endpoint").get<std::string>();
    storage_ = ready.at("storage").get<std::string>();
    cas_ = ready.at("cas").get<std::string>();
  } catch (...) {
    ::close(stdin_fd_);
    ::close(stdout_fd_);
    kill_and_reap(pid_);
    throw;
  }
}

HubStandin::~HubStandin() {
  if (stdin_fd_ >= 0) ::close(stdin_fd_);
  kill_and_reap(pid_);
  if (stdout_fd_ >= 0) ::close(stdout_fd_);
}

HubStandin::Response HubStandin::http(const std::string& method, const std::string& url,
                                      const std::vector<std::string>& headers, const std::string& body) {
  ensure_curl();
  Response r;
  CURL* c = curl_easy_init();
  if (!c) throw std::runtime_error("curl_easy_init failed");
  curl_slist* list = nullptr;
  for (const auto& h : headers) list = curl_slist_append(list, h.c_str());
  list = curl_slist_append(list, "Expect:");
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, list);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, &on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &r.body);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, &on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &r.headers);
  if (method == "HEAD") {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else {
    if (method != "GET") curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
    if (!body.empty() || method == "POST" || method == "PUT") {
      curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
      curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    }
  }
  char err[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, err);
  const CURLcode rc = curl_easy_perform(c);
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  if (rc != CURLE_OK) r.error = std::string(curl_easy_strerror(rc)) + (err[0] ? std::string(": ") + err : "");
  curl_slist_free_all(list);
  curl_easy_cleanup(c);
  return r;
}

nlohmann::json HubStandin::admin(const std::string& method, const std::string& path, const std::string& body) {
  const auto r = http(method, endpoint_ + path, {"Content-Type: application/json"}, body);
  if (!r.error.empty() || r.status != 200) {
    throw std::runtime_error("hub stand-in " + method + " " + path + " failed: " +
                             (r.error.empty() ? "HTTP " + std::to_string(r.status) + " " + r.body : r.error));
  }
  return nlohmann::json::parse(r.body);
}

nlohmann::json HubStandin::publish_json(const std::string& repo, const std::filesystem::path& dir,
                                        const PublishOptions& opts) {
  nlohmann::json req = {{"repo", repo},
                        {"dir", std::filesystem::absolute(dir).string()},
                        {"branch", opts.branch},
                        {"tags", opts.tags},
                        {"gated", opts.gated}};
  if (opts.xet) req["xet"] = {{"compression", opts.xet_compression}};
  if (opts.xet_enabled) req["xet_enabled"] = *opts.xet_enabled;
  return admin("POST", "/_admin/repos", req.dump());
}

std::string HubStandin::publish(const std::string& repo, const std::filesystem::path& dir, const PublishOptions& opts) {
  return publish_json(repo, dir, opts).at("commit").get<std::string>();
}

std::vector<HubRequest> HubStandin::log() {
  std::vector<HubRequest> out;
  for (const auto& e : admin("GET", "/_admin/log")) {
    HubRequest r;
    r.listener = e.at("listener").get<std::string>();
    r.method = e.at("method").get<std::string>();
    r.path = e.at("path").get<std::string>();
    r.query = e.at("query").get<std::string>();
    if (!e.at("range").is_null()) r.range = e.at("range").get<std::string>();
    if (!e.at("authorization").is_null()) r.authorization = e.at("authorization").get<std::string>();
    if (e.contains("user_agent") && !e.at("user_agent").is_null()) r.user_agent = e.at("user_agent").get<std::string>();
    r.status = e.at("status").get<int>();
    r.bytes_sent = e.at("bytes_sent").get<uint64_t>();
    r.bytes_received = e.value("bytes_received", uint64_t{0});
    out.push_back(std::move(r));
  }
  return out;
}

void HubStandin::clear_log() { admin("DELETE", "/_admin/log"); }

void HubStandin::fault(const nlohmann::json& rule) { admin("POST", "/_admin/faults", rule.dump()); }

void HubStandin::clear_faults() { admin("DELETE", "/_admin/faults"); }

void HubStandin::configure(const nlohmann::json& cfg) { admin("POST", "/_admin/config", cfg.dump()); }

XetStats HubStandin::xet_stats() {
  XetStats s;
  s.raw = admin("GET", "/_admin/xet");
  const auto& b = s.raw.at("bytes");
  s.xorb_upload_bytes = b.at("xorb_upload").get<uint64_t>();
  s.shard_upload_bytes = b.at("shard_upload").get<uint64_t>();
  s.lfs_upload_bytes = b.at("lfs_upload").get<uint64_t>();
  s.xorb_download_bytes = b.at("xorb_download").get<uint64_t>();
  s.dedupe_answer_bytes = b.at("dedupe_answered").get<uint64_t>();
  for (const auto& x : s.raw.at("xorbs")) {
    s.xorbs.push_back({x.at("hash").get<std::string>(), x.at("status").get<std::string>(), x.value("error", std::string()),
                       x.at("bytes").get<uint64_t>(), x.value("chunks", uint64_t{0})});
  }
  for (const auto& x : s.raw.at("shards")) {
    XetStats::Shard sh{x.at("route").get<std::string>(), x.at("status").get<std::string>(), x.value("error", std::string()),
                       x.value("repo", std::string()), x.at("bytes").get<uint64_t>(), {}};
    for (const auto& f : x.value("files", nlohmann::json::array())) sh.file_sha256.push_back(f.at("sha256").get<std::string>());
    s.shards.push_back(std::move(sh));
  }
  for (const auto& q : s.raw.at("dedupe_queries")) s.dedupe_queries.push_back({q.at("chunk").get<std::string>(), q.at("found").get<bool>()});
  for (const auto& q : s.raw.at("reconstructions")) {
    XetStats::Reconstruction r{q.at("file").get<std::string>(), q.at("version").get<int>(), q.at("status").get<int>(), std::nullopt};
    if (!q.at("range").is_null()) r.range = q.at("range").get<std::string>();
    s.reconstructions.push_back(std::move(r));
  }
  const auto& sc = s.raw.at("chunk_schemes");
  s.chunks_none = sc.at("none").get<uint64_t>();
  s.chunks_lz4 = sc.at("lz4").get<uint64_t>();
  s.chunks_bg4_lz4 = sc.at("bg4_lz4").get<uint64_t>();
  return s;
}

void HubStandin::clear_xet_stats() { admin("DELETE", "/_admin/xet"); }

nlohmann::json HubStandin::xet_store(bool with_chunks) {
  return admin("GET", with_chunks ? "/_admin/xet/store?chunks=1" : "/_admin/xet/store");
}

void HubStandin::forget_xet_store() { admin("DELETE", "/_admin/xet/store"); }

void HubStandin::expire_xet_tokens() { admin("POST", "/_admin/xet/expire-tokens"); }

void HubStandin::set_repo_xet(const std::string& repo, std::optional<bool> enabled) {
  const nlohmann::json body = {{"repo", repo}, {"xet_enabled", enabled ? nlohmann::json(*enabled) : nlohmann::json(nullptr)}};
  admin("POST", "/_admin/repo-settings", body.dump());
}

}  // namespace skippy::test
