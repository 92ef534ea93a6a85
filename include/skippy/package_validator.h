// validate-package: prove a package faithful to the model it was written
// from, before publishing (spec: "Publishing Rules"). Recomputes the SHA-256
// and size of every source shard and artifact, and checks that every source
// tensor sits in exactly one artifact, the right one, byte-identical.
//
// Thread-safety: validate_package only reads; any number may run at once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "skippy/manifest.h"
#include "skippy/model_source.h"

namespace skippy {

struct ValidationReport {
  bool valid = false;
  // Every problem found (not just the first), each naming the file or field.
  // When the source's first file does not hash to source_model.sha256, the
  // first problem is wrong_source (the rest follow from it), then the others.
  std::vector<std::string> problems;
  // Set when `source` is not the file the package was written from (its
  // SHA-256 is not source_model.sha256): says so, with both digests.
  std::optional<std::string> wrong_source;
  // Deviations that are not corruption: what the reference (mesh-llm)
  // writer does differently (repeated extras and metadata, source sizes
  // and digests not recorded), each naming the file or field.
  std::vector<std::string> warnings;
  // The package schema judged (1 or 2) and, for schema 2, the root's package_id.
  // A schema 2 package gets the reference's certification (certify_catalog,
  // skippy/package_convert.h: every source tensor exactly once with its type,
  // dims and bytes, every artifact's SHA-256, the source files' digests)
  // plus the carrier's and sidecars' sizes and digests.
  uint32_t schema_version = 1;
  std::string package_id;
  uint64_t artifacts_checked = 0;
  uint64_t tensors_checked = 0;
  uint64_t bytes_hashed = 0;
  // What was read and checked, for validation.json (below):
  // each source shard as hashed here (file name, size, SHA-256; empty when it
  // could not be read), and the names of the checks that ran, in order.
  struct SourceFile {
    std::string name;
    uint64_t size = 0;
    std::string sha256;
  };
  std::vector<SourceFile> source_files;
  std::vector<std::string> checks;
};

struct ValidateOptions {
  unsigned threads = 0;  // worker threads; 0: one per core (at most 16)
  std::function<void(uint64_t, uint64_t)> on_progress;  // (bytes done, bytes total)
  // (Schema 1 only.) Check against this manifest instead of the package's model-package.json
  // (write-package --validate, before the manifest is committed).
  std::optional<PackageManifest> manifest;
  // The generation block's rules that need the source model and live in a
  // library above this one: called with the manifest's generation and the
  // opened source; appends problems and warnings (each naming its field).
  // validate-package passes speculative_model_problems
  // (skippy/package_generation.h: native-mtp layer_indices must hold NextN
  // tensors, the rules `speculative` applies). The profile's evidence is
  // checked here regardless (the writer's own GLM-DSA check).
  std::function<void(const GenerationDefaults&, const ModelSource&, std::vector<std::string>& problems,
                     std::vector<std::string>& warnings)>
      generation_model_rules;
};

// Problems are reported in the result, not thrown; throws only when the
// check itself cannot run (I/O failure mid-way).
ValidationReport validate_package(const std::filesystem::path& source, const std::filesystem::path& package_dir,
                                  const ValidateOptions& options = {});

// ------------------------------------------------------------- validation.json
// validation.json: validate-package's verdict, kept in the package (the
// answer to the spec's "machine-readable validation results" open question).
//
// `write-package --validate` and `validate-package --write-result` leave it
// beside the manifest, written atomically:
//
//   schema_version           1
//   tool                     {"name": "skippy-model-package", "version"}
//   command                  what produced it ("write-package --validate", ...)
//   manifest_sha256          of the model-package.json it judged (the exact bytes)
//   source_files             [{"name", "size", "sha256"}]: each source shard as read
//   checks                   the checks that ran, in order
//   result                   "valid" | "invalid"
//   problems, warnings       as validate-package reports them
//   artifacts_checked, tensors_checked, bytes_hashed
//   validated_at_unix_secs, validated_at (UTC, "YYYY-MM-DDTHH:MM:SSZ")
//
// The manifest does not declare it (a manifest cannot hold a digest of a
// file that names the manifest's digest); the binding runs the other way:
// validation.json names the manifest's SHA-256, and the signature sidecar
// (skippy/package_signature.h) records and signs validation.json's bytes
// when the package is signed. A validation.json whose manifest_sha256 is
// not the manifest's describes another package: read_validation_result
// says so, and publish refuses to upload it.
//
// Thread-safety: reading is safe from any thread; writing replaces
// validation.json atomically (a reader sees the old file or the new one).

inline constexpr int kValidationSchemaVersion = 1;

// Writes `package_dir`/validation.json atomically for `report`, bound to
// `manifest_sha256` (the manifest's bytes: write-package knows them before
// the manifest lands). `now_unix_secs` defaults to the clock.
void write_validation_result(const std::filesystem::path& package_dir, const ValidationReport& report,
                             const std::string& manifest_sha256, const std::string& command,
                             std::optional<int64_t> now_unix_secs = std::nullopt);

struct ValidationResultInfo {
  std::filesystem::path file;
  std::string sha256;               // of validation.json's bytes
  std::string result;               // "valid" | "invalid"
  std::string manifest_sha256;      // the manifest it judged
  bool matches_manifest = false;    // manifest_sha256 is the package's model-package.json now
  std::string tool, tool_version, command;
  int64_t validated_at_unix_secs = 0;
  std::vector<ValidationReport::SourceFile> source_files;
  std::vector<std::string> checks, problems;
  // Why the file cannot be used at all (not JSON, a field missing, another
  // schema_version); the other fields are then unset.
  std::optional<std::string> unreadable;
};

// validation.json in `dir`, judged against `manifest_sha256` (the package's
// model-package.json); nullopt when there is none. Never throws for a bad
// file (see `unreadable`); throws Error(kIo) when it cannot be read.
std::optional<ValidationResultInfo> read_validation_result(const std::filesystem::path& dir,
                                                           const std::string& manifest_sha256);

}  // namespace skippy
