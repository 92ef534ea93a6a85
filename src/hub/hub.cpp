#include "skippy/hub.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "hub/http.h"
#include "hub/hub_status.h"
#include "hub/hub_stream.h"
#include "hub/ranged_fetch.h"
#include "hub/retry.h"
#include "util/env.h"
#include "skippy/error.h"
#include "skippy/source.h"
#include "util/sha256.h"
#include "source/blob_writer.h"
#include "util/parallel.h"

namespace skippy {
namespace {

using detail::follow_location;
using detail::HttpRequest;
using detail::HttpResponse;
using detail::url_encode;
using detail::parse_u64;
using detail::retry_status;
constexpr unsigned kMaxRedirects = 5;

// ": <the server's reason>" (an S3 <Message>, the body's first line...), or "".
using detail::reason_tail;

// What a HEAD on a resolve URL told us about one file.
struct FileMeta {
  std::string commit;
  std::string etag;
  uint64_t size = 0;
  std::string download_url;   // the storage URL for LFS files, else the resolve URL
  bool token_allowed = true;  // false when download_url is on another host
  std::optional<detail::XetFileRef> xet;  // a Xet-backed file (X-Xet-Hash)
};

// One repository on the Hub: the protocol (HEAD, GET with Range, the
// listing API, errors) for one repo id.
class HubRepo {
 public:
  HubRepo(const HubConfig& c, std::string r) : cfg(c), repo(std::move(r)) {}

  const HubConfig& cfg;
  const std::string repo;
  std::mutex mu;
  std::map<std::string, FileMeta> heads;  // "<commit>/<path>" -> HEAD answer, reused once

  std::string resolve_url(const std::string& rev, const std::string& path) const {
    return cfg.endpoint + "/" + repo + "/resolve/" + url_encode(rev, false) + "/" + url_encode(path, true);
  }

  std::vector<std::string> headers(bool with_token) const {
    std::vector<std::string> h = {"Accept-Encoding: identity"};
    if (with_token && cfg.token) h.push_back("Authorization: Bearer " + *cfg.token);
    return h;
  }

  detail::RetryPolicy policy() const { return {cfg.max_attempts, cfg.backoff_ms}; }

  [[noreturn]] void fail_status(const HttpResponse& r, const std::string& url, const std::string& rev,
                                const std::string& path) const {
    const auto code = detail::hub_error_code(r);
    const std::string tail = detail::reason_tail(r);
    const std::string where = "hf://" + repo;
    const ErrorKind kind = detail::hub_error_code_kind(code, r.status);
    if (code == detail::HubErrorCode::kGatedRepo) {
      detail::throw_hub_error(r, kind, where + " is a gated repository: " +
                    (cfg.token ? std::string("the token in use (HF_TOKEN) has not been granted access; request access at ")
                               : std::string("accept its conditions at ")) +
                    cfg.endpoint + "/" + repo + (cfg.token ? "" : " and set HF_TOKEN to a token of that account"));
    }
    if (code == detail::HubErrorCode::kRepoNotFound) {
      detail::throw_hub_error(r, kind, where + ": repository not found on " + cfg.endpoint +
                      (cfg.token ? " (or the token in use cannot see it)" : " (if it is private, set HF_TOKEN)"));
    }
    if (code == detail::HubErrorCode::kRevisionNotFound) {
      detail::throw_hub_error(r, kind, where + ": revision \"" + rev + "\" not found (use a commit, branch or tag)");
    }
    if (code == detail::HubErrorCode::kEntryNotFound) {
      detail::throw_hub_error(r, kind, where + "@" + rev + ": no file \"" + path + "\"" +
                      (path == "model-package.json" ? " (is this a layer package repository?)" : ""));
    }
    if (r.status == 401) {
      detail::throw_hub_status(r, where + ": authentication required (HTTP 401)" +
                    std::string(cfg.token ? "; the token in use (HF_TOKEN) was refused" : "; set HF_TOKEN") + tail);
    }
    if (r.status == 403) detail::throw_hub_status(r, where + ": access denied (HTTP 403)" + tail);
    if (r.status == 404) detail::throw_hub_status(r, where + "@" + rev + ": \"" + path + "\" not found (HTTP 404)");
    detail::throw_hub_status(r, where + ": HTTP " + std::to_string(r.status) + " from " + url + tail);
  }

  // One request with retries for transport errors, 429 and 5xx.
  HttpResponse perform(const HttpRequest& req, const std::string& what) const {
    return detail::perform_with_retries(req, policy(), what,
                                        "is " + cfg.endpoint + " reachable? HF_HUB_OFFLINE=1 uses the cache only");
  }

  // HEAD on the resolve URL, following same-host redirects (renamed repos)
  // and stopping at a redirect to another host (LFS storage).
  FileMeta head(const std::string& rev, const std::string& path) const {
    std::string url = resolve_url(rev, path);
    for (unsigned hops = 0; hops < kMaxRedirects; ++hops) {
      HttpRequest req;
      req.method = "HEAD";
      req.url = url;
      req.headers = headers(true);
      const auto r = perform(req, "hf://" + repo + "@" + rev + ": " + path);
      if (r.status >= 300 && r.status < 400) {
        auto loc = r.header("location");
        if (!loc || loc->empty()) throw_invalid("hf://" + repo + ": redirect without a Location for " + path);
        const auto next = follow_location(url, *loc);
        if (next.same_origin) {
          if (r.header("x-linked-etag")) {
            // An LFS answer served from the Hub's own host: download there,
            // with the token only when that is a Hub endpoint (storage may
            // share the Hub's origin, and refuses a signed URL with a token).
            return meta_from(r, rev, path, next.url, detail::is_hub_api_url(cfg.endpoint, next.url));
          }
          url = next.url;
          continue;
        }
        return meta_from(r, rev, path, next.url, false);
      }
      if (r.status != 200) fail_status(r, url, rev, path);
      return meta_from(r, rev, path, url, true);
    }
    throw_invalid("hf://" + repo + ": too many redirects resolving " + path);
  }

  FileMeta meta_from(const HttpResponse& r, const std::string& rev, const std::string& path, const std::string& url,
                     bool token_allowed) const {
    FileMeta m;
    m.commit = r.header("x-repo-commit").value_or("");
    if (!is_commit_hash(m.commit)) {
      throw_invalid("hf://" + repo + "@" + rev + ": the Hub's answer for " + path +
                    " has no usable X-Repo-Commit header (is HF_ENDPOINT a Hugging Face Hub?)");
    }
    const std::string where = "hf://" + repo + "@" + rev + ": the Hub's answer for " + path;
    auto etag = r.header("x-linked-etag");
    auto size = parse_u64(r.header("x-linked-size"));
    if (!token_allowed && (!etag || !size)) {
      // A redirect to storage describes the file only through X-Linked-*;
      // the redirect's own ETag and Content-Length are not the file's.
      throw_invalid(where + " redirects to another host without X-Linked-Etag and X-Linked-Size");
    }
    if (!etag) etag = r.header("etag");
    if (!etag) throw_invalid(where + " has no ETag");
    m.etag = normalize_etag(*etag);
    if (!is_blob_etag(m.etag)) {
      throw_invalid(where + " has an unusable ETag \"" + m.etag + "\" (expected a lowercase SHA-256 or git blob SHA-1)");
    }
    if (!size) size = parse_u64(r.header("content-length"));
    if (!size) throw_invalid(where + " has no size");
    m.size = *size;
    m.download_url = url;
    m.token_allowed = token_allowed;
    m.xet = detail::xet_file_ref(r, cfg.endpoint, repo, m.commit);
    return m;
  }

  FileMeta head_cached(const std::string& commit, const std::string& path) {
    {
      std::lock_guard g(mu);
      auto it = heads.find(commit + "/" + path);
      if (it != heads.end()) {
        FileMeta m = it->second;
        heads.erase(it);
        return m;
      }
    }
    return head(commit, path);
  }

  // GETs meta.download_url into `w` from w.have() on, until it is complete:
  // resumes with Range, starts over when the server ignores it, follows
  // redirects (dropping the token across hosts), refreshes an expired
  // signed URL, retries with backoff.
  void transfer(detail::HttpConnection& conn, detail::BlobWriter& w, FileMeta& meta, const std::string& commit,
                const std::string& path) const {
    const std::string& what = w.spec().what;
    std::string failure;
    unsigned redirects = 0;
    uint64_t have_at_refresh = UINT64_MAX;  // a signed URL may be refreshed again once bytes were gained
    auto pause = [&](unsigned attempt, const HttpResponse* r) {
      if (attempt + 1 < cfg.max_attempts) detail::pause_before_retry(policy(), attempt, r, what, failure);
    };
    for (unsigned attempt = 0; !w.complete(); ++attempt) {
      if (attempt >= cfg.max_attempts) {
        throw Error(ErrorKind::kTransport, what + ": download failed after " + std::to_string(cfg.max_attempts) +
                                               " attempts: " + failure + " (" + std::to_string(w.have()) + " of " +
                                               std::to_string(meta.size) + " bytes kept; the next run resumes)");
      }
      HttpRequest req;
      req.url = meta.download_url;
      req.headers = headers(meta.token_allowed);
      req.min_rate_bytes_per_sec = cfg.min_rate_bytes_per_sec;
      req.min_rate_secs = cfg.min_rate_secs;
      if (w.have() > 0) {
        req.headers.push_back("Range: bytes=" + std::to_string(w.have()) + "-");
        w.mark_resumed();
      }
      std::string bad_range;
      std::optional<Error> sink_error;
      req.on_start = [&](long status, const std::map<std::string, std::string>& h) {
        if (status == 200 && w.have() > 0) {  // the server ignored Range: start over
          w.restart();
        } else if (status == 206) {
          const auto it = h.find("content-range");
          const std::string expect = "bytes " + std::to_string(w.have()) + "-";
          if (it == h.end() || !it->second.starts_with(expect)) {
            bad_range = "the server answered a different range (" + (it == h.end() ? std::string("none") : it->second) + ")";
            return false;
          }
        }
        return true;
      };
      req.sink = [&](std::span<const uint8_t> data) {
        try {
          w.append(data);
          return true;
        } catch (const Error& e) {
          sink_error = e;
          return false;
        }
      };
      auto res = conn.perform(req);
      if (res.error) {
        if (!bad_range.empty()) {  // our partial file is useless to this server: start over
          failure = bad_range;
          w.restart();
          continue;
        }
        if (sink_error) throw *sink_error;  // disk full, more bytes than declared
        failure = res.error->message;
        if (!res.error->retryable) throw Error(ErrorKind::kTransport, what + ": " + failure);
        pause(attempt, nullptr);
        continue;
      }
      const auto& r = *res.response;
      if (r.status == 200 || r.status == 206) {
        if (!w.complete()) {  // the connection closed early without an error
          failure = "the transfer ended after " + std::to_string(w.have()) + " of " + std::to_string(meta.size) + " bytes";
          pause(attempt, nullptr);
        }
        continue;
      }
      if (r.status == 416) {  // our partial file is not a prefix the server recognises
        w.restart();
        failure = "HTTP 416 for a resumed range";
        continue;
      }
      if (r.status == 301 || r.status == 302 || r.status == 303 || r.status == 307 || r.status == 308) {
        // The Hub redirects small files to /api/resolve-cache/... on its own
        // host (token kept) and LFS files to storage (token dropped).
        const auto loc = r.header("location");
        if (!loc || loc->empty() || ++redirects > kMaxRedirects) {
          throw_invalid(what + ": " + (loc ? "too many redirects" : "a redirect without a Location") + " from " +
                        meta.download_url);
        }
        const auto next = follow_location(meta.download_url, *loc);
        meta.token_allowed = meta.token_allowed && next.same_origin && detail::is_hub_api_url(cfg.endpoint, next.url);
        meta.download_url = next.url;
        --attempt;  // a redirect is not a failed attempt
        continue;
      }
      if (detail::storage_url_may_have_expired(r.status) && !meta.token_allowed && w.have() != have_at_refresh) {
        // A signed storage URL that expired (or was refused): ask the Hub
        // for a fresh one, which must describe the same bytes.
        have_at_refresh = w.have();
        failure = "storage answered HTTP " + std::to_string(r.status) + reason_tail(r);
        const FileMeta fresh = head(commit, path);
        if (fresh.etag != meta.etag || fresh.size != meta.size || fresh.commit != meta.commit) {
          throw_integrity(what + ": the Hub changed its answer during the download (etag " + meta.etag + " -> " +
                          fresh.etag + ", " + std::to_string(meta.size) + " -> " + std::to_string(fresh.size) + " bytes)");
        }
        meta.download_url = fresh.download_url;
        meta.token_allowed = fresh.token_allowed;
        continue;
      }
      if (retry_status(r.status)) {
        failure = "HTTP " + std::to_string(r.status) + reason_tail(r);
        pause(attempt, &r);
        continue;
      }
      if (!meta.token_allowed) {
        throw detail::storage_refusal(r, what, meta.download_url);
      }
      fail_status(r, meta.download_url, commit, path);
    }
  }

  // One file: what the Hub says about it must agree with the request; then
  // the blob writer receives it over the fetch's pooled connections: in
  // ranges over several at once when it is large, else in one stream.
  RemoteOutcome fetch_one(detail::ConnectionPool& pool, const HfRepoCache& cache, const std::string& commit,
                          const RemoteFile& want, const std::function<void(uint64_t)>& on_bytes,
                          const std::function<void(const std::string&)>& on_note) {
    const std::string what = "hf://" + repo + "@" + commit + ": " + want.path;
    FileMeta meta = checked_head(commit, want, what);
    detail::BlobSpec spec;
    spec.etag = meta.etag;
    spec.size = meta.size;
    spec.sha256 = want.sha256;
    spec.declared_by = want.declared_by;
    spec.what = what;
    spec.on_note = on_note;
    auto one_stream = [&](detail::BlobWriter& w) {
      pool.run([&](detail::HttpConnection& conn) { transfer(conn, w, meta, commit, want.path); });
    };
    const unsigned connections = pool.size();
    const uint64_t min_range = std::max<uint64_t>(cfg.min_range_bytes, 1);
    if (!meta.xet && (connections < 2 || meta.size < 2 * min_range)) {
      const auto got = detail::receive_blob(cache, commit, want.path, spec, on_bytes, one_stream);
      return RemoteOutcome{true, got.received, got.received && got.verified, std::nullopt};
    }
    const auto o = ranged_options(pool, meta, commit, want.path, what,
                                  detail::range_size_for(meta.size, connections, min_range));
    const auto got = detail::receive_blob_ranged(
        cache, commit, want.path, spec, on_bytes,
        [&](detail::RangedBlobWriter& w) {
          return detail::fetch_ranges(w, {meta.download_url, meta.token_allowed}, o);
        },
        one_stream);
    return RemoteOutcome{true, got.received, got.received && got.verified, std::nullopt};
  }

  // The ranges target.missing() lists of one file, over `pool` in ranges of
  // range_bytes (a streamed write-package's source). The storage must
  // honour Range.
  void fetch_into(detail::ConnectionPool& pool, const std::string& commit, const RemoteFile& want,
                  detail::RangeTarget& target, uint64_t range_bytes) {
    const std::string& what = target.what();
    const FileMeta meta = checked_head(commit, want, what);
    if (meta.size != target.size()) {
      throw_integrity(what + ": the Hub serves " + std::to_string(meta.size) + " bytes, the listing said " +
                      std::to_string(target.size()));
    }
    const auto o = ranged_options(pool, meta, commit, want.path, what, range_bytes);
    if (!detail::fetch_ranges(target, {meta.download_url, meta.token_allowed}, o)) {
      throw Error(ErrorKind::kTransport, what + ": the storage host " + detail::url_origin(meta.download_url) +
                                             " ignores Range requests, which streaming needs (run without --stream)");
    }
  }

  // The options fetch_ranges needs for one file the Hub described as `meta`.
  detail::RangedFetchOptions ranged_options(detail::ConnectionPool& pool, const FileMeta& meta, const std::string& commit,
                                            const std::string& path, const std::string& what, uint64_t range_bytes) {
    detail::RangedFetchOptions o;
    o.pool = &pool;
    o.connections = pool.size();
    o.range_bytes = range_bytes;
    o.retry = policy();
    o.min_rate_bytes_per_sec = cfg.min_rate_bytes_per_sec;
    o.min_rate_secs = cfg.min_rate_secs;
    o.headers = headers(false);
    if (cfg.token) o.token_header = "Authorization: Bearer " + *cfg.token;
    o.refresh = [this, meta, commit, path, what]() {
      const FileMeta fresh = head(commit, path);
      if (fresh.etag != meta.etag || fresh.size != meta.size || fresh.commit != meta.commit) {
        throw_integrity(what + ": the Hub changed its answer during the download (etag " + meta.etag + " -> " +
                        fresh.etag + ", " + std::to_string(meta.size) + " -> " + std::to_string(fresh.size) + " bytes)");
      }
      return detail::DownloadLocation{fresh.download_url, fresh.token_allowed};
    };
    o.refused = [this, commit, path](const HttpResponse& r, const std::string& url) { fail_status(r, url, commit, path); };
    o.xet = detail::make_xet_source(meta.xet, cfg, meta.size);
    return o;
  }

  // HEAD for one file, which must agree with what `want` declares.
  FileMeta checked_head(const std::string& commit, const RemoteFile& want, const std::string& what) {
    FileMeta meta = head_cached(commit, want.path);
    if (meta.commit != commit) {
      throw_invalid(what + ": the Hub answered for commit " + meta.commit + " (asked for " + commit + ")");
    }
    if (want.max_size && meta.size > *want.max_size) {
      // Before a byte: a file read whole into memory has a cap.
      throw_invalid(what + ": the Hub advertises " + std::to_string(meta.size) + " bytes, over the " +
                    std::to_string(*want.max_size) + "-byte cap for this file (refused before downloading it)");
    }
    if (want.size && meta.size != *want.size) {
      throw_integrity(what + ": the Hub serves " + std::to_string(meta.size) + " bytes, " + want.declared_by + " says " +
                      std::to_string(*want.size));
    }
    if (want.sha256 && meta.etag.size() == 64 && !sha256_equal(meta.etag, *want.sha256)) {
      throw_integrity(what + ": the Hub serves SHA-256 " + meta.etag + ", " + want.declared_by + " says " + *want.sha256);
    }
    return meta;
  }

  // GET /api/models/{repo}/refs: whether `revision` is one of its tags
  // (nullopt when the Hub does not say).
  std::optional<bool> is_tag(const std::string& revision) {
    HttpRequest req;
    req.url = cfg.endpoint + "/api/models/" + repo + "/refs";
    req.headers = headers(true);
    const auto r = perform(req, "hf://" + repo + ": its tags and branches");
    if (r.status != 200) return std::nullopt;
    const auto j = nlohmann::json::parse(r.body, nullptr, false);
    if (!j.is_object() || !j.contains("tags") || !j["tags"].is_array()) return std::nullopt;
    const std::string name = revision.starts_with("refs/tags/") ? revision.substr(10) : revision;
    for (const auto& t : j["tags"]) {
      if (t.is_object() && t.contains("name") && (t["name"] == name || t["name"] == "refs/tags/" + name)) return true;
    }
    return false;
  }

  // GET /api/models/{repo}/revision/{revision}?blobs=true.
  RemoteListing list(const std::string& revision) {
    const std::string url = cfg.endpoint + "/api/models/" + repo + "/revision/" + url_encode(revision, false) + "?blobs=true";
    HttpRequest req;
    req.url = url;
    req.headers = headers(true);
    req.max_body = size_t{64} << 20;
    const std::string what = "hf://" + repo + "@" + revision + ": repository listing";
    auto r = perform(req, what);
    for (unsigned hops = 0; r.status >= 300 && r.status < 400 && hops < kMaxRedirects; ++hops) {
      // A renamed repository answers with a redirect on the Hub's own host.
      const auto loc = r.header("location");
      if (!loc) break;
      const auto next = follow_location(req.url, *loc);
      if (!next.same_origin) break;  // never take the token elsewhere
      req.url = next.url;
      r = perform(req, what);
    }
    if (r.status != 200) fail_status(r, req.url, revision, "");
    RemoteListing info;
    try {
      const auto j = nlohmann::json::parse(r.body);
      info.commit = j.at("sha").get<std::string>();
      for (const auto& s : j.at("siblings")) {
        RemoteListing::File f;
        f.path = s.at("rfilename").get<std::string>();
        if (s.contains("size") && s["size"].is_number_unsigned()) f.size = s["size"].get<uint64_t>();
        if (s.contains("lfs") && s["lfs"].is_object() && s["lfs"].contains("sha256")) {
          f.sha256 = s["lfs"]["sha256"].get<std::string>();
          if (s["lfs"].contains("size") && s["lfs"]["size"].is_number_unsigned()) f.size = s["lfs"]["size"].get<uint64_t>();
        }
        info.files.push_back(std::move(f));
      }
    } catch (const std::exception& e) {
      throw_invalid("hf://" + repo + "@" + revision + ": unreadable repository listing from " + url + ": " + e.what());
    }
    if (!is_commit_hash(info.commit)) throw_invalid("hf://" + repo + ": the repository listing has no commit id");
    return info;
  }
};

class HubRemote final : public Remote {
 public:
  explicit HubRemote(HubConfig cfg) : cfg_(std::move(cfg)) {}

  std::string name() const override { return "hub"; }

  std::optional<std::string> resolve_commit(const HfRepoCache& cache, const std::string& revision,
                                            const std::string& probe_path) override {
    auto& repo = repo_for(cache);
    FileMeta m = repo.head(revision, probe_path);
    // Download from the commit, not the moving name: the bytes must be the
    // ones this commit holds even if the branch moves in between.
    if (m.token_allowed) m.download_url = repo.resolve_url(m.commit, probe_path);
    const std::string commit = m.commit;
    std::lock_guard g(repo.mu);
    repo.heads[commit + "/" + probe_path] = std::move(m);
    return commit;
  }

  std::optional<RemoteListing> list(const HfRepoCache& cache, const std::string& revision) override {
    return repo_for(cache).list(revision);
  }

  std::optional<bool> is_tag(const HfRepoCache& cache, const std::string& revision) override {
    return repo_for(cache).is_tag(revision);
  }

  std::vector<RemoteOutcome> fetch(const HfRepoCache& cache, const std::string& commit, const std::vector<RemoteFile>& files,
                                   const std::function<void(uint64_t)>& on_bytes) override {
    auto& repo = repo_for(cache);
    std::vector<RemoteOutcome> out(files.size());
    std::vector<uint64_t> sizes;
    for (const auto& f : files) sizes.push_back(f.size.value_or(0));
    // One pool of connections for every file of this fetch: a large file
    // spreads its ranges over all of them, small files take one each.
    const unsigned connections = std::max(1u, cfg_.connections);
    detail::ConnectionPool pool(static_cast<unsigned>(std::min<size_t>(connections, std::max<uint64_t>(
                                                                                         1, total_ranges(sizes)))));
    auto on_note = [this](const std::string& n) {
      std::lock_guard g(mu_);
      notes_.push_back(n);
    };
    // Every file is tried even when another fails: what arrives stays in
    // the cache for the next run. Enough files at once that while one
    // file's last ranges finish, the next ones' requests are queued.
    const unsigned files_at_once = std::max(cfg_.parallel_downloads, pool.size());
    detail::run_jobs_largest_first(sizes, files_at_once, [&](size_t i) {
      try {
        out[i] = repo.fetch_one(pool, cache, commit, files[i], on_bytes, on_note);
      } catch (const Error& e) {
        out[i] = RemoteOutcome{false, false, false, e};
      }
    });
    return out;
  }

  // One ranged request for the file's first bytes, after the HEAD that
  // checks its size and SHA-256 (the etag) against what the caller expects.
  std::optional<std::vector<uint8_t>> read_head(const HfRepoCache& cache, const std::string& commit,
                                                const RemoteFile& file, uint64_t length) override {
    auto& repo = repo_for(cache);
    const std::string what = "hf://" + cache.repo_id() + "@" + commit + ": " + file.path;
    const FileMeta meta = repo.checked_head(commit, file, what);
    std::vector<uint8_t> head(static_cast<size_t>(std::min(length, meta.size)));
    if (head.empty()) return head;
    detail::PrefixTarget target(what, meta.size, 0, head);
    detail::ConnectionPool pool(1);
    const auto o = repo.ranged_options(pool, meta, commit, file.path, what, head.size());
    if (!detail::fetch_ranges(target, {meta.download_url, meta.token_allowed}, o)) return std::nullopt;  // no Range here
    if (!target.complete()) throw Error(ErrorKind::kTransport, what + ": the header's bytes did not all arrive");
    return head;
  }

  std::vector<std::string> take_notes() override {
    std::lock_guard g(mu_);
    return std::exchange(notes_, {});
  }

 private:
  HubRepo& repo_for(const HfRepoCache& cache) {
    std::lock_guard g(mu_);
    auto& r = repos_[cache.repo_id()];
    if (!r) r = std::make_unique<HubRepo>(cfg_, cache.repo_id());
    return *r;
  }

  // How many requests the files could use at once (sizes unknown count as one).
  uint64_t total_ranges(const std::vector<uint64_t>& sizes) const {
    const uint64_t min_range = std::max<uint64_t>(cfg_.min_range_bytes, 1);
    uint64_t n = 0;
    for (const uint64_t s : sizes) n += std::max<uint64_t>(1, s / min_range);
    return n;
  }

  HubConfig cfg_;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<HubRepo>> repos_;
  std::vector<std::string> notes_;
};

}  // namespace

namespace detail {

RemoteListing list_hub_repo(const HubConfig& config, const std::string& repo, const std::string& revision) {
  HubRepo r(config, repo);
  return r.list(revision);
}

void fetch_hub_ranges(const HubConfig& config, const std::string& repo, const std::string& commit, const RemoteFile& want,
                      RangeTarget& target, ConnectionPool& pool, uint64_t range_bytes) {
  HubRepo r(config, repo);
  r.fetch_into(pool, commit, want, target, range_bytes);
}

}  // namespace detail

HubConfig HubConfig::from_env() {
  HubConfig c;
  c.endpoint = env::hf_endpoint();
  c.token = env::hf_token();
  c.backoff_ms = env::hf_backoff_ms();
  c.max_attempts = env::hf_max_attempts();
  c.parallel_downloads = env::hf_parallel_downloads();
  c.connections = env::hf_connections();
  c.min_range_bytes = env::hf_min_range_bytes();
  c.min_rate_bytes_per_sec = env::hf_min_rate();
  c.min_rate_secs = env::hf_min_rate_secs();
  return c;
}

std::shared_ptr<Remote> make_hub_remote(HubConfig config) { return std::make_shared<HubRemote>(std::move(config)); }

Sources default_sources() {
  Sources s;
  s.hf_cache = env::hf_hub_cache_dir();
  s.offline = env::hf_hub_offline();
  if (!s.offline) s.remotes.push_back(make_hub_remote(HubConfig::from_env()));
  s.trusted_signers = env::trusted_signers();
  return s;
}

Sources default_sources(const HubConfig& hub) {
  Sources s;
  s.hf_cache = env::hf_hub_cache_dir();
  s.offline = env::hf_hub_offline();
  if (!s.offline) s.remotes.push_back(make_hub_remote(hub));
  s.trusted_signers = env::trusted_signers();
  return s;
}

}  // namespace skippy
