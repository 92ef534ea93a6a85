#include "source/blob_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <vector>

#include "skippy/error.h"
#include "util/io_env.h"
#include "util/file_lock.h"

namespace skippy::detail {

namespace fs = std::filesystem;

namespace {

constexpr uint64_t kWritebackChunk = uint64_t{4} << 20;
constexpr size_t kHashChunk = size_t{1} << 20;
constexpr auto kRecordEvery = std::chrono::milliseconds(500);
constexpr std::string_view kRecordMagic = "skippy-range-record 1";

// What is wrong with finished bytes whose digests are `sha` (and `git`).
std::optional<std::string> digest_problem(const BlobSpec& spec, Sha256& sha, std::optional<GitBlobId>& git) {
  const std::string digest = sha.hex_digest();
  const std::string git_id = git ? git->hex_digest() : std::string();
  if (spec.sha256 && !sha256_equal(digest, *spec.sha256)) {
    return "the bytes have SHA-256 " + digest + ", " + spec.declared_by + " says " + *spec.sha256;
  }
  if (spec.etag.size() == 64 && digest != spec.etag) {
    return "the bytes have SHA-256 " + digest + ", " + spec.etag_from + " says " + spec.etag;
  }
  if (spec.etag.size() == 40 && git_id != spec.etag) {
    return "the bytes have git blob id " + git_id + ", " + spec.etag_from + " says " + spec.etag;
  }
  return std::nullopt;
}

void note(const BlobSpec& spec, const std::string& text) {
  if (spec.on_note) spec.on_note(spec.what + ": " + text);
}

// The range record of a blob, read and checked; nullopt when there is none.
// `why` says what made an existing one unusable.
std::optional<ByteRanges> load_range_record(const fs::path& path, const BlobSpec& spec, std::string* why) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec))) return std::nullopt;
  ByteRanges done;
  try {
    const std::string text = read_small_file(path, kMaxRecordBytes);
    if (auto bad = parse_range_record(text, spec.etag, spec.size, done)) {
      *why = *bad;
      return ByteRanges{};
    }
  } catch (const Error& e) {
    *why = e.what();
    return ByteRanges{};
  }
  return done;
}

void pwrite_all(IoEnv& env, int fd, uint64_t offset, std::span<const uint8_t> data, const BlobSpec& spec,
                const fs::path& file) {
  size_t done = 0;
  while (done < data.size()) {
    const auto n = env.pwrite(fd, data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      throw Error(ErrorKind::kIo, spec.what + ": cannot write " + file.string() + ": " + std::strerror(n < 0 ? errno : ENOSPC));
    }
    done += static_cast<size_t>(n);
  }
}

// Opens blobs/<etag>.incomplete for writing, refusing anything but a regular file.
Fd open_incomplete(const fs::path& incomplete, struct stat& st) {
  Fd fd(::open(incomplete.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0666));
  if (!fd) throw_io(incomplete.string() + ": cannot open");
  if (::fstat(fd.get(), &st) != 0) throw_io(incomplete.string() + ": cannot stat");
  if (!S_ISREG(st.st_mode)) throw_invalid(incomplete.string() + ": not a regular file; remove it");
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) throw_io(incomplete.string() + ": cannot set flags");
  return fd;
}

// Digests of [0, len) of `fd`, read back in chunks.
void hash_file_range(int fd, uint64_t from, uint64_t to, Sha256& sha, std::optional<GitBlobId>& git, const fs::path& file,
                     std::vector<uint8_t>& buf) {
  if (buf.size() < kHashChunk) buf.resize(kHashChunk);
  for (uint64_t off = from; off < to;) {
    const auto n = ::pread(fd, buf.data(), static_cast<size_t>(std::min<uint64_t>(buf.size(), to - off)), static_cast<off_t>(off));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw_io(file.string() + ": cannot read back the partial download");
    sha.update({buf.data(), static_cast<size_t>(n)});
    if (git) git->update({buf.data(), static_cast<size_t>(n)});
    off += static_cast<uint64_t>(n);
  }
}

}  // namespace

BlobWriter::BlobWriter(const HfRepoCache& cache, BlobSpec spec, std::function<void(uint64_t)> on_bytes)
    : cache_(cache), spec_(std::move(spec)), on_bytes_(std::move(on_bytes)), incomplete_(cache.incomplete_path(spec_.etag)) {
  struct stat st {};
  fd_ = open_incomplete(incomplete_, st);
  if (spec_.etag.size() == 40) git_.emplace(spec_.size);
  const uint64_t kept = take_over_range_record(static_cast<uint64_t>(st.st_size));
  if (kept > spec_.size) {
    restart();
    return;
  }
  // Resume: the prefix an earlier run left goes into the digests first.
  std::vector<uint8_t> buf;
  hash_file_range(fd_.get(), 0, kept, sha_, git_, incomplete_, buf);
  have_ = flushed_ = kept;
  resumed_ = kept > 0;
  if (kept > 0 && on_bytes_) on_bytes_(kept);
}

uint64_t BlobWriter::take_over_range_record(uint64_t kept) {
  // A ranged download left this file (it has holes): only the prefix its
  // record lists may be kept, as a one-stream download appends after it.
  const fs::path record = range_record_path(cache_, spec_.etag);
  std::string why;
  const auto done = load_range_record(record, spec_, &why);
  if (!done) return kept;
  if (!why.empty()) {
    note(spec_, "the record of finished ranges " + record.string() + " is unusable (" + why +
                    "); downloading the file from the start");
  }
  const uint64_t prefix = std::min(done->prefix(), kept);
  if (::ftruncate(fd_.get(), static_cast<off_t>(prefix)) != 0) throw_io(incomplete_.string() + ": cannot truncate");
  ::unlink(record.c_str());
  return prefix;
}

void BlobWriter::restart() {
  if (::ftruncate(fd_.get(), 0) != 0) throw_io(incomplete_.string() + ": cannot truncate");
  ::unlink(range_record_path(cache_, spec_.etag).c_str());
  sha_ = Sha256();
  if (git_) git_.emplace(spec_.size);
  have_ = flushed_ = 0;
  resumed_ = false;
}

void BlobWriter::append(std::span<const uint8_t> data) {
  if (data.size() > spec_.size - have_) {
    throw_integrity(spec_.what + ": more than the " + std::to_string(spec_.size) + " bytes declared arrived");
  }
  pwrite_all(io(cache_.io_env()), fd_.get(), have_, data, spec_, incomplete_);
  sha_.update(data);
  if (git_) git_->update(data);
  have_ += data.size();
  if (on_bytes_) on_bytes_(data.size());
  if (have_ - flushed_ >= kWritebackChunk) {
    // Start writeback now so the fsync before the rename has little left.
    (void)::sync_file_range(fd_.get(), static_cast<off64_t>(flushed_), static_cast<off64_t>(have_ - flushed_),
                            SYNC_FILE_RANGE_WRITE);
    flushed_ = have_;
  }
}

std::optional<std::string> BlobWriter::problem() { return digest_problem(spec_, sha_, git_); }

void BlobWriter::install() {
  if (io(cache_.io_env()).fsync(fd_.get()) != 0) throw_io(incomplete_.string() + ": cannot fsync");
  fd_.close(incomplete_);
  // The bytes are durable before they get their name; the name itself is
  // not fsynced (a crash may lose it, never point it at other bytes: the
  // next run receives again), as huggingface_hub does not either.
  const fs::path blob = cache_.blob_path(spec_.etag);
  if (io(cache_.io_env()).rename(incomplete_.c_str(), blob.c_str()) != 0) {
    throw_io(blob.string() + ": cannot rename the finished download into place");
  }
}

namespace {

// Step 1: the blob lock; true (and `out` filled) when the blob is there already.
bool already_there(const HfRepoCache& cache, const std::string& commit, const std::string& rel_path, const BlobSpec& spec,
                   const std::function<void(uint64_t)>& on_bytes, ReceivedBlob& out) {
  std::error_code ec;
  if (!fs::is_regular_file(cache.blob_path(spec.etag), ec)) return false;
  if (on_bytes) on_bytes(spec.size);  // another process brought it while we waited
  out.local = cache.link(commit, rel_path, spec.etag);
  return true;
}

void check_blob_name(const BlobSpec& spec) {
  if (!is_blob_etag(spec.etag)) {
    throw_invalid(spec.what + ": \"" + spec.etag + "\" cannot name a blob (expected a lowercase SHA-256 or git blob SHA-1)");
  }
}

}  // namespace

// Steps 2-5 in one stream, the blob lock held.
ReceivedBlob receive_single(const HfRepoCache& cache, const std::string& commit, const std::string& rel_path,
                            const BlobSpec& spec, const std::function<void(uint64_t)>& on_bytes,
                            const std::function<void(BlobWriter&)>& transfer) {
  ReceivedBlob out;
  BlobWriter w(cache, spec, on_bytes);
  auto receive = [&] {
    try {
      if (!w.complete()) transfer(w);
    } catch (const Error& e) {
      // A sender that broke its own word (more bytes than it declared, a
      // different file): what it sent is worth nothing to a resume.
      if (e.kind() == ErrorKind::kIntegrity) {
        w.fd_.reset();
        ::unlink(w.incomplete_.c_str());
      }
      throw;
    }
    if (!w.complete()) {
      throw Error(ErrorKind::kTransport, spec.what + ": the transfer ended after " + std::to_string(w.have()) + " of " +
                                             std::to_string(spec.size) + " bytes (kept for the next run to resume)");
    }
  };
  receive();
  auto problem = w.problem();
  if (problem && w.resumed_) {
    // The partial file an earlier run left may be what is wrong: receive
    // once more from byte 0 before blaming the sender.
    w.restart();
    receive();
    problem = w.problem();
  }
  if (problem) {
    w.fd_.reset();
    ::unlink(w.incomplete_.c_str());
    throw_integrity(spec.what + ": " + *problem + "; the download was discarded (nothing was placed in the cache)");
  }
  w.install();
  out.received = true;
  out.verified = spec.sha256.has_value();
  out.local = cache.link(commit, rel_path, spec.etag);
  return out;
}

ReceivedBlob receive_blob(const HfRepoCache& cache, const std::string& commit, const std::string& rel_path,
                          const BlobSpec& spec, const std::function<void(uint64_t)>& on_bytes,
                          const std::function<void(BlobWriter&)>& transfer) {
  check_blob_name(spec);
  cache.create_dirs();
  ReceivedBlob out;
  const auto lock = FileLock::acquire(cache.lock_path(spec.etag), /*wait=*/true, /*mode=*/0666);
  if (already_there(cache, commit, rel_path, spec, on_bytes, out)) return out;
  return receive_single(cache, commit, rel_path, spec, on_bytes, transfer);
}

// ------------------------------------------------------------ ranged blobs

void ByteRanges::add(uint64_t begin, uint64_t end) {
  if (begin >= end) return;
  // The first range that ends at or after `begin` (it may touch or overlap).
  auto it = std::lower_bound(ranges_.begin(), ranges_.end(), begin,
                             [](const Range& r, uint64_t b) { return r.second < b; });
  auto last = it;
  while (last != ranges_.end() && last->first <= end) {
    begin = std::min(begin, last->first);
    end = std::max(end, last->second);
    ++last;
  }
  it = ranges_.erase(it, last);
  ranges_.insert(it, {begin, end});
}

uint64_t ByteRanges::total() const noexcept {
  uint64_t t = 0;
  for (const auto& r : ranges_) t += r.second - r.first;
  return t;
}

uint64_t ByteRanges::prefix() const noexcept { return !ranges_.empty() && ranges_[0].first == 0 ? ranges_[0].second : 0; }

std::vector<ByteRanges::Range> ByteRanges::missing(uint64_t size) const {
  std::vector<Range> out;
  uint64_t at = 0;
  for (const auto& r : ranges_) {
    if (r.first >= size) break;
    if (r.first > at) out.push_back({at, r.first});
    at = std::max(at, r.second);
  }
  if (at < size) out.push_back({at, size});
  return out;
}

fs::path range_record_path(const HfRepoCache& cache, std::string_view etag) {
  fs::path p = cache.incomplete_path(etag);
  p += ".ranges";
  return p;
}

std::string format_range_record(std::string_view etag, uint64_t size, const ByteRanges& done) {
  std::string body = std::string(kRecordMagic) + "\netag " + std::string(etag) + "\nsize " + std::to_string(size) + "\n";
  for (const auto& r : done.ranges()) body += std::to_string(r.first) + " " + std::to_string(r.second) + "\n";
  return body + "sha256 " + sha256_hex(body) + "\n";
}

std::optional<std::string> parse_range_record(std::string_view text, std::string_view etag, uint64_t size,
                                              ByteRanges& done) {
  done.clear();
  if (text.size() > kMaxRecordBytes) return "larger than " + std::to_string(kMaxRecordBytes) + " bytes";
  // The checksum line covers every byte before it.
  if (text.empty() || text.back() != '\n') return std::string("truncated (no final newline)");
  const auto last_nl = text.rfind('\n', text.size() - 2);
  if (last_nl == std::string_view::npos) return std::string("truncated");
  const std::string_view body = text.substr(0, last_nl + 1);
  const std::string_view sum_line = text.substr(last_nl + 1, text.size() - last_nl - 2);
  if (!sum_line.starts_with("sha256 ") || sum_line.size() != 7 + 64) return std::string("no checksum line");
  if (sum_line.substr(7) != sha256_hex(body)) return std::string("its checksum does not match its contents");
  size_t pos = 0;
  auto next_line = [&](std::string_view& line) {
    if (pos >= body.size()) return false;
    const auto nl = body.find('\n', pos);  // body ends with '\n'
    line = body.substr(pos, nl - pos);
    pos = nl + 1;
    return true;
  };
  auto number = [](std::string_view s, uint64_t& v) {
    if (s.empty() || s.size() > 20) return false;
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return ec == std::errc() && p == s.data() + s.size();
  };
  std::string_view line;
  if (!next_line(line) || line != kRecordMagic) return std::string("not a range record of this version");
  if (!next_line(line) || !line.starts_with("etag ") || line.substr(5) != etag) return std::string("it is for another blob");
  uint64_t v = 0;
  if (!next_line(line) || !line.starts_with("size ") || !number(line.substr(5), v)) return std::string("no size line");
  if (v != size) return "it is for " + std::to_string(v) + " bytes, the file has " + std::to_string(size);
  uint64_t prev_end = 0;
  size_t count = 0;
  while (next_line(line)) {
    const auto sp = line.find(' ');
    uint64_t a = 0, b = 0;
    if (sp == std::string_view::npos || !number(line.substr(0, sp), a) || !number(line.substr(sp + 1), b)) {
      return "unreadable line \"" + std::string(line.substr(0, 60)) + "\"";
    }
    if (a >= b || b > size) return "range " + std::to_string(a) + "-" + std::to_string(b) + " is outside the file";
    if (count > 0 && a <= prev_end) return std::string("ranges out of order or overlapping");
    if (++count > kMaxRecordRanges) return "more than " + std::to_string(kMaxRecordRanges) + " ranges";
    done.add(a, b);
    prev_end = b;
  }
  return std::nullopt;
}

RangedBlobWriter::RangedBlobWriter(const HfRepoCache& cache, BlobSpec spec, std::function<void(uint64_t)> on_bytes)
    : cache_(cache),
      spec_(std::move(spec)),
      on_bytes_(std::move(on_bytes)),
      incomplete_(cache.incomplete_path(spec_.etag)),
      record_path_(range_record_path(cache, spec_.etag)) {
  struct stat st {};
  fd_ = open_incomplete(incomplete_, st);
  if (spec_.etag.size() == 40) git_.emplace(spec_.size);
  uint64_t length = static_cast<uint64_t>(st.st_size);
  std::string why;
  auto done = load_range_record(record_path_, spec_, &why);
  if (done && !why.empty()) {
    note(spec_, "the record of finished ranges " + record_path_.string() + " is unusable (" + why +
                    "); downloading the file from the start");
    if (::ftruncate(fd_.get(), 0) != 0) throw_io(incomplete_.string() + ": cannot truncate");
    length = 0;
  } else if (done) {
    // Only what the record lists, and only what the file holds.
    for (const auto& r : done->ranges()) {
      if (r.first < length) done_.add(r.first, std::min(r.second, length));
    }
  } else if (length > 0 && length <= spec_.size) {
    done_.add(0, length);  // a one-stream download's prefix (its length is its record)
  } else if (length > 0) {
    if (::ftruncate(fd_.get(), 0) != 0) throw_io(incomplete_.string() + ": cannot truncate");
    length = 0;
  }
  if (length > spec_.size && ::ftruncate(fd_.get(), static_cast<off_t>(spec_.size)) != 0) {
    throw_io(incomplete_.string() + ": cannot truncate");
  }
  resumed_ = done_.total() > 0;
  // Reserve the blocks without changing the length (best effort): fewer
  // fragments from writes landing out of order.
  (void)::fallocate(fd_.get(), FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(spec_.size));
  // Nothing beyond what is recorded may be written before the record exists.
  record();
  if (resumed_ && on_bytes_) on_bytes_(done_.total());
}

RangedBlobWriter::~RangedBlobWriter() {
  if (finished_) return;
  try {
    record();
  } catch (const std::exception&) {
    // The next run then trusts less (or starts over): never more.
  }
}

std::vector<ByteRanges::Range> RangedBlobWriter::missing() const {
  std::lock_guard g(mu_);
  return done_.missing(spec_.size);
}

uint64_t RangedBlobWriter::received() const {
  std::lock_guard g(mu_);
  return done_.total();
}

bool RangedBlobWriter::complete() const {
  std::lock_guard g(mu_);
  return done_.prefix() == spec_.size;
}

void RangedBlobWriter::write_at(uint64_t offset, std::span<const uint8_t> data) {
  if (offset > spec_.size || data.size() > spec_.size - offset) {
    throw_integrity(spec_.what + ": bytes past the " + std::to_string(spec_.size) + " declared arrived (at offset " +
                    std::to_string(offset) + ")");
  }
  pwrite_all(io(cache_.io_env()), fd_.get(), offset, data, spec_, incomplete_);
  {
    std::lock_guard g(mu_);
    done_.add(offset, offset + data.size());
    dirty_ = true;
  }
  if (on_bytes_) on_bytes_(data.size());
}

void RangedBlobWriter::notify() {
  {
    std::lock_guard g(mu_);
    woken_ = true;
  }
  cv_.notify_all();
}

void RangedBlobWriter::hash_prefix() {
  uint64_t prefix;
  {
    std::lock_guard g(mu_);
    prefix = done_.prefix();
  }
  if (prefix <= hashed_) return;
  std::vector<uint8_t> buf;
  hash_file_range(fd_.get(), hashed_, prefix, sha_, git_, incomplete_, buf);
  hashed_ = prefix;
  if (hashed_ - flushed_ >= kWritebackChunk || hashed_ == spec_.size) {
    // Start writeback now so the fsync before the rename has little left.
    (void)::sync_file_range(fd_.get(), static_cast<off64_t>(flushed_), static_cast<off64_t>(hashed_ - flushed_),
                            SYNC_FILE_RANGE_WRITE);
    flushed_ = hashed_;
  }
}

void RangedBlobWriter::record() {
  std::string text;
  {
    std::lock_guard g(mu_);
    text = format_range_record(spec_.etag, spec_.size, done_);
    dirty_ = false;
  }
  // Atomic (a temporary name, then rename): a reader sees the old record or
  // the new one. Not fsynced: after a crash of the machine the SHA-256 check
  // still stands between wrong bytes and a name.
  write_file_atomic(record_path_, text, Durability::kRenameOnly, cache_.io_env());
  recorded_at_ = std::chrono::steady_clock::now();
}

void RangedBlobWriter::pump(std::chrono::milliseconds wait) {
  hash_prefix();
  bool due;
  {
    std::lock_guard g(mu_);
    due = dirty_ && std::chrono::steady_clock::now() - recorded_at_ >= kRecordEvery;
  }
  if (due) record();
  std::unique_lock g(mu_);
  cv_.wait_for(g, wait, [&] { return woken_; });
  woken_ = false;
}

void RangedBlobWriter::restart() {
  if (::ftruncate(fd_.get(), 0) != 0) throw_io(incomplete_.string() + ": cannot truncate");
  {
    std::lock_guard g(mu_);
    done_.clear();
  }
  sha_ = Sha256();
  if (git_) git_.emplace(spec_.size);
  hashed_ = flushed_ = 0;
  resumed_ = false;
  record();
}

std::optional<std::string> RangedBlobWriter::problem() {
  hash_prefix();
  return digest_problem(spec_, sha_, git_);
}

void RangedBlobWriter::install() {
  if (io(cache_.io_env()).fsync(fd_.get()) != 0) throw_io(incomplete_.string() + ": cannot fsync");
  fd_.close(incomplete_);
  const fs::path blob = cache_.blob_path(spec_.etag);
  if (io(cache_.io_env()).rename(incomplete_.c_str(), blob.c_str()) != 0) {
    throw_io(blob.string() + ": cannot rename the finished download into place");
  }
  finished_ = true;
  ::unlink(record_path_.c_str());
}

void RangedBlobWriter::discard() noexcept {
  finished_ = true;
  fd_.reset();
  ::unlink(incomplete_.c_str());
  ::unlink(record_path_.c_str());
}

ReceivedBlob receive_blob_ranged(const HfRepoCache& cache, const std::string& commit, const std::string& rel_path,
                                 const BlobSpec& spec, const std::function<void(uint64_t)>& on_bytes,
                                 const std::function<bool(RangedBlobWriter&)>& transfer,
                                 const std::function<void(BlobWriter&)>& single) {
  check_blob_name(spec);
  cache.create_dirs();
  ReceivedBlob out;
  const auto lock = FileLock::acquire(cache.lock_path(spec.etag), /*wait=*/true, /*mode=*/0666);
  if (already_there(cache, commit, rel_path, spec, on_bytes, out)) return out;
  std::optional<RangedBlobWriter> w;
  w.emplace(cache, spec, on_bytes);
  // False: the server serves no ranges; then one stream from byte 0.
  auto receive = [&] {
    if (!w->complete() && !transfer(*w)) return false;
    if (!w->complete()) {
      throw Error(ErrorKind::kTransport, spec.what + ": the transfer ended with " + std::to_string(w->received()) + " of " +
                                             std::to_string(spec.size) + " bytes (kept for the next run to resume)");
    }
    return true;
  };
  auto one_stream = [&] {
    w->discard();
    w.reset();
    return receive_single(cache, commit, rel_path, spec, on_bytes, single);
  };
  if (!receive()) return one_stream();
  auto problem = w->problem();
  if (problem && w->resumed()) {
    // Bytes an earlier run left may be what is wrong: receive everything
    // once more before blaming the sender.
    w->restart();
    if (!receive()) return one_stream();
    problem = w->problem();
  }
  if (problem) {
    w->discard();
    throw_integrity(spec.what + ": " + *problem + "; the download was discarded (nothing was placed in the cache)");
  }
  w->install();
  out.received = true;
  out.verified = spec.sha256.has_value();
  out.local = cache.link(commit, rel_path, spec.etag);
  return out;
}

}  // namespace skippy::detail
