// The one way bytes from a remote (the Hub, a peer) enter the Hugging Face
// cache. Shared by every remote so the rules live in one place:
//
//   1. take .locks/models--ns--repo/<etag>.lock (flock, as huggingface_hub's
//      filelock does), waiting while another process brings the same blob;
//      a blob that appeared meanwhile needs nothing more;
//   2. receive into blobs/<etag>.incomplete, resuming what an earlier run
//      left there (its bytes are hashed first), hashing while writing, with
//      writeback started as the file grows;
//   3. check the size, the declared SHA-256 and the etag itself (a SHA-256,
//      or a git blob id for files outside LFS): no blob is ever named on a
//      server's word;
//   4. when the check fails and the bytes were not received in one stream
//      from byte 0 (a partial file of an earlier run, a resumed request),
//      drop them and receive once more from byte 0 (the prefix may be what
//      was wrong); when it fails again, delete the partial file and throw
//      Error(kIntegrity): wrong bytes never get a final name;
//   5. fsync, rename to blobs/<etag>, link snapshots/<commit>/<path>.
//
// A transfer that fails midway (transport, timeout) keeps the partial file
// for the next run. Every write, fsync and rename goes through the cache's
// IoEnv (HfRepoCache::io_env, from Sources::io_env). Internal to the
// library (hub/ and peer/ use it).
//
// Large blobs may instead arrive as byte ranges over several connections at
// once (receive_blob_ranged, RangedBlobWriter): each range is written in
// place (pwrite) into the same .incomplete file, the SHA-256 follows the
// contiguous prefix as it grows (reading back what was just written, from
// the page cache), and the finished ranges are recorded beside it in
// blobs/<etag>.incomplete.ranges (the range record, replaced atomically) so
// the next run resumes every range exactly. Bytes the record does not list
// are never trusted; a record that cannot be read means starting over, with
// a note saying so. Steps 1, 3, 4 and 5 are the same.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "util/file.h"
#include "skippy/source.h"
#include "util/sha256.h"

namespace skippy::detail {

// What the bytes must be.
struct BlobSpec {
  std::string etag;                   // the blob's name: lowercase 64-hex SHA-256 or 40-hex git blob id
  uint64_t size = 0;                  // exact
  std::optional<std::string> sha256;  // the declared content digest (the manifest's), either case
  std::string declared_by = "the manifest";
  std::string etag_from = "the Hub's etag";  // who named the blob (for messages)
  std::string what;                   // "hf://ns/repo@commit: path", prefixes every message
  // Told what the writer did that the user should know but that is no
  // failure (a range record it could not read and ignored). Optional.
  std::function<void(const std::string&)> on_note;
};

// Receives one blob's bytes. Not thread-safe; one per transfer.
class BlobWriter {
 public:
  // Opens (creating) blobs/<etag>.incomplete and hashes what it holds.
  BlobWriter(const HfRepoCache& cache, BlobSpec spec, std::function<void(uint64_t)> on_bytes);
  BlobWriter(const BlobWriter&) = delete;
  BlobWriter& operator=(const BlobWriter&) = delete;

  const BlobSpec& spec() const noexcept { return spec_; }
  // Bytes received so far (the resume offset for the next request).
  uint64_t have() const noexcept { return have_; }
  bool complete() const noexcept { return have_ == spec_.size; }
  // Drops everything received; the next byte is byte 0.
  void restart();
  // Says the bytes that follow continue a prefix received earlier (a Range
  // request after a dropped connection, a peer's resume offset): should the
  // finished blob fail its check, it is then received once more from byte 0,
  // since the prefix may be what was wrong. No effect at have() == 0.
  void mark_resumed() noexcept { resumed_ = resumed_ || have_ > 0; }
  // Appends at have(). Throws Error(kIntegrity) when the bytes would go past
  // the declared size (nothing is written then), Error(kIo) when the disk
  // refuses (disk full).
  void append(std::span<const uint8_t> data);

 private:
  friend struct ReceivedBlob receive_blob(const HfRepoCache&, const std::string&, const std::string&, const BlobSpec&,
                                          const std::function<void(uint64_t)>&,
                                          const std::function<void(BlobWriter&)>&);
  friend struct ReceivedBlob receive_single(const HfRepoCache&, const std::string&, const std::string&, const BlobSpec&,
                                            const std::function<void(uint64_t)>&,
                                            const std::function<void(BlobWriter&)>&);
  std::optional<std::string> problem();  // what is wrong with the received bytes, if anything
  void install();                        // fsync + rename to blobs/<etag>
  uint64_t take_over_range_record(uint64_t kept);  // a ranged download's record: its prefix, or 0

  const HfRepoCache& cache_;
  BlobSpec spec_;
  std::function<void(uint64_t)> on_bytes_;
  std::filesystem::path incomplete_;
  Fd fd_;
  uint64_t have_ = 0;
  uint64_t flushed_ = 0;   // bytes whose writeback was started
  bool resumed_ = false;   // the bytes were not received in one stream from byte 0
  Sha256 sha_;
  std::optional<GitBlobId> git_;
};

struct ReceivedBlob {
  std::filesystem::path local;  // snapshots/<commit>/<path>
  bool received = false;        // false: another process brought it first
  bool verified = false;        // the declared SHA-256 was checked on the bytes
};

// Steps 1-5 above around `transfer`, which must append bytes from
// writer.have() until writer.complete() (or throw; it may restart() the
// writer when its peer cannot resume). Returns where the file now is.
ReceivedBlob receive_blob(const HfRepoCache& cache, const std::string& commit, const std::string& rel_path,
                          const BlobSpec& spec, const std::function<void(uint64_t)>& on_bytes,
                          const std::function<void(BlobWriter&)>& transfer);

// ------------------------------------------------------------ ranged blobs

// Half-open byte ranges [first, second), kept sorted, disjoint and merged.
class ByteRanges {
 public:
  using Range = std::pair<uint64_t, uint64_t>;
  void add(uint64_t begin, uint64_t end);
  void clear() noexcept { ranges_.clear(); }
  const std::vector<Range>& ranges() const noexcept { return ranges_; }
  uint64_t total() const noexcept;
  // The end of the range that starts at byte 0 (0 when none does).
  uint64_t prefix() const noexcept;
  // What [0, size) lacks, in order.
  std::vector<Range> missing(uint64_t size) const;

 private:
  std::vector<Range> ranges_;
};

// blobs/<etag>.incomplete.ranges: the record of a ranged download's finished
// ranges, beside its .incomplete file.
std::filesystem::path range_record_path(const HfRepoCache& cache, std::string_view etag);
// The record's text: a version line, the etag, the size, one "BEGIN END"
// line per finished range, and the SHA-256 of everything before it.
std::string format_range_record(std::string_view etag, uint64_t size, const ByteRanges& done);
// Reads a record (untrusted: it may be truncated, damaged or another blob's)
// into `done`; returns why it cannot be used, or nullopt when it can. Every
// number is bounds-checked against `size`; ranges must be in order and
// disjoint; at most kMaxRecordRanges of them.
inline constexpr size_t kMaxRecordRanges = 100000;
inline constexpr uint64_t kMaxRecordBytes = uint64_t{4} << 20;
std::optional<std::string> parse_range_record(std::string_view text, std::string_view etag, uint64_t size,
                                              ByteRanges& done);

// Receives one blob as byte ranges written concurrently from several
// threads. Whoever drives it (the caller of receive_blob_ranged's
// `transfer`) hands each byte offset to exactly one writer thread at a time.
class RangedBlobWriter {
 public:
  // Opens (creating) blobs/<etag>.incomplete with what its range record
  // says was received (or, with no record, its length as a prefix left by
  // a one-stream download), then records that before any new byte lands.
  RangedBlobWriter(const HfRepoCache& cache, BlobSpec spec, std::function<void(uint64_t)> on_bytes);
  // Records what arrived (the range record) unless the blob was installed
  // or discarded: an interrupted download resumes from it.
  ~RangedBlobWriter();
  RangedBlobWriter(const RangedBlobWriter&) = delete;
  RangedBlobWriter& operator=(const RangedBlobWriter&) = delete;

  const BlobSpec& spec() const noexcept { return spec_; }
  // What is still missing, in order.
  std::vector<ByteRanges::Range> missing() const;
  uint64_t received() const;
  bool complete() const;
  // Some of the bytes came from an earlier run (the record or a prefix).
  bool resumed() const noexcept { return resumed_; }
  // Thread-safe: writes `data` at `offset` and counts it received. Throws
  // Error(kIntegrity) past the declared size, Error(kIo) when the disk refuses.
  void write_at(uint64_t offset, std::span<const uint8_t> data);
  // For the one thread that waits while others write: hashes what the
  // contiguous prefix gained, records the finished ranges when it is time
  // (at most every half second), then waits up to `wait` or until notify().
  void pump(std::chrono::milliseconds wait);
  void notify();
  // Drops everything received (and the record); the download starts over.
  // Only while no thread writes.
  void restart();

 private:
  friend ReceivedBlob receive_blob_ranged(const HfRepoCache&, const std::string&, const std::string&, const BlobSpec&,
                                          const std::function<void(uint64_t)>&,
                                          const std::function<bool(RangedBlobWriter&)>&,
                                          const std::function<void(BlobWriter&)>&);
  void hash_prefix();  // hashes [hashed_, prefix)
  void record();       // writes the range record
  std::optional<std::string> problem();
  void install();
  void discard() noexcept;  // deletes the partial file and its record

  const HfRepoCache& cache_;
  BlobSpec spec_;
  std::function<void(uint64_t)> on_bytes_;
  std::filesystem::path incomplete_, record_path_;
  Fd fd_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  ByteRanges done_;          // guarded by mu_
  bool dirty_ = false;       // done_ changed since the last record (mu_)
  bool woken_ = false;       // notify() since the last wait (mu_)
  bool finished_ = false;    // installed or discarded: nothing to record
  bool resumed_ = false;
  uint64_t hashed_ = 0;      // the pump thread's
  uint64_t flushed_ = 0;     // writeback started for [0, flushed_)
  std::chrono::steady_clock::time_point recorded_at_{};
  Sha256 sha_;
  std::optional<GitBlobId> git_;
};

// receive_blob's steps around a ranged `transfer`, which must write every
// missing range (writer.missing()) and return true, or throw (the record
// keeps what arrived); or return false when the server cannot serve ranges,
// and then `single` receives the blob in one stream from byte 0 as
// receive_blob's transfer does.
ReceivedBlob receive_blob_ranged(const HfRepoCache& cache, const std::string& commit, const std::string& rel_path,
                                 const BlobSpec& spec, const std::function<void(uint64_t)>& on_bytes,
                                 const std::function<bool(RangedBlobWriter&)>& transfer,
                                 const std::function<void(BlobWriter&)>& single);

}  // namespace skippy::detail
