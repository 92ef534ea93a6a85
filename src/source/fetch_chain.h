// The Hugging Face cache followed by the remotes, for one repository: the
// part of the source layer that open_package (artifacts) and
// open_model_source (write-package's Hub sources) share. Internal.
#pragma once

#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "skippy/source.h"

namespace skippy::detail {

class FetchChain {
 public:
  // Throws Error(kUsage) for a repo id the Hub would refuse.
  FetchChain(Sources sources, const std::string& repo_id);

  const HfRepoCache& cache() const noexcept { return cache_; }
  const Sources& sources() const noexcept { return sources_; }

  // The commit `revision` names. From the cache (a commit is itself; a
  // branch or tag in refs/) unless `refresh`; else from the first remote
  // that resolves names, recording refs/<revision>. *from_cache tells which.
  std::string resolve_commit(const std::string& revision, const std::string& probe_path, bool refresh, bool* from_cache);

  // The repository's files at `revision`: the first remote that lists
  // (recording refs/<revision>), else — with no remote that can — the
  // cache's snapshot of the revision (LFS blobs are named by their SHA-256).
  // `declared_by` says which, for messages.
  RemoteListing list(const std::string& revision, std::string* declared_by);
  // the first remote's word on whether `revision` is a tag (nullopt:
  // none could tell). Never throws for a remote's failure.
  std::optional<bool> is_tag(const std::string& revision);

  // Brings every file into snapshots/<commit>/ and returns where each is,
  // in order. A file already in the snapshot, or whose blob another commit
  // brought (same SHA-256), needs nothing; the rest are asked of each remote
  // in order, file by file, until one delivers. A file no remote delivers
  // throws the last remote's error (its kind kept; earlier remotes' reasons
  // in front), or Error(kOffline / kNotFound) naming the files when there
  // is no remote.
  std::vector<std::filesystem::path> bring(const std::string& commit, const std::vector<RemoteFile>& files,
                                           const ProgressFn& on_progress);

  // The first `length` bytes of `file` at `commit`, from the first remote
  // that reads parts of files (remotes that cannot are skipped; one that
  // fails is noted and the next asked). Not cached here. Throws the last
  // failure, or Error(kOffline / kNotFound) when no remote could be asked.
  std::vector<uint8_t> read_head(const std::string& commit, const RemoteFile& file, uint64_t length);

  std::vector<std::string> fetched() const;
  std::map<std::string, std::string> origins() const;
  bool verified(const std::string& rel_path) const;
  std::vector<std::string> notes() const;

 private:
  // Error(kOffline) when HF_HUB_OFFLINE removed the Hub, else kNotFound:
  // "<what> (<repo dir>) and <why nothing else may be asked><tail>".
  [[noreturn]] void fail_cache_only(const std::string& what, const std::string& tail = {}) const;
  void check_free_space(const std::vector<RemoteFile>& missing) const;

  Sources sources_;
  HfRepoCache cache_;
  mutable std::mutex mu_;
  std::vector<std::string> fetched_;
  std::map<std::string, std::string> origins_;
  std::set<std::string> verified_;
  std::vector<std::string> notes_;
};

}  // namespace skippy::detail
