#include "skippy/verify.h"

#include "skippy/stage.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <set>

#include "util/env.h"
#include "skippy/error.h"
#include "util/file.h"
#include "util/sha256.h"
#include "util/parallel.h"
#include "format/verification_cache.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using detail::FileIdentity;
using detail::identity_of;
using detail::VerificationCache;
using detail::verification_key;

// Read size for hashing: large enough for few syscalls and good readahead,
// small enough to stay in L2 between the copy and the hash.
constexpr size_t kChunk = size_t{1} << 20;

// A file whose ctime is this close to the moment we start reading it is not
// recorded: a later write within the same filesystem timestamp tick (a few
// ms on Linux; whole seconds on coarse filesystems) would leave its metadata
// unchanged. Same idea as git's "racily clean" index entries.
constexpr int64_t kRacyWindowNs = 50'000'000;
constexpr int64_t kCoarseRacyWindowNs = 2'000'000'000;

int64_t realtime_ns() noexcept {
  struct timespec t {};
  ::clock_gettime(CLOCK_REALTIME, &t);
  return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + static_cast<int64_t>(t.tv_nsec);
}

bool racy(int64_t started_ns, int64_t ctime_ns) noexcept {
  const int64_t window = ctime_ns % 1'000'000'000 == 0 ? kCoarseRacyWindowNs : kRacyWindowNs;
  return started_ns - ctime_ns < window;
}

struct Hashed {
  std::string digest;
  uint64_t bytes = 0;  // read and hashed
  std::string error;   // empty when the whole file was read
  FileIdentity id;     // of the open file, before reading
  bool cacheable = false;
};

std::string errno_text() { return std::strerror(errno); }

// SHA-256 of one file with large sequential reads; the file's identity is
// taken from the descriptor actually read, before and after reading.
Hashed hash_one(const fs::path& path, const std::function<void(uint64_t)>& on_bytes) {
  Hashed h;
  const int64_t started = realtime_ns();
  Fd fd;
  try {
    fd = open_regular_file(path);
  } catch (const Error& e) {
    h.error = e.kind() == ErrorKind::kNotFound ? "missing" : e.kind() == ErrorKind::kInvalidInput ? "not a regular file"
                                                                                                   : e.what();
    return h;
  }
  struct stat before {};
  if (::fstat(fd.get(), &before) != 0) {
    h.error = "cannot stat: " + errno_text();
    return h;
  }
  h.id = identity_of(before);
  ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_SEQUENTIAL);
  std::unique_ptr<uint8_t[]> buf(new uint8_t[kChunk]);
  Sha256 sha;
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf.get(), kChunk);
    if (n < 0) {
      if (errno == EINTR) continue;
      h.error = "read failed after " + std::to_string(h.bytes) + " bytes: " + errno_text();
      return h;
    }
    if (n == 0) break;
    sha.update({buf.get(), static_cast<size_t>(n)});
    h.bytes += static_cast<uint64_t>(n);
    if (on_bytes) on_bytes(static_cast<uint64_t>(n));
  }
  h.digest = sha.hex_digest();
  struct stat after {};
  h.cacheable = ::fstat(fd.get(), &after) == 0 && identity_of(after) == h.id && h.bytes == h.id.size &&
                !racy(started, h.id.ctime_ns);
  return h;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// Records files hashed moments ago (while downloading them), so the next
// resolution is a cache hit instead of a full re-hash. A file just renamed
// into place is inside the racy window: wait it out (at most 50 ms, once for
// all of them) and record only files whose identity did not move meanwhile.
// Coarse-timestamp filesystems are not waited for.
void record_fresh(VerificationCache& cache, std::string_view scope, const std::vector<FileClaim>& claims,
                  const std::vector<FileIdentity>& ids) {
  int64_t wait_ns = 0;
  for (const auto& id : ids) {
    if (id.ctime_ns % 1'000'000'000 == 0) continue;
    wait_ns = std::max(wait_ns, id.ctime_ns + kRacyWindowNs - realtime_ns());
  }
  if (wait_ns > 0) {
    struct timespec t {static_cast<time_t>(wait_ns / 1'000'000'000), static_cast<long>(wait_ns % 1'000'000'000)};
    ::nanosleep(&t, nullptr);
  }
  for (size_t i = 0; i < claims.size(); ++i) {
    const auto& c = claims[i];
    struct stat now {};
    if (::stat(c.path.c_str(), &now) != 0 || !(identity_of(now) == ids[i]) || racy(realtime_ns(), ids[i].ctime_ns)) continue;
    cache.store(verification_key(scope, c.rel_path, c.sha256, c.bytes, ids[i]), lower(c.sha256), c.bytes);
  }
}

}  // namespace

namespace {

// One file to verify, whichever schema declared it.
struct Claim {
  const std::filesystem::path* path;
  const std::string* rel_path;
  const std::string* sha256;
  uint64_t bytes = 0;
  std::string label;  // how problems name it
};

// The wording of problems: who declared the digest and the size.
struct Declarer {
  std::string digest;  // "manifest says"
  std::string size;    // "manifest says artifact_bytes"
};

// verify_parts' and verify_parts' one body: `scope` keys the
// verification cache (the manifest's SHA-256), `source` the package's.
VerifyReport verify_claims(std::string_view scope, const ArtifactSource* source, const std::vector<Claim>& claims,
                           const Declarer& declarer, const VerifyOptions& options) {
  VerifyReport r;
  const size_t n = claims.size();
  r.artifacts = n;
  r.parts.resize(n);
  std::vector<std::string> problems(n);
  std::optional<VerificationCache> cache;
  if (options.use_cache) cache.emplace(options.cache_dir.value_or(default_verification_cache_dir()));

  // Cache lookups first (a stat and a small read each), then hash the misses.
  std::vector<std::pair<size_t, FileIdentity>> fetched;  // verified while downloading
  std::vector<size_t> todo;
  std::vector<uint64_t> sizes;
  for (size_t i = 0; i < n; ++i) {
    const Claim& p = claims[i];
    r.parts[i].rel_path = *p.rel_path;
    if (!is_sha256_hex(*p.sha256)) {
      problems[i] = p.label + ": declared sha256 \"" + *p.sha256 + "\" is not 64 hex digits";
      continue;
    }
    uint64_t size = p.bytes;
    struct stat st {};
    if (::stat(p.path->c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      size = static_cast<uint64_t>(st.st_size);
      if (source && size == p.bytes && source->verified_while_fetching(*p.rel_path)) {
        // Hashed as it was downloaded, against this manifest, moments ago.
        r.parts[i].verified_while_fetching = true;
        r.parts[i].ok = true;
        fetched.push_back({i, identity_of(st)});
        continue;
      }
      if (cache) {
        const auto key = verification_key(scope, *p.rel_path, *p.sha256, p.bytes, identity_of(st));
        if (cache->lookup(key, *p.sha256, p.bytes)) {
          r.parts[i].cache_hit = true;
          r.parts[i].ok = true;
          ++r.cache_hits;
          continue;
        }
      }
    }
    todo.push_back(i);
    sizes.push_back(size);
  }

  uint64_t total = 0;
  for (const auto s : sizes) total += s;
  std::atomic<uint64_t> done{0};
  std::vector<uint64_t> hashed(todo.size(), 0);
  std::function<void(uint64_t)> on_bytes;
  if (options.on_progress) {
    on_bytes = [&](uint64_t k) { options.on_progress(done.fetch_add(k) + k, total); };
  }
  detail::run_jobs_largest_first(sizes, options.threads, [&](size_t j) {
    const size_t i = todo[j];
    const Claim& p = claims[i];
    try {
      const Hashed h = hash_one(*p.path, on_bytes);
      hashed[j] = h.bytes;
      if (!h.error.empty()) {
        problems[i] = p.label + ": " + h.error;
      } else if (h.bytes != p.bytes) {
        problems[i] = p.label + ": " + std::to_string(h.bytes) + " bytes, " + declarer.size + " " +
                      std::to_string(p.bytes) + " (truncated or replaced?)";
      } else if (!sha256_equal(h.digest, *p.sha256)) {
        problems[i] = p.label + ": SHA-256 is " + h.digest + ", " + declarer.digest + " " + lower(*p.sha256);
      } else {
        r.parts[i].ok = true;
        if (cache && h.cacheable) {
          cache->store(verification_key(scope, *p.rel_path, *p.sha256, p.bytes, h.id), h.digest, p.bytes);
        }
      }
    } catch (const std::exception& e) {
      problems[i] = p.label + ": " + e.what();
    }
  });
  for (const auto b : hashed) r.hashed_bytes += b;
  if (cache && !fetched.empty()) {
    std::vector<FileClaim> fresh;
    std::vector<FileIdentity> ids;
    for (const auto& [i, id] : fetched) {
      const Claim& p = claims[i];
      fresh.push_back({*p.path, *p.rel_path, *p.sha256, p.bytes});
      ids.push_back(id);
    }
    record_fresh(*cache, scope, fresh, ids);
  }
  for (auto& p : problems) {
    if (!p.empty()) r.problems.push_back(std::move(p));
  }
  if (cache) {
    if (auto note = cache->note()) r.notes.push_back(std::move(*note));
  }
  r.verified = r.problems.empty();
  return r;
}

// "<what>: SHA-256 verification failed for N of M artifact(s):" + each
// problem, and for a package with a source the damaged cached files to remove.
[[noreturn]] void throw_failed(const std::string& ref, const VerifyReport& r, bool has_source,
                               const std::vector<std::filesystem::path>& paths) {
  std::string msg = ref + ": SHA-256 verification failed for " + std::to_string(r.problems.size()) + " of " +
                    std::to_string(r.artifacts) + " artifact(s):";
  for (const auto& p : r.problems) msg += "\n  " + p;
  if (has_source) {
    // A damaged copy in a shared cache: say which file to remove so the
    // next resolution downloads it again.
    std::string damaged;
    for (size_t i = 0; i < r.parts.size() && i < paths.size(); ++i) {
      if (!r.parts[i].ok) damaged += " " + paths[i].string();
    }
    if (!damaged.empty()) msg += "\nThe cached copy is damaged; remove it and fetch again:\n  rm" + damaged;
  }
  throw_integrity(msg);
}

}  // namespace

VerifyReport verify_parts(const OpenedPlace& pkg, const std::vector<StagePart>& parts, const VerifyOptions& options) {
  std::vector<const StagePart*> unique;
  {
    std::set<std::string> seen;
    for (const auto& p : parts) {
      if (seen.insert(p.rel_path).second) unique.push_back(&p);
    }
  }
  // Problems name a part as its package does: its path and the manifest, or
  // its artifact id and the catalog.
  // A part brought and checked (provide_parts) is hashed where it was
  // found; any other passes the file rule first (a part that is missing,
  // outside the package or of another size is a problem of the report).
  std::vector<std::filesystem::path> paths(unique.size());
  std::vector<std::string> refused(unique.size());
  for (size_t i = 0; i < unique.size(); ++i) {
    if (!unique[i]->path.empty()) {
      paths[i] = unique[i]->path;
      continue;
    }
    try {
      paths[i] = check_part(pkg, *unique[i]);
    } catch (const Error& e) {
      std::string what = e.what();
      if (what.starts_with(pkg.ref + ": ")) what.erase(0, pkg.ref.size() + 2);
      refused[i] = what;
    }
  }
  std::vector<Claim> claims;
  std::vector<size_t> claim_of;
  for (size_t i = 0; i < unique.size(); ++i) {
    if (!refused[i].empty()) continue;
    const StagePart& p = *unique[i];
    claims.push_back({&paths[i], &p.rel_path, &p.sha256, p.bytes, artifact_label(pkg, p.artifact_id, p.rel_path)});
    claim_of.push_back(i);
  }
  const DeclaredWording wording = declared_wording(pkg);
  VerifyReport hashed =
      verify_claims(pkg.manifest_sha256, pkg.source.get(), claims, Declarer{wording.digest, wording.size}, options);
  VerifyReport r;
  r.artifacts = unique.size();
  r.hashed_bytes = hashed.hashed_bytes;
  r.cache_hits = hashed.cache_hits;
  r.notes = std::move(hashed.notes);
  r.parts.resize(unique.size());
  for (size_t k = 0; k < claim_of.size(); ++k) r.parts[claim_of[k]] = hashed.parts[k];
  for (size_t i = 0; i < unique.size(); ++i) {
    const StagePart& p = *unique[i];
    r.parts[i].rel_path = p.rel_path;
    r.parts[i].artifact_id = p.artifact_id;
    r.parts[i].layer_index = p.layer_index;
    r.parts[i].role = p.role.value_or(PartRole::kMetadata);
    if (!refused[i].empty()) r.problems.push_back(refused[i]);
  }
  for (auto& p : hashed.problems) r.problems.push_back(std::move(p));
  r.verified = r.problems.empty();
  return r;
}

VerifyReport verify_stage(const OpenedPlace& pkg, const StageSelection& stage, const VerifyOptions& options) {
  // A part the reader hashed when it built the catalog (a schema 2 carrier)
  // is not hashed again.
  std::vector<StagePart> parts;
  for (const auto& p : stage.parts) {
    if (!p.hashed_on_read) parts.push_back(p);
  }
  return verify_parts(pkg, parts, options);
}

bool verify_required(const OpenedPlace& pkg) {
  if (pkg.always_verify) return true;
  return env::verify_package_sha();
}

std::optional<VerifyReport> verify_if_required(const OpenedPlace& pkg, const std::vector<StagePart>& parts,
                                               const VerifyOptions& options) {
  if (!verify_required(pkg)) return std::nullopt;
  auto r = verify_parts(pkg, parts, options);
  if (!r.verified) {
    std::vector<std::filesystem::path> paths;
    std::set<std::string> seen;
    for (const auto& p : parts) {
      if (!seen.insert(p.rel_path).second) continue;
      std::error_code ec;
      paths.push_back(p.path.empty() ? std::filesystem::weakly_canonical(pkg.root / p.rel_path, ec) : p.path);
    }
    throw_failed(pkg.ref, r, pkg.source != nullptr, paths);
  }
  return r;
}

std::optional<VerifyReport> verify_catalog_reads(const OpenedCatalog& pkg, const VerifyOptions& options) {
  std::vector<StagePart> read;
  for (auto& p : all_parts(pkg.catalog)) {
    const auto& a = pkg.catalog.artifacts.at(pkg.catalog.artifact_index.at(p.artifact_id));
    if (a.read_for_catalog && !a.hashed_on_read) read.push_back(std::move(p));
  }
  if (read.empty()) return std::nullopt;
  provide_parts(pkg, read);  // on disk already: the reader read them
  return verify_if_required(pkg, read, options);
}

CheckedStage open_checked_stage(const OpenedPackage& opened, const StageChoice& choice) {
  CheckedStage c{opened.catalog(catalog_need(choice)), {}, {}, std::nullopt, 0};
  c.stage = choose_stage(c.pkg, choice);
  c.parts = c.stage.parts_with_projector();
  provide_parts(c.pkg, c.parts);
  c.verified = verify_if_required(c.pkg, c.parts);
  for (const auto& p : c.parts) c.total_bytes += p.bytes;
  return c;
}

std::vector<bool> cached_verifications(std::string_view scope, const std::vector<FileClaim>& claims,
                                       const VerifyOptions& options) {
  std::vector<bool> out(claims.size(), false);
  if (!options.use_cache) return out;
  VerificationCache cache(options.cache_dir.value_or(default_verification_cache_dir()));
  for (size_t i = 0; i < claims.size(); ++i) {
    const auto& c = claims[i];
    struct stat st {};
    if (!is_sha256_hex(c.sha256) || ::stat(c.path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
        static_cast<uint64_t>(st.st_size) != c.bytes) {
      continue;
    }
    out[i] = cache.lookup(verification_key(scope, c.rel_path, c.sha256, c.bytes, identity_of(st)), c.sha256, c.bytes);
  }
  return out;
}

void record_verifications(std::string_view scope, const std::vector<FileClaim>& claims, const VerifyOptions& options) {
  if (!options.use_cache || claims.empty()) return;
  VerificationCache cache(options.cache_dir.value_or(default_verification_cache_dir()));
  std::vector<FileClaim> keep;
  std::vector<FileIdentity> ids;
  for (const auto& c : claims) {
    struct stat st {};
    if (!is_sha256_hex(c.sha256) || ::stat(c.path.c_str(), &st) != 0 || static_cast<uint64_t>(st.st_size) != c.bytes) {
      continue;
    }
    keep.push_back(c);
    ids.push_back(identity_of(st));
  }
  record_fresh(cache, scope, keep, ids);
}

namespace detail {

std::string sha256_file_cached(std::string_view scope, const fs::path& path, std::string_view rel_path,
                               std::string_view declared_sha256, uint64_t declared_bytes) {
  VerificationCache cache(default_verification_cache_dir());
  struct stat st {};
  if (is_sha256_hex(declared_sha256) && ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
      static_cast<uint64_t>(st.st_size) == declared_bytes) {
    const auto key = verification_key(scope, rel_path, declared_sha256, declared_bytes, identity_of(st));
    if (cache.lookup(key, declared_sha256, declared_bytes)) return lower(declared_sha256);
  }
  const Hashed h = hash_one(path, nullptr);
  if (!h.error.empty()) return sha256_file(path);  // its error, thrown
  if (h.digest == lower(declared_sha256) && h.bytes == declared_bytes && h.cacheable) {
    cache.store(verification_key(scope, rel_path, declared_sha256, declared_bytes, h.id), h.digest, h.bytes);
  }
  return h.digest;
}

}  // namespace detail
}  // namespace skippy
