// A local Hugging Face Hub for tests: starts tests/hub/hub_standin.mjs
// (Node) and talks to its admin API. The stand-in serves the Hub's resolve
// and API endpoints on endpoint() and redirects LFS downloads to signed URLs
// on a separate storage() listener, like huggingface.co and its CDN. See the
// comment at the top of the .mjs for the exact protocol.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace skippy::test {

// One request the stand-in answered (admin calls are not logged).
struct HubRequest {
  std::string listener, method, path, query;  // listener: "hub" | "storage"; path decoded
  std::optional<std::string> range, authorization, user_agent;
  int status = 0;
  uint64_t bytes_sent = 0;
};

struct PublishOptions {
  std::string branch = "main";
  std::vector<std::string> tags = {};  // (an initializer keeps -Wmissing-field-initializers quiet for {.gated = true})
  bool gated = false;
};

class HubStandin {
 public:
  // Starts the stand-in and waits (up to 15 s) for its ready line; throws on
  // failure.
  HubStandin();
  // Closes its stdin (it exits on EOF), then SIGTERM/SIGKILL, and reaps it.
  ~HubStandin();
  HubStandin(const HubStandin&) = delete;
  HubStandin& operator=(const HubStandin&) = delete;

  const std::string& endpoint() const { return endpoint_; }  // http://127.0.0.1:P1
  const std::string& storage() const { return storage_; }    // http://127.0.0.1:P2

  // Publishes every regular file under `dir` (recursively, in place) as a new
  // commit on opts.branch of `repo` ("ns/name"); returns the commit id.
  std::string publish(const std::string& repo, const std::filesystem::path& dir, const PublishOptions& opts = {});
  // The same, returning the stand-in's whole answer:
  // {"commit", "files":[{"path","size","sha256","lfs","oid"}]}.
  nlohmann::json publish_json(const std::string& repo, const std::filesystem::path& dir,
                              const PublishOptions& opts = {});

  std::vector<HubRequest> log();
  void clear_log();
  // A rule such as {"match":"x.gguf","listener":"storage","kind":"cut","after_bytes":10,"times":1}.
  void fault(const nlohmann::json& rule);
  void clear_faults();
  // {"token":"hf_test","url_ttl_secs":60,"reject_unknown_tokens":false}
  void configure(const nlohmann::json& cfg);

  // Plain HTTP for tests (libcurl, redirects not followed, no proxy). Never
  // throws for HTTP or transport failures: status is the status line received
  // (0 if none), and error is curl's message when the transfer did not
  // complete (e.g. a cut body; headers/body then hold what did arrive).
  // Header names are lower-cased; a repeated header keeps its last value.
  struct Response {
    long status = 0;
    std::map<std::string, std::string> headers;
    std::string body;
    std::string error;  // empty on success, else curl's message
  };
  static Response http(const std::string& method, const std::string& url, const std::vector<std::string>& headers = {},
                       const std::string& body = {});

 private:
  nlohmann::json admin(const std::string& method, const std::string& path, const std::string& body = {});

  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  std::string endpoint_, storage_;
};

}  // namespace skippy::test
