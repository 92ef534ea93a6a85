// Publishing files through Xet storage (hub-docs docs/xet/upload-protocol.md,
// deduplication.md): each file is read once, in order, and cut into chunks
// (xet/file_hasher.h: chunk hashes, the file hash and the SHA-256 in that
// one pass); a chunk is referenced where it already is, else packed into a
// new xorb, which is stored as soon as it is full. Deduplication, in the
// order tried:
//   in the file   a chunk repeated in the xorb still being packed;
//   in the run    a chunk of a xorb this upload stored for another file;
//   the source    a chunk of the source the package is cut from, located in
//                 the source's xorbs by its reconstruction terms
//                 (xet_source_index.h), with no query;
//   global        a chunk of a xorb the CAS holds: the first chunk of each
//                 file, a chunk the hash rule makes eligible (at least 256
//                 chunks after the file's previous query, as hf-xet spaces
//                 them) and the caller's hints are asked of GET /v1/chunks,
//                 and every xorb of each answer (its chunk hashes keyed with
//                 the answer's HMAC key) is referenced from then on.
// A xorb the CAS acknowledged is written to the resume journal
// (xet_journal.h) until the files are registered, so a rerun after a failure
// references it instead of sending it again.
// A file's terms, verification hashes and SHA-256 go into the upload shard
// once all its xorbs are stored; finish() registers the shard(s), which makes
// the files the repository's LFS objects, ready for the commit. A file whose
// bytes are not what the caller declared (its SHA-256) is an error naming it.
//
// Thread-safety: upload_file may run on several threads at once; prime and
// finish are called with no upload_file running.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "hub/xet_cas.h"
#include "hub/xet_journal.h"
#include "hub/xet_source_index.h"
#include "skippy/hub_publish.h"
#include "xet/hash.h"
#include "xet/shard.h"
#include "xet/xorb.h"

namespace skippy::detail {

// Where a chunk is: a stored xorb and its index there.
struct XetChunkLoc {
  xet::Hash xorb;
  uint32_t index = 0;
};

class XetUploadSession {
 public:
  XetUploadSession(std::unique_ptr<XetCas> cas, std::string where);
  // The session publish makes on the first LFS batch answer that chose Xet:
  // its CAS client (the action's token first), primed with the source's
  // dedupe hints.
  static std::unique_ptr<XetUploadSession> start(XetCasConfig cfg, const nlohmann::json& upload_action, std::string where,
                                                 const std::vector<std::string>& dedupe_hints,
                                                 std::shared_ptr<XetSourceIndex> source,
                                                 const std::filesystem::path& journal_dir);
  // The one line a publish without Xet says (`offered`: the Hub was asked
  // and offered none; else HF_HUB_DISABLE_XET kept it from asking).
  static std::string lfs_note(bool offered, const std::string& repo);

  // Asks the global dedupe index for these chunk hashes (hex); a failed
  // query is a note in the summary, not an error.
  void prime(const std::vector<std::string>& hex_hashes);
  void retire_source_if_known();
  // Chunks, deduplicates and stores [0, size) of `fd` as `rel`; `sha256`
  // (lower-case hex) must be the bytes'. `progress` gets each count of bytes
  // done. With `chunks` (the file's chunks as its writer cut them, from the
  // bytes whose SHA-256 is `sha256`) only new chunks' bytes are read, each
  // checked against its hash; without, the file is read and hashed whole.
  // Throws for a refused xorb, a changed file or a CAS failure.
  void upload_file(int fd, uint64_t size, const std::string& sha256, const std::string& rel,
                   const std::function<void(uint64_t)>& progress, const std::vector<ContentChunk>* chunks = nullptr);
  // Registers every file uploaded so far (the shard, or several when one
  // would pass 64 MiB). A file that referenced source chunks whose term
  // was then refused (XetSourceIndex) is an error here, before any shard
  // holding it goes up.
  void finish();
  XetUploadSummary summary() const;

  // For the file being uploaded (xet_upload.cpp).
  enum class Way { kNew, kFile, kRun, kGlobal };
  struct Found {
    XetChunkLoc loc;
    Way way = Way::kNew;
  };
  bool find(const xet::Hash& chunk, Found& out);
  // Way (c): the chunk in the source's own xorbs.
  bool find_source(const xet::Hash& chunk, XetSourceIndex::Hit& out) const {
    return source_ && source_->find(chunk, out);
  }
  // Asks the CAS about `chunk` once per session; true when it answered with
  // xorbs not known before.
  bool query(const xet::Hash& chunk, const std::string& what);
  // Stores a xorb this upload built (unless the resume journal has it and
  // the CAS still holds it): its chunks are referenced from now on and its
  // CAS info goes into the shard.
  void store_xorb(const xet::BuiltXorb& x, const std::string& what);
  // `source_terms`: the last term of each source file the file referenced;
  // until they are verified the file waits outside the shard.
  void add_file(xet::ShardFile file, const XetFileUpload& report, const std::map<uint32_t, uint32_t>& source_terms);
  XetCas& cas() { return *cas_; }

 private:
  void upload_chunked(int fd, uint64_t size, const std::string& sha256, const std::string& rel,
                      const std::function<void(uint64_t)>& progress, const std::vector<ContentChunk>& chunks);
  void flush_shard_locked();
  void add_to_shard_locked(xet::ShardFile file);
  bool source_verified(const std::map<uint32_t, uint32_t>& terms) const;

  struct GlobalShard {
    xet::Hash key;  // zero: plain chunk hashes
    std::unordered_map<xet::Hash, XetChunkLoc, xet::HashHasher> chunks;
  };
  std::unique_ptr<XetCas> cas_;
  std::string where_;
  mutable std::mutex mu_;
  std::unordered_map<xet::Hash, XetChunkLoc, xet::HashHasher> run_;
  std::vector<GlobalShard> global_;
  std::shared_ptr<XetSourceIndex> source_;
  std::unique_ptr<XetJournal> journal_;
  struct Waiting {  // a file whose source terms were not yet verified
    xet::ShardFile file;
    std::string path;
    std::map<uint32_t, uint32_t> source_terms;
  };
  std::vector<Waiting> waiting_;
  std::set<xet::Hash> known_xorbs_, queried_;
  xet::ShardBuilder shard_;
  XetUploadSummary summary_;
};

}  // namespace skippy::detail
