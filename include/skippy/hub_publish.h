// Publishing a layer package to the Hugging Face Hub in one commit, on the
// Hub's own upload protocol (as huggingface_hub's create_commit and
// @huggingface/hub's commit speak it):
//
//   GET  {endpoint}/api/whoami-v2                    the token may write (else kUnauthorized, before any upload)
//   POST {endpoint}/api/repos/create                 when asked to create (409, "exists", is fine)
//   GET  {endpoint}/api/models/{repo}/revision/{branch}?blobs=true
//                                                    the branch head (the commit's parentCommit) and what it holds;
//                                                    a missing branch is created from main
//   POST {endpoint}/api/models/{repo}/preupload/{branch}   each file's upload mode, "lfs" or "regular"
//   POST {endpoint}/{repo}.git/info/lfs/objects/batch      upload actions for the LFS files; an object the Hub
//                                                    already holds comes back without one and is not sent again
//                                                    (this is how an interrupted publish resumes)
//   PUT  the storage URL (basic), or each part's URL then POST the completion (multipart); then POST verify
//   POST {endpoint}/api/models/{repo}/commit/{branch}      NDJSON: a header (summary, parentCommit), then one
//                                                    "file" line (base64) per regular file and one "lfsFile"
//                                                    line per LFS object
//   POST {endpoint}/api/models/{repo}/tag/{commit}         publish --tag: JSON {"tag", "message"?}, as
//                                                    huggingface_hub's HfApi.create_tag (409: the tag exists)
//
// The commit is the only step that changes the repository, so a package
// appears all at once or not at all; a commit made to the branch by someone
// else while this one was uploading is detected through parentCommit
// (HTTP 412) and refused, not overwritten. The token goes only to the Hub's
// API endpoints, never to a storage URL, even one on the Hub's own origin;
// storage gets exactly the headers the LFS batch action gives (as the
// official clients send them). Uploads run several at once and are retried
// on 429, 5xx and dropped connections with backoff, honouring Retry-After
// (the downloads' rule), each retry reported (skippy/hub.h:
// set_retry_reporter); an upload slower than HubConfig's minimum rate is a
// failed attempt; an expired storage URL is refreshed. A refusal names the
// storage's own reason (S3's <Message>, or the body's first line).
// Files are streamed from disk with pread, never read whole into memory
// (except regular-mode files, which the Hub keeps small).
//
// Thread-safety: a HubPublisher is thread-safe (add() from any thread while
// its uploaders run); the free functions may run concurrently for different
// repositories (two publishes to one branch race on the Hub, which refuses the
// later commit as a conflict).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "skippy/hub.h"
#include "skippy/package_signature.h"
#include "skippy/package_writer.h"

namespace skippy {

// Dedupe against the source itself: an opaque object write-package makes
// when the source is Xet-backed on the Hub (the source's chunks located in
// its xorbs by its reconstruction terms, as the write pass reads them).
class XetDedupeSource {
 public:
  virtual ~XetDedupeSource();
};

// Where a package goes: "hf://ns/repo" (branch main) or "hf://ns/repo@branch".
struct PushTarget {
  std::string repo;             // "ns/repo"
  std::string branch = "main";
  std::string text() const;     // "hf://ns/repo@branch"
};
// Throws Error(kUsage) naming the reference: a commit id, a ":rev" form or a
// bad repo id or branch is refused (a commit needs a branch to move).
PushTarget parse_push_target(std::string_view ref);

// A tag made on the published commit (publish --tag).
struct TagResult {
  std::string tag, commit;
  bool created = true;  // false: the tag already named this commit (a rerun)
  std::string ref;      // "hf://ns/repo@TAG"
};

struct PublishSettings {
  bool create = false;          // create the repository when it does not exist
  bool private_repo = false;    // with create: a private repository
  unsigned parallel_uploads = 4;
  // Tag the commit (or the head, when nothing changed) with this name
  // once it is made (tag_hub_commit). Checked, and an existing tag on
  // another commit refused, in begin(), before anything is uploaded.
  std::string tag;
  // publish_package: sign the package with this owner directory
  // (sign_package: writes model-package.json.sig into it) after it is
  // verified, and upload the sidecar in the same commit.
  std::filesystem::path sign_owner;
  // (bytes on the Hub, bytes handed to the publisher so far): uploaded
  // bytes plus files the Hub already had. Called from uploader threads.
  std::function<void(uint64_t done, uint64_t total)> on_progress;  // Called once, on the uploader thread that hit it, when the first upload
  // fails (no commit will be made; failed() turns true as it returns): a
  // writer feeding the publisher can stop waiting for bytes that will never
  // be freed (write-package --push --max-disk cancels its disk budget). It
  // runs under the publisher's lock: it must not call the publisher.
  std::function<void(const Error& first_failure)> on_failure;
  // Upload through Xet storage when the Hub offers it (the LFS batch
  // answers transfer "xet"); false, or HF_HUB_DISABLE_XET=1 in
  // publish_settings_from_env, keeps to LFS.
  bool xet = true;
  // Chunk hashes (Xet hex) asked of the CAS's global dedupe index before any
  // file is chunked: the first chunk of each source file a package was cut
  // from (xet_first_chunk_hash), which the index always holds when the source
  // is on the Hub, so that every package file dedupes against the source.
  std::vector<std::string> xet_dedupe_hints;
  // Dedupe against the source itself (write-package fills it when the source
  // is Xet-backed on the Hub): the source's chunks located in its xorbs by
  // its reconstruction terms, found without a global query.
  std::shared_ptr<XetDedupeSource> xet_source;
};

// The hash (Xet hex) of the first chunk of a file that starts with `head`
// (its first 128 KiB, or the whole file when shorter): a dedupe hint.
std::string xet_first_chunk_hash(std::span<const uint8_t> head);

// What Xet storage did for one file.
struct XetFileUpload {
  std::string path;
  uint64_t bytes = 0;           // chunked
  uint64_t chunks = 0;
  uint64_t deduped_in_run = 0;  // bytes of chunks another file of this upload had stored
  uint64_t deduped_global = 0;  // bytes of chunks the CAS already held (global dedupe)
  uint64_t deduped_source = 0;  // bytes of chunks found in the source's own xorbs
  uint64_t new_bytes = 0;       // bytes of chunks packed into new xorbs (before compression)
  // Bytes read from disk to upload it: the whole file, or, when its writer
  // cut its chunks in the write pass (write-package --push), only the reads
  // of the new chunks' bytes.
  uint64_t bytes_read = 0;
};
// A publish's Xet side: what was chunked, deduplicated (by way) and sent.
struct XetUploadSummary {
  bool used = false;     // false: the files went up through LFS
  std::string note;      // why not Xet, when it was not used
  uint64_t bytes_chunked = 0, deduped_in_run = 0, deduped_global = 0, deduped_source = 0, new_bytes = 0;
  uint64_t bytes_read = 0;  // read back from disk (XetFileUpload::bytes_read)
  uint64_t xorb_bytes_uploaded = 0, shard_bytes_uploaded = 0;  // serialized, as sent
  size_t xorbs_uploaded = 0, shards_uploaded = 0, dedupe_queries = 0, dedupe_hits = 0;
  // New xorbs an earlier, failed publish of these files had stored (the
  // resume journal): referenced, not sent again.
  size_t xorbs_resumed = 0;
  uint64_t xorb_bytes_resumed = 0;
  std::vector<XetFileUpload> files;  // in the order they finished
};

struct PublishResult {
  std::string repo, branch;
  std::string commit;           // the new commit (or the head, when nothing changed)
  std::string parent_commit;    // the head the commit was made on
  std::string commit_url;       // as the Hub gave it (may be empty)
  bool committed = false;       // false: the branch already held exactly these files
  bool created_repo = false;
  size_t files = 0;             // files in the commit
  size_t lfs_files = 0;
  size_t lfs_uploaded = 0;      // LFS objects whose bytes were sent
  size_t lfs_already_on_hub = 0;
  uint64_t bytes = 0;           // of every file
  uint64_t bytes_uploaded = 0;  // LFS bytes sent and accepted (retries not counted twice)
  std::vector<std::string> deleted;  // stale package files removed by the commit
  std::optional<TagResult> tag;      // settings.tag
  std::string signed_by;             // owner id of the uploaded sidecar's signer ("" unsigned)
  bool validation_result = false;    // validation.json went up too
  XetUploadSummary xet;
};

// One publish session: begin(), add() each file as it is ready (uploads
// start at once, in the background), commit(). Thread-safe.
class HubPublisher {
 public:
  HubPublisher(HubConfig hub, PushTarget target, PublishSettings settings);
  ~HubPublisher();  // stops the uploaders (after their current request)
  HubPublisher(const HubPublisher&) = delete;
  HubPublisher& operator=(const HubPublisher&) = delete;

  // Before anything is sent: the token must exist and have write access
  // (Error kUnauthorized), the repository must exist or be created
  // (kNotFound without create), and the branch head is read.
  void begin();
  // Queues `file` for the commit as `rel_path` (a safe repository path;
  // each once). `size` and `sha256` are what the caller verified; the Hub
  // checks them again. `on_stored` runs (on an uploader thread) once the Hub
  // holds the bytes, or the publisher has them in memory for the commit:
  // from then on the local file may be deleted. `xet_chunks`: the file's
  // Xet chunks as its writer cut them (WrittenArtifact::xet_chunks); an
  // upload through Xet then reads only new chunks' bytes (each checked
  // against its hash) instead of the whole file.
  void add(const std::string& rel_path, const std::filesystem::path& file, uint64_t size, const std::string& sha256,
           std::function<void()> on_stored = {}, std::shared_ptr<const std::vector<ContentChunk>> xet_chunks = {});
  // True once an upload has failed: no commit will be made.
  bool failed() const;
  // Waits for every upload, then makes the one commit, removing package
  // files (model-package.json, README.md, shared/, layers/, projectors/)
  // that the branch holds but this package does not; or none when the
  // branch already holds exactly these files. Throws: the failed uploads
  // (nothing committed; a rerun sends only what is missing), a conflicting
  // commit (kInvalidInput), the Hub's refusal.
  PublishResult commit(const std::string& summary, const std::string& description = {});

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// `publish`: a local package directory, consumer-validated (the manifest,
// every artifact's path and size) and SHA-256-verified first, so a package
// that would fail its own consumers is never uploaded; one whose manifest
// records a local path (source_model.path) is refused too, since nothing
// private goes to the Hub. Uploads the manifest's artifacts,
// model-package.json, README.md, and validation.json and the
// signature sidecar when present (nothing else in the directory) in one
// commit: see add_package_metadata for what is checked first. With
// settings.sign_owner the package is signed first. `on_verify` reports
// hashing progress.
// A package schema 2 directory (model-package.json says schema_version
// 2) is read by its schema's reader (open_local_package) and
// every catalog artifact (carrier, payload parts, sidecars) checked and
// SHA-256-verified through the verification cache; the commit holds those
// artifacts, model-package.json and the same optional files. LFS objects the
// repository already holds are not sent again: a schema 1 package converted
// to schema 2 (convert-package --to 2), published to another branch of the
// repository that holds the schema 1 package, uploads only the carrier (the
// fragments are the same objects) and the root.
PublishResult publish_package(const std::filesystem::path& dir, const HubConfig& hub, const PushTarget& target,
                              const PublishSettings& settings, const std::string& message,
                              const std::function<void(uint64_t, uint64_t)>& on_verify = {});

// Queues `dir`'s files beside the artifacts: README.md (when present),
// model-package.json, and validation.json and model-package.json.sig
// when present. Refuses (nothing sent yet) a validation.json that describes
// another manifest (kInvalidInput) and a sidecar that does not verify over
// the bytes to upload (kIntegrity): the Hub never gets a package its trusting
// consumers would refuse. `manifest_sha256` is the manifest as verified.
// Returns the sidecar's signer ("" when unsigned) and whether validation.json
// goes up.
struct PackageMetadataUpload {
  std::string signed_by;           // the sidecar's owner id, "" when unsigned
  bool validation_result = false;  // validation.json is queued
};
PackageMetadataUpload add_package_metadata(HubPublisher& pub, const std::filesystem::path& dir,
                                           const std::string& manifest_sha256);

// ------------------------------------------------ immutable references

// A tag name the Hub (git) accepts: Error(kUsage) naming it otherwise (no
// refs/ prefix, not 40 hex, none of git's forbidden characters or forms).
void check_tag_name(std::string_view tag);

// The commit `tag` names in `repo` (GET /api/models/{repo}/refs), nullopt
// when it has no such tag (or the Hub does not list its refs).
std::optional<std::string> find_hub_tag(const HubConfig& hub, const std::string& repo, const std::string& tag);

// Tags `commit` of `repo` as `tag` (POST /api/models/{repo}/tag/{commit},
// JSON {"tag", "message"?}: huggingface_hub's HfApi.create_tag). A tag that
// already names this commit is fine (created = false); one that names
// another commit is refused with Error(kInvalidInput) saying where it points
// (a tag is never moved). Needs a write token (kUnauthorized).
TagResult tag_hub_commit(const HubConfig& hub, const std::string& repo, const std::string& commit, const std::string& tag,
                         const std::string& message = {});

// ------------------------------------------------ mesh-llm's package catalog

// Nodes find a package by model name through mesh-llm's catalog, the Hub
// dataset meshllm/catalog: one JSON file per source repository,
// entries/<owner>/<name>.json, {"schema_version": 1, "source_repo",
// "variants": {<variant>: {"source": {repo, file, revision}, "curated":
// {name, size, description, ...}, "packages": [{"type": "layer-package",
// "repo", "layer_count", "total_bytes"?}]}}} (its model-resolver's
// catalog.rs; a variant is the source file's name without .gguf and a
// -NNNNN-of-NNNNN suffix). A package not in it is found by its exact repo id
// only, never by model name.
struct CatalogEntryRequest {
  std::string source_repo;      // org/name of the source model
  std::string source_file;      // its .gguf path in that repo (a split source's first shard)
  std::string source_revision;  // the source commit the package was made from
  std::string package_repo;     // ns/name (or ns/name@revision, which nodes pass on as hf://ns/name@revision)
  std::string package_revision;  // recorded beside it (a key the reader ignores); may be empty
  std::string model_id;         // for the description and the commit title; may be empty
  uint32_t layer_count = 0;
  std::optional<uint64_t> total_bytes;
};
// entries/<org>/<name>.json for `source_repo`.
std::string catalog_entry_path(std::string_view source_repo);
// The variant key the reference's writer gives `source_file`.
std::string catalog_variant_key(std::string_view source_file);
// The entry file's text with this package in it: `existing` (the file's
// current text, nullopt for a new entry) checked by the reader's rules
// (Error(kInvalidInput) naming `origin` and the field when it would refuse
// it), the variant added or its package line for this repo replaced (other
// packages, variants and unknown keys kept), as the reference's writer does.
// kUsage when the request is incomplete.
std::string merge_catalog_entry(const std::optional<std::string>& existing, const CatalogEntryRequest& request,
                                const std::string& origin);

struct CatalogProposal {
  std::string path;              // entries/<org>/<name>.json
  std::string content;           // what was committed
  bool existed = false;          // the dataset's main held an entry for the source already
  std::string commit;            // the commit made (on refs/pr/N for a pull request)
  std::string pull_request_url;  // when one was opened
};
// Reads the dataset's entry for the source (GET /datasets/{dataset}/resolve/
// main/{path}; 404: new), merges this package in and commits it
// (POST /api/datasets/{dataset}/commit/main, NDJSON), as a pull request
// (?create_pr=1: nodes read main, so it takes effect when merged) unless
// `pull_request` is false. Needs a token (kUnauthorized).
CatalogProposal propose_catalog_entry(const HubConfig& hub, const std::string& dataset, const CatalogEntryRequest& request,
                                      bool pull_request = true);

// ------------------------------------------------ write-package's run

// A package written from any source and, when asked, signed and published in
// the same run: what `write-package` does, for any caller.
struct WriteAndPublishOptions {
  // Everything the writer takes but the source (source, provenance,
  // stream_read, on_artifact and disk_budget are filled here); its
  // projectors are the ones given by name.
  WritePackageOptions write;
  std::string source;  // a local .gguf (any shard) or ORG/REPO:DIST
  // A local source's coordinates (all three); for a Hub source only the
  // revision (default main).
  std::string model_id, revision, source_file;
  // A Hub source read once over HTTP ranges as it is split, never stored
  // (StreamedHubSource): its mmproj*.gguf come in as projectors unless one
  // of the same name was given.
  bool stream = false;
  // The Hub source's publisher files go into a schema 2 package.
  bool hub_publisher_metadata = false;
  // Publish while writing: each fragment is queued as it is finished, the
  // publisher begun (token, repository, branch, tag checked) before a byte
  // is written, one commit at the end (HubPublisher).
  std::optional<PushTarget> push;
  PublishSettings publish;  // with push (sign_owner is ignored: see sign_owner)
  // With push: the most the output directory holds at once; each fragment is
  // deleted once the Hub holds it.
  uint64_t max_disk = 0;
  std::string message;                // with push: the commit summary
  std::filesystem::path sign_owner;   // sign the finished package (sign_package)
  HubConfig hub;
  // Progress of a Hub source being brought into the cache (done, total).
  std::function<void(uint64_t, uint64_t)> on_source_download;
  std::function<void(const std::string&)> on_warning;  // for the user
  // A streamed source is open: its bytes in all, the disk budget (null
  // without max_disk); then each read's bytes as they arrive.
  std::function<void(uint64_t total, const std::shared_ptr<DiskBudget>& budget)> on_stream_open;
  std::function<void(uint64_t)> on_stream_bytes;
  std::function<void()> on_write_start;  // the source is open and the push begun: the write starts
  // The package is written (before it is signed or pushed).
  std::function<void(const WritePackageResult&)> on_written;
};

struct WriteAndPublishResult {
  std::optional<WritePackageResult> written;  // always set on return
  std::optional<PackageSignature> signature;
  std::optional<PublishResult> published;
  uint64_t max_disk = 0, disk_peak = 0;  // with max_disk (a streamed source's headers included)
  unsigned threads = 0;
  struct Streamed {
    uint64_t source_bytes = 0;
    std::vector<std::string> projectors_from_source;
  };
  std::optional<Streamed> streamed;
};

// Throws what each step throws (Error naming the file or flag); checks that
// need no I/O (the tag's name, the owner directory's files, flags that go
// together) come first. When an upload failed before the write did, the
// upload's failure is what is thrown. Nothing is committed unless every
// fragment, the manifest and the metadata went up.
WriteAndPublishResult write_and_publish(const WriteAndPublishOptions& options);

}  // namespace skippy
