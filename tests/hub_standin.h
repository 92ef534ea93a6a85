// A local Hugging Face Hub for tests: starts tests/hub/hub_standin.mjs
// (Node) and talks to its admin API. The stand-in serves the Hub's resolve
// and API endpoints on endpoint() and redirects LFS downloads to signed URLs
// on a separate storage() listener, like huggingface.co and its CDN; its Xet
// CAS listens on cas() and serves xorb ranges from storage(). See the
// comments at the top of hub_standin.mjs and cas_standin.mjs for the exact
// protocol.
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
  std::optional<std::string> range, authorization, user_agent;  // listener also "cas"
  int status = 0;
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;  // request body bytes
};

struct PublishOptions {
  std::string branch = "main";
  std::vector<std::string> tags = {};  // (an initializer keeps -Wmissing-field-initializers quiet for {.gated = true})
  bool gated = false;
  // Also store the LFS files Xet-backed (chunked, packed into xorbs and
  // registered, so their chunks are in the global dedupe index), with this
  // chunk compression: "auto", "none", "lz4" or "bg4_lz4".
  bool xet = false;
  std::string xet_compression = "auto";
  std::optional<bool> xet_enabled = std::nullopt;  // the repo's Xet switch; unset: unchanged
};

// What the stand-in's Xet CAS received and answered since the last
// clear_xet_stats() (GET /_admin/xet). Byte counts are request/response
// bodies; lfs_upload_bytes counts storage PUTs (the LFS path).
struct XetStats {
  uint64_t xorb_upload_bytes = 0, shard_upload_bytes = 0, lfs_upload_bytes = 0, xorb_download_bytes = 0,
           dedupe_answer_bytes = 0;
  struct Xorb {
    std::string hash, status, error;  // status: "stored" | "exists" (body not examined) | "refused"
    uint64_t bytes = 0, chunks = 0;
  };
  struct Shard {
    std::string route, status, error, repo;  // route: "v1" | "v2"; status: "registered" | "refused"
    uint64_t bytes = 0;
    std::vector<std::string> file_sha256;  // the files it registered
  };
  struct DedupeQuery {
    std::string chunk;
    bool found = false;
  };
  struct Reconstruction {
    std::string file;
    int version = 0, status = 0;
    std::optional<std::string> range;
  };
  std::vector<Xorb> xorbs;
  std::vector<Shard> shards;
  std::vector<DedupeQuery> dedupe_queries;
  std::vector<Reconstruction> reconstructions;
  uint64_t chunks_none = 0, chunks_lz4 = 0, chunks_bg4_lz4 = 0;  // schemes of uploaded chunks
  nlohmann::json raw;                                             // the whole answer
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
  const std::string& cas() const { return cas_; }            // http://127.0.0.1:P3 (the casUrl)

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
  // {"token":"hf_test","url_ttl_secs":60,"reject_unknown_tokens":false}; Xet:
  // {"xet_enabled":true,"xet_token_ttl_secs":3600,"xet_url_ttl_secs":null,
  //  "xet_multi_range":true,"xet_dedupe_expiry_secs":604800}
  void configure(const nlohmann::json& cfg);

  // Xet. Faults go through fault() with these kinds: "xet_expired_token",
  // "xet_refuse_shard" {message?, retryable?}, "xet_bad_terms" {mode:
  // unpacked_length|chunk_range|unknown_xorb|missing_fetch|offset},
  // "xet_wrong_bytes", "xet_short_read" {drop_bytes?}, "xet_refuse_multirange"
  // (listener "cas" or "storage"; the usual status/cut/slow/... kinds apply
  // to the "cas" listener too).
  XetStats xet_stats();
  void clear_xet_stats();
  // {"xorbs":[{hash,bytes,chunks,unpacked,schemes,chunk_list?}],"files":[{hash,size,
  //  sha256,terms:[{xorb,start,end,size}]}],"shards":[{xorbs,files,route,repo}]};
  // with_chunks adds each xorb's chunk_list [{hash,size,start,end}].
  nlohmann::json xet_store(bool with_chunks = false);
  void forget_xet_store();  // every xorb, file and shard (benchmarks)
  void expire_xet_tokens();  // every CAS token issued so far now answers 401
  // A repo's Xet switch: true, false, or nullopt to follow config xet_enabled.
  void set_repo_xet(const std::string& repo, std::optional<bool> enabled);

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
  std::string endpoint_, storage_, cas_;
};

}  // namespace skippy::test
