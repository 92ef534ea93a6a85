// export_to_local_dir(): a stage's verified files as plain files in a
// directory of the user's (skippy/verify.h).
#include <algorithm>
#include <set>

#include "skippy/error.h"
#include "skippy/package_layout.h"
#include "skippy/verify.h"
#include "util/file.h"
#include "util/sha256.h"

namespace skippy {

namespace fs = std::filesystem;

namespace {

// Copies `from` to dir/rel atomically, in the kernel where it can.
uint64_t copy_into(const fs::path& from, const fs::path& to) {
  std::error_code ec;
  fs::create_directories(to.parent_path(), ec);
  if (ec) throw Error(ErrorKind::kIo, to.parent_path().string() + ": cannot create: " + ec.message());
  const auto src = MappedFile::open(from);
  AtomicFile out(to);
  out.preallocate(src->size());
  constexpr uint64_t kChunk = uint64_t{64} << 20;
  for (uint64_t at = 0; at < src->size(); at += kChunk) {
    const uint64_t n = std::min(kChunk, src->size() - at);
    out.copy_range(*src, at, at, src->bytes().subspan(static_cast<size_t>(at), static_cast<size_t>(n)));
  }
  out.commit();
  return src->size();
}

}  // namespace

LocalDirReport export_to_local_dir(const OpenedPlace& pkg, const std::vector<StagePart>& parts, const fs::path& dir,
                                   const VerifyOptions& options) {
  refuse_hf_cache_snapshot(dir, "--local-dir");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw Error(ErrorKind::kIo, dir.string() + ": cannot create: " + ec.message());
  if (fs::equivalent(dir, pkg.root, ec)) {
    throw Error(ErrorKind::kUsage, dir.string() + " is the package's own directory: --local-dir needs another one");
  }
  LocalDirReport r;
  r.dir = dir;
  // The place the copies make: the same package, read from `dir`, every
  // file checked (nothing there is trusted because of where it came from).
  OpenedPlace local = pkg;
  local.root = fs::absolute(dir);
  local.boundary = fs::weakly_canonical(dir, ec);
  local.source = nullptr;
  local.always_verify = true;

  // The root: the bytes the package was opened with, checked by digest.
  const std::string root_text = read_small_file(pkg.root / std::string(kManifestFileName), kManifestMaxBytes);
  if (sha256_hex(root_text) != pkg.manifest_sha256) {
    throw Error(ErrorKind::kIntegrity, (pkg.root / std::string(kManifestFileName)).string() +
                                           " changed since the package was opened: not copied");
  }
  const fs::path root_out = dir / std::string(kManifestFileName);
  if (!fs::exists(root_out, ec) || read_small_file(root_out, kManifestMaxBytes) != root_text) {
    write_file_atomic(root_out, root_text);
    r.copied.push_back(std::string(kManifestFileName));
    r.copied_bytes += root_text.size();
  } else {
    r.kept.push_back(std::string(kManifestFileName));
  }
  const fs::path sig = pkg.root / std::string(kSignatureFileName);
  if (pkg.signature && fs::is_regular_file(sig, ec)) {
    r.copied_bytes += copy_into(sig, dir / std::string(kSignatureFileName));
    r.copied.push_back(std::string(kSignatureFileName));
  }

  // Parts already in `dir` at their size are checked first; what does not
  // verify is copied again.
  std::vector<StagePart> present;
  std::set<std::string> seen;
  for (const auto& p : parts) {
    if (!seen.insert(p.rel_path).second) continue;
    if (!is_safe_relative_path(p.rel_path)) {
      throw Error(ErrorKind::kInvalidInput, pkg.ref + ": " + p.rel_path + " is not a safe relative path");
    }
    const fs::path there = dir / p.rel_path;
    if (fs::is_regular_file(there, ec) && fs::file_size(there, ec) == p.bytes) {
      present.push_back(p);
      present.back().path = local.root / p.rel_path;  // the copy's bytes, not the part's
    }
  }
  std::set<std::string> good;
  if (!present.empty()) {
    for (const auto& v : verify_parts(local, present, options).parts) {
      if (v.ok) good.insert(v.rel_path);
    }
  }
  for (const auto& rel : seen) {
    const auto it = std::find_if(parts.begin(), parts.end(), [&](const StagePart& p) { return p.rel_path == rel; });
    if (good.contains(rel)) {
      r.kept.push_back(rel);
      continue;
    }
    if (it->path.empty()) throw Error(ErrorKind::kUsage, rel + ": not brought yet (provide_parts first)");
    r.copied_bytes += copy_into(it->path, dir / rel);
    r.copied.push_back(rel);
  }
  fsync_directory(dir);
  std::vector<StagePart> all;
  for (const auto& p : parts) {
    if (std::none_of(all.begin(), all.end(), [&](const StagePart& q) { return q.rel_path == p.rel_path; })) {
      all.push_back(p);
      all.back().path = local.root / p.rel_path;
    }
  }
  r.verify = verify_parts(local, all, options);
  if (!r.verify.verified) {
    throw Error(ErrorKind::kIntegrity, dir.string() + ": the copies do not verify: " +
                                           (r.verify.problems.empty() ? std::string("?") : r.verify.problems.front()));
  }
  return r;
}

}  // namespace skippy
