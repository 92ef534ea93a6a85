#include "skippy/hub_publish.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "hub/http.h"
#include "hub/hub_status.h"
#include "hub/hub_write_api.h"
#include "hub/lfs_upload.h"
#include "hub/retry.h"
#include "hub/xet_upload.h"
#include "skippy/error.h"
#include "util/env.h"
#include "util/file.h"
#include "skippy/source.h"
#include "skippy/manifest.h"
#include "skippy/package_signature.h"
#include "util/sha256.h"
#include "skippy/stage.h"
#include "skippy/verify.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using detail::HttpRequest;
using detail::HeadFile;
using detail::HttpResponse;
using detail::base64;
using detail::check_write_token;
using detail::commit_ndjson;
using detail::CommitFile;
using detail::url_encode;
using detail::pread_all;
using detail::parse_json;
using nlohmann::json;

constexpr size_t kGroup = 100;                         // files per preupload / batch call
constexpr uint64_t kMaxRegularBytes = uint64_t{64} << 20;  // a "regular" file is kept in memory for the commit
constexpr unsigned kMaxRefreshes = 3;                  // fresh upload URLs per file

// One file of the commit.
struct Item {
  std::string rel;
  fs::path file;
  uint64_t size = 0;
  std::string sha256;
  std::function<void()> on_stored;
  std::shared_ptr<const std::vector<ContentChunk>> xet_chunks;  // as its writer cut them, when given
  Fd fd;
  bool lfs = false;
  std::string content;  // regular files: kept for the commit
  std::string git_oid;  // regular files
};

// An LFS object to send, with the Hub's actions for it.
struct UploadTask {
  size_t item = 0;
  json upload;  // {href, header?}
  json verify;  // {href, header?} or null
  unsigned refreshes = 0;
  bool xet = false;  // through Xet storage (the batch chose transfer "xet")
};

}  // namespace

class HubPublisher::Impl {
 public:
  Impl(HubConfig hub, PushTarget target, PublishSettings settings)
      : cfg_(std::move(hub)), target_(std::move(target)), settings_(std::move(settings)) {
    settings_.parallel_uploads = std::max(1u, settings_.parallel_uploads);
    where_ = target_.text();
    lfs_.endpoint = cfg_.endpoint;
    lfs_.repo = target_.repo;
    lfs_.token = cfg_.token;
    lfs_.policy = policy();
    lfs_.min_rate_bytes_per_sec = cfg_.min_rate_bytes_per_sec;
    lfs_.min_rate_secs = cfg_.min_rate_secs;
    lfs_.on_progress = [this](int64_t n) { progress(n); };
    lfs_.on_stored = [this](uint64_t n) {
      std::lock_guard g(mu_);
      uploaded_bytes_ += n;
    };
  }
  ~Impl() { stop(); }

  // ------------------------------------------------------------ requests

  detail::RetryPolicy policy() const { return {cfg_.max_attempts, cfg_.backoff_ms}; }

  std::vector<std::string> hub_headers() const {
    std::vector<std::string> h = {"Accept-Encoding: identity"};
    if (cfg_.token) h.push_back("Authorization: Bearer " + *cfg_.token);
    return h;
  }
  // The token goes to the Hub's API endpoints only (lfs_upload.h), never to
  // storage, even storage on the Hub's own origin.
  bool hub_api(const std::string& url) const { return lfs_.hub_api_url(url); }

  HttpResponse call(const std::string& method, const std::string& url, const std::string& body, const std::string& what,
                    const std::string& content_type = "application/json", size_t max_body = size_t{4} << 20) const {
    HttpRequest req;
    req.method = method;
    req.url = url;
    req.headers = hub_api(url) ? hub_headers() : std::vector<std::string>{"Accept-Encoding: identity"};
    if (method == "POST" || method == "PUT") req.headers.push_back("Content-Type: " + content_type);
    req.body = body;
    req.max_body = max_body;
    return detail::perform_with_retries(req, policy(), what, "is " + cfg_.endpoint + " reachable?");
  }

  [[noreturn]] void fail(const HttpResponse& r, const std::string& what) const {
    detail::throw_write_api_error(r, what, target_.repo, target_.branch, cfg_.endpoint);
  }

  std::string api(const std::string& op) const {
    return cfg_.endpoint + "/api/models/" + target_.repo + "/" + op + "/" + url_encode(target_.branch, false);
  }

  // ---------------------------------------------------------------- begin

  void check_token() {
    if (!cfg_.token) {
      throw Error(ErrorKind::kUnauthorized, where_ + ": publishing needs a token with write access; set HF_TOKEN (or "
                                                     "HF_TOKEN_PATH) to one created at " +
                                                         cfg_.endpoint + "/settings/tokens");
    }
    const std::string what = where_ + ": checking the token (whoami)";
    const auto r = call("GET", cfg_.endpoint + "/api/whoami-v2", "", what);
    if (r.status == 401) {
      detail::throw_hub_status(r, where_ + ": the token in use (HF_TOKEN) was refused by " + cfg_.endpoint + detail::reason_tail(r));
    }
    if (r.status == 404) return;  // a Hub without whoami (a mirror): its write endpoints decide
    if (r.status != 200) fail(r, what);
    user_ = check_write_token(parse_json(r, what), target_.repo, where_, cfg_.endpoint, what);
  }

  void create_repo() {
    const std::string what = where_ + ": creating the repository";
    const auto slash = target_.repo.find('/');
    json body = {{"name", target_.repo.substr(slash + 1)},
                 {"organization", target_.repo.substr(0, slash)},
                 {"private", settings_.private_repo}};
    const auto r = call("POST", cfg_.endpoint + "/api/repos/create", body.dump(), what);
    if (r.status == 200 || r.status == 201) {
      created_ = true;
      return;
    }
    if (r.status == 409) return;  // it exists already: fine
    fail(r, what);
  }

  // GET revision/{branch}?blobs=true: the head and its files. nullopt when
  // the branch does not exist.
  std::optional<std::string> read_head(std::map<std::string, HeadFile>* files) {
    const std::string what = where_ + ": reading the branch";
    const auto r = call("GET", api("revision") + "?blobs=true", "", what, "application/json", size_t{64} << 20);
    if (r.status == 404 && detail::hub_error_code(r) == detail::HubErrorCode::kRevisionNotFound) return std::nullopt;
    if (r.status != 200) fail(r, what);
    const json j = parse_json(r, what);
    if (!j.is_object() || !j.contains("sha") || !j["sha"].is_string() || !is_commit_hash(j["sha"].get<std::string>())) {
      throw_invalid(what + ": the Hub's answer has no commit id (is HF_ENDPOINT a Hugging Face Hub?)");
    }
    if (files) *files = detail::revision_files(j);
    return j["sha"].get<std::string>();
  }

  void create_branch() {
    const std::string what = where_ + ": creating the branch";
    const auto r = call("POST", cfg_.endpoint + "/api/models/" + target_.repo + "/branch/" + url_encode(target_.branch, false),
                        "{}", what);
    if (r.status == 200 || r.status == 201 || r.status == 409) return;
    fail(r, what);
  }

  void begin() {
    if (!settings_.tag.empty()) check_tag_name(settings_.tag);
    check_token();
    if (settings_.create) create_repo();
    auto head = read_head(&remote_);
    if (!head) {
      create_branch();
      head = read_head(&remote_);
      if (!head) throw_not_found(where_ + ": the branch could not be created");
    }
    head_ = *head;
    if (!settings_.tag.empty()) {
      // A tag names one commit for good. One that exists on another
      // commit than the head could only be refused after the upload: refuse now.
      const auto at = find_hub_tag(cfg_, target_.repo, settings_.tag);
      tag_exists_ = at.has_value();
      if (at && *at != head_) {
        throw Error(ErrorKind::kInvalidInput,
                    where_ + ": --tag " + settings_.tag + ": refused before uploading anything: the tag already exists on "
                    "commit " + *at + ", and a tag is never moved; pick a new name (a tag per source revision)");
      }
    }
    planner_ = std::thread([this] { plan_loop(); });
    for (unsigned i = 0; i < settings_.parallel_uploads; ++i) uploaders_.emplace_back([this] { upload_loop(); });
    begun_ = true;
  }

  // ------------------------------------------------------------------ add

  void add(const std::string& rel, const fs::path& file, uint64_t size, const std::string& sha256,
           std::function<void()> on_stored, std::shared_ptr<const std::vector<ContentChunk>> xet_chunks) {
    check_safe_relative_path(rel, where_ + ": file");
    if (!is_sha256_hex(sha256)) throw Error(ErrorKind::kUsage, where_ + ": " + rel + ": not a SHA-256: " + sha256);
    std::lock_guard g(mu_);
    if (!begun_ || closing_) throw Error(ErrorKind::kUsage, where_ + ": add() outside begin()..commit()");
    if (!paths_.insert(rel).second) throw Error(ErrorKind::kUsage, where_ + ": " + rel + " added twice");
    Item it;
    it.rel = rel;
    it.file = file;
    it.size = size;
    it.sha256 = sha256;
    std::transform(it.sha256.begin(), it.sha256.end(), it.sha256.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    it.on_stored = std::move(on_stored);
    it.xet_chunks = std::move(xet_chunks);
    items_.push_back(std::move(it));
    to_plan_.push_back(items_.size() - 1);
    total_ += size;
    cv_.notify_all();
  }

  bool failed() const {
    std::lock_guard g(mu_);
    return !errors_.empty();
  }

  // --------------------------------------------------------------- workers

  void record_error(const Error& e) {
    std::lock_guard g(mu_);
    // Under the lock: commit() and failed() see the failure only once the
    // callback has run (it must not call back into the publisher).
    if (errors_.empty() && settings_.on_failure) settings_.on_failure(e);
    errors_.push_back(e);
    cv_.notify_all();
  }

  void progress(int64_t delta) {
    const uint64_t d = done_.fetch_add(static_cast<uint64_t>(delta)) + static_cast<uint64_t>(delta);
    if (settings_.on_progress) {
      uint64_t t;
      {
        std::lock_guard g(mu_);
        t = total_;
      }
      settings_.on_progress(d, t);
    }
  }

  void stored(size_t idx) {
    Item* it;
    {
      std::lock_guard g(mu_);
      it = &items_[idx];
    }
    it->fd.reset();
    if (it->on_stored) it->on_stored();
  }

  void plan_loop() {
    for (;;) {
      std::vector<size_t> group;
      {
        std::unique_lock l(mu_);
        cv_.wait(l, [&] {
          return stop_ || (closing_ && to_plan_.empty()) ||
                 (!to_plan_.empty() && to_upload_.size() < 2 * size_t{settings_.parallel_uploads});
        });
        if (stop_ || to_plan_.empty()) {
          planner_done_ = true;
          cv_.notify_all();
          return;
        }
        while (!to_plan_.empty() && group.size() < kGroup) {
          group.push_back(to_plan_.front());
          to_plan_.pop_front();
        }
      }
      try {
        plan(group);
      } catch (const Error& e) {
        record_error(e);
      } catch (const std::exception& e) {
        record_error(Error(ErrorKind::kInvalidInput, where_ + ": " + e.what()));
      }
    }
  }

  Item& item(size_t idx) {
    std::lock_guard g(mu_);
    return items_[idx];
  }

  // preupload, then the LFS batch, for a group of files.
  void plan(const std::vector<size_t>& group) {
    json files = json::array();
    for (const size_t idx : group) {
      Item& it = item(idx);
      it.fd = open_regular_file(it.file);
      const auto sample = pread_all(it.fd.get(), 0, static_cast<size_t>(std::min<uint64_t>(it.size, 512)), it.file);
      files.push_back({{"path", it.rel}, {"size", it.size}, {"sample", base64(sample)}});
    }
    const std::string what = where_ + ": preupload";
    const auto r = call("POST", api("preupload"), json{{"files", files}}.dump(), what);
    if (r.status != 200) fail(r, what);
    const json j = parse_json(r, what);
    std::map<std::string, std::string> mode;
    if (!j.is_object() || !j.contains("files") || !j["files"].is_array()) throw_invalid(what + ": the answer has no files list");
    for (const auto& f : j["files"]) {
      if (f.is_object() && f.contains("path") && f["path"].is_string() && f.contains("uploadMode") && f["uploadMode"].is_string()) {
        mode[f["path"].get<std::string>()] = f["uploadMode"].get<std::string>();
      }
    }
    std::vector<size_t> lfs;
    for (const size_t idx : group) {
      Item& it = item(idx);
      const auto m = mode.find(it.rel);
      if (m == mode.end() || (m->second != "lfs" && m->second != "regular")) {
        throw_invalid(what + ": the Hub gave no upload mode for " + it.rel);
      }
      if (m->second == "lfs") {
        it.lfs = true;
        lfs.push_back(idx);
        continue;
      }
      if (it.size > kMaxRegularBytes) {
        throw_invalid(what + ": the Hub wants " + it.rel + " (" + std::to_string(it.size) +
                      " bytes) as a regular file, larger than this client sends that way");
      }
      it.content = pread_all(it.fd.get(), 0, static_cast<size_t>(it.size), it.file);
      if (sha256_hex(it.content) != it.sha256) throw_integrity(where_ + ": " + it.rel + ": the file changed (SHA-256 differs)");
      GitBlobId g(it.size);
      g.update(std::string_view(it.content));
      it.git_oid = g.hex_digest();
      progress(static_cast<int64_t>(it.size));
      stored(idx);
    }
    if (!lfs.empty()) batch(lfs, nullptr);
  }

  // POST the LFS batch for `idxs`; objects without actions are on the Hub
  // already. With `refresh`, only that task's actions are renewed.
  void batch(const std::vector<size_t>& idxs, UploadTask* refresh) {
    json objects = json::array();
    std::map<std::string, std::vector<size_t>> by_oid;
    for (const size_t idx : idxs) {
      const Item& it = item(idx);
      if (by_oid[it.sha256].empty()) objects.push_back({{"oid", it.sha256}, {"size", it.size}});
      by_oid[it.sha256].push_back(idx);
    }
    json transfers = {"basic", "multipart"};
    if (settings_.xet && !refresh) transfers.push_back("xet");  // a refresh renews an LFS action
    const json body = {{"operation", "upload"},
                       {"transfers", transfers},
                       {"hash_algo", "sha256"},
                       {"ref", {{"name", target_.branch}}},
                       {"objects", objects}};
    const std::string what = where_ + ": LFS batch";
    const auto r = call("POST", cfg_.endpoint + "/" + target_.repo + ".git/info/lfs/objects/batch", body.dump(), what,
                        "application/vnd.git-lfs+json", size_t{256} << 20);
    if (r.status != 200) fail(r, what);
    std::map<std::string, std::string> asked;
    for (const auto& [oid, v] : by_oid) asked[oid] = item(v.front()).rel;
    const auto answer = detail::parse_lfs_batch(parse_json(r, what), asked, what);
    for (const auto& o : answer.objects) {
      const auto& same = by_oid[o.oid];
      if (o.upload.is_null()) {
        for (const size_t idx : same) {
          {
            std::lock_guard g(mu_);
            ++already_;
          }
          progress(static_cast<int64_t>(item(idx).size));
          stored(idx);
        }
        if (refresh) refresh->upload = json();
        continue;
      }
      UploadTask t;
      t.upload = o.upload;
      t.verify = o.verify;
      t.xet = answer.xet;
      if (t.xet) {
        start_xet(t.upload);
      } else {
        note_lfs();
      }
      if (refresh) {
        refresh->upload = t.upload;
        refresh->verify = t.verify;
        continue;
      }
      // Identical files share one object: send it once, the others follow.
      t.item = same.front();
      std::lock_guard g(mu_);
      for (size_t k = 1; k < same.size(); ++k) twins_[t.item].push_back(same[k]);
      to_upload_.push_back(std::move(t));
      cv_.notify_all();
    }
  }

  void upload_loop() {
    for (;;) {
      UploadTask t;
      {
        std::unique_lock l(mu_);
        cv_.wait(l, [&] { return stop_ || !to_upload_.empty() || planner_done_; });
        if (stop_ || to_upload_.empty()) return;
        t = std::move(to_upload_.front());
        to_upload_.pop_front();
        cv_.notify_all();  // the planner may batch more
      }
      try {
        upload(t);
      } catch (const Error& e) {
        record_error(e);
      } catch (const std::exception& e) {
        record_error(Error(ErrorKind::kTransport, where_ + ": " + item(t.item).rel + ": " + e.what()));
      }
    }
  }

  // The Xet session, made on the first batch that chose Xet (the planner's thread).
  void start_xet(const json& upload_action) {
    {
      std::lock_guard g(mu_);
      if (xet_) return;
    }
    auto session = detail::XetUploadSession::start(
        {detail::xet_client_config(cfg_), target_.repo, target_.branch},
        upload_action, where_, settings_.xet_dedupe_hints, std::dynamic_pointer_cast<detail::XetSourceIndex>(settings_.xet_source), env::skippy_cache_dir() / "xet-journal");
    std::lock_guard g(mu_);
    if (!xet_) xet_ = std::move(session);
  }
  void note_lfs() {
    std::lock_guard g(mu_);
    if (!xet_note_.empty()) return;
    xet_note_ = detail::XetUploadSession::lfs_note(settings_.xet, target_.repo);
  }

  // True when a refresh found the object on the Hub (and marked it stored).
  bool upload_lfs(UploadTask& t, Item& it) {
    const std::string what = where_ + ": uploading " + it.rel;
    for (;;) {
      const std::string href = t.upload["href"].get<std::string>();
      const auto refused = lfs_.send(it.fd.get(), it.size, it.sha256, t.upload, what);
      if (!refused) {
        lfs_.verify(t.verify, it.sha256, it.size, what);
        std::lock_guard g(mu_);
        ++sent_objects_;
        break;
      }
      // A 4xx from storage: most often an expired signed URL. Ask for fresh ones.
      if (t.refreshes++ >= kMaxRefreshes) {
        throw detail::storage_refusal(*refused, what, href);
      }
      batch({t.item}, &t);
      if (t.upload.is_null()) {
        return true;
      }
    }
    return false;
  }

  void upload(UploadTask& t) {
    Item& it = item(t.item);
    bool found_on_hub = false;  // a refresh found it there (and marked it stored)
    if (t.xet) {
      xet_->upload_file(it.fd.get(), it.size, it.sha256, it.rel, [this](uint64_t n) { progress(static_cast<int64_t>(n)); },
                        it.xet_chunks.get());
      std::lock_guard g(mu_);
      ++sent_objects_;
    } else {
      found_on_hub = upload_lfs(t, it);
    }
    std::vector<size_t> twins;
    {
      std::lock_guard g(mu_);
      if (auto tw = twins_.find(t.item); tw != twins_.end()) twins = tw->second;
    }
    if (!found_on_hub) stored(t.item);
    for (const size_t k : twins) {
      progress(static_cast<int64_t>(item(k).size));
      stored(k);
    }
  }

  // --------------------------------------------------------------- commit

  void stop() {
    {
      std::lock_guard g(mu_);
      stop_ = true;
      cv_.notify_all();
    }
    join();
  }
  void join() {
    if (planner_.joinable()) planner_.join();
    for (auto& u : uploaders_) {
      if (u.joinable()) u.join();
    }
    uploaders_.clear();
  }

  bool matches(const std::map<std::string, HeadFile>& remote) const {
    for (const auto& it : items_) {
      const auto r = remote.find(it.rel);
      if (r == remote.end()) return false;
      if (it.lfs ? !sha256_equal(r->second.sha256, it.sha256) : r->second.blob_id != it.git_oid) return false;
    }
    return true;
  }

  PublishResult commit(const std::string& summary, const std::string& description) {
    PublishResult res = commit_files(summary, description);
    if (!settings_.tag.empty()) res.tag = tag_hub_commit(cfg_, target_.repo, res.commit, settings_.tag, summary);
    return res;
  }

  PublishResult commit_files(const std::string& summary, const std::string& description) {
    {
      std::lock_guard g(mu_);
      if (!begun_) throw Error(ErrorKind::kUsage, where_ + ": commit() before begin()");
      closing_ = true;
      cv_.notify_all();
    }
    join();
    if (!errors_.empty()) {
      std::string msg = where_ + ": " + std::to_string(errors_.size()) +
                        " upload(s) failed, nothing was committed (what reached the Hub stays there: the same command "
                        "sends only what is missing): ";
      for (size_t i = 0; i < errors_.size() && i < 5; ++i) msg += (i ? "; " : "") + std::string(errors_[i].what());
      throw Error(errors_.front().kind(), msg);
    }
    if (xet_) {
      try {
        xet_->finish();
      } catch (const Error& e) {
        throw Error(e.kind(), where_ + ": the Xet CAS did not register the files, nothing was committed: " + e.what());
      }
    }
    PublishResult res;
    if (xet_) {
      res.xet = xet_->summary();
      res.bytes_uploaded = res.xet.xorb_bytes_uploaded + res.xet.shard_bytes_uploaded;
    }
    res.xet.note = res.xet.note.empty() ? xet_note_ : res.xet.note;
    res.repo = target_.repo;
    res.branch = target_.branch;
    res.parent_commit = head_;
    res.created_repo = created_;
    res.files = items_.size();
    for (const auto& it : items_) {
      res.bytes += it.size;
      if (it.lfs) ++res.lfs_files;
    }
    res.lfs_uploaded = sent_objects_;
    res.lfs_already_on_hub = already_;
    res.bytes_uploaded += uploaded_bytes_;

    res.deleted = detail::package_files_to_delete(remote_, paths_);
    if (res.deleted.empty() && matches(remote_)) {
      res.commit = head_;
      return res;  // the branch holds exactly this package already
    }
    if (tag_exists_) {
      // The tag names the head, and this package makes a new commit the tag cannot follow.
      throw Error(ErrorKind::kInvalidInput,
                  where_ + ": --tag " + settings_.tag + ": refused: the tag already exists on commit " + head_ +
                      " (the branch head) and this package would make a new commit; a tag is never moved, so nothing "
                      "was committed (the uploaded files stay on the Hub): pick a new name (a tag per source revision)");
    }
    std::vector<CommitFile> files;
    for (const auto& it : items_) files.push_back({it.rel, it.lfs, it.sha256, it.size, &it.content});
    const std::string body = commit_ndjson(summary, description, head_, files, res.deleted);

    const std::string what = where_ + ": commit";
    const unsigned attempts = std::max(1u, cfg_.max_attempts);
    std::string last;
    for (unsigned attempt = 0; attempt < attempts; ++attempt) {
      HttpRequest req;
      req.method = "POST";
      req.url = api("commit");
      req.headers = hub_headers();
      req.headers.push_back("Content-Type: application/x-ndjson");
      req.body = body;
      auto out = detail::http_perform(req);
      if (out.response && out.response->status == 200) {
        const json j = parse_json(*out.response, what);
        if (!j.is_object() || !j.contains("commitOid") || !j["commitOid"].is_string() ||
            !is_commit_hash(j["commitOid"].get<std::string>())) {
          throw_invalid(what + ": the Hub's answer has no commitOid");
        }
        res.commit = j["commitOid"].get<std::string>();
        if (j.contains("commitUrl") && j["commitUrl"].is_string()) res.commit_url = j["commitUrl"].get<std::string>();
        res.committed = true;
        return res;
      }
      if (out.response && out.response->status == 412) conflict(attempt > 0);
      if (out.response && !detail::retry_status(out.response->status)) fail(*out.response, what);
      if (out.error && !out.error->retryable) throw Error(ErrorKind::kTransport, what + ": " + out.error->message);
      last = out.error ? out.error->message : "HTTP " + std::to_string(out.response->status);
      // The commit may have landed before the answer was lost: look.
      std::map<std::string, HeadFile> now;
      const auto head = read_head(&now);
      if (head && *head != head_) {
        if (matches(now)) {
          res.commit = *head;
          res.committed = true;
          return res;
        }
        conflict(false);
      }
      if (attempt + 1 < attempts) {
        detail::pause_before_retry(policy(), attempt, out.response ? &*out.response : nullptr, what, last);
      }
    }
    throw Error(ErrorKind::kTransport, what + ": " + last + " (after " + std::to_string(attempts) +
                                           " attempts; the uploaded files stay on the Hub: rerun to commit them)");
  }

  [[noreturn]] void conflict(bool after_retry) {
    std::string now;
    try {
      now = read_head(nullptr).value_or("");
    } catch (const Error&) {
    }
    throw Error(ErrorKind::kInvalidInput,
                where_ + ": refused: the branch moved while this package was uploading (it was at " + head_ +
                    (now.empty() ? "" : ", it is now at " + now) +
                    "), and a commit never overwrites another" + (after_retry ? " (a retried commit may have raced)" : "") +
                    ". Nothing was committed; the uploaded files stay on the Hub, so running the same command again "
                    "commits on top of the new head and sends only what is missing");
  }

  HubConfig cfg_;
  PushTarget target_;
  PublishSettings settings_;
  std::string where_;
  std::string user_;
  std::string head_;
  std::map<std::string, HeadFile> remote_;
  bool created_ = false;
  bool tag_exists_ = false;  // settings_.tag already names the head

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> items_;  // stable addresses
  std::set<std::string> paths_;
  std::deque<size_t> to_plan_;
  std::deque<UploadTask> to_upload_;
  std::map<size_t, std::vector<size_t>> twins_;
  std::vector<Error> errors_;
  bool begun_ = false, closing_ = false, stop_ = false, planner_done_ = false;
  uint64_t total_ = 0;
  std::atomic<uint64_t> done_{0};
  size_t already_ = 0, sent_objects_ = 0;
  uint64_t uploaded_bytes_ = 0;
  std::thread planner_;
  std::vector<std::thread> uploaders_;
  detail::LfsUploader lfs_;
  std::unique_ptr<detail::XetUploadSession> xet_;
  std::string xet_note_;
};

HubPublisher::HubPublisher(HubConfig hub, PushTarget target, PublishSettings settings)
    : impl_(std::make_unique<Impl>(std::move(hub), std::move(target), std::move(settings))) {}
HubPublisher::~HubPublisher() = default;
void HubPublisher::begin() { impl_->begin(); }
void HubPublisher::add(const std::string& rel_path, const fs::path& file, uint64_t size, const std::string& sha256,
                       std::function<void()> on_stored, std::shared_ptr<const std::vector<ContentChunk>> xet_chunks) {
  impl_->add(rel_path, file, size, sha256, std::move(on_stored), std::move(xet_chunks));
}
bool HubPublisher::failed() const { return impl_->failed(); }
PublishResult HubPublisher::commit(const std::string& summary, const std::string& description) {
  return impl_->commit(summary, description);
}

}  // namespace skippy
