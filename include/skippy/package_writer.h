// write-package: turn a GGUF model (one file or every shard of a split
// model) into a layer package (spec: "Repository Layout", "Manifest Schema",
// "Publishing Rules").
//
// One sequential pass over the source hashes every shard and writes and
// hashes every fragment from the same bytes. Fragments appear under their
// final names only once complete; model-package.json is written last,
// atomically. A rerun into the directory of a crashed run finishes the job.
//
// Thread-safety: write_package runs worker threads of its own; writes into
// different directories may run at once, two into one directory may not.
// DiskBudget is thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <condition_variable>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "skippy/manifest.h"
#include "skippy/manifest_v2.h"

namespace skippy {

// Where the source came from. For a local file the CLI requires model_id,
// revision and primary_file (spec: "Local source GGUF paths are allowed
// only with explicit provenance").
struct SourceProvenance {
  std::string model_id;        // "org/repo:distribution" (or "org/repo")
  std::string repo;            // default: model_id before ':'
  std::string revision;        // source commit
  std::string primary_file;    // repo-relative name of the (first) file
  std::string distribution_id; // default: model_id after ':'
  // Repo-relative path of each shard, in shard order; default: primary_file
  // for a single file, else primary_file's directory + each shard's name.
  std::vector<std::string> file_paths;
  // SHA-256 the Hub declared for each shard (checked against what we read).
  std::vector<std::string> expected_sha256;
  // Per shard: expected_sha256[i] was already verified on exactly these
  // bytes (the verification cache vouches for the file as it is now), so the
  // writer does not hash the shard again.
  std::vector<bool> shard_verified;
};

// One content-defined chunk of a file as Xet storage cuts it: its keyed
// BLAKE3 chunk hash and its length (hub-docs docs/xet/chunking.md).
struct ContentChunk {
  std::array<uint8_t, 32> hash{};
  uint32_t length = 0;
};

// A fragment (or projector) complete under its final name: size checked,
// fsynced, SHA-256 computed from the bytes written.
struct WrittenArtifact {
  std::string rel_path;            // as the manifest will name it
  std::filesystem::path path;      // where it is
  uint64_t size = 0;
  std::string sha256;
  // With WritePackageOptions::xet_chunks, for a file the pass wrote: its
  // chunks in order, cut from the same bytes as the SHA-256, so an upload
  // through Xet reads only the bytes of chunks nobody holds yet. Null for
  // a file copied whole (a projector).
  std::shared_ptr<const std::vector<ContentChunk>> xet_chunks;
};

// Bytes an output directory may hold at once (write-package --max-disk).
// The writer acquires a fragment's size before creating its file; whoever
// deletes an announced fragment releases it. Thread-safe.
class DiskBudget {
 public:
  explicit DiskBudget(uint64_t limit) : limit_(limit) {}
  // Blocks until `bytes` more fit in the limit, or until every byte held
  // belongs to files that cannot be finished before this one starts
  // (`stuck`): then waiting would never end, and a file larger than the
  // limit goes alone. Throws Error after cancel().
  void acquire(uint64_t bytes, uint64_t stuck = 0);
  // Takes `bytes` when they fit in the limit now, else (or after cancel())
  // takes nothing and returns false: for bytes that must be refused, not
  // waited for.
  bool try_acquire(uint64_t bytes);
  void release(uint64_t bytes);
  // Wakes every waiter (and fails later acquires) with Error(kTransport,
  // why): the bytes held will never be freed (the uploads failed).
  void cancel(const std::string& why);
  uint64_t limit() const noexcept { return limit_; }
  uint64_t peak() const;
  uint64_t used() const;  // bytes held now

 private:
  const uint64_t limit_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t used_ = 0, peak_ = 0;
  std::string cancelled_;
};

// Schema 2: how a payload part lays out its tensors.
enum class V2PartLayout {
  // The source's order, each tensor padded to the alignment (the last one
  // too); only this one is hashed as it is written.
  kSource,
  // The reference writer's (mesh-llm's part_writer.rs): tensors in name
  // order, nothing after the last one, the source KVs minus exactly
  // split.no, split.count and split.tensors.count. Each part is then byte
  // for byte the reference's; it is hashed by reading it back once written.
  kReference,
};

struct WritePackageOptions {
  // Package schema: 1 (the spec's layer packages, the default) or 2
  // (mesh-llm's "package v2": shared/metadata.gguf carrier, shared/common.gguf
  // and layers/layer-NNNNN[-partMM].gguf payload parts, skippy/manifest_v2.h),
  // from the same single streaming pass with the same crash safety.
  uint32_t schema = 1;
  // Schema 2: the most payload bytes one part holds; a layer (or the common
  // group) over it is split into -partMM parts (a single larger tensor stays
  // whole). The reference's default, 8 GiB.
  uint64_t max_artifact_bytes = uint64_t{8} << 30;
  // Schema 2: the payload parts' layout (V2PartLayout above).
  V2PartLayout layout = V2PartLayout::kSource;
  // Schema 2: the root's native_abi_version, the one runtime ABI that admits
  // the package (skippy/abi.h). Empty: kDefaultNativeAbiV2.
  std::string native_abi_version;
  // Schema 2: generation.request_defaults (publisher sampling profiles,
  // parse_request_defaults_v2), written as given.
  std::optional<V2RequestDefaults> request_defaults;
  // Schema 2: publisher files (config.json, generation_config.json,
  // tokenizer_config.json, chat_template.jinja, hf_quant_config.json: the
  // role is the name) copied to metadata/ as publisher_metadata, with the
  // publisher_defaults the reference derives from them. Needs the source's
  // repository and 40-hex revision.
  std::vector<std::filesystem::path> publisher_metadata;
  std::filesystem::path source;          // a .gguf or any shard of a split model
  std::filesystem::path out_dir;
  SourceProvenance provenance;
  std::vector<std::filesystem::path> projectors;  // copied into projectors/
  bool force = false;                    // allow a non-empty out_dir
  std::optional<int64_t> created_at_unix_secs;  // default: SOURCE_DATE_EPOCH, else now
  unsigned threads = 0;  // worker threads; 0: one per core (at most 16)
  // Run validate-package on the written package before the manifest is
  // committed; a failure throws Error(kIntegrity) listing the problems and
  // leaves no manifest. The README records the result.
  bool validate = false;
  // Progress: (bytes done, bytes total) over all source and projector bytes
  // (and, with validate, the validation's bytes after them).
  std::function<void(uint64_t, uint64_t)> on_progress;
  // Streaming hand-off (write-package --push): when set, each fragment is
  // renamed into place as soon as it is complete and announced here (from a
  // worker thread), instead of all fragments at the end; projectors after
  // their copy. Throwing stops the run. README.md and model-package.json
  // are written last, as always, and not announced. On failure, fragments
  // announced so far stay (the in-progress marker lets a rerun redo them).
  std::function<void(const WrittenArtifact&)> on_artifact;
  // With on_artifact: the output directory never holds more than the
  // budget's limit (or one fragment, when a fragment is larger), as long as
  // the receiver of on_artifact deletes and releases what it is done with.
  std::shared_ptr<DiskBudget> disk_budget;
  // With on_artifact: cut each written fragment into Xet chunks in the
  // write pass (WrittenArtifact::xet_chunks); write-package --push sets it
  // when it uploads through Xet.
  bool xet_chunks = false;
  // A streamed source (write-package --stream, skippy/hub_stream.h): when
  // set, `source` names placeholder shards that hold only their GGUF
  // headers, and the tensor bytes come through this, in file order (every
  // shard from byte 0 to its end, one shard after the other). Every shard
  // is hashed from these bytes and must match provenance.expected_sha256
  // (checked as each shard ends: a mismatch stops the run before the
  // manifest). With disk_budget, a layout whose open fragments cannot fit
  // in the limit (less what the budget holds already) is refused before
  // the output directory is touched. With validate, each tensor's SHA-256
  // is taken from these bytes as they arrive and stands in for the source
  // in validate-package's checks (see validate).
  std::function<void(size_t shard, uint64_t offset, std::span<uint8_t> into)> stream_read;
  // Sees every source byte as it is read, in file order (every shard from
  // byte 0 to its end, one after the other), one call at a time, while the
  // next bytes are read and before any fragment is hashed over them
  // (write-package --push chunks the source for Xet here). Setting it keeps
  // the pass to one lane.
  std::function<void(size_t shard, uint64_t offset, std::span<const uint8_t> bytes)> on_source_read;
  // With validate and stream_read, or on_artifact with disk_budget
  // (fragments that leave the disk once announced): each fragment and
  // projector is checked on its own as soon as it is complete, read back
  // from disk, before on_artifact; a problem stops the run there (nothing
  // more announced, no manifest), and the end gives the report
  // validate-package gives for the finished package (validation.json;
  // schema 2: the certification, as certify_catalog).
  // For tests: called with each such artifact once it is on disk, just
  // before that check reads it (e.g. to damage it).
  std::function<void(const WrittenArtifact&)> after_write_before_check;
  // The calls every write, fsync and rename of this run goes through, as
  // MaterializeOptions::io_env; nullptr: the system's. (`class IoEnv`
  // names the library's internal interface, src/util/io_env.h.)
  class IoEnv* io_env = nullptr;
};

struct WritePackageResult {
  std::filesystem::path package_dir;
  std::string manifest_sha256;
  PackageManifest manifest;
  size_t artifact_count = 0;   // fragments + projectors
  std::vector<std::string> notes;    // decisions worth telling a person (generation inference, ...)
  std::vector<std::string> details;  // why nothing was declared (for --verbose)
  bool validated = false;          // validate ran and passed
  uint64_t source_bytes_hashed = 0;  // shards hashed by this run (not those already verified)
  std::string architecture;          // the source's general.architecture
  // Schema 2 (manifest then holds only model_id and layer_count): the
  // root's package_id and native ABI version; empty for schema 1.
  uint32_t schema = 1;
  std::string package_id;
  std::string native_abi_version;
};

// Throws Error naming the file and problem; on failure no file appears under
// a final name that does not match what the manifest would say, and no
// manifest is written.
WritePackageResult write_package(const WritePackageOptions& options);

}  // namespace skippy
