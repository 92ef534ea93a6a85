// Dedupe against the source itself: when a package is cut from a model the
// Hub stores Xet-backed, each source file's reconstruction terms (xorb, chunk
// range, unpacked length; hub-docs docs/xet/download-protocol.md) say which
// xorb chunk holds each stretch of its bytes. The writer reads the source in
// order anyway; observe() chunks those same bytes with the Xet CDC
// (xet/file_hasher.h) as they are read and walks the terms beside them, so
// chunk k of the source is chunk i of xorb X, and a package chunk with the
// same hash is referenced there without asking the global dedupe index.
//
// Safety: a chunk is located by position, so the walk is checked against the
// CAS's own lengths: the chunks of each term must add up to exactly its
// unpacked length, and the file to exactly its terms. A disagreement drops
// the file (a note; its chunks are never found again). A chunk is findable as
// soon as it is cut (a package file may be uploaded before the term holding
// its bytes ends in the source), so each hit names its term: the upload keeps
// a file out of its shard until every term it used is verified
// (verified()), and a file whose term was then refused is an error before
// anything is registered: never a wrong reference.
//
// Memory: one entry (about 80 bytes) per source chunk, 64 KiB on average:
// about 0.12% of the source's size.
//
// Thread-safety: observe() from one thread (the writer's reader), find() and
// verified() from any.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "hub/xet_cas.h"
#include "hub/xet_download.h"
#include "hub/xet_reconstruction.h"
#include "skippy/hub_publish.h"
#include "xet/hash.h"

namespace skippy::detail {

class XetSourceIndex final : public XetDedupeSource {
 public:
  struct File {
    std::string path;                // in the source repository (for messages)
    uint64_t size = 0;
    std::optional<XetFileRef> xet;   // nullopt: not Xet-backed, no dedupe against it
  };
  // `files` in the writer's shard order. Asks the CAS for every Xet-backed
  // file's terms now; a file the CAS cannot describe is a note, not an error.
  XetSourceIndex(const XetClientConfig& cfg, std::vector<File> files, std::string where);
  // For tests: terms given, nothing asked.
  XetSourceIndex(std::vector<File> files, std::vector<std::vector<XetTerm>> terms, std::string where);
  ~XetSourceIndex();

  // The source's bytes, in order: each file from byte 0 to its end, one file
  // after the other (calls for files without terms are skipped cheaply).
  void observe(size_t file, uint64_t offset, std::span<const uint8_t> bytes);

  struct Hit {
    xet::Hash xorb;
    uint32_t index = 0;  // chunk index in the xorb
    uint32_t file = 0;   // which source file, and which of its terms: for verified()
    uint32_t term = 0;
  };
  bool find(const xet::Hash& chunk, Hit& out) const;
  // Term `term` of source file `file`, and all before it, agreed with the
  // chunks; false while it is still being read or once the file was dropped.
  bool verified(uint32_t file, uint32_t term) const;
  // Why a file's hits cannot be used (empty while it may still verify).
  std::string refusal(uint32_t file) const;
  // True once every file was read to its end (or dropped).
  bool complete() const;
  // What happened, for the publish summary (files dropped, CAS failures).
  std::vector<std::string> notes() const;
  // Files that have terms (way (c) possible).
  size_t usable_files() const;
  // Every xorb the source's terms name.
  const std::vector<xet::Hash>& xorbs() const { return xorbs_; }
  // Nothing more to do: the upload found every source xorb another way (a
  // global answer listed them all), so the reader stops chunking the source
  // and find() answers nothing. Safe while observe() runs.
  void retire() { retired_ = true; }

 private:
  struct Walk;
  struct Entry {
    uint32_t xorb = 0;  // into xorbs_
    uint32_t index = 0;
    uint32_t file = 0;
    uint32_t term = 0;
  };
  void add_walk(size_t file, std::vector<XetTerm> terms);
  void on_chunk(uint32_t file, const xet::Hash& hash, uint32_t length);
  void drop(uint32_t file, const std::string& why);

  std::string where_;
  std::vector<File> files_;
  std::vector<std::unique_ptr<Walk>> walks_;  // per file; null without terms
  std::atomic<bool> retired_{false};
  mutable std::shared_mutex mu_;
  std::vector<xet::Hash> xorbs_;  // set by the constructor, then read only
  std::unordered_map<xet::Hash, uint32_t, xet::HashHasher> xorb_ids_;  // likewise
  std::unordered_map<xet::Hash, Entry, xet::HashHasher> chunks_;  // (mu_)
  std::vector<std::string> notes_;                                 // (mu_)
};

// The index for a source the writer reads from the Hub: `files` are the
// local copies (the HF cache's, or a streamed source's placeholders; their
// sizes are the files'), `paths` their names in `repo` at `commit`, in shard
// order. Each file's resolve URL is asked (HEAD, not following the
// redirect) whether it is Xet-backed. nullptr when none is (or every HEAD
// failed: way (c) is an optimisation, never a reason to fail).
std::shared_ptr<XetSourceIndex> make_xet_source_index(const HubConfig& hub, const std::string& repo, const std::string& commit,
                                                      const std::vector<std::filesystem::path>& files,
                                                      const std::vector<std::string>& paths, const std::string& where);

}  // namespace skippy::detail
