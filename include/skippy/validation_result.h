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
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "skippy/package_validator.h"

namespace skippy {

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
