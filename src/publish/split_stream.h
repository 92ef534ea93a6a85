// One sequential pass over a source model that hashes every shard and, from
// the same bytes, writes and hashes every package fragment. Each source byte
// is read once, into a small buffer that is hashed and written from cache;
// the work (reading, the shard hash chain, the fragment hash chain, writes)
// is spread over worker threads so both cores stay busy.
// When no shard needs hashing (its digest was verified before), the pass
// runs as several lanes over disjoint source ranges instead (StreamOptions::lanes).
// Internal to the package writer.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "util/file.h"
#include "gguf/gguf_writer.h"
#include "publish/output_readback.h"

namespace skippy::detail {

struct StreamOutput {
  std::filesystem::path final_path;
  GgufBytes header;             // bytes before the first piece (may view a source map)
  uint64_t total_size = 0;      // header + pieces + padding
  struct Piece {
    size_t shard = 0;
    uint64_t src_offset = 0;
    uint64_t bytes = 0;
    uint64_t dst_offset = 0;
    uint64_t pad_after = 0;     // zero bytes following the piece
  };
  // Sorted by (shard, src_offset), with dst_offset increasing in that order
  // (unless hash_after_write).
  std::vector<Piece> pieces;
  // Hashed after it is written instead of front to back in the pass: the
  // pieces may land at any offsets (a part whose tensors are in name order,
  // not source order; pad_after unused, gaps left as the preallocated
  // zeros). Once its last byte is written the file is read back
  // (hash_written_output) and only then is it complete: renamed and
  // announced to on_output_complete, or its digest in StreamResult.
  bool hash_after_write = false;
};

struct StreamResult {
  std::vector<std::string> shard_sha256;   // per source shard
  std::vector<std::string> output_sha256;  // per output
};

struct StreamOptions {
  unsigned threads = 0;  // worker threads; 0: one per core (at most 16)
  // The source is read in chunks of this size into `buffers` buffers of
  // the pipeline's own (pread, or read_source), each hashed twice and
  // written while it is still in the core's L2 cache: half a MiB, with
  // 8 MiB in flight, measured fastest on 1.5 GiB (256 KiB to 1 MiB within
  // noise; 8 MiB chunks cost twice the system time).
  size_t chunk_bytes = 512u << 10;
  size_t buffers = 16;
  std::function<void(uint64_t)> on_bytes;  // source bytes fully processed
  // Per shard (may be shorter than the shard list): a SHA-256 already
  // verified on exactly these bytes. Such a shard is not hashed again and
  // its StreamResult digest is this one: one SHA-256 stream instead of two.
  std::vector<std::optional<std::string>> known_shard_sha256;
  // With every shard's digest known (and no before_create), the pass is cut
  // into up to this many lanes (at most `threads`): independent source
  // ranges, each holding whole outputs, run at once, so the fragments' hash
  // chains use every core. Each lane has `threads` workers and its share of
  // the buffers. (4 lanes on 2 cores measured slower than 2.)
  unsigned lanes = 2;
  // Called with the hashes once every output is complete, before any is
  // renamed into place; throwing here leaves no output under a final name.
  // (With on_output_complete the outputs are in place already.)
  std::function<void(const StreamResult&)> before_commit;
  // Every write, fsync and rename of the outputs goes through this
  // (src/util/io_env.h; nullptr: the system's): the writing operation's.
  IoEnv* io_env = nullptr;
  // Streaming hand-off: when set, each output is created only when the pass
  // reaches it, and is size-checked, fsynced and renamed into place as soon
  // as its last byte is written and hashed, then announced here (from a
  // worker thread; throwing stops the pass). On error, outputs announced
  // so far stay under their final names.
  std::function<void(size_t output, const OutputDigest& digest)> on_output_complete;
  // With on_output_complete: each output's digest also holds its Xet chunks
  // (cut in the same hash chain as its SHA-256; a hash_after_write output's
  // on its read-back), for an upload that needs no second read.
  bool xet_chunks = false;
  // With on_output_complete: called (from the reader) before an output's
  // file is created, with its size and the bytes of outputs still open that
  // cannot be finished before this one starts; may block until there is
  // room, or throw. Outputs are then read one after the other (no read
  // spans two), so an output is finished before the next one starts
  // whenever the budget asks to wait.
  std::function<void(uint64_t bytes, uint64_t stuck_bytes)> before_create;
  // Called (from the failing thread, perhaps more than once) as soon as the
  // pass fails: a before_create that blocks must then return or throw, or
  // the pass waits for it forever (its room would come from outputs that
  // will now never be announced).
  std::function<void()> on_failure;

  // ---- A second kind of source: bytes that arrive (write-package --stream) ----
  // When set, the pass reads the source through this instead of pread on
  // the shards' files, in file order (every shard from byte 0 to its end, one shard
  // after the other, each call continuing where the last ended), into
  // buffers of its own, and writes the fragments from those buffers. The
  // mappings then need hold only the GGUF headers (a placeholder file of
  // the shard's size): their tensor bytes are never touched. One lane;
  // every shard is hashed (known_shard_sha256 is ignored).
  std::function<void(size_t shard, uint64_t offset, std::span<uint8_t> into)> read_source;
  // Called (from a worker) with a shard's SHA-256 as soon as its last byte
  // is hashed, before later shards' outputs complete; throwing stops the
  // pass (a source that does not match its declared digest).
  std::function<void(size_t shard, const std::string& sha256)> on_shard_hashed;
  // Called with each chunk of source bytes, in file order (every shard from
  // byte 0 to its end), on the source's hash chain: one call at a time, while
  // the next chunk is read, and before any output is hashed over those
  // bytes; throwing stops the pass. Setting it keeps the pass to one lane.
  std::function<void(size_t shard, uint64_t offset, std::span<const uint8_t> bytes)> observe_source;
};

// The least room a pass with before_create needs on disk: the most bytes
// of outputs open at once when each output is created at its first piece
// and could leave the disk at its last (outputs without pieces count as
// held throughout: a schema 2 carrier announced last).
// A --max-disk below this cannot be kept whatever the upload speed.
uint64_t peak_open_bytes(const std::vector<StreamOutput>& outputs);

// Writes every output under a hidden temporary name, checks its size, and
// renames it into place only after every output is complete (fsynced), or
// one by one with on_output_complete. Otherwise, on error, no output
// appears under its final name.
// How many lanes stream_split would run these outputs in (1: one pass).
size_t stream_lanes(const std::vector<std::shared_ptr<const MappedFile>>& shards,
                    const std::vector<StreamOutput>& outputs, const StreamOptions& options);

StreamResult stream_split(const std::vector<std::shared_ptr<const MappedFile>>& shards,
                          const std::vector<StreamOutput>& outputs, const StreamOptions& options);

}  // namespace skippy::detail
