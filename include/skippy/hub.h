// The Hugging Face Hub: resolving revisions and bringing files into the
// shared Hugging Face cache (skippy/hf_cache.h) over the Hub's HTTP
// protocol, as huggingface_hub does:
//
//   HEAD {endpoint}/{repo}/resolve/{revision}/{path}
//     -> X-Repo-Commit (the commit), X-Linked-Etag / X-Linked-Size (LFS
//        files; else ETag / Content-Length), and for LFS files a redirect
//        to a storage host, which is fetched WITHOUT the token;
//   GET  that URL with Range to resume blobs/<etag>.incomplete.
//
// Configuration comes from the environment huggingface_hub reads:
// HF_ENDPOINT, HF_TOKEN (else HUGGING_FACE_HUB_TOKEN, else the token file
// $HF_TOKEN_PATH or $HF_HOME/token), HF_HUB_OFFLINE, and the cache
// variables. Retries (429, 5xx, dropped connections) back off
// exponentially from $SKIPPY_HF_BACKOFF_MS (default 1000) and honour
// Retry-After.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "skippy/hf_cache.h"

namespace skippy {

struct HubConfig {
  std::string endpoint = "https://huggingface.co";
  std::optional<std::string> token;
  bool offline = false;
  std::filesystem::path cache_dir;
  unsigned max_attempts = 5;     // per request, retries included
  unsigned backoff_ms = 1000;    // first retry delay; doubles, capped at 30 s
  unsigned parallel_downloads = 4;
  // Throws Error(kUsage) for an HF_ENDPOINT that is not http(s)://.
  static HubConfig from_env();
};

// One file wanted from a repo at a commit. For package artifacts the
// manifest gives the SHA-256 and size: the bytes must match both before
// they appear under their final name.
struct HubFileRequest {
  std::string path;                        // repo-relative
  std::optional<std::string> sha256;      // expected content digest
  std::optional<uint64_t> size;           // expected size
  std::string expected_from = "the manifest";  // who declared them (for messages)
};

struct HubFileResult {
  std::string path;
  std::filesystem::path local;  // snapshots/<commit>/<path>
  bool downloaded = false;      // false: already in the cache
  bool verified = false;        // SHA-256 checked against the request while downloading
};

// A repository on the Hub, as seen through the local cache.
class HubRepo {
 public:
  HubRepo(HubConfig config, std::string repo_id);
  ~HubRepo();
  HubRepo(const HubRepo&) = delete;
  HubRepo& operator=(const HubRepo&) = delete;

  const HubConfig& config() const noexcept;
  const HfRepoCache& cache() const noexcept;
  const std::string& repo_id() const noexcept;

  // The commit `revision` names: from the cache when it is a commit hash or
  // refs/ has it (no network), else from the Hub (HEAD on `probe_path`,
  // which must exist at that revision), recording refs/<revision>.
  // *from_cache (when given) tells whether the answer came from the cache.
  // `refresh`: a branch or tag is asked of the Hub even when refs/ has it
  // (ignored offline, where the cached ref is the answer).
  std::string resolve_commit(const std::string& revision, const std::string& probe_path, bool* from_cache = nullptr,
                             bool refresh = false);

  // Brings the files into snapshots/<commit>/, several at once. Files
  // already there (or whose blob is, by expected SHA-256) need no network.
  // Progress is (bytes downloaded, bytes to download) over the batch.
  std::vector<HubFileResult> ensure_files(const std::string& commit, const std::vector<HubFileRequest>& files,
                                          const std::function<void(uint64_t, uint64_t)>& on_progress = {});

  // GET /api/models/{repo}/revision/{revision}?blobs=true: the commit
  // ("sha") and every file ("siblings": rfilename, size, lfs.sha256).
  struct RepoFile {
    std::string path;
    uint64_t size = 0;
    std::optional<std::string> sha256;  // LFS files
  };
  struct RepoInfo {
    std::string commit;
    std::vector<RepoFile> files;
  };
  RepoInfo info(const std::string& revision);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace skippy
