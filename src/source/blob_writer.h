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
// for the next run. Internal to the library (hub/ and peer/ use it).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "skippy/file.h"
#include "skippy/hf_cache.h"
#include "skippy/sha256.h"

namespace skippy::detail {

// What the bytes must be.
struct BlobSpec {
  std::string etag;                   // the blob's name: lowercase 64-hex SHA-256 or 40-hex git blob id
  uint64_t size = 0;                  // exact
  std::optional<std::string> sha256;  // the declared content digest (the manifest's), either case
  std::string declared_by = "the manifest";
  std::string etag_from = "the Hub's etag";  // who named the blob (for messages)
  std::string what;                   // "hf://ns/repo@commit: path", prefixes every message
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
  std::optional<std::string> problem();  // what is wrong with the received bytes, if anything
  void install();                        // fsync + rename to blobs/<etag>

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

}  // namespace skippy::detail
