// Integrity of a stage's parts (spec: "Consumer Validation"): SHA-256 of the
// selected artifacts (and of a projector the stage will use) against the
// manifest, hashed on a few threads, with a local verification cache.
//
// When verification is required:
//   - hf:// packages (OpenedPlace::always_verify) verify on every
//     resolution, Hugging Face cache hits included;
//   - local package directories verify when SKIPPY_VERIFY_PACKAGE_SHA is set
//     to a non-empty value other than "0";
//   - the `verify` command always verifies what it selects.
// A verification-cache hit counts as verified: the record says these exact
// bytes (same file identity and metadata) were hashed and matched before.
//
// The verification cache (spec: "Implementations MAY cache successful
// checksum verification results"). Directory: env::skippy_cache_dir()/verified.
// One record per verified file, named by a key: the SHA-256 of a canonical
// string of the manifest's SHA-256, the artifact's relative path, its
// declared SHA-256 and size, and the resolved file's st_dev, st_ino,
// st_size, st_mtim and st_ctim (nanoseconds). A record holds only its key,
// the declared digest and size and a timestamp — never a raw path. A hit
// (record present and matching) does no hashing and reads no artifact bytes;
// any change to the file (write, touch, replace, copy, move to another
// device) changes its metadata and so misses. Records are written atomically
// (not fsynced: a record torn by a crash is unreadable, which is a miss) and
// only after a successful hash whose file did not change while it was read.
// Files whose ctime is less than 50 ms (2 s on filesystems with whole-second
// timestamps) older than the start of their hash are verified but not
// recorded: a later write within the same filesystem timestamp tick would
// leave the metadata unchanged (git's "racily clean" rule). An unusable
// cache directory never fails a verification: it only disables caching (one
// note in the report).
//
// Thread-safety: reentrant; verifications of one package may run at once from threads
// or processes (the verification cache is replaced by rename, never seen half-written;
// a record lost in a race only costs a re-hash next time).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "skippy/stage.h"

namespace skippy {

// env::skippy_cache_dir() / "verified".
std::filesystem::path default_verification_cache_dir();

struct VerifyOptions {
  unsigned threads = 0;   // files hash in parallel, one thread per file; 0: one per core (at most 16)
  bool use_cache = true;  // false: hash everything, read and write no records
  std::optional<std::filesystem::path> cache_dir;  // default_verification_cache_dir() when unset
  // Bytes hashed so far and bytes to hash (cache misses only). May be called
  // from worker threads, concurrently.
  std::function<void(uint64_t done, uint64_t total)> on_progress;
};

struct VerifiedPart {
  std::string rel_path;
  std::string artifact_id;
  PartRole role = PartRole::kMetadata;
  std::optional<uint32_t> layer_index;
  bool cache_hit = false;  // no hashing: a matching record was found
  bool verified_while_fetching = false;  // no hashing: downloaded and hashed by this process
  bool ok = false;         // digest (or record) and size match the manifest
};

struct VerifyReport {
  bool verified = false;       // every part matched
  size_t artifacts = 0;        // distinct parts checked
  uint64_t hashed_bytes = 0;   // bytes read and hashed (0 on a full cache hit)
  size_t cache_hits = 0;
  // One per failed part, naming its relative path: "<rel path>: SHA-256 is X,
  // manifest says Y", size mismatches, read errors.
  std::vector<std::string> problems;
  std::vector<std::string> notes;   // e.g. the cache could not be written
  std::vector<VerifiedPart> parts;  // in the order given (duplicates folded)
};

// Checks every part's SHA-256 and size against the package's declaration,
// for either schema (through the same verification cache: records keyed by
// the manifest's SHA-256, the part's relative path, its declared digest and
// size, and the file's identity). Each part's file rule (check_part) comes
// first: a part that is missing, resolves outside the package or has
// another size is a problem of the report, as a wrong, truncated or
// unreadable artifact (or a malformed declared digest) is, never an
// exception. Problems name the part as the package's schema does: schema 1
// "<rel path>: SHA-256 is X, manifest says Y"; schema 2 "artifact <id>
// (<path>): SHA-256 is X, the catalog says Y". VerifiedPart::role is the
// part's (kMetadata for a part without one); parts are in the order given,
// duplicates folded.
VerifyReport verify_parts(const OpenedPlace& pkg, const std::vector<StagePart>& parts,
                          const VerifyOptions& options = {});

// verify_parts for a stage: its parts and projector, less a schema 2
// carrier (hashed when the package was opened; schema 1's metadata part
// is a fragment like the others).
VerifyReport verify_stage(const OpenedPlace& pkg, const StageSelection& stage, const VerifyOptions& options = {});

// True when a stage loader must verify before using the package: hf://
// packages always; local directories when SKIPPY_VERIFY_PACKAGE_SHA is set
// to a non-empty value other than "0".
bool verify_required(const OpenedPlace& pkg);

// For stage loaders (select, materialize): when verify_required(pkg), verifies
// `parts` (pass the stage's projector among them when it will be used) and
// throws Error(kIntegrity) listing every problem (and, for a package with
// a source, the damaged cached files to remove) if they do not match.
// Returns the report (nullopt when verification was not required).
std::optional<VerifyReport> verify_if_required(const OpenedPlace& pkg, const std::vector<StagePart>& parts,
                                               const VerifyOptions& options = {});

// verify_if_required for the artifacts a reader read to build `pkg`'s
// catalog (CatalogArtifact::read_for_catalog) and did not hash then: what a
// catalog says of tensors is only as good as the files it came from.
std::optional<VerifyReport> verify_catalog_reads(const OpenedCatalog& pkg, const VerifyOptions& options = {});

// A stage chosen, brought and checked, as select and fetch (and any stage
// loader) take it: the catalog the choice needs (catalog_need), the stage
// (choose_stage), its parts with the projector last, each brought through
// the package's source and checked (provide_parts), then verified where
// the package requires it (verify_if_required).
struct CheckedStage {
  OpenedCatalog pkg;
  StageSelection stage;
  std::vector<StagePart> parts;         // stage.parts_with_projector(), each with its path
  std::optional<VerifyReport> verified;  // nullopt: verification was not required
  uint64_t total_bytes = 0;              // of the parts
};
// The choice must have passed check_stage_choice against `opened`'s
// identity. Throws the selection's, the source's, the file rule's and
// verify_if_required's errors.
CheckedStage open_checked_stage(const OpenedPackage& opened, const StageChoice& choice);

// ------------------------------------------- files outside a package

// A file whose SHA-256 and size another party declared (a Hub repository
// listing for write-package's sources), for the same verification cache.
// `scope` names the declarer (e.g. "hf:org/repo@<commit>") and plays the
// role the manifest's SHA-256 plays for package artifacts.
struct FileClaim {
  std::filesystem::path path;  // the file to read
  std::string rel_path;        // its name in the declarer's terms
  std::string sha256;
  uint64_t bytes = 0;
};

// Which claims a record vouches for, the file being exactly as it was when
// it was hashed (a stat and a small read each; nothing is hashed).
std::vector<bool> cached_verifications(std::string_view scope, const std::vector<FileClaim>& claims,
                                       const VerifyOptions& options = {});

// Records claims the caller has just verified on the bytes (a download
// hashed while written). Files still inside the racy window are waited out
// once (at most 50 ms); a file that changes meanwhile is not recorded.
void record_verifications(std::string_view scope, const std::vector<FileClaim>& claims,
                          const VerifyOptions& options = {});

// fetch --local-dir: a stage's files as plain files under `dir` (as
// huggingface-cli's --local-dir), at their declared paths: model-package.json
// (its SHA-256 the one the package was opened with), its signature when the
// package has one, and `parts` (brought and checked: provide_parts). Each
// file is written under a temporary name and renamed into place
// (copy_file_range from the part; nothing half-written under a final name);
// a file already there of its declared size and SHA-256 is kept (the
// verification cache makes a rerun cheap). Then every part in `dir` is
// verified against the package's declaration (verify_parts on `dir`).
// Refuses (Error(kUsage)) a `dir` inside a Hugging Face cache snapshot or
// the package's own directory. Throws Error(kIo) when a file cannot be
// written, Error(kIntegrity) naming a part whose copy does not verify.
struct LocalDirReport {
  std::filesystem::path dir;
  std::vector<std::string> copied;  // relative paths written by this call
  std::vector<std::string> kept;    // relative paths already there, verified
  uint64_t copied_bytes = 0;
  VerifyReport verify;              // of every part in `dir`
};
LocalDirReport export_to_local_dir(const OpenedPlace& pkg, const std::vector<StagePart>& parts,
                                   const std::filesystem::path& dir, const VerifyOptions& options = {});

}  // namespace skippy
