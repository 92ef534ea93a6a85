// The resume journal of a Xet publish: the xorbs the CAS acknowledged for a
// publish whose files are not registered yet (a refused shard, a failed
// commit, a run killed on the way), so that the same command run again does
// not send them a second time. Packing is deterministic (the same files give
// the same xorbs), so a rerun builds the same xorb, finds it here, asks the
// CAS whether it still holds it (XetCas::has_xorb) and, when it does, only
// references it; when it does not, or cannot say, the xorb is sent as usual:
// the journal never makes a publish fail.
//
// One small text file per (Hub, repository, branch), in
// SKIPPY_CACHE_DIR/xet-journal/:
//
//   skippy xet journal 1
//   <sha-256 of "endpoint\nrepo\nbranch">
//   <xorb hash (Xet hex)> <serialized bytes>      one line per xorb, oldest first
//
// rewritten whole (write_file_atomic: temporary file, fsync, rename) after
// each acknowledged xorb, at most 4096 lines (the oldest dropped), and
// removed once the files are registered. Read as untrusted input: a file
// that is not exactly this (wrong header or key, a bad line, too many lines,
// more than 1 MiB) is ignored with a note, and the next write replaces it.
//
// Thread-safety: every method may be called from several threads at once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "xet/hash.h"

namespace skippy::detail {

class XetJournal {
 public:
  XetJournal(std::filesystem::path dir, const std::string& endpoint, const std::string& repo, const std::string& branch);

  bool has(const xet::Hash& xorb) const;
  // The CAS acknowledged `xorb`: recorded now (a failure to write is a note).
  void add(const xet::Hash& xorb, uint64_t bytes);
  // The files are registered: the journal is done with.
  void clear();
  // Why the journal was ignored or could not be written ("" when all went well).
  std::string note() const;

  const std::filesystem::path& path() const { return path_; }

 private:
  void load();
  void write_locked();

  std::filesystem::path path_;
  std::string key_;
  mutable std::mutex mu_;
  std::vector<std::pair<xet::Hash, uint64_t>> entries_;
  std::set<xet::Hash> known_;
  std::string note_;
};

}  // namespace skippy::detail
