#include "skippy/source.h"

#include <cerrno>
#include <cstring>

#include <unistd.h>

#include <cstdlib>

#include "skippy/error.h"
#include "util/file.h"
#include "util/io_env.h"
#include "util/sha256.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;

std::string repo_folder_name(std::string_view repo_id) {
  std::string name = "models--";
  for (const char c : repo_id) {
    if (c == '/') {
      name += "--";
    } else {
      name += c;
    }
  }
  return name;
}

// An etag names a file under blobs/: a lowercase SHA-256 (LFS files) or
// git blob SHA-1 (the rest) and nothing else, so a hostile server can
// neither steer it elsewhere nor pick a name whose contents go unchecked.
void check_etag(std::string_view etag) {
  if (!is_blob_etag(etag)) {
    throw_invalid("\"" + std::string(etag) + "\" is not a blob etag (expected a lowercase SHA-256 or git blob SHA-1)");
  }
}

}  // namespace

bool is_blob_etag(std::string_view etag) noexcept {
  return (etag.size() == 64 || etag.size() == 40) && etag.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

std::string normalize_etag(std::string_view etag) {
  if (etag.starts_with("W/")) etag.remove_prefix(2);
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') etag = etag.substr(1, etag.size() - 2);
  return std::string(etag);
}

HfRepoCache::HfRepoCache(fs::path cache_root, const std::string& repo_id, IoEnv* io_env)
    : repo_id_(repo_id),
      root_(std::move(cache_root)),
      repo_dir_(root_ / repo_folder_name(repo_id)),
      locks_dir_(root_ / ".locks" / repo_folder_name(repo_id)),
      io_env_(io_env) {}

fs::path HfRepoCache::blob_path(std::string_view etag) const {
  check_etag(etag);
  return repo_dir_ / "blobs" / std::string(etag);
}

fs::path HfRepoCache::incomplete_path(std::string_view etag) const {
  check_etag(etag);
  return repo_dir_ / "blobs" / (std::string(etag) + ".incomplete");
}

fs::path HfRepoCache::lock_path(std::string_view etag) const {
  check_etag(etag);
  return locks_dir_ / (std::string(etag) + ".lock");
}

fs::path HfRepoCache::snapshot_dir(std::string_view commit) const {
  if (!is_commit_hash(commit)) throw_invalid("\"" + std::string(commit) + "\" is not a commit id");
  return repo_dir_ / "snapshots" / std::string(commit);
}

void HfRepoCache::create_dirs() const {
  std::error_code ec;
  for (const auto& d : {repo_dir_ / "blobs", repo_dir_ / "snapshots", repo_dir_ / "refs", locks_dir_}) {
    fs::create_directories(d, ec);
    if (ec) throw Error(ErrorKind::kIo, d.string() + ": cannot create the Hugging Face cache directory: " + ec.message());
  }
}

std::optional<std::string> HfRepoCache::cached_commit(std::string_view revision) const {
  if (is_commit_hash(revision)) return std::string(revision);
  check_revision(revision, "revision");
  const fs::path ref = repo_dir_ / "refs" / std::string(revision);
  std::error_code ec;
  if (!fs::is_regular_file(ref, ec)) return std::nullopt;
  std::string text;
  try {
    text = read_small_file(ref, 4096);
  } catch (const Error&) {
    return std::nullopt;
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) text.pop_back();
  if (!is_commit_hash(text)) return std::nullopt;
  return text;
}

void HfRepoCache::write_ref(std::string_view revision, std::string_view commit) const {
  if (revision == commit) return;
  check_revision(revision, "revision");
  if (!is_commit_hash(commit)) throw_invalid("\"" + std::string(commit) + "\" is not a commit id");
  const fs::path ref = repo_dir_ / "refs" / std::string(revision);
  std::error_code ec;
  fs::create_directories(ref.parent_path(), ec);
  if (ec) throw Error(ErrorKind::kIo, ref.parent_path().string() + ": cannot create: " + ec.message());
  write_file_atomic(ref, commit, Durability::kDurable, io_env_);
}

std::optional<fs::path> HfRepoCache::snapshot_file(std::string_view commit, std::string_view rel_path) const {
  const fs::path p = snapshot_dir(commit) / std::string(rel_path);
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) return std::nullopt;  // follows the symlink: dangling links miss
  return p;
}

void HfRepoCache::check_small_blob(std::string_view commit, std::string_view rel_path, uint64_t max_bytes) const {
  const fs::path file = snapshot_dir(commit) / std::string(rel_path);
  std::error_code ec;
  if (!fs::is_symlink(fs::symlink_status(file, ec))) return;
  const fs::path target = fs::read_symlink(file, ec);
  if (ec) return;
  const std::string etag = target.filename().string();
  if (target.parent_path().filename() != "blobs" || !is_blob_etag(etag)) return;
  const std::string bytes = read_small_file(file, max_bytes);
  std::string has;
  if (etag.size() == 64) {
    has = sha256_hex(bytes);
  } else {
    GitBlobId g(bytes.size());
    g.update(std::string_view(bytes));
    has = g.hex_digest();
  }
  if (has == etag) return;
  throw_integrity(file.string() + ": the cached " + std::string(rel_path) + " has " +
                  (etag.size() == 64 ? "SHA-256 " : "git blob id ") + has + ", its blob is named " + etag +
                  ": the Hugging Face cache's copy was changed after download; remove " +
                  blob_path(etag).string() + " to fetch it again");
}

fs::path HfRepoCache::link(std::string_view commit, std::string_view rel_path, std::string_view etag) const {
  const fs::path file = snapshot_dir(commit) / std::string(rel_path);
  const fs::path blob = blob_path(etag);
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  if (ec) throw Error(ErrorKind::kIo, file.parent_path().string() + ": cannot create: " + ec.message());
  const fs::path target = blob.lexically_relative(file.parent_path());
  const fs::path tmp = temporary_path_for(file);
  fs::create_symlink(target, tmp, ec);
  if (ec) throw Error(ErrorKind::kIo, tmp.string() + ": cannot create the snapshot symlink: " + ec.message());
  if (detail::io(io_env_).rename(tmp.c_str(), file.c_str()) != 0) {
    const int err = errno;
    fs::remove(tmp, ec);
    throw Error(ErrorKind::kIo, file.string() + ": cannot place the snapshot symlink: " + std::strerror(err));
  }
  return file;
}

}  // namespace skippy
