// Where packages and models come from (spec: "Repository Identity", the
// runtime's package references; "Peer Cache Transfer": a peer is asked
// before normal resolution). This layer turns a reference into files on disk
// and hands them to the consumer (skippy/stage.h), which validates them the
// same way whatever their origin.
//
//   a local package directory      read in place
//   hf://ns/repo[@rev|:rev]        the revision becomes a commit (the cache
//                                  answers a commit or a ref it holds; else
//                                  the first remote that can resolve names);
//                                  model-package.json and then exactly the
//                                  artifacts a selection asks for come from
//                                  the Hugging Face cache, else from each
//                                  Remote in order (a peer, then the Hub),
//                                  file by file: a file one remote cannot
//                                  deliver is asked of the next, and the
//                                  reason is kept as a note.
//
// Every remote writes through one blob writer into the Hugging Face cache
// (huggingface_hub's layout, HfRepoCache below): bytes land in
// blobs/<etag>.incomplete, are checked against their size and digests, and
// only then get their final name and a snapshot link.
//
// Thread-safety: open_package and the other functions may run on several
// threads at once, also against one cache (blobs are written under their
// flock, refs and links replaced atomically). A Remote is called one method
// at a time by the source layer; an OpenedPackage is a plain value.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "skippy/error.h"
#include "skippy/package_writer.h"
#include "skippy/stage.h"

namespace skippy {

class IoEnv;  // the file-system calls a write goes through (internal: src/util/io_env.h)

inline constexpr std::string_view kHfScheme = "hf://";
inline constexpr std::string_view kDefaultRevision = "main";

struct HfRef {
  std::string repo_id;            // "namespace/repo"
  std::string revision;           // "main" when not given
  bool revision_given = false;
  std::string text() const;       // canonical "hf://ns/repo@rev"
};

bool is_hf_ref(std::string_view text) noexcept;
// Throws Error(kUsage) with a message naming the reference and the rule.
HfRef parse_hf_ref(std::string_view text);

// 40 lowercase hex digits: a full commit id (which never moves).
bool is_commit_hash(std::string_view s) noexcept;

// The Hub's repo id rules ("ns/repo"); throws Error(kUsage) naming `what`.
void check_repo_id(std::string_view repo_id, std::string_view what);
// Revision rules; throws Error(kUsage) naming `what`.
void check_revision(std::string_view revision, std::string_view what);

// "org/repo:distribution" (write-package's Hub source coordinate), with an
// optional "@revision" suffix. The distribution is a quantization tag such
// as Q4_K_M or UD-Q4_K_XL matched against the repo's GGUF file names.
struct ModelCoordinate {
  std::string repo_id;
  std::string distribution;
  std::string revision = std::string(kDefaultRevision);
  std::string text() const;       // "org/repo:distribution"
};
// True when `text` has the shape of a coordinate (one '/', a ':' after it);
// callers check for an existing local path first.
bool looks_like_model_coordinate(std::string_view text) noexcept;
ModelCoordinate parse_model_coordinate(std::string_view text);

// ------------------------------------------------------ the Hugging Face cache
// The Hugging Face Hub cache, exactly as huggingface_hub lays it out, so
// that huggingface_hub, transformers, llama.cpp -hf and this tool share one
// copy of every file:
//
//   <cache>/models--<ns>--<repo>/
//     blobs/<etag>                  file contents; for LFS files the etag is
//                                   the SHA-256, else the git blob SHA-1
//     blobs/<etag>.incomplete       a download in progress (resumable)
//     snapshots/<commit>/<path>     relative symlinks into ../blobs
//     refs/<revision>               the commit a branch/tag resolved to, no
//                                   trailing newline
//   <cache>/.locks/models--<ns>--<repo>/<etag>.lock   flock(2) per blob
//
// <cache> is env::hf_hub_cache_dir(): $HF_HUB_CACHE, else $HF_HOME/hub, else
// $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.
//
// Thread-safety: an HfRepoCache is immutable (it names paths; its const
// members may run on many threads at once). The cache on disk is shared by
// threads and processes: refs and links are replaced atomically, and a blob's
// writers serialize on its flock in .locks/, as huggingface_hub's do.

class HfRepoCache {
 public:
  // `repo_id` must already satisfy check_repo_id (above). Every write into
  // the cache (blobs, refs, snapshot links) goes through `io_env` (as
  // Sources::io_env; nullptr: the system's).
  HfRepoCache(std::filesystem::path cache_root, const std::string& repo_id, IoEnv* io_env = nullptr);

  const std::string& repo_id() const noexcept { return repo_id_; }
  const std::filesystem::path& root() const noexcept { return root_; }
  const std::filesystem::path& repo_dir() const noexcept { return repo_dir_; }
  std::filesystem::path blob_path(std::string_view etag) const;
  std::filesystem::path incomplete_path(std::string_view etag) const;
  std::filesystem::path lock_path(std::string_view etag) const;
  std::filesystem::path snapshot_dir(std::string_view commit) const;
  IoEnv* io_env() const noexcept { return io_env_; }

  // The commit `revision` names without asking the Hub: a full commit hash
  // is itself; a branch or tag is read from refs/ (nullopt when absent or
  // malformed).
  std::optional<std::string> cached_commit(std::string_view revision) const;
  // refs/<revision> := commit (atomic; no trailing newline). No-op for a
  // revision that is itself the commit.
  void write_ref(std::string_view revision, std::string_view commit) const;

  // snapshots/<commit>/<path> when it exists and resolves to a file.
  std::optional<std::filesystem::path> snapshot_file(std::string_view commit, std::string_view rel_path) const;
  // A small file's cache hit checked: the bytes of snapshots/<commit>/<rel_path>
  // (read whole, at most `max_bytes`) against the name of the blob it links
  // to (SHA-256 or git blob id). Throws Error(kIntegrity) naming the file and
  // both ids when they differ; returns when they match or when the entry is
  // not a symlink to an etag-named blob (nothing names its bytes).
  void check_small_blob(std::string_view commit, std::string_view rel_path, uint64_t max_bytes) const;
  // Points snapshots/<commit>/<rel_path> at blobs/<etag> with a relative
  // symlink, replacing any previous link atomically.
  std::filesystem::path link(std::string_view commit, std::string_view rel_path, std::string_view etag) const;

  // Creates blobs/, snapshots/, refs/ and the lock directory.
  void create_dirs() const;

 private:
  std::string repo_id_;
  std::filesystem::path root_;
  std::filesystem::path repo_dir_;
  std::filesystem::path locks_dir_;
  IoEnv* io_env_;
};

// A lowercase 64-hex SHA-256 or 40-hex git blob SHA-1: the only etags that
// may name a blob (each says how to check the bytes).
bool is_blob_etag(std::string_view etag) noexcept;

// Normalises an ETag header value as huggingface_hub does: drops a weak
// "W/" prefix and the surrounding quotes.
std::string normalize_etag(std::string_view etag);

// Bytes done and bytes to do over a batch; may be called from several
// threads at once.
using ProgressFn = std::function<void(uint64_t done, uint64_t total)>;

// One file wanted from a repository at a commit. For package artifacts the
// manifest declares the SHA-256 and size: the bytes must match both before
// they get a final name.
struct RemoteFile {
  std::string path;                        // repository-relative, safe
  std::optional<std::string> sha256;       // expected content digest
  std::optional<uint64_t> size;            // expected size
  std::string declared_by = "the manifest";  // who declared them (for messages)
  // A file read whole into memory (the manifest, the signature sidecar,
  // validation.json): a remote advertising more is refused before the first
  // byte, and a body running past it is cut off, nothing kept.
  std::optional<uint64_t> max_size = std::nullopt;
};

// What a remote did with one RemoteFile.
struct RemoteOutcome {
  bool delivered = false;   // now in snapshots/<commit>/<path>
  bool received = false;    // its bytes came through this call (false: another process brought it meanwhile)
  bool verified = false;    // its SHA-256 was checked against RemoteFile::sha256 while it was written
  std::optional<Error> error;  // why not, when not delivered
};

// A repository's files at a revision, as a remote lists them.
struct RemoteListing {
  struct File {
    std::string path;
    uint64_t size = 0;
    std::optional<std::string> sha256;  // LFS files
  };
  std::string commit;
  std::vector<File> files;
};

// A place that brings files of a Hugging Face repository into the cache
// (the Hub, a peer). Implementations are thread-compatible: the source layer
// calls one method at a time.
class Remote {
 public:
  virtual ~Remote() = default;
  // "hub", "peer": what `fetch --json` reports per file.
  virtual std::string name() const = 0;
  // The commit `revision` names now (asked of the remote, recording nothing);
  // nullopt when this remote does not resolve names (a peer serves commits
  // only). `probe_path` is a file that must exist at that revision.
  virtual std::optional<std::string> resolve_commit(const HfRepoCache& cache, const std::string& revision,
                                                    const std::string& probe_path) = 0;
  // Whether `revision` (a name, not a commit) is a tag rather than a
  // branch (a tag names one commit for good; a branch moves); nullopt when
  // this remote cannot tell (a peer), or could not be asked.
  virtual std::optional<bool> is_tag(const HfRepoCache& cache, const std::string& revision) {
    (void)cache;
    (void)revision;
    return std::nullopt;
  }
  // Every file at `revision`; nullopt when this remote cannot list.
  virtual std::optional<RemoteListing> list(const HfRepoCache& cache, const std::string& revision) = 0;
  // Brings the files (none of them in the cache yet) into
  // snapshots/<commit>/, reporting bytes received through on_bytes. One
  // outcome per file, in order. Throws only for what stops the whole batch
  // (the remote is unusable); the caller then asks the next remote.
  virtual std::vector<RemoteOutcome> fetch(const HfRepoCache& cache, const std::string& commit,
                                           const std::vector<RemoteFile>& files,
                                           const std::function<void(uint64_t)>& on_bytes) = 0;
  // The first `length` bytes of `file` at `commit` (a GGUF header: a plan
  // reads tensor tables, not tensors) without bringing the file; at most
  // `length` bytes come back (fewer only at the file's end). nullopt when
  // this remote cannot read part of a file (a peer serves whole files).
  // Unlike the other methods, may be called from several threads at once.
  virtual std::optional<std::vector<uint8_t>> read_head(const HfRepoCache& cache, const std::string& commit,
                                                        const RemoteFile& file, uint64_t length) {
    (void)cache;
    (void)commit;
    (void)file;
    (void)length;
    return std::nullopt;
  }
  // What the last fetch() did that the user should know but that failed
  // nothing (a damaged record of a partial download it started over); the
  // notes are handed over once. None by default.
  virtual std::vector<std::string> take_notes() { return {}; }
};

// The sources an open_package or open_model_source call may use.
struct Sources {
  std::filesystem::path hf_cache;  // the Hugging Face cache root (env::hf_hub_cache_dir())
  // Asked in order for what the cache lacks; empty = the cache only.
  std::vector<std::shared_ptr<Remote>> remotes;
  // HF_HUB_OFFLINE=1 kept the Hub out of `remotes`: what the cache lacks is
  // then Error(kOffline), and messages say why.
  bool offline = false;
  // Owner certificates whose signature a package must carry
  // (skippy/package_signature.h: --trust-signer, SKIPPY_TRUSTED_SIGNERS);
  // empty: signatures are optional.
  std::vector<std::filesystem::path> trusted_signers;
  // The calls every write into the caches goes through (downloads into
  // hf_cache: blobs, refs, links; the GGUF headers kept in the skippy
  // cache), as WritePackageOptions::io_env; nullptr: the system's.
  IoEnv* io_env = nullptr;
};

struct OpenOptions {
  ProgressFn on_progress;  // downloads of an hf:// package
  // hf:// with a branch or tag: ask a remote what it names now instead of
  // answering from refs/ in the cache (no effect for a commit or without remotes).
  bool refresh_revision = false;
  // hf://: bring the signature sidecar (and the validation.json it covers)
  // even without trusted signers, when the repository has one (inspect
  // reports them). With trusted signers they always come.
  bool with_signature = false;
};

// Resolves `ref` (a local package directory or an hf:// reference) and
// opens it (open_package_dir: the root read, its reader chosen, the
// reader's checks). For hf://, the returned package's ArtifactSource brings
// exactly the artifacts a catalog or a selection asks for, and
// always_verify is set; a revision that may move (a branch, "main" always,
// or a name no remote could classify; not a commit nor a tag the Hub knows)
// adds a warning naming the commit to pin, and revision_kind says which it
// was. With sources.trusted_signers, the package must be signed by one of
// them (check_package_trust: kUnauthorized, kIntegrity), checked before the
// reader brings any other file; every artifact it uses is then
// SHA-256-verified. Throws Error with the kind of what failed (kUsage for a
// malformed reference, kNotFound, kOffline, kUnauthorized, kIntegrity,
// kTransport, kIo, kInvalidInput), naming the reference.
OpenedPackage open_package(std::string_view ref, const Sources& sources, const OpenOptions& options = {});

// ------------------------------------------------ write-package's sources

// write-package's SOURCE argument: a local GGUF (any shard of a split model)
// or an "org/repo:distribution" coordinate whose GGUF file(s) are brought
// into the Hugging Face cache (every shard) and described with the remote's
// own answers.
struct ModelSourceRequest {
  std::string source;                    // as the user wrote it
  // Local sources: the spec's explicit provenance (all three required).
  // Coordinates: only `revision` may be given (default "main"); the others
  // come from the Hub.
  std::string model_id, revision, source_file;
  // Coordinates only: also bring the repository's publisher files found at
  // its top level at the same commit (config.json, generation_config.json,
  // tokenizer_config.json, chat_template.jinja, hf_quant_config.json).
  bool publisher_files = false;
};

struct ResolvedModelSource {
  std::filesystem::path local;          // the file to read (first shard)
  SourceProvenance provenance;
  bool from_hub = false;
  std::vector<std::string> downloaded;  // repository paths not cached before
  std::vector<std::filesystem::path> publisher_files;  // with publisher_files: local copies, in that order
  std::vector<std::string> warnings;    // for the user (a local source's revision that is not a commit)
};

// Local path first (an existing file wins over a coordinate of the same
// shape); then a coordinate, listed by the first remote that can list (else
// from the cache's snapshot of the revision) and fetched like package
// artifacts. Checks every provenance rule before any work: throws
// Error(kUsage) for a flag that does not fit the source kind, a missing
// provenance flag or a malformed coordinate.
ResolvedModelSource open_model_source(const ModelSourceRequest& request, const Sources& sources,
                                      const ProgressFn& on_progress = {});

// The GGUF files of `coord.distribution` among `paths`: names containing
// the tag (case-insensitive) bounded by '-', '.', '/' or the ends, not
// projectors (mmproj*). Exactly one model must match (one file, or every
// shard of one split model, returned in shard order); otherwise
// Error(kNotFound / kInvalidInput) lists what was found.
std::vector<std::string> match_distribution(const std::vector<std::string>& paths, const ModelCoordinate& coord);

}  // namespace skippy
