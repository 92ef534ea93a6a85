// Publishing files through Xet storage (hub-docs docs/xet/upload-protocol.md,
// deduplication.md): each file is read once, in order, and cut into chunks
// (xet/file_hasher.h: chunk hashes, the file hash and the SHA-256 in that
// one pass); a chunk is referenced where it already is, else packed into a
// new xorb, which is stored as soon as it is full. Deduplication, three ways
// in the order tried:
//   in the file   a chunk repeated in the xorb still being packed;
//   in the run    a chunk of a xorb this upload stored for another file;
//   global        a chunk of a xorb the CAS holds: the first chunk of each
//                 file, a chunk the hash rule makes eligible (at least 256
//                 chunks after the file's previous query, as hf-xet spaces
//                 them) and the caller's hints are asked of GET /v1/chunks,
//                 and every xorb of each answer (its chunk hashes keyed with
//                 the answer's HMAC key) is referenced from then on.
// A file's terms, verification hashes and SHA-256 go into the upload shard
// once all its xorbs are stored; finish() registers the shard(s), which makes
// the files the repository's LFS objects, ready for the commit. A file whose
// bytes are not what the caller declared (its SHA-256) is an error naming it.
//
// Thread-safety: upload_file may run on several threads at once; prime and
// finish are called with no upload_file running.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "hub/xet_cas.h"
#include "skippy/hub_publish.h"
#include "xet/hash.h"
#include "xet/shard.h"

namespace skippy::detail {

// Where a chunk is: a stored xorb and its index there.
struct XetChunkLoc {
  xet::Hash xorb;
  uint32_t index = 0;
};

class XetUploadSession {
 public:
  XetUploadSession(std::unique_ptr<XetCas> cas, std::string where);

  // Asks the global dedupe index for these chunk hashes (hex); a failed
  // query is a note in the summary, not an error.
  void prime(const std::vector<std::string>& hex_hashes);
  // Chunks, deduplicates and stores [0, size) of `fd` as `rel`; `sha256`
  // (lower-case hex) must be the bytes'. `progress` gets each count of bytes
  // read. Throws for a refused xorb, a changed file or a CAS failure.
  void upload_file(int fd, uint64_t size, const std::string& sha256, const std::string& rel,
                   const std::function<void(uint64_t)>& progress);
  // Registers every file uploaded so far (the shard, or several when one
  // would pass 64 MiB).
  void finish();
  XetUploadSummary summary() const;

  // For the file being uploaded (xet_upload.cpp).
  enum class Way { kNew, kFile, kRun, kGlobal };
  struct Found {
    XetChunkLoc loc;
    Way way = Way::kNew;
  };
  bool find(const xet::Hash& chunk, Found& out);
  // Asks the CAS about `chunk` once per session; true when it answered with
  // xorbs not known before.
  bool query(const xet::Hash& chunk, const std::string& what);
  // A xorb this upload stored: its chunks are referenced from now on and its
  // CAS info goes into the shard.
  void stored_xorb(const xet::ShardXorb& info, uint64_t serialized_bytes);
  void add_file(xet::ShardFile file, const XetFileUpload& report);
  XetCas& cas() { return *cas_; }

 private:
  void flush_shard_locked();

  struct GlobalShard {
    xet::Hash key;  // zero: plain chunk hashes
    std::unordered_map<xet::Hash, XetChunkLoc, xet::HashHasher> chunks;
  };
  std::unique_ptr<XetCas> cas_;
  std::string where_;
  mutable std::mutex mu_;
  std::unordered_map<xet::Hash, XetChunkLoc, xet::HashHasher> run_;
  std::vector<GlobalShard> global_;
  std::set<xet::Hash> known_xorbs_, queried_;
  xet::ShardBuilder shard_;
  XetUploadSummary summary_;
};

}  // namespace skippy::detail
