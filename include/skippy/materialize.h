// Materialize (derived cache): a stage's selected parts written as one GGUF,
// for runtimes that want a single file. Spec: "If a runtime composes those
// parts into a per-stage GGUF file, that file is derived cache and MUST NOT
// become the published repository format." Direct load (stage_view.h) is the
// normal path.
//
// The file: the metadata part's KVs in order, minus the fragment keys
// (skippy.package.*), plus keys marking it derived (kMaterialized*Key); the
// fragments' alignment; the tensors of the parts in load order (metadata,
// embeddings, layers, output), streamed with positional reads. A full-range
// materialization holds exactly the source model's tensors, byte-identical.
// A projector is never merged.
//
// The cache: <cache_dir>/<manifest_sha256[:16]>-L<start>-<end>.gguf with a
// sidecar <same>.json (manifest_sha256, model_id, layer range, size,
// tensor_count, sha256 of the file or null when not computed,
// parts_verified). Only a stage built from verified parts enters the cache:
// a new entry's parts are SHA-256-checked against the package first, even
// when the package does not require it (a local directory), since every
// later run of the same manifest may reuse the entry, from any copy of the
// package. A run reuses the file when the sidecar matches the package and
// range, says its parts were verified, and the file's size and header agree;
// when verification is required (verify_required() or
// MaterializeOptions::verify) the parts are verified against the manifest
// and the cached file compared byte for byte with them. Concurrent
// materializers of one stage (threads or processes) serialize on an flock of
// <same>.lock: one builds, the others find its result. Files are staged
// under a hidden partial name, checked (size, and a re-parse showing the
// tensor table written) and renamed: cache entries fsynced first
// (AtomicFile), the sidecar last; an explicit `out` file like cp (renamed,
// left to the kernel's writeback). Nothing is ever written inside the
// package directory.
//
// Package schema 2: the same file from the catalog. KVs are the metadata carrier's in order, minus its
// skippy.package.* bookkeeping (is_carrier_key) and split.*, plus the
// kMaterialized*Key ones (kMaterializedPackageIdKey too); the alignment is
// the carrier's general.alignment; the tensors, in the carrier's directory
// order, have the directory's type and dims and the bytes at each locator
// (artifact, offset, stored bytes), so a full range is the source model's
// tensors, byte-identical, in the source's order. Cache, sidecar, lock,
// reuse, --out and staging are schema 1's, by the same code.
//
// Thread-safety: safe from several threads or processes at once: materializers of
// one stage serialize on a file lock (below), the others find its result.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "skippy/stage.h"

namespace skippy {

class IoEnv;  // the file-system calls a write goes through (internal: src/util/io_env.h)

// KVs that mark a materialized file as derived.
inline constexpr std::string_view kMaterializedLayerStartKey = "skippy.materialized.layer_start";        // u32
inline constexpr std::string_view kMaterializedLayerEndKey = "skippy.materialized.layer_end";            // u32
inline constexpr std::string_view kMaterializedManifestKey = "skippy.materialized.manifest_sha256";      // string
inline constexpr std::string_view kMaterializedModelIdKey = "skippy.materialized.model_id";              // string
inline constexpr std::string_view kMaterializedPackageIdKey = "skippy.materialized.package_id";          // string, schema 2

// env::skippy_cache_dir() / "stages".
std::filesystem::path default_stage_cache_dir();

struct MaterializeOptions {
  // Write exactly this file instead of the cache: staged and renamed (a
  // reader never sees it partial), not fsynced (as cp); no sidecar, no lock,
  // never reused.
  std::optional<std::filesystem::path> out;
  // The cache directory; default_stage_cache_dir() when unset.
  std::optional<std::filesystem::path> cache_dir;
  // Verify the parts (SHA-256 against the manifest, verification cache
  // allowed) and, before reusing a cached file, compare its every byte with
  // what materializing would write now — even when verify_required() says
  // no. Both happen anyway when verify_required(pkg).
  bool verify = false;
  // Also compute the file's SHA-256 (MaterializeResult::sha256, recorded in
  // the sidecar). Off by default: without it the bytes are copied by a
  // reader and a writer thread, at about the speed of cp.
  bool hash = false;
  // Bytes written so far and the file's total size.
  std::function<void(uint64_t done, uint64_t total)> on_progress;
  // The calls every write, fsync and rename of this run goes through (as
  // LevelDB's Options::env; the interface is internal to the library and its
  // tests, which pass one that fails or "crashes" at the Nth call); nullptr:
  // the system's.
  IoEnv* io_env = nullptr;
};

struct MaterializeResult {
  std::filesystem::path path;  // the materialized GGUF
  uint64_t tensor_count = 0;
  uint64_t bytes = 0;          // file size
  std::string sha256;          // of the file; "" unless options.hash (or recorded before)
  bool reused = false;         // found valid in the cache, nothing written
  bool cached = false;         // lives in the cache (false for options.out)
};

// Materializes the stage `stage` (select_stage or select_stage_tensors on
// pkg.catalog; OpenedPackage::catalog(CatalogNeed::stage(range)) lists a
// stage's tensors). Its parts come through the package's source when missing,
// and each passes check_part before it is read; schema 1's parts have
// passed the reader's fragment rules (tensor counts and role keys, one
// alignment, a layer fragment holding only its layer) and then pass the
// StageView's (every layer in range present and holding tensors). Verification
// (options.verify, or verify_required) hashes the parts (verify_stage,
// with the verification cache). A selection by tensor names has no layer
// range: it needs options.out (Error(kUsage) otherwise) and its file
// carries no layer_start/layer_end keys. Throws Error(kInvalidInput) when
// a part breaks a rule or a target lies inside the package,
// Error(kIntegrity) when verification finds a part whose SHA-256 or size is
// not the declared one (naming it as verify_parts does), Error(kIo) when
// the cache or --out cannot be written.
MaterializeResult materialize_stage(const OpenedCatalog& pkg, const StageSelection& stage,
                                    const MaterializeOptions& options = {});

// ---------------------------------------------------------- the source again
//
// materialize_source: the source model's file(s) the package was written
// from, rebuilt byte for byte from its parts (what `gguf-split --merge`
// users expect of a merge: the original bytes, not a derived stage). The
// package's reader says how the files were laid out (PackageReader::
// source_layout: schema 1 records it in shared/metadata.gguf; schema 2's
// carrier holds a one-file source's KVs and directory); each file is laid
// out again, checked against the size the package records for it
// (source_model.files[]) before a byte is written, then written under a
// hidden temporary name beside its target, its SHA-256 computed from the
// bytes as they are written (tensor bytes read from the parts with
// positional reads, flat memory), and renamed into place only when every
// file's size and SHA-256 are the ones the package records. A package that
// does not record what a file needs is refused before anything is written,
// saying what is missing; a rebuilt SHA-256 that differs leaves nothing
// behind and says why (the parts that are not what the package declares,
// or what the layout took on trust). Projectors are their own files in the
// package, never part of the source model.

struct SourceRebuildOptions {
  // A directory (for a source of several files, made when missing, in an
  // existing one): each file goes there under its name in the source (the
  // last component of source_model.files[].path). For a source of one file
  // that is not an existing directory: the file itself. Replaced files are
  // replaced whole (renamed over, like cp); a target inside the package is
  // refused.
  std::filesystem::path out;
  // Verify every part against the package before reading it (always done
  // when verify_required(pkg)).
  bool verify = false;
  // Bytes written so far and the files' total size.
  std::function<void(uint64_t done, uint64_t total)> on_progress;
  IoEnv* io_env = nullptr;  // as MaterializeOptions::io_env
};

struct RebuiltSourceFile {
  std::string source_path;     // source_model.files[].path
  std::filesystem::path path;  // where it was written
  uint64_t bytes = 0;
  std::string sha256;          // computed from the bytes written: the recorded one
};

// Throws Error(kUsage) for an `out` that cannot name the files,
// Error(kInvalidInput) for what the package does not record (naming it) or
// a target inside the package, Error(kIntegrity) when a rebuilt file is not
// the recorded one (or verification finds a damaged part), the source's
// errors for parts that cannot be brought, Error(kIo) for the writes.
std::vector<RebuiltSourceFile> materialize_source(const OpenedPackage& pkg, const SourceRebuildOptions& options);

// "<manifest_sha256[:16]>-L<start>-<end>" (the cache entry's base name).
std::string stage_cache_key(std::string_view manifest_sha256, LayerRange range);

struct StageCacheEntry {
  std::string name;                    // base name, e.g. "0123abcd4567ef89-L0-4"
  std::filesystem::path path;          // the .gguf (may be missing when !valid)
  std::string manifest_sha256;         // from the sidecar ("" when unreadable)
  std::string model_id;
  LayerRange range;
  uint64_t size = 0;                   // bytes on disk (.gguf, sidecar, lock)
  uint64_t tensor_count = 0;
  std::string sha256;                  // "" when never computed
  bool complete = false;               // sidecar readable and the file's size matches it
};

// Every entry in the cache directory (by base name, sorted), complete or
// not; leftovers of interrupted runs (partials, orphan locks or sidecars)
// appear as incomplete entries. A missing directory lists nothing.
std::vector<StageCacheEntry> list_stage_cache(const std::filesystem::path& cache_dir);

struct PruneResult {
  std::vector<std::string> removed;  // entry names
  std::vector<std::string> busy;     // skipped: a materializer holds their lock
  uint64_t freed_bytes = 0;
};
// Removes the cache's entries (only those of one package when
// `manifest_sha256` is given), taking each entry's lock without waiting; an
// entry being built is skipped (busy). Hidden partials of dead runs go too.
// A process that already opened a removed file keeps reading it.
PruneResult prune_stage_cache(const std::filesystem::path& cache_dir,
                              std::optional<std::string_view> manifest_sha256 = std::nullopt);

}  // namespace skippy
