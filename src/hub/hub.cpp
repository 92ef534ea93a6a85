#include "skippy/hub.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "http.h"
#include "skippy/error.h"
#include "skippy/file.h"
#include "skippy/hf_ref.h"
#include "skippy/manifest.h"
#include "skippy/sha256.h"
#include "util/file_lock.h"
#include "util/parallel.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using detail::HttpRequest;
using detail::HttpResponse;

constexpr unsigned kMaxBackoffMs = 30'000;
constexpr uint64_t kMaxRetryAfterMs = 300'000;  // the Hub's 429s may ask for minutes
constexpr size_t kHashChunk = size_t{1} << 20;
constexpr unsigned kMaxRedirects = 5;
constexpr uint64_t kWritebackChunk = uint64_t{4} << 20;

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

bool env_truthy(const char* name) {
  auto v = env(name);
  if (!v) return false;
  std::string s = *v;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return s == "1" || s == "ON" || s == "YES" || s == "TRUE";
}

unsigned env_unsigned(const char* name, unsigned fallback) {
  auto v = env(name);
  if (!v) return fallback;
  unsigned out = 0;
  const auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  return ec == std::errc() && p == v->data() + v->size() ? out : fallback;
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

std::optional<uint64_t> parse_u64(const std::optional<std::string>& s) {
  if (!s) return std::nullopt;
  uint64_t v = 0;
  const auto [p, ec] = std::from_chars(s->data(), s->data() + s->size(), v);
  if (ec != std::errc() || p != s->data() + s->size()) return std::nullopt;
  return v;
}

// " (<Message>)" from an S3-style XML error body, if there is one.
std::string storage_message(const HttpResponse& r) {
  const auto a = r.body.find("<Message>");
  const auto b = r.body.find("</Message>");
  if (a == std::string::npos || b == std::string::npos || b < a) return {};
  return " (" + r.body.substr(a + 9, std::min<size_t>(b - a - 9, 200)) + ")";
}

void sleep_ms(unsigned ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

bool retry_status(long status) { return status == 429 || (status >= 500 && status <= 599); }

// What a HEAD on a resolve URL told us about one file.
struct FileMeta {
  std::string commit;
  std::string etag;
  uint64_t size = 0;
  std::string download_url;   // the storage URL for LFS files, else the resolve URL
  bool token_allowed = true;  // false when download_url is on another host
};

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

HubConfig HubConfig::from_env() {
  HubConfig c;
  if (auto e = env("HF_ENDPOINT")) c.endpoint = *e;
  while (c.endpoint.ends_with('/')) c.endpoint.pop_back();
  if (!(c.endpoint.starts_with("https://") || c.endpoint.starts_with("http://")) || detail::url_origin(c.endpoint).size() < 9) {
    // Without a scheme curl would fall back to plain http (token in clear).
    throw Error(ErrorKind::kUsage, "HF_ENDPOINT=\"" + c.endpoint + "\" is not an http:// or https:// URL");
  }
  if (auto t = env("HF_TOKEN")) {
    c.token = trim(*t);
  } else if (auto t2 = env("HUGGING_FACE_HUB_TOKEN")) {
    c.token = trim(*t2);
  } else {
    fs::path file;
    if (auto p = env("HF_TOKEN_PATH")) {
      file = expand_user(*p);
    } else if (auto h = env("HF_HOME")) {
      file = expand_user(*h) / "token";
    } else if (auto x = env("XDG_CACHE_HOME"); x && fs::path(*x).is_absolute()) {
      file = fs::path(*x) / "huggingface" / "token";
    } else if (auto home = env("HOME")) {
      file = fs::path(*home) / ".cache" / "huggingface" / "token";
    }
    std::error_code ec;
    if (!file.empty() && fs::is_regular_file(file, ec)) {
      try {
        const auto t3 = trim(read_small_file(file, 4096));
        if (!t3.empty()) c.token = t3;
      } catch (const Error&) {
        // An unreadable token file is the same as none: public repos still work.
      }
    }
  }
  if (c.token && c.token->empty()) c.token.reset();
  c.offline = env_truthy("HF_HUB_OFFLINE");
  c.cache_dir = hf_hub_cache_dir();
  c.backoff_ms = env_unsigned("SKIPPY_HF_BACKOFF_MS", c.backoff_ms);
  c.max_attempts = std::max(1u, env_unsigned("SKIPPY_HF_MAX_ATTEMPTS", c.max_attempts));
  c.parallel_downloads = std::max(1u, env_unsigned("SKIPPY_HF_DOWNLOADS", c.parallel_downloads));
  return c;
}

struct HubRepo::Impl {
  HubConfig cfg;
  std::string repo;
  HfRepoCache cache;
  std::mutex mu;
  std::map<std::string, FileMeta> heads;  // "<commit>/<path>" -> HEAD answer, reused once

  Impl(HubConfig c, std::string r) : cfg(std::move(c)), repo(std::move(r)), cache(cfg.cache_dir, repo) {}

  std::string resolve_url(const std::string& rev, const std::string& path) const {
    return cfg.endpoint + "/" + repo + "/resolve/" + detail::url_encode(rev, false) + "/" + detail::url_encode(path, true);
  }

  std::vector<std::string> headers(bool with_token) const {
    std::vector<std::string> h = {"Accept-Encoding: identity"};
    if (with_token && cfg.token) h.push_back("Authorization: Bearer " + *cfg.token);
    return h;
  }

  unsigned backoff(unsigned attempt, const HttpResponse* r) const {
    uint64_t ms = std::min<uint64_t>(uint64_t{cfg.backoff_ms} << std::min(attempt, 10u), kMaxBackoffMs);
    if (r) {
      if (auto ra = parse_u64(r->header("retry-after"))) ms = std::min<uint64_t>(std::max<uint64_t>(ms / 2, *ra * 1000), kMaxRetryAfterMs);
    }
    return static_cast<unsigned>(ms);
  }

  [[noreturn]] void fail_status(const HttpResponse& r, const std::string& url, const std::string& rev,
                                const std::string& path) const {
    const std::string code = r.header("x-error-code").value_or("");
    std::string detail = r.header("x-error-message").value_or("");
    if (detail.empty()) {
      try {
        const auto j = nlohmann::json::parse(r.body);
        if (j.is_object() && j.contains("error") && j["error"].is_string()) detail = j["error"].get<std::string>();
      } catch (const std::exception&) {
      }
    }
    const std::string where = "hf://" + repo;
    if (code == "GatedRepo") {
      throw_invalid(where + " is a gated repository: " +
                    (cfg.token ? std::string("the token in use (HF_TOKEN) has not been granted access; request access at ")
                               : std::string("accept its conditions at ")) +
                    cfg.endpoint + "/" + repo + (cfg.token ? "" : " and set HF_TOKEN to a token of that account"));
    }
    if (code == "RepoNotFound") {
      throw_not_found(where + ": repository not found on " + cfg.endpoint +
                      (cfg.token ? " (or the token in use cannot see it)" : " (if it is private, set HF_TOKEN)"));
    }
    if (code == "RevisionNotFound") throw_not_found(where + ": revision \"" + rev + "\" not found (use a commit, branch or tag)");
    if (code == "EntryNotFound") {
      throw_not_found(where + "@" + rev + ": no file \"" + path + "\"" +
                      (path == "model-package.json" ? " (is this a layer package repository?)" : ""));
    }
    if (r.status == 401) {
      throw_invalid(where + ": authentication required (HTTP 401)" +
                    std::string(cfg.token ? "; the token in use (HF_TOKEN) was refused" : "; set HF_TOKEN") +
                    (detail.empty() ? "" : ": " + detail));
    }
    if (r.status == 403) throw_invalid(where + ": access denied (HTTP 403)" + (detail.empty() ? "" : ": " + detail));
    if (r.status == 404) throw_not_found(where + "@" + rev + ": \"" + path + "\" not found (HTTP 404)");
    throw_invalid(where + ": HTTP " + std::to_string(r.status) + " from " + url + (detail.empty() ? "" : ": " + detail));
  }

  // One request with retries for transport errors, 429 and 5xx.
  HttpResponse perform(const HttpRequest& req, const std::string& what) const {
    std::string last;
    for (unsigned attempt = 0; attempt < cfg.max_attempts; ++attempt) {
      auto res = detail::http_perform(req);
      if (res.error) {
        last = res.error->message;
        if (!res.error->retryable) throw Error(ErrorKind::kIo, what + ": " + last + " (" + req.url + ")");
        if (attempt + 1 < cfg.max_attempts) sleep_ms(backoff(attempt, nullptr));
        continue;
      }
      if (retry_status(res.response->status) && attempt + 1 < cfg.max_attempts) {
        last = "HTTP " + std::to_string(res.response->status);
        sleep_ms(backoff(attempt, &*res.response));
        continue;
      }
      return std::move(*res.response);
    }
    throw Error(ErrorKind::kIo, what + ": " + last + " (after " + std::to_string(cfg.max_attempts) + " attempts; is " +
                                    cfg.endpoint + " reachable? HF_HUB_OFFLINE=1 uses the cache only)");
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
        const auto next = detail::follow_location(url, *loc);
        if (next.same_origin) {
          if (r.header("x-linked-etag")) {
            // An LFS answer served from the Hub's own host: download there.
            return meta_from(r, rev, path, next.url, true);
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

  // Streams meta.download_url into blobs/<etag>.incomplete (resuming what is
  // there), checks size, the expected SHA-256 and the etag itself (SHA-256
  // or git blob id), then renames it to blobs/<etag>. Bytes that fail a
  // check never get a final name.
  void download(const std::string& commit, const HubFileRequest& want, FileMeta meta,
                const std::function<void(uint64_t)>& on_bytes) {
    const fs::path inc = cache.incomplete_path(meta.etag);
    const fs::path blob = cache.blob_path(meta.etag);
    const std::string what = "hf://" + repo + "@" + commit + ": " + want.path;
    Fd fd(::open(inc.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666));
    if (fd.get() < 0) throw_io(inc.string() + ": cannot open");
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0) throw_io(inc.string() + ": cannot stat");
    uint64_t have = static_cast<uint64_t>(st.st_size);
    Sha256 hash;
    // Files outside LFS are named by their git blob id, SHA-1("blob <size>\0"
    // + bytes): checked too, so a file the manifest cannot vouch for (the
    // manifest itself) is still checked end to end, and no blob name is
    // ever taken on the server's word.
    std::optional<GitBlobId> git;
    // Received bytes are hashed and written as they arrive; every 4 MiB the
    // writeback of what was written starts right away, so the fsync before
    // the rename has little left to wait for.
    uint64_t flushed = 0;  // bytes whose writeback was started
    auto restart = [&] {  // drop what we have and start from byte 0
      if (::ftruncate(fd.get(), 0) != 0) throw_io(inc.string() + ": cannot truncate");
      hash = Sha256();
      if (meta.etag.size() == 40) git.emplace(meta.size);
      have = 0;
      flushed = 0;
    };
    if (meta.etag.size() == 40) git.emplace(meta.size);
    if (have > meta.size) restart();
    flushed = have;
    const bool resumed_from_disk = have > 0;
    if (have > 0) {  // resume: the prefix on disk goes into the digests first
      std::vector<uint8_t> buf(kHashChunk);
      for (uint64_t off = 0; off < have;) {
        const auto n = ::pread(fd.get(), buf.data(), static_cast<size_t>(std::min<uint64_t>(buf.size(), have - off)),
                               static_cast<off_t>(off));
        if (n <= 0) throw_io(inc.string() + ": cannot read the partial download");
        hash.update({buf.data(), static_cast<size_t>(n)});
        if (git) git->update({buf.data(), static_cast<size_t>(n)});
        off += static_cast<uint64_t>(n);
      }
      on_bytes(have);
    }

    std::string failure;
    unsigned redirects = 0;
    uint64_t have_at_refresh = UINT64_MAX;  // a signed URL may be refreshed again once bytes were gained
    auto pause = [&](unsigned attempt, const HttpResponse* r) {
      if (attempt + 1 < cfg.max_attempts) sleep_ms(backoff(attempt, r));
    };
    auto transfer = [&] {
      for (unsigned attempt = 0; have < meta.size; ++attempt) {
        if (attempt >= cfg.max_attempts) {
          throw Error(ErrorKind::kIo, what + ": download failed after " + std::to_string(cfg.max_attempts) +
                                          " attempts: " + failure + " (" + std::to_string(have) + " of " +
                                          std::to_string(meta.size) + " bytes kept in " + inc.string() +
                                          "; the next run resumes)");
        }
        HttpRequest req;
        req.url = meta.download_url;
        req.headers = headers(meta.token_allowed);
        if (have > 0) req.headers.push_back("Range: bytes=" + std::to_string(have) + "-");
        std::string abort_reason;
        bool bad_range = false;
        bool write_failed = false;
        req.on_start = [&](long status, const std::map<std::string, std::string>& h) {
          if (status == 200 && have > 0) {  // the server ignored Range: start over
            restart();
          } else if (status == 206) {
            const auto it = h.find("content-range");
            const std::string expect = "bytes " + std::to_string(have) + "-";
            if (it == h.end() || !it->second.starts_with(expect)) {
              abort_reason = "the server answered a different range (" + (it == h.end() ? std::string("none") : it->second) + ")";
              bad_range = true;
              return false;
            }
          }
          return true;
        };
        req.sink = [&](std::span<const uint8_t> data) {
          if (have + data.size() > meta.size) {
            abort_reason = "the server sent more than the " + std::to_string(meta.size) + " bytes it declared";
            return false;
          }
          size_t done = 0;
          while (done < data.size()) {
            const auto n = ::pwrite(fd.get(), data.data() + done, data.size() - done, static_cast<off_t>(have + done));
            if (n <= 0) {
              abort_reason = "cannot write " + inc.string() + ": " + std::strerror(n < 0 ? errno : ENOSPC);
              write_failed = true;
              return false;
            }
            done += static_cast<size_t>(n);
          }
          hash.update(data);
          if (git) git->update(data);
          have += data.size();
          on_bytes(data.size());
          if (have - flushed >= kWritebackChunk) {
            (void)::sync_file_range(fd.get(), static_cast<off64_t>(flushed), static_cast<off64_t>(have - flushed),
                                    SYNC_FILE_RANGE_WRITE);
            flushed = have;
          }
          return true;
        };
        auto res = detail::http_perform(req);
        if (res.error) {
          if (bad_range) {  // our partial file is useless to this server: start over
            failure = abort_reason;
            restart();
            continue;
          }
          if (res.error->aborted_by_sink) {
            if (write_failed) throw Error(ErrorKind::kIo, what + ": " + abort_reason);  // disk full, ...
            throw_invalid(what + ": " + abort_reason);
          }
          failure = res.error->message;
          if (!res.error->retryable) throw Error(ErrorKind::kIo, what + ": " + failure);
          pause(attempt, nullptr);
          continue;
        }
        const auto& r = *res.response;
        if (r.status == 200 || r.status == 206) {
          if (have < meta.size) {  // the connection closed early without an error
            failure = "the transfer ended after " + std::to_string(have) + " of " + std::to_string(meta.size) + " bytes";
            pause(attempt, nullptr);
          }
          continue;
        }
        if (r.status == 416) {  // our partial file is not a prefix the server recognises
          restart();
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
          const auto next = detail::follow_location(meta.download_url, *loc);
          meta.token_allowed = meta.token_allowed && next.same_origin;
          meta.download_url = next.url;
          --attempt;  // a redirect is not a failed attempt
          continue;
        }
        if ((r.status == 401 || r.status == 403 || r.status == 400) && !meta.token_allowed && have != have_at_refresh) {
          // A signed storage URL that expired (or was refused): ask the Hub
          // for a fresh one, which must describe the same bytes.
          have_at_refresh = have;
          failure = "storage answered HTTP " + std::to_string(r.status) + storage_message(r);
          const FileMeta fresh = head(commit, want.path);
          if (fresh.etag != meta.etag || fresh.size != meta.size || fresh.commit != meta.commit) {
            throw_invalid(what + ": the Hub changed its answer during the download (etag " + meta.etag + " -> " +
                          fresh.etag + ", " + std::to_string(meta.size) + " -> " + std::to_string(fresh.size) + " bytes)");
          }
          meta.download_url = fresh.download_url;
          meta.token_allowed = fresh.token_allowed;
          continue;
        }
        if (retry_status(r.status)) {
          failure = "HTTP " + std::to_string(r.status);
          pause(attempt, &r);
          continue;
        }
        if (!meta.token_allowed) {
          throw_invalid(what + ": the storage host " + detail::url_origin(meta.download_url) + " answered HTTP " +
                        std::to_string(r.status) + storage_message(r));
        }
        fail_status(r, meta.download_url, commit, want.path);
      }
    };
    auto expected = [&](const std::string& digest, const std::string& git_id) -> std::string {
      if (want.sha256 && !sha256_equal(digest, *want.sha256)) {
        return "the bytes have SHA-256 " + digest + ", " + want.expected_from + " says " + *want.sha256;
      }
      if (meta.etag.size() == 64 && digest != meta.etag) {
        return "the bytes have SHA-256 " + digest + ", the Hub's etag says " + meta.etag;
      }
      if (meta.etag.size() == 40 && git_id != meta.etag) {
        return "the bytes have git blob id " + git_id + ", the Hub's etag says " + meta.etag;
      }
      return {};
    };
    transfer();
    std::string problem = expected(hash.hex_digest(), git ? git->hex_digest() : std::string());
    if (!problem.empty() && resumed_from_disk) {
      // The partial file left by an earlier run may be what is wrong: one
      // more try from byte 0 before blaming the server.
      restart();
      transfer();
      problem = expected(hash.hex_digest(), git ? git->hex_digest() : std::string());
    }
    if (!problem.empty()) {
      ::unlink(inc.c_str());
      throw_invalid(what + ": " + problem + "; the download was discarded (nothing was placed in the cache)");
    }
    if (::fsync(fd.get()) != 0) throw_io(inc.string() + ": cannot fsync");
    // The bytes are durable before they get their name; the name itself is
    // not fsynced (a crash may lose it, never point it at other bytes: the
    // next run downloads again), as huggingface_hub does not either.
    if (::rename(inc.c_str(), blob.c_str()) != 0) throw_io(blob.string() + ": cannot rename the finished download into place");
  }

  HubFileResult fetch_one(const std::string& commit, const HubFileRequest& want, const std::function<void(uint64_t)>& on_bytes) {
    HubFileResult out{want.path, {}, false, false};
    FileMeta meta = head_cached(commit, want.path);
    const std::string what = "hf://" + repo + "@" + commit + ": " + want.path;
    if (meta.commit != commit) {
      throw_invalid(what + ": the Hub answered for commit " + meta.commit + " (asked for " + commit + ")");
    }
    if (want.size && meta.size != *want.size) {
      throw_invalid(what + ": the Hub serves " + std::to_string(meta.size) + " bytes, " + want.expected_from + " says " +
                    std::to_string(*want.size));
    }
    if (want.sha256 && meta.etag.size() == 64 && !sha256_equal(meta.etag, *want.sha256)) {
      throw_invalid(what + ": the Hub serves SHA-256 " + meta.etag + ", " + want.expected_from + " says " + *want.sha256);
    }
    const auto lock = detail::FileLock::acquire(cache.lock_path(meta.etag), /*wait=*/true, /*mode=*/0666);
    std::error_code ec;
    if (!fs::is_regular_file(cache.blob_path(meta.etag), ec)) {
      download(commit, want, meta, on_bytes);
      out.downloaded = true;
      out.verified = want.sha256.has_value();
    } else {
      on_bytes(meta.size);  // another process brought it while we waited
    }
    out.local = cache.link(commit, want.path, meta.etag);
    return out;
  }
};

HubRepo::HubRepo(HubConfig config, std::string repo_id) {
  check_repo_id(repo_id, "hf://" + repo_id);
  impl_ = std::make_unique<Impl>(std::move(config), std::move(repo_id));
}
HubRepo::~HubRepo() = default;

const HubConfig& HubRepo::config() const noexcept { return impl_->cfg; }
const HfRepoCache& HubRepo::cache() const noexcept { return impl_->cache; }
const std::string& HubRepo::repo_id() const noexcept { return impl_->repo; }

std::string HubRepo::resolve_commit(const std::string& revision, const std::string& probe_path, bool* from_cache,
                                    bool refresh) {
  check_revision(revision, "hf://" + impl_->repo + "@" + revision);
  if (from_cache) *from_cache = true;
  if (!refresh || impl_->cfg.offline || is_commit_hash(revision)) {
    if (auto c = impl_->cache.cached_commit(revision)) return *c;
  }
  if (from_cache) *from_cache = false;
  if (impl_->cfg.offline) {
    throw_not_found("hf://" + impl_->repo + "@" + revision + ": revision \"" + revision +
                    "\" is not in the Hugging Face cache (" + impl_->cache.repo_dir().string() +
                    ") and HF_HUB_OFFLINE=1 forbids asking the Hub");
  }
  FileMeta m = impl_->head(revision, probe_path);
  // Download from the commit, not the moving name: the bytes must be the
  // ones this commit holds even if the branch moves in between.
  if (m.token_allowed) m.download_url = impl_->resolve_url(m.commit, probe_path);
  impl_->cache.create_dirs();
  impl_->cache.write_ref(revision, m.commit);
  const std::string commit = m.commit;
  std::lock_guard g(impl_->mu);
  impl_->heads[commit + "/" + probe_path] = std::move(m);
  return commit;
}

std::vector<HubFileResult> HubRepo::ensure_files(const std::string& commit, const std::vector<HubFileRequest>& files,
                                                 const std::function<void(uint64_t, uint64_t)>& on_progress) {
  auto& c = impl_->cache;
  std::vector<HubFileResult> out(files.size());
  std::vector<size_t> missing;
  for (const auto& f : files) {
    if (!is_safe_relative_path(f.path)) {
      throw_invalid("hf://" + impl_->repo + "@" + commit + ": \"" + f.path + "\" is not a safe relative path");
    }
  }
  for (size_t i = 0; i < files.size(); ++i) {
    const auto& f = files[i];
    out[i].path = f.path;
    if (auto p = c.snapshot_file(commit, f.path)) {
      out[i].local = *p;
      continue;
    }
    std::error_code ec;
    if (f.sha256 && is_sha256_hex(*f.sha256)) {
      std::string etag = *f.sha256;
      std::transform(etag.begin(), etag.end(), etag.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
      if (fs::is_regular_file(c.blob_path(etag), ec)) {  // same bytes under another commit
        c.create_dirs();
        out[i].local = c.link(commit, f.path, etag);
        continue;
      }
    }
    missing.push_back(i);
  }
  if (missing.empty()) return out;
  if (impl_->cfg.offline) {
    std::string list;
    for (const auto i : missing) list += (list.empty() ? "" : ", ") + files[i].path;
    throw_not_found("hf://" + impl_->repo + "@" + commit + ": not in the Hugging Face cache (" + c.repo_dir().string() +
                    ") and HF_HUB_OFFLINE=1 forbids downloading: " + list);
  }
  c.create_dirs();
  std::vector<uint64_t> sizes;
  uint64_t total = 0, partial = 0;
  for (const auto i : missing) {
    sizes.push_back(files[i].size.value_or(0));
    total += sizes.back();
    // Bytes a resumable partial download already holds need no new space.
    if (files[i].sha256 && is_blob_etag(*files[i].sha256)) {
      std::error_code ec;
      const auto have = fs::file_size(c.incomplete_path(*files[i].sha256), ec);
      if (!ec) partial += std::min<uint64_t>(have, sizes.back());
    }
  }
  struct statvfs vfs {};
  if (::statvfs((c.repo_dir() / "blobs").c_str(), &vfs) == 0) {
    const uint64_t free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
    if (free_bytes + partial < total) {
      throw Error(ErrorKind::kIo, "hf://" + impl_->repo + ": " + std::to_string(total) + " bytes to download, only " +
                                      std::to_string(free_bytes) + " free under " + c.root().string() +
                                      " (set HF_HUB_CACHE to a larger disk)");
    }
  }
  std::atomic<uint64_t> done{0};
  auto on_bytes = [&](uint64_t n) {
    const uint64_t d = done.fetch_add(n) + n;
    if (on_progress) on_progress(d, std::max(total, d));
  };
  detail::run_jobs_largest_first(sizes, impl_->cfg.parallel_downloads, [&](size_t k) {
    const size_t i = missing[k];
    out[i] = impl_->fetch_one(commit, files[i], on_bytes);
  });
  return out;
}

HubRepo::RepoInfo HubRepo::info(const std::string& revision) {
  auto& im = *impl_;
  check_revision(revision, "hf://" + im.repo + "@" + revision);
  if (im.cfg.offline) throw_not_found("hf://" + im.repo + ": listing the repository needs the Hub, and HF_HUB_OFFLINE=1");
  const std::string url = im.cfg.endpoint + "/api/models/" + im.repo + "/revision/" + detail::url_encode(revision, false) + "?blobs=true";
  HttpRequest req;
  req.url = url;
  req.headers = im.headers(true);
  req.max_body = size_t{64} << 20;
  auto r = im.perform(req, "hf://" + im.repo + "@" + revision + ": repository listing");
  for (unsigned hops = 0; r.status >= 300 && r.status < 400 && hops < kMaxRedirects; ++hops) {
    // A renamed repository answers with a redirect on the Hub's own host.
    const auto loc = r.header("location");
    if (!loc) break;
    const auto next = detail::follow_location(req.url, *loc);
    if (!next.same_origin) break;  // never take the token elsewhere
    req.url = next.url;
    r = im.perform(req, "hf://" + im.repo + "@" + revision + ": repository listing");
  }
  if (r.status != 200) im.fail_status(r, req.url, revision, "");
  RepoInfo info;
  try {
    const auto j = nlohmann::json::parse(r.body);
    info.commit = j.at("sha").get<std::string>();
    for (const auto& s : j.at("siblings")) {
      RepoFile f;
      f.path = s.at("rfilename").get<std::string>();
      if (s.contains("size") && s["size"].is_number_unsigned()) f.size = s["size"].get<uint64_t>();
      if (s.contains("lfs") && s["lfs"].is_object() && s["lfs"].contains("sha256")) {
        f.sha256 = s["lfs"]["sha256"].get<std::string>();
        if (s["lfs"].contains("size") && s["lfs"]["size"].is_number_unsigned()) f.size = s["lfs"]["size"].get<uint64_t>();
      }
      info.files.push_back(std::move(f));
    }
  } catch (const std::exception& e) {
    throw_invalid("hf://" + im.repo + "@" + revision + ": unreadable repository listing from " + url + ": " + e.what());
  }
  if (!is_commit_hash(info.commit)) throw_invalid("hf://" + im.repo + ": the repository listing has no commit id");
  return info;
}

}  // namespace skippy
