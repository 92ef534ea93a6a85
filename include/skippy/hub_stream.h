// A model on the Hub read once, as it arrives (write-package --stream): no
// copy of the source on disk. The repository is listed at a revision (which
// becomes its commit), the distribution's GGUF shard(s) matched as
// write-package's Hub sources are (match_distribution), and each shard's
// GGUF header fetched first (a prefix of the file, grown until it parses,
// refused as soon as its bytes refuse it, one shard's in memory at a time)
// into a placeholder: a sparse file of the shard's size holding only the
// header, which the package writer opens as if it were the source (it
// decides every fragment's layout) while the tensor bytes come through
// read(). Behind read(), every shard is fetched in order as HTTP ranges over
// several connections at once (fetch's transport: redirects, the token only
// to the Hub, retries, the minimum rate, signed URL refresh), reassembled in
// order in memory, never more than a window ahead of the reader
// (back-pressure: a reader that waits stops the download), and never
// written to disk. The bytes are not checked here: the writer hashes each
// shard and compares it with provenance().expected_sha256 (the Hub's LFS
// oid).
//
// Thread-safety: read() is for one thread at a time (the writer's reader);
// the accessors are immutable after construction. The download runs on
// threads of its own, started by the first read(), stopped by the
// destructor.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "skippy/hub.h"
#include "skippy/package_writer.h"

namespace skippy {

struct StreamSourceOptions {
  std::string revision;               // empty: main
  // Where the placeholders go: created empty (an earlier run's are
  // replaced), removed by the destructor.
  std::filesystem::path header_dir;
  // One request's share of a shard; 0: as fetch sizes them (about four
  // ranges per connection, at least HubConfig::min_range_bytes, at most 64 MiB).
  uint64_t range_bytes = 0;
  // Bytes held in memory ahead of the reader; 0: two ranges per connection.
  uint64_t window_bytes = 0;
  // Bytes received so far (headers included), from the download threads.
  std::function<void(uint64_t)> on_bytes;
  // The repository's publisher files are wanted (fetch_publisher_files):
  // their caps are checked against the listing by the constructor.
  bool publisher_files = false;
  // write-package --max-disk: what this source puts on disk (the
  // placeholders' headers, the projectors and the publisher files) is taken
  // from the budget before a byte of it is fetched, reserved or written,
  // and what does not fit is refused (Error(kUsage)); a header prefix never
  // grows past the room left. Held while the source lives (its files stay
  // on disk until the destructor, which gives it back).
  std::shared_ptr<DiskBudget> disk_budget;
};

class StreamedHubSource {
 public:
  // `coordinate` is ORG/REPO:DIST. Throws Error as fetch does (kNotFound,
  // kUnauthorized, kTransport...), kInvalidInput for a shard without an
  // LFS SHA-256 (its bytes could not be checked), whose header does not
  // parse or needs more than 1 GiB, or a publisher file listed over its
  // cap, kUsage when the disk budget cannot hold the headers, projectors
  // and publisher files (all refused before a byte of them is fetched or
  // reserved), kIo when the placeholders cannot be written.
  StreamedHubSource(const std::string& coordinate, const HubConfig& hub, StreamSourceOptions options);
  ~StreamedHubSource();
  StreamedHubSource(const StreamedHubSource&) = delete;
  StreamedHubSource& operator=(const StreamedHubSource&) = delete;

  // The first shard's placeholder: write-package's source.
  const std::filesystem::path& local() const;
  // Repository, commit, shard paths, sizes and the Hub's SHA-256s.
  const SourceProvenance& provenance() const;
  uint64_t total_bytes() const;          // every shard's size
  uint64_t placeholder_disk_bytes() const;  // what the placeholders hold on disk (their headers)
  // The first Xet chunk of each shard (xet_first_chunk_hash of its first
  // bytes, fetched with its header): PublishSettings::xet_dedupe_hints.
  const std::vector<std::string>& xet_dedupe_hints() const;
  // The repository's projector GGUFs (mmproj*.gguf) at the same commit,
  // as mesh-llm's packaging jobs discover them.
  const std::vector<std::string>& projector_paths() const;
  uint64_t projector_bytes() const;  // their sizes, summed
  // Downloads the projectors (small beside the model) whole into
  // header_dir/projectors/, each checked against its LFS SHA-256; returns
  // their paths, in projector_paths() order. Their bytes are on disk until
  // the destructor. A file's blocks are reserved once the Hub's HEAD
  // agrees with the listed size (which the disk budget already holds).
  std::vector<std::filesystem::path> fetch_projectors();
  // Downloads the repository's publisher files (config.json,
  // generation_config.json, tokenizer_config.json, chat_template.jinja,
  // hf_quant_config.json: those at its top level, at the same commit, each
  // at most 16 MiB, of the size the listing declares and, for an LFS file,
  // its SHA-256) whole into header_dir/publisher/, for
  // WritePackageOptions::publisher_metadata; on disk until the destructor.
  // None unless StreamSourceOptions::publisher_files asked for them.
  std::vector<std::filesystem::path> fetch_publisher_files();
  uint64_t publisher_bytes() const;  // their sizes, summed (0 unless asked for)
  // Fills `into` with shard `shard`'s bytes at `offset`, waiting for them:
  // reads go in file order (shards one after the other, each from byte 0,
  // each read where the last ended). Throws the download's Error.
  void read(size_t shard, uint64_t offset, std::span<uint8_t> into);

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace skippy
