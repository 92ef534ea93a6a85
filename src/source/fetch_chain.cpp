#include "source/fetch_chain.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <atomic>
#include <cctype>

#include "skippy/error.h"
#include "skippy/manifest.h"
#include "util/sha256.h"

namespace skippy::detail {

namespace fs = std::filesystem;

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

HfRepoCache checked_cache(const Sources& sources, const std::string& repo_id) {
  check_repo_id(repo_id, "hf://" + repo_id);
  return HfRepoCache(sources.hf_cache, repo_id, sources.io_env);
}

}  // namespace

FetchChain::FetchChain(Sources sources, const std::string& repo_id)
    : sources_(std::move(sources)), cache_(checked_cache(sources_, repo_id)) {}

void FetchChain::fail_cache_only(const std::string& what, const std::string& tail) const {
  throw Error(sources_.offline ? ErrorKind::kOffline : ErrorKind::kNotFound,
              what + " (" + cache_.repo_dir().string() + ") and " +
                  (sources_.offline ? std::string("HF_HUB_OFFLINE=1 forbids asking the Hub")
                                    : std::string("no remote source is configured")) +
                  tail);
}

std::string FetchChain::resolve_commit(const std::string& revision, const std::string& probe_path, bool refresh,
                                       bool* from_cache) {
  const std::string where = "hf://" + cache_.repo_id() + "@" + revision;
  check_revision(revision, where);
  if (from_cache) *from_cache = true;
  if (!refresh || sources_.remotes.empty() || is_commit_hash(revision)) {
    if (auto c = cache_.cached_commit(revision)) return *c;
  }
  if (from_cache) *from_cache = false;
  if (sources_.remotes.empty()) fail_cache_only(where + ": revision \"" + revision + "\" is not in the Hugging Face cache");
  for (const auto& remote : sources_.remotes) {
    if (auto c = remote->resolve_commit(cache_, revision, probe_path)) {
      if (!is_commit_hash(*c)) throw_invalid(where + ": " + remote->name() + " answered \"" + *c + "\", not a commit id");
      cache_.create_dirs();
      cache_.write_ref(revision, *c);
      return *c;
    }
  }
  throw_not_found(where + ": revision \"" + revision + "\" is not in the Hugging Face cache and no source can resolve it (" +
                  "a peer serves commits only; pin the commit)");
}

std::optional<bool> FetchChain::is_tag(const std::string& revision) {
  if (is_commit_hash(revision)) return std::nullopt;
  for (const auto& remote : sources_.remotes) {
    try {
      if (auto t = remote->is_tag(cache_, revision)) return t;
    } catch (const Error&) {
      // Unknown: the caller treats the name as one that can move.
    }
  }
  return std::nullopt;
}

RemoteListing FetchChain::list(const std::string& revision, std::string* declared_by) {
  const std::string where = "hf://" + cache_.repo_id() + "@" + revision;
  check_revision(revision, where);
  for (const auto& remote : sources_.remotes) {
    if (auto l = remote->list(cache_, revision)) {
      if (!is_commit_hash(l->commit)) throw_invalid(where + ": the repository listing has no commit id");
      if (!is_commit_hash(revision)) {
        cache_.create_dirs();
        cache_.write_ref(revision, l->commit);
      }
      if (declared_by) *declared_by = "the " + remote->name() + "'s repository listing";
      return std::move(*l);
    }
  }
  // No remote lists: the cache's snapshot of the revision is the listing.
  const auto commit = cache_.cached_commit(revision);
  if (!commit) fail_cache_only(where + ": revision \"" + revision + "\" is not in the Hugging Face cache");
  RemoteListing out;
  out.commit = *commit;
  const fs::path snap = cache_.snapshot_dir(*commit);
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(snap, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    RemoteListing::File f;
    f.path = it->path().lexically_relative(snap).generic_string();
    f.size = it->file_size(ec);
    const auto target = fs::read_symlink(it->path(), ec).filename().string();
    if (is_sha256_hex(target)) f.sha256 = target;
    out.files.push_back(std::move(f));
  }
  if (declared_by) *declared_by = "the cached blob's name";
  return out;
}

void FetchChain::check_free_space(const std::vector<RemoteFile>& missing) const {
  uint64_t total = 0, partial = 0;
  for (const auto& f : missing) {
    const uint64_t size = f.size.value_or(0);
    total += size;
    // Bytes a resumable partial download already holds need no new space.
    if (f.sha256 && is_blob_etag(lower(*f.sha256))) {
      std::error_code ec;
      const auto have = fs::file_size(cache_.incomplete_path(lower(*f.sha256)), ec);
      if (!ec) partial += std::min<uint64_t>(have, size);
    }
  }
  struct statvfs vfs {};
  if (::statvfs((cache_.repo_dir() / "blobs").c_str(), &vfs) != 0) return;
  const uint64_t free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  if (free_bytes + partial < total) {
    throw Error(ErrorKind::kIo, "hf://" + cache_.repo_id() + ": " + std::to_string(total) + " bytes to download, only " +
                                    std::to_string(free_bytes) + " free under " + cache_.root().string() +
                                    " (set HF_HUB_CACHE to a larger disk)");
  }
}

std::vector<fs::path> FetchChain::bring(const std::string& commit, const std::vector<RemoteFile>& files,
                                        const ProgressFn& on_progress) {
  const std::string where = "hf://" + cache_.repo_id() + "@" + commit;
  for (const auto& f : files) {
    if (!is_safe_relative_path(f.path)) throw_invalid(where + ": \"" + f.path + "\" is not a safe relative path");
  }
  std::vector<fs::path> out(files.size());
  std::vector<size_t> missing;
  for (size_t i = 0; i < files.size(); ++i) {
    const auto& f = files[i];
    std::optional<fs::path> local = cache_.snapshot_file(commit, f.path);
    if (!local && f.sha256 && is_sha256_hex(*f.sha256)) {
      std::error_code ec;
      const std::string etag = lower(*f.sha256);
      if (fs::is_regular_file(cache_.blob_path(etag), ec)) {  // the same bytes under another commit
        cache_.create_dirs();
        local = cache_.link(commit, f.path, etag);
      }
    }
    if (local) {
      out[i] = *local;
      std::lock_guard g(mu_);
      origins_.emplace(f.path, "cache");
      continue;
    }
    missing.push_back(i);
  }
  if (missing.empty()) return out;
  if (sources_.remotes.empty()) {
    std::vector<std::string> names;
    for (const auto i : missing) names.push_back(files[i].path);
    fail_cache_only(where + ": not in the Hugging Face cache", ": " + join(names));
  }
  cache_.create_dirs();
  {
    std::vector<RemoteFile> want;
    for (const auto i : missing) want.push_back(files[i]);
    check_free_space(want);
  }
  uint64_t total = 0;
  for (const auto i : missing) total += files[i].size.value_or(0);
  std::atomic<uint64_t> done{0};
  auto on_bytes = [&](uint64_t n) {
    const uint64_t d = done.fetch_add(n) + n;
    if (on_progress) on_progress(d, std::max(total, d));
  };

  // Each remote in order gets what the ones before it could not deliver.
  std::vector<size_t> pending = missing;
  std::map<size_t, std::vector<std::string>> reasons;  // earlier remotes' failures, per file
  std::map<size_t, Error> last_error;
  for (size_t r = 0; r < sources_.remotes.size() && !pending.empty(); ++r) {
    auto& remote = *sources_.remotes[r];
    std::vector<RemoteFile> want;
    for (const auto i : pending) want.push_back(files[i]);
    std::vector<RemoteOutcome> outcomes;
    try {
      outcomes = remote.fetch(cache_, commit, want, on_bytes);
    } catch (const Error& e) {
      outcomes.assign(want.size(), RemoteOutcome{false, false, false, e});
    }
    for (auto& n : remote.take_notes()) {
      std::lock_guard g(mu_);
      notes_.push_back(std::move(n));
    }
    if (outcomes.size() != want.size()) {
      throw_invalid(where + ": the " + remote.name() + " source answered for " + std::to_string(outcomes.size()) +
                    " of " + std::to_string(want.size()) + " files");
    }
    std::vector<size_t> still;
    for (size_t k = 0; k < pending.size(); ++k) {
      const size_t i = pending[k];
      const auto& o = outcomes[k];
      if (o.delivered) {
        out[i] = cache_.snapshot_dir(commit) / files[i].path;
        std::lock_guard g(mu_);
        if (o.received) fetched_.push_back(files[i].path);
        // Brought by another process while we waited: the cache served it.
        origins_[files[i].path] = o.received ? remote.name() : "cache";
        if (o.verified) verified_.insert(files[i].path);
        continue;
      }
      const Error e = o.error.value_or(Error(ErrorKind::kTransport, where + ": " + files[i].path + ": not delivered"));
      if (r + 1 < sources_.remotes.size()) {
        std::lock_guard g(mu_);
        notes_.push_back(files[i].path + ": the " + remote.name() + " could not deliver it (" + e.what() +
                         "); asking the " + sources_.remotes[r + 1]->name());
      }
      reasons[i].push_back(remote.name() + ": " + e.what());
      last_error.insert_or_assign(i, e);
      still.push_back(i);
    }
    pending = std::move(still);
  }
  if (!pending.empty()) {
    const size_t i = pending.front();
    const Error& e = last_error.at(i);
    if (reasons[i].size() <= 1) throw e;
    reasons[i].pop_back();
    throw e.with_context(files[i].path + ": " + join(reasons[i]) + "; then");
  }
  return out;
}

std::vector<uint8_t> FetchChain::read_head(const std::string& commit, const RemoteFile& file, uint64_t length) {
  const std::string where = "hf://" + cache_.repo_id() + "@" + commit + ": " + file.path;
  if (sources_.remotes.empty()) fail_cache_only(where + ": not in the Hugging Face cache");
  std::optional<Error> last;
  std::string why;  // earlier remotes' reasons
  for (const auto& r : sources_.remotes) {
    try {
      auto head = r->read_head(cache_, commit, file, length);
      if (!head) continue;
      if (head->size() > length) throw_integrity(where + ": " + r->name() + " sent more than the first " + std::to_string(length) + " bytes");
      return std::move(*head);
    } catch (const Error& e) {
      if (last) why += std::string(why.empty() ? "" : "; ") + last->what();
      last = e;
    }
  }
  if (last) throw Error(last->kind(), why.empty() ? std::string(last->what()) : why + "; then " + last->what());
  throw Error(ErrorKind::kNotFound, where + ": no configured remote reads part of a file (and it is not in the cache)");
}

std::vector<std::string> FetchChain::fetched() const {
  std::lock_guard g(mu_);
  return fetched_;
}

std::map<std::string, std::string> FetchChain::origins() const {
  std::lock_guard g(mu_);
  return origins_;
}

bool FetchChain::verified(const std::string& rel_path) const {
  std::lock_guard g(mu_);
  return verified_.count(rel_path) != 0;
}

std::vector<std::string> FetchChain::notes() const {
  std::lock_guard g(mu_);
  return notes_;
}

}  // namespace skippy::detail
