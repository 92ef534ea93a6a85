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
#include "skippy/package_signature.h"

namespace skippy {

class IoEnv;  // the file-system calls a write goes through (internal: src/util/io_env.h)

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
  IoEnv* io_env = nullptr;  // as WritePackageOptions::io_env
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
  IoEnv* io_env = nullptr;  // as WritePackageOptions::io_env
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

// ----------------------------------------- re-stamping for another runtime ABI
// Re-stamping a package schema 2 for another runtime ABI.
//
// mesh-llm's exact-rule runtimes (upstream, its release) admit a schema 2
// package only at exactly its root's native_abi_version; the fork's takes it
// as provenance (skippy/abi.h: the ABI rules and the runtime lines). The artifacts do not depend on it, so
// moving a package to another runtime ABI changes the root alone: its
// native_abi_version and, recomputed, its package_id. Every artifact stays
// byte for byte (a Hub commit of the result uploads one small file), the
// carrier included, and the package stays verifiable.
//
// The files bound to the old root's bytes are handled, never left lying:
//   - model-package.json.sig signs the old bytes: removed, or, with
//     sign_owner_dir, replaced by a signature of the new root. Signing
//     first checks what it will vouch for: the signature the package
//     carries (if any) must verify over the root as it is, and every
//     artifact must have its declared size and SHA-256 (Error(kIntegrity)
//     otherwise, before anything is written): a root edited after it was
//     signed is never signed again;
//   - validation.json names the old manifest's SHA-256 (publish refuses it
//     against the new one): removed; validate-package SOURCE DIR --write-result
//     certifies the re-stamped package again (its artifacts are unchanged);
//   - README.md: written again when it is the model card write-package
//     writes (it names the package_id and the ABI); another README is left
//     as it is, with a note when it names the old ABI.
// The old files are removed before the new root is renamed into place: a
// crash leaves the old root unsigned, or the new one, never a signature or
// a verdict that names other bytes.
//
// Thread-safety: restamp_package writes one package directory; do not run
// two on the same directory at once. Safe to call from any thread otherwise.

struct RestampOptions {
  std::filesystem::path package_dir;  // holds a schema 2 model-package.json
  std::string native_abi_version;     // "MAJOR.MINOR.PATCH" (required)
  // An owner identity directory (owner.key, owner.crt) to sign the new root
  // with; without it an existing signature is removed.
  std::optional<std::filesystem::path> sign_owner_dir;
};

struct RestampResult {
  std::string old_native_abi_version, native_abi_version;
  std::string old_package_id, package_id;
  std::string manifest_sha256;        // of the root as it is now
  bool changed = false;               // false: it was at that ABI already, nothing written
  std::vector<std::string> removed;   // "<file>: <why>", one per file removed
  std::vector<std::string> rewritten; // other files written again (README.md)
  std::vector<std::string> notes;     // worth telling a person (a README naming the old ABI)
  std::optional<PackageSignature> signature;  // with sign_owner_dir
};

// Throws Error(kUsage) for a malformed version, Error(kNotFound) without a
// manifest, Error(kInvalidInput) for a root that is not a valid schema 2
// root (a schema 1 manifest named as such); the root is then as it was. A
// signer's error (with sign_owner_dir) comes after the new root is in place:
// it is rethrown saying the package was re-stamped but not signed.
RestampResult restamp_package_v2(const RestampOptions& options);

}  // namespace skippy
