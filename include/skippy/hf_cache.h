// The Hugging Face Hub cache, exactly as huggingface_hub lays it out, so
// that huggingface_hub, transformers, llama.cpp -hf and this tool share one
// copy of every file:
//
//   <cache>/models--<ns>--<repo>/
//     blobs/<etag>                  file contents; for LFS files the etag is
//                                   the SHA-256, else the git blob SHA-1
//     blobs/<etag>.incomplete       a download in progress (resumable)
//     snapshots/<commit>/<path>     relative symlinks into ../blobs
//     refs/<revision>               the commit a branch/tag resolved to, no
//                                   trailing newline
//   <cache>/.locks/models--<ns>--<repo>/<etag>.lock   flock(2) per blob
//
// <cache> is env::hf_hub_cache_dir(): $HF_HUB_CACHE, else $HF_HOME/hub, else
// $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.
//
// Thread-safety: an HfRepoCache is immutable (it names paths; its const
// members may run on many threads at once). The cache on disk is shared by
// threads and processes: refs and links are replaced atomically, and a blob's
// writers serialize on its flock in .locks/, as huggingface_hub's do.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace skippy {

class HfRepoCache {
 public:
  // `repo_id` must already satisfy check_repo_id (hf_ref.h).
  HfRepoCache(std::filesystem::path cache_root, const std::string& repo_id);

  const std::string& repo_id() const noexcept { return repo_id_; }
  const std::filesystem::path& root() const noexcept { return root_; }
  const std::filesystem::path& repo_dir() const noexcept { return repo_dir_; }
  std::filesystem::path blob_path(std::string_view etag) const;
  std::filesystem::path incomplete_path(std::string_view etag) const;
  std::filesystem::path lock_path(std::string_view etag) const;
  std::filesystem::path snapshot_dir(std::string_view commit) const;

  // The commit `revision` names without asking the Hub: a full commit hash
  // is itself; a branch or tag is read from refs/ (nullopt when absent or
  // malformed).
  std::optional<std::string> cached_commit(std::string_view revision) const;
  // refs/<revision> := commit (atomic; no trailing newline). No-op for a
  // revision that is itself the commit.
  void write_ref(std::string_view revision, std::string_view commit) const;

  // snapshots/<commit>/<path> when it exists and resolves to a file.
  std::optional<std::filesystem::path> snapshot_file(std::string_view commit, std::string_view rel_path) const;
  // A small file's cache hit checked: the bytes of snapshots/<commit>/<rel_path>
  // (read whole, at most `max_bytes`) against the name of the blob it links
  // to (SHA-256 or git blob id). Throws Error(kIntegrity) naming the file and
  // both ids when they differ; returns when they match or when the entry is
  // not a symlink to an etag-named blob (nothing names its bytes).
  void check_small_blob(std::string_view commit, std::string_view rel_path, uint64_t max_bytes) const;
  // Points snapshots/<commit>/<rel_path> at blobs/<etag> with a relative
  // symlink, replacing any previous link atomically.
  std::filesystem::path link(std::string_view commit, std::string_view rel_path, std::string_view etag) const;

  // Creates blobs/, snapshots/, refs/ and the lock directory.
  void create_dirs() const;

 private:
  std::string repo_id_;
  std::filesystem::path root_;
  std::filesystem::path repo_dir_;
  std::filesystem::path locks_dir_;
};

// A lowercase 64-hex SHA-256 or 40-hex git blob SHA-1: the only etags that
// may name a blob (each says how to check the bytes).
bool is_blob_etag(std::string_view etag) noexcept;

// Normalises an ETag header value as huggingface_hub does: drops a weak
// "W/" prefix and the surrounding quotes.
std::string normalize_etag(std::string_view etag);

}  // namespace skippy
