#include "hub/xet_upload.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <optional>

#include "skippy/error.h"
#include "util/file.h"
#include "xet/file_hasher.h"
#include "xet/xorb.h"

namespace skippy {

std::string xet_first_chunk_hash(std::span<const uint8_t> head) {
  xet::Chunker c;
  const auto cut = c.next_cut(head);
  const size_t n = cut ? *cut : head.size();
  return xet::chunk_hash(head.first(n)).to_hex();
}

namespace detail {
namespace {

using xet::Hash;

constexpr size_t kReadBytes = size_t{4} << 20;
constexpr uint64_t kQuerySpacing = 256;  // chunks between a file's dedupe queries (hf-xet)

std::array<uint8_t, 32> sha256_bytes(const std::string& hex) {
  std::array<uint8_t, 32> out{};
  auto nib = [](char c) { return static_cast<uint8_t>(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10); };
  for (size_t i = 0; i < 32; ++i) out[i] = static_cast<uint8_t>(nib(hex[2 * i]) << 4 | nib(hex[2 * i + 1]));
  return out;
}

// Reads the chunks of a file that go into new xorbs: a lone chunk alone,
// a run of them in reads that grow to kReadBytes (a file that dedupes
// against nothing is read in large sequential reads, not 64 KiB ones).
// Each chunk read is checked against the hash its writer recorded.
class NewChunkReader {
 public:
  NewChunkReader(int fd, uint64_t size, const std::string& what, uint64_t& bytes_read)
      : fd_(fd), size_(size), what_(what), read_(bytes_read) {}

  std::span<const uint8_t> read(const xet::ChunkInfo& c) {
    // A run of new chunks reads ahead, twice as far each time, up to
    // kReadBytes; a lone new chunk (most files' first) reads just itself.
    ahead_ = c.offset == last_end_ ? std::min<uint64_t>(kReadBytes, std::max<uint64_t>(2 * ahead_, kMinAhead)) : 0;
    last_end_ = c.offset + c.length;
    if (c.offset < start_ || c.offset + c.length > start_ + have_) {
      fill(c.offset, std::min<uint64_t>(std::max<uint64_t>(ahead_, c.length), size_ - c.offset));
    }
    const std::span<const uint8_t> b(buf_.data() + (c.offset - start_), c.length);
    if (xet::chunk_hash(b) != c.hash) {
      throw_integrity(what_ + ": the file changed after it was written (the chunk at byte " + std::to_string(c.offset) +
                      " is not the one its writer cut)");
    }
    return b;
  }

 private:
  void fill(uint64_t at, uint64_t n) {
    if (buf_.size() < n) buf_.resize(static_cast<size_t>(n));
    start_ = at;
    have_ = 0;
    pread_exact(fd_, at, {buf_.data(), static_cast<size_t>(n)}, what_);
    have_ = n;
    read_ += n;
  }

  int fd_;
  uint64_t size_;
  const std::string& what_;
  uint64_t& read_;
  std::vector<uint8_t> buf_;
  uint64_t start_ = 0, have_ = 0;
  uint64_t last_end_ = UINT64_MAX;
  uint64_t ahead_ = 0;
  static constexpr uint64_t kMinAhead = uint64_t{256} << 10;
};

// One file's pass: chunks in, terms out.
class FileUpload {
 public:
  FileUpload(XetUploadSession& s, std::string what) : s_(s), what_(std::move(what)) {}

  // `bytes()` gives the chunk's bytes; it is called only for a chunk that
  // goes into a new xorb.
  template <class Bytes>
  void chunk(const xet::ChunkInfo& c, Bytes&& bytes) {
    report_.chunks++;
    report_.bytes += c.length;
    Ref ref;
    uint64_t* way = nullptr;
    if (auto p = pending_.find(c.hash); p != pending_.end()) {
      ref = {true, seq_, {}, p->second};
      way = &report_.deduped_in_run;
    } else if (XetUploadSession::Found f; s_.find(c.hash, f)) {
      ref = {false, 0, f.loc.xorb, f.loc.index};
      way = f.way == XetUploadSession::Way::kGlobal ? &report_.deduped_global : &report_.deduped_in_run;
    } else if (XetSourceIndex::Hit h; s_.find_source(c.hash, h)) {
      // The source's own chunk: no global query for it.
      ref = {false, 0, h.xorb, h.index};
      way = &report_.deduped_source;
      auto [it, added] = deps_.emplace(h.file, h.term);
      if (!added) it->second = std::max(it->second, h.term);
    } else if (query_due(c) && s_.query(c.hash, what_) && s_.find(c.hash, f)) {
      ref = {false, 0, f.loc.xorb, f.loc.index};
      way = f.way == XetUploadSession::Way::kGlobal ? &report_.deduped_global : &report_.deduped_in_run;
    } else {
      if (!builder_.fits(c.length)) flush();
      const uint32_t idx = builder_.add(c.hash, bytes());
      pending_.emplace(c.hash, idx);
      ref = {true, seq_, {}, idx};
      way = &report_.new_bytes;
    }
    *way += c.length;
    append(ref, c.hash, c.length);
    ++index_;
  }

  // The file's shard entry, once its last xorb is stored.
  xet::ShardFile finish(const xet::FileHasher::Result& r, const std::string& sha256) {
    close_term();
    if (!builder_.empty()) flush();
    xet::ShardFile f;
    f.file_hash = r.file_hash;
    for (auto& t : terms_) {
      f.terms.push_back({t.pending ? resolved_.at(t.seq) : t.xorb, 0, t.bytes, t.start, t.end});
    }
    f.verification = std::move(verification_);
    f.sha256 = sha256_bytes(sha256);
    return f;
  }
  XetFileUpload& report() { return report_; }
  // The last term of each source file this file referenced (XetSourceIndex::verified).
  const std::map<uint32_t, uint32_t>& source_terms() const { return deps_; }

 private:
  struct Ref {
    bool pending = false;  // in a xorb of this file not yet stored: seq says which
    size_t seq = 0;
    Hash xorb;
    uint32_t index = 0;
  };
  struct Term {
    bool pending = false;
    size_t seq = 0;
    Hash xorb;
    uint32_t start = 0, end = 0, bytes = 0;
  };

  bool query_due(const xet::ChunkInfo& c) {
    const bool due = index_ == 0 || (xet::is_global_dedupe_eligible(c.hash) && (!last_query_ || index_ - *last_query_ >= kQuerySpacing));
    if (due) last_query_ = index_;
    return due;
  }

  void append(const Ref& r, const Hash& h, uint32_t len) {
    if (!terms_.empty() && open_) {
      Term& t = terms_.back();
      const bool same = t.pending == r.pending && (r.pending ? t.seq == r.seq : t.xorb == r.xorb);
      if (same && t.end == r.index && uint64_t{t.bytes} + len <= UINT32_MAX) {
        t.end++;
        t.bytes += len;
        open_hashes_.push_back(h);
        return;
      }
      close_term();
    }
    terms_.push_back({r.pending, r.seq, r.xorb, r.index, r.index + 1, len});
    open_hashes_.assign(1, h);
    open_ = true;
  }

  void close_term() {
    if (!open_) return;
    verification_.push_back(xet::verification_hash(open_hashes_));
    open_hashes_.clear();
    open_ = false;
  }

  void flush() {
    xet::BuiltXorb x = builder_.finish();
    s_.store_xorb(x, what_);
    if (resolved_.size() <= seq_) resolved_.resize(seq_ + 1);
    resolved_[seq_++] = x.index.hash;
    pending_.clear();
  }

  XetUploadSession& s_;
  std::string what_;
  XetFileUpload report_;
  xet::XorbBuilder builder_;
  std::unordered_map<Hash, uint32_t, xet::HashHasher> pending_;  // chunks of the xorb being packed
  size_t seq_ = 0;                                               // this file's xorbs so far
  std::vector<Hash> resolved_;                                   // seq -> stored xorb hash
  std::vector<Term> terms_;
  std::vector<Hash> verification_, open_hashes_;
  bool open_ = false;
  uint64_t index_ = 0;
  std::optional<uint64_t> last_query_;
  std::map<uint32_t, uint32_t> deps_;
};

}  // namespace

std::unique_ptr<XetUploadSession> XetUploadSession::start(XetCasConfig cfg, const nlohmann::json& upload_action,
                                                          std::string where, const std::vector<std::string>& dedupe_hints,
                                                          std::shared_ptr<XetSourceIndex> source,
                                                          const std::filesystem::path& journal_dir) {
  std::unique_ptr<XetJournal> journal;
  if (!journal_dir.empty()) journal = std::make_unique<XetJournal>(journal_dir, cfg.client.endpoint, cfg.repo, cfg.branch);
  auto cas = std::make_unique<XetCas>(std::move(cfg), xet_token_from_action(upload_action));
  auto session = std::make_unique<XetUploadSession>(std::move(cas), std::move(where));
  session->source_ = std::move(source);
  session->journal_ = std::move(journal);
  session->prime(dedupe_hints);
  session->retire_source_if_known();
  return session;
}

std::string XetUploadSession::lfs_note(bool offered, const std::string& repo) {
  return offered ? "the Hub offered no Xet storage for " + repo + ": uploaded through LFS"
                 : "Xet storage not used (HF_HUB_DISABLE_XET): uploaded through LFS";
}

XetUploadSession::XetUploadSession(std::unique_ptr<XetCas> cas, std::string where)
    : cas_(std::move(cas)), where_(std::move(where)) {
  summary_.used = true;
}

bool XetUploadSession::find(const Hash& chunk, Found& out) {
  std::lock_guard g(mu_);
  if (auto it = run_.find(chunk); it != run_.end()) {
    out = {it->second, Way::kRun};
    return true;
  }
  for (const auto& s : global_) {
    const Hash k = s.key.is_zero() ? chunk : xet::keyed_hash(s.key, chunk);
    if (auto it = s.chunks.find(k); it != s.chunks.end()) {
      out = {it->second, Way::kGlobal};
      return true;
    }
  }
  return false;
}

bool XetUploadSession::query(const Hash& chunk, const std::string& what) {
  {
    std::lock_guard g(mu_);
    if (!queried_.insert(chunk).second) return false;
    summary_.dedupe_queries++;
  }
  std::optional<std::vector<uint8_t>> answer;
  xet::Shard shard;
  try {
    answer = cas_->query_chunk(chunk, what);
    if (!answer) return false;
    shard = xet::parse_shard(*answer, what + ": the CAS's dedupe answer for chunk " + chunk.to_hex());
  } catch (const Error& e) {
    std::lock_guard g(mu_);
    if (summary_.note.empty()) summary_.note = std::string("a global dedupe query failed (that data was uploaded): ") + e.what();
    return false;
  }
  GlobalShard gs;
  if (shard.footer) gs.key = shard.footer->chunk_hash_key;
  std::lock_guard g(mu_);
  summary_.dedupe_hits++;
  for (const auto& x : shard.xorbs) {
    if (!known_xorbs_.insert(x.hash).second) continue;
    for (uint32_t i = 0; i < x.chunks.size(); ++i) gs.chunks.emplace(x.chunks[i].hash, XetChunkLoc{x.hash, i});
  }
  if (gs.chunks.empty()) return false;
  global_.push_back(std::move(gs));
  return true;
}

// When the hints' answers listed every xorb of the source, global dedupe
// (tried first) finds every chunk the source could: chunking the source as
// well would only cost the reader time.
void XetUploadSession::retire_source_if_known() {
  if (!source_ || source_->xorbs().empty()) return;
  std::lock_guard g(mu_);
  for (const auto& x : source_->xorbs()) {
    if (!known_xorbs_.count(x)) return;
  }
  source_->retire();
}

void XetUploadSession::prime(const std::vector<std::string>& hex_hashes) {
  for (const auto& h : hex_hashes) {
    if (const auto hash = Hash::from_hex(h)) query(*hash, where_ + ": dedupe hint");
  }
}

void XetUploadSession::store_xorb(const xet::BuiltXorb& x, const std::string& what) {
  const Hash& h = x.index.hash;
  const bool resumed = journal_ && journal_->has(h) && cas_->has_xorb(h, what);
  if (!resumed) {
    cas_->upload_xorb(h, x.bytes, what);
    if (journal_) journal_->add(h, x.bytes.size());
  }
  const xet::ShardXorb info = xet::shard_xorb(x);
  std::lock_guard g(mu_);
  known_xorbs_.insert(info.hash);
  for (uint32_t i = 0; i < info.chunks.size(); ++i) run_.emplace(info.chunks[i].hash, XetChunkLoc{info.hash, i});
  if (resumed) {
    summary_.xorbs_resumed++;
    summary_.xorb_bytes_resumed += x.bytes.size();
  } else {
    summary_.xorbs_uploaded++;
    summary_.xorb_bytes_uploaded += x.bytes.size();
  }
  if (!shard_.fits_xorb(info)) flush_shard_locked();
  shard_.add_xorb(info);
}

void XetUploadSession::add_file(xet::ShardFile file, const XetFileUpload& report,
                                const std::map<uint32_t, uint32_t>& source_terms) {
  std::lock_guard g(mu_);
  if (source_verified(source_terms)) {
    add_to_shard_locked(std::move(file));
  } else {
    waiting_.push_back({std::move(file), report.path, source_terms});
  }
  summary_.files.push_back(report);
  summary_.bytes_chunked += report.bytes;
  summary_.deduped_in_run += report.deduped_in_run;
  summary_.deduped_global += report.deduped_global;
  summary_.deduped_source += report.deduped_source;
  summary_.new_bytes += report.new_bytes;
  summary_.bytes_read += report.bytes_read;
}

bool XetUploadSession::source_verified(const std::map<uint32_t, uint32_t>& terms) const {
  for (const auto& [file, term] : terms) {
    if (!source_ || !source_->verified(file, term)) return false;
  }
  return true;
}

void XetUploadSession::add_to_shard_locked(xet::ShardFile file) {
  if (!shard_.fits_file(file)) flush_shard_locked();
  shard_.add_file(std::move(file));
}

// Every file in the shard has all its xorbs stored (add_file comes after), so
// a shard may go up whenever it is full.
void XetUploadSession::flush_shard_locked() {
  if (shard_.empty()) return;
  const auto bytes = shard_.finish();
  cas_->upload_shard(bytes, where_);
  summary_.shards_uploaded++;
  summary_.shard_bytes_uploaded += bytes.size();
}

void XetUploadSession::finish() {
  std::lock_guard g(mu_);
  // The write is over, so every source term a file used was read: each is
  // verified now, or its file was dropped and the reference cannot stand.
  for (auto& w : waiting_) {
    for (const auto& [file, term] : w.source_terms) {
      if (source_->verified(file, term)) continue;
      throw Error(ErrorKind::kIntegrity,
                  where_ + ": " + w.path + ": it references chunks of the source by their place in the source's Xet "
                  "terms, and those terms then disagreed with the source's bytes (" + source_->refusal(file) +
                  "), so nothing was registered or committed (HF_HUB_DISABLE_XET=1 publishes through LFS instead)");
    }
  }
  for (auto& w : waiting_) add_to_shard_locked(std::move(w.file));
  waiting_.clear();
  flush_shard_locked();
  if (journal_) journal_->clear();  // registered: nothing left to resume
}

XetUploadSummary XetUploadSession::summary() const {
  std::lock_guard g(mu_);
  XetUploadSummary s = summary_;
  if (source_) {
    for (const auto& n : source_->notes()) s.note += (s.note.empty() ? "" : "; ") + n;
  }
  if (journal_ && !journal_->note().empty()) s.note += (s.note.empty() ? "" : "; ") + journal_->note();
  return s;
}

void XetUploadSession::upload_file(int fd, uint64_t size, const std::string& sha256, const std::string& rel,
                                   const std::function<void(uint64_t)>& progress, const std::vector<ContentChunk>* chunks) {
  if (chunks) {
    upload_chunked(fd, size, sha256, rel, progress, *chunks);
    return;
  }
  const std::string what = where_ + ": " + rel;
  FileUpload up(*this, what);
  up.report().path = rel;
  xet::FileHasher hasher([&](const xet::ChunkInfo& c, std::span<const uint8_t> b) { up.chunk(c, [b] { return b; }); }, true);
  std::vector<uint8_t> buf(static_cast<size_t>(std::min<uint64_t>(size, kReadBytes)));
  for (uint64_t off = 0; off < size;) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), size - off));
    const ssize_t r = ::pread(fd, buf.data(), want, static_cast<off_t>(off));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw_io(what + ": cannot read the file");
    if (r == 0) throw_integrity(what + ": the file is shorter than its declared size (did it change?)");
    hasher.update(std::span<const uint8_t>(buf.data(), static_cast<size_t>(r)));
    off += static_cast<uint64_t>(r);
    up.report().bytes_read += static_cast<uint64_t>(r);
    if (progress) progress(static_cast<uint64_t>(r));
  }
  const auto result = hasher.finish();
  if (result.sha256_hex != sha256) {
    throw_integrity(what + ": the file changed after it was hashed (SHA-256 " + result.sha256_hex + ", declared " + sha256 + ")");
  }
  auto file = up.finish(result, sha256);
  add_file(std::move(file), up.report(), up.source_terms());
}

// The file's chunks were cut by its writer, from the bytes it hashed:
// only chunks that go into a new xorb are read, each checked against its
// hash (a file changed since is an error naming the byte), in one read
// per run of new chunks.
void XetUploadSession::upload_chunked(int fd, uint64_t size, const std::string& sha256, const std::string& rel,
                                      const std::function<void(uint64_t)>& progress, const std::vector<ContentChunk>& chunks) {
  const std::string what = where_ + ": " + rel;
  FileUpload up(*this, what);
  up.report().path = rel;
  NewChunkReader reader(fd, size, what, up.report().bytes_read);
  xet::MerkleHasher merkle;
  uint64_t off = 0;
  for (const ContentChunk& k : chunks) {
    if (k.length == 0 || k.length > xet::kMaxChunkSize || k.length > size - off) {
      throw_integrity(what + ": its writer's chunk list does not fit its " + std::to_string(size) + " bytes (chunk at byte " +
                      std::to_string(off) + ")");
    }
    xet::ChunkInfo c;
    c.offset = off;
    c.length = k.length;
    c.hash.bytes = k.hash;
    up.chunk(c, [&] { return reader.read(c); });
    merkle.add(c.hash, c.length);
    off += k.length;
    if (progress) progress(k.length);
  }
  if (off != size) {
    throw_integrity(what + ": its writer's chunks cover " + std::to_string(off) + " of its " + std::to_string(size) + " bytes");
  }
  xet::FileHasher::Result r;
  r.file_hash = merkle.file_hash();
  r.size = size;
  r.chunk_count = merkle.chunk_count();
  auto file = up.finish(r, sha256);
  add_file(std::move(file), up.report(), up.source_terms());
}

}  // namespace detail
}  // namespace skippy
