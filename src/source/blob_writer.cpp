#include "source/blob_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "skippy/error.h"
#include "util/file_lock.h"

namespace skippy::detail {

namespace fs = std::filesystem;

namespace {

constexpr uint64_t kWritebackChunk = uint64_t{4} << 20;
constexpr size_t kHashChunk = size_t{1} << 20;

}  // namespace

BlobWriter::BlobWriter(const HfRepoCache& cache, BlobSpec spec, std::function<void(uint64_t)> on_bytes)
    : cache_(cache), spec_(std::move(spec)), on_bytes_(std::move(on_bytes)), incomplete_(cache.incomplete_path(spec_.etag)) {
  fd_.reset(::open(incomplete_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0666));
  if (!fd_) throw_io(incomplete_.string() + ": cannot open");
  struct stat st {};
  if (::fstat(fd_.get(), &st) != 0) throw_io(incomplete_.string() + ": cannot stat");
  if (!S_ISREG(st.st_mode)) throw_invalid(incomplete_.string() + ": not a regular file; remove it");
  const int flags = ::fcntl(fd_.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd_.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) throw_io(incomplete_.string() + ": cannot set flags");
  if (spec_.etag.size() == 40) git_.emplace(spec_.size);
  const uint64_t kept = static_cast<uint64_t>(st.st_size);
  if (kept > spec_.size) {
    restart();
    return;
  }
  // Resume: the prefix an earlier run left goes into the digests first.
  std::vector<uint8_t> buf(kHashChunk);
  for (uint64_t off = 0; off < kept;) {
    const auto n = ::pread(fd_.get(), buf.data(), static_cast<size_t>(std::min<uint64_t>(buf.size(), kept - off)),
                           static_cast<off_t>(off));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw_io(incomplete_.string() + ": cannot read the partial download");
    sha_.update({buf.data(), static_cast<size_t>(n)});
    if (git_) git_->update({buf.data(), static_cast<size_t>(n)});
    off += static_cast<uint64_t>(n);
  }
  have_ = flushed_ = kept;
  resumed_ = kept > 0;
  if (kept > 0 && on_bytes_) on_bytes_(kept);
}

void BlobWriter::restart() {
  if (::ftruncate(fd_.get(), 0) != 0) throw_io(incomplete_.string() + ": cannot truncate");
  sha_ = Sha256();
  if (git_) git_.emplace(spec_.size);
  have_ = flushed_ = 0;
  resumed_ = false;
}

void BlobWriter::append(std::span<const uint8_t> data) {
  if (data.size() > spec_.size - have_) {
    throw_integrity(spec_.what + ": more than the " + std::to_string(spec_.size) + " bytes declared arrived");
  }
  size_t done = 0;
  while (done < data.size()) {
    const auto n = ::pwrite(fd_.get(), data.data() + done, data.size() - done, static_cast<off_t>(have_ + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      throw Error(ErrorKind::kIo, spec_.what + ": cannot write " + incomplete_.string() + ": " +
                                      std::strerror(n < 0 ? errno : ENOSPC));
    }
    done += static_cast<size_t>(n);
  }
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

std::optional<std::string> BlobWriter::problem() {
  const std::string digest = sha_.hex_digest();
  const std::string git_id = git_ ? git_->hex_digest() : std::string();
  if (spec_.sha256 && !sha256_equal(digest, *spec_.sha256)) {
    return "the bytes have SHA-256 " + digest + ", " + spec_.declared_by + " says " + *spec_.sha256;
  }
  if (spec_.etag.size() == 64 && digest != spec_.etag) {
    return "the bytes have SHA-256 " + digest + ", " + spec_.etag_from + " says " + spec_.etag;
  }
  if (spec_.etag.size() == 40 && git_id != spec_.etag) {
    return "the bytes have git blob id " + git_id + ", " + spec_.etag_from + " says " + spec_.etag;
  }
  return std::nullopt;
}

void BlobWriter::install() {
  if (::fsync(fd_.get()) != 0) throw_io(incomplete_.string() + ": cannot fsync");
  fd_.close(incomplete_);
  // The bytes are durable before they get their name; the name itself is
  // not fsynced (a crash may lose it, never point it at other bytes: the
  // next run receives again), as huggingface_hub does not either.
  const fs::path blob = cache_.blob_path(spec_.etag);
  if (::rename(incomplete_.c_str(), blob.c_str()) != 0) throw_io(blob.string() + ": cannot rename the finished download into place");
}

ReceivedBlob receive_blob(const HfRepoCache& cache, const std::string& commit, const std::string& rel_path,
                          const BlobSpec& spec, const std::function<void(uint64_t)>& on_bytes,
                          const std::function<void(BlobWriter&)>& transfer) {
  if (!is_blob_etag(spec.etag)) {
    throw_invalid(spec.what + ": \"" + spec.etag + "\" cannot name a blob (expected a lowercase SHA-256 or git blob SHA-1)");
  }
  cache.create_dirs();
  ReceivedBlob out;
  const auto lock = FileLock::acquire(cache.lock_path(spec.etag), /*wait=*/true, /*mode=*/0666);
  std::error_code ec;
  if (fs::is_regular_file(cache.blob_path(spec.etag), ec)) {
    if (on_bytes) on_bytes(spec.size);  // another process brought it while we waited
    out.local = cache.link(commit, rel_path, spec.etag);
    return out;
  }
  BlobWriter w(cache, spec, on_bytes);
  auto receive = [&] {
    if (!w.complete()) transfer(w);
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

}  // namespace skippy::detail
