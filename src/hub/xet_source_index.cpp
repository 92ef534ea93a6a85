#include "hub/xet_source_index.h"

#include <atomic>

#include "hub/http.h"
#include "hub/retry.h"
#include "skippy/error.h"
#include "xet/file_hasher.h"

namespace skippy {

XetDedupeSource::~XetDedupeSource() = default;

namespace detail {

// One source file's walk: its terms, the chunker fed with its bytes, and
// where in the terms the chunks have got to.
struct XetSourceIndex::Walk {
  std::vector<XetTerm> terms;
  std::vector<uint32_t> term_xorb;  // xorbs_ id of each term
  std::unique_ptr<xet::FileHasher> hasher;
  uint64_t next = 0;        // the next byte expected
  size_t term = 0;          // the term the next chunk belongs to
  uint32_t chunk = 0;       // chunks of that term walked so far
  uint64_t term_bytes = 0;  // their bytes
  std::atomic<uint32_t> verified{0};  // terms that agreed, in order
  std::atomic<bool> dropped{false}, done{false};
  std::string why;  // (mu_) why it was dropped
};

XetSourceIndex::XetSourceIndex(const XetClientConfig& cfg, std::vector<File> files, std::string where)
    : where_(std::move(where)), files_(std::move(files)) {
  walks_.resize(files_.size());
  for (size_t i = 0; i < files_.size(); ++i) {
    const File& f = files_[i];
    if (!f.xet) continue;
    const std::string what = where_ + ": " + f.path + " (the source's Xet terms)";
    try {
      add_walk(i, XetRangeSource(*f.xet, cfg, f.size).file_terms(what));
    } catch (const Error& e) {
      notes_.push_back(f.path + ": not deduplicated against the source (" + e.what() + ")");
    }
  }
}

XetSourceIndex::XetSourceIndex(std::vector<File> files, std::vector<std::vector<XetTerm>> terms, std::string where)
    : where_(std::move(where)), files_(std::move(files)) {
  walks_.resize(files_.size());
  for (size_t i = 0; i < files_.size() && i < terms.size(); ++i) add_walk(i, std::move(terms[i]));
}

void XetSourceIndex::add_walk(size_t file, std::vector<XetTerm> terms) {
  auto w = std::make_unique<Walk>();
  for (const auto& t : terms) {
    const auto h = xet::Hash::from_hex(t.xorb);
    if (!h) throw Error(ErrorKind::kInvalidInput, where_ + ": " + files_[file].path + ": a Xet term names xorb " + t.xorb);
    auto [it, added] = xorb_ids_.emplace(*h, static_cast<uint32_t>(xorbs_.size()));
    if (added) xorbs_.push_back(*h);
    w->term_xorb.push_back(it->second);
  }
  w->terms = std::move(terms);
  if (files_[file].size == 0) w->done = true;
  walks_[file] = std::move(w);
}

XetSourceIndex::~XetSourceIndex() = default;

size_t XetSourceIndex::usable_files() const {
  size_t n = 0;
  for (const auto& w : walks_) n += w ? 1 : 0;
  return n;
}

std::vector<std::string> XetSourceIndex::notes() const {
  std::shared_lock g(mu_);
  return notes_;
}

void XetSourceIndex::drop(uint32_t file, const std::string& why) {
  Walk& w = *walks_[file];
  if (w.dropped.exchange(true)) return;  // (the hasher may be calling: observe() frees it)
  std::unique_lock g(mu_);
  w.why = why;
  notes_.push_back(files_[file].path + ": not deduplicated against the source: " + why);
}

void XetSourceIndex::observe(size_t file, uint64_t offset, std::span<const uint8_t> bytes) {
  if (file >= walks_.size() || !walks_[file] || bytes.empty() || retired_) return;
  Walk& w = *walks_[file];
  if (w.dropped || w.done) return;
  const auto f = static_cast<uint32_t>(file);
  if (offset != w.next || offset + bytes.size() > files_[file].size) {
    return drop(f, "its bytes were not read in order (byte " + std::to_string(offset) + " after " + std::to_string(w.next) + ")");
  }
  if (!w.hasher) {
    w.hasher = std::make_unique<xet::FileHasher>(
        [this, f](const xet::ChunkInfo& c, std::span<const uint8_t>) { on_chunk(f, c.hash, c.length); }, false);
  }
  w.hasher->update(bytes);
  w.next += bytes.size();
  if (w.dropped) return w.hasher.reset();
  if (w.next < files_[file].size) return;
  w.hasher->finish();  // the last chunk
  w.hasher.reset();
  if (w.dropped) return;
  if (w.term != w.terms.size()) {
    return drop(f, "the file ends after " + std::to_string(w.term) + " of its " + std::to_string(w.terms.size()) + " Xet terms");
  }
  w.done = true;
}

void XetSourceIndex::on_chunk(uint32_t file, const xet::Hash& hash, uint32_t length) {
  Walk& w = *walks_[file];
  if (w.dropped) return;
  if (w.term >= w.terms.size()) return drop(file, "its chunks run past the end of its Xet terms");
  const XetTerm& t = w.terms[w.term];
  const uint32_t index = t.chunk_start + w.chunk;
  auto name = [&] {  // for the messages only: nothing is built per chunk
    return "term " + std::to_string(w.term) + " (xorb " + t.xorb + " chunks [" + std::to_string(t.chunk_start) + ", " +
           std::to_string(t.chunk_end) + "), " + std::to_string(t.unpacked) + " bytes)";
  };
  if (index >= t.chunk_end || w.term_bytes + length > t.unpacked) {
    return drop(file, "its chunks do not agree with the CAS's " + name() + ": chunk " + std::to_string(w.chunk) + " of " +
                          std::to_string(length) + " bytes runs past it");
  }
  {
    std::unique_lock g(mu_);
    chunks_.emplace(hash, Entry{w.term_xorb[w.term], index, file, static_cast<uint32_t>(w.term)});
  }
  ++w.chunk;
  w.term_bytes += length;
  if (w.term_bytes < t.unpacked) return;
  if (index + 1 != t.chunk_end) {
    return drop(file, "its chunks do not agree with the CAS's " + name() + ": they fill it after " + std::to_string(w.chunk) +
                          " chunks");
  }
  ++w.term;
  w.chunk = 0;
  w.term_bytes = 0;
  w.verified.store(static_cast<uint32_t>(w.term));
}

bool XetSourceIndex::find(const xet::Hash& chunk, Hit& out) const {
  if (retired_) return false;
  std::shared_lock g(mu_);
  const auto it = chunks_.find(chunk);
  if (it == chunks_.end()) return false;
  const Entry& e = it->second;
  if (walks_[e.file]->dropped) return false;
  out = {xorbs_[e.xorb], e.index, e.file, e.term};
  return true;
}

bool XetSourceIndex::verified(uint32_t file, uint32_t term) const {
  const Walk* w = file < walks_.size() ? walks_[file].get() : nullptr;
  return w && !w->dropped && w->verified.load() > term;
}

std::string XetSourceIndex::refusal(uint32_t file) const {
  const Walk* w = file < walks_.size() ? walks_[file].get() : nullptr;
  if (!w) return "no Xet terms";
  if (w->dropped) {
    std::shared_lock g(mu_);
    return w->why;
  }
  return w->done ? "" : "the source was not read to its end";
}

bool XetSourceIndex::complete() const {
  for (const auto& w : walks_) {
    if (w && !w->dropped && !w->done) return false;
  }
  return true;
}

std::shared_ptr<XetSourceIndex> make_xet_source_index(const HubConfig& hub, const std::string& repo, const std::string& commit,
                                                      const std::vector<std::filesystem::path>& files,
                                                      const std::vector<std::string>& paths, const std::string& where) {
  std::vector<XetSourceIndex::File> out;
  bool any = false;
  const XetClientConfig cfg = xet_client_config(hub);
  for (size_t i = 0; i < files.size() && i < paths.size(); ++i) {
    XetSourceIndex::File f;
    f.path = paths[i];
    std::error_code ec;
    f.size = std::filesystem::file_size(files[i], ec);
    if (ec) return nullptr;
    HttpRequest req;
    req.method = "HEAD";
    req.url = hub.endpoint + "/" + repo + "/resolve/" + url_encode(commit, false) + "/" + url_encode(paths[i], true);
    req.headers = {"Accept-Encoding: identity"};
    if (hub.token) req.headers.push_back("Authorization: Bearer " + *hub.token);
    try {
      const auto r = perform_with_retries(req, cfg.policy, where + ": " + paths[i] + " (is it Xet-backed?)",
                                          "is " + hub.endpoint + " reachable?");
      if (r.status < 400) f.xet = xet_file_ref(r, hub.endpoint, repo, commit);
    } catch (const Error&) {
      // Not knowing costs only this dedupe.
    }
    any = any || f.xet.has_value();
    out.push_back(std::move(f));
  }
  if (!any) return nullptr;
  return std::make_shared<XetSourceIndex>(cfg, std::move(out), where);
}

}  // namespace detail
}  // namespace skippy
