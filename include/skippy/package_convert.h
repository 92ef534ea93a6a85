// convert-package: between package schema 1 (the spec's layer packages) and
// package schema 2 (mesh-llm's "package v2": a root, a metadata carrier and
// payload parts; skippy/manifest_v2.h, skippy/package_catalog.h).
//
// 1 -> 2 copies no payload byte: schema 1 fragments hold every owned tensor
// exactly once, so each fragment with tensors becomes a schema 2 payload
// artifact unchanged (same bytes, same SHA-256: a hard link on the same
// filesystem, else copy_file_range, else a plain copy). Only the carrier
// (the KVs of shared/metadata.gguf and the directory built from each
// fragment's header, locator = the tensor's absolute offset in its
// fragment) and the root are new. Paths: the reference writer's, which its
// reader derives layers from: layers/layer-NNNNN.gguf keep theirs (id
// "layer-NNNNN"), shared/embeddings.gguf and shared/output.gguf keep theirs
// (ids "embeddings", "output": payload parts without a layer), the schema 1
// metadata fragment's tensors (rope_freqs, ...) move to shared/common.gguf
// (id "common"; the same bytes) since shared/metadata.gguf is the carrier
// (id "metadata"); mmproj projectors become sidecars ("projector-NNNNN")
// at their schema 1 path. Fragments without tensors have no place.
//
// Certification (the reference's design: a v1 package proves only what its
// writer selected; full coverage may be claimed only against the original
// source's tensor directories): with `source`, every source tensor must be in
// the catalog exactly once with the same type, dims and bytes (compared,
// streaming), the source files must hash to the root's files[], the carrier's
// KVs must be the source's, and every artifact must hash to its digest.
// Without a source the conversion refuses (Error(kUsage), saying why) unless
// `allow_uncertified`: then it writes the package and says it is
// uncertified (the root has no field for it; the report and the CLI do).
//
// 2 -> 1 rewrites fragments: every tensor is streamed from its payload part
// by locator into the schema 1 writer's fragments (its layout, KV rules and
// crash safety), the manifest built from the root and the carrier.
//
// Both directions: the output directory appears complete or not at all (a
// sibling temporary directory, fsynced, renamed into place).
//
// Thread-safety: each conversion works on its own output directory and may run
// concurrently with others; two conversions into one directory are not
// supported.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "skippy/manifest_v2.h"
#include "skippy/package.h"
#include "skippy/package_catalog.h"

namespace skippy {

struct ConvertToV2Options {
  std::filesystem::path package_dir;            // a schema 1 package directory
  std::filesystem::path out_dir;                // must not exist, or be empty (or --force)
  std::optional<std::filesystem::path> source;  // the original source (any shard) to certify against
  bool allow_uncertified = false;               // write without a source
  bool force = false;                           // replace a non-empty out_dir
  unsigned threads = 0;  // worker threads; 0: one per core (at most 16)
  std::function<void(uint64_t, uint64_t)> on_progress;  // certification bytes
  // The root's native_abi_version (skippy/abi.h): the one runtime ABI that
  // admits it; schema 1's skippy_abi_version is another rule and is not
  // carried over. Empty: kDefaultNativeAbiV2.
  std::string native_abi_version;
  // generation.request_defaults to write (schema 1 has no place for them).
  std::optional<V2RequestDefaults> request_defaults;
  // Publisher files to attach (as WritePackageOptions::publisher_metadata).
  std::vector<std::filesystem::path> publisher_metadata;
};

struct ConvertedArtifact {
  std::string id;
  std::string path;        // in the schema 2 package
  std::string from;        // schema 1 path ("" for the new carrier)
  uint64_t bytes = 0;
  std::string sha256;
  std::string how;         // "hard link", "copy_file_range", "copy", "written"
};

struct ConvertToV2Result {
  std::filesystem::path package_dir;
  std::string package_id;
  std::string manifest_sha256;
  PackageRootV2 root;
  std::vector<ConvertedArtifact> artifacts;
  uint64_t payload_bytes = 0;     // placed without rewriting
  uint64_t linked_bytes = 0;      // of those, hard-linked
  bool certified = false;
  std::string certification;      // what was checked, or why nothing was
  uint64_t tensors_certified = 0;
  uint64_t bytes_compared = 0;    // tensor bytes compared with the source
  std::vector<std::string> dropped;  // what schema 1 held that schema 2 has no place for
  double carrier_root_seconds = 0;   // building and writing the carrier + root
  double certify_seconds = 0;
};

ConvertToV2Result convert_package_to_v2(const ConvertToV2Options& options);

// The certification alone, on a built catalog of a package in `package_dir`
// (any schema 2 package: ours, converted, or the reference's): throws
// Error(kIntegrity) naming the first tensor or file that differs, or
// Error(kInvalidInput) when the source is not the package's. Returns the
// number of tensor bytes compared. `hash_artifacts` also hashes every
// artifact against its catalog digest.
struct CertifyResult {
  uint64_t tensors = 0;
  uint64_t bytes_compared = 0;
  uint64_t bytes_hashed = 0;
  std::vector<std::string> source_sha256;  // each source shard as hashed, in shard order
  std::vector<uint64_t> source_bytes;
};
CertifyResult certify_catalog(const PackageCatalog& catalog, const std::filesystem::path& package_dir,
                              const std::filesystem::path& source, bool hash_artifacts, unsigned threads = 0,
                              const std::function<void(uint64_t, uint64_t)>& on_progress = {});

struct ConvertToV1Options {
  std::filesystem::path package_dir;   // the schema 2 package (read by open_local_package)
  std::filesystem::path out_dir;
  bool force = false;
  unsigned threads = 0;  // worker threads; 0: one per core (at most 16)
  std::function<void(uint64_t, uint64_t)> on_progress;
};

struct ConvertToV1Result {
  std::filesystem::path package_dir;
  std::string manifest_sha256;
  size_t artifact_count = 0;
  uint64_t bytes_written = 0;
  std::vector<std::string> dropped;   // what schema 2 held that schema 1 has no place for
  std::vector<std::string> notes;
};

// `package` is the opened package schema 2 (open_local_package; another
// schema is refused, Error(kUsage)); its catalog is read here, its payload
// parts size-checked and their bytes hashed on the way through against the
// catalog's SHA-256.
ConvertToV1Result convert_package_to_v1(const OpenedPackage& package, const ConvertToV1Options& options);

}  // namespace skippy
