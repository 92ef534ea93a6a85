// validate-package's checks one artifact at a time (write-package
// --validate when fragments leave the disk as they are uploaded, or when
// the source is streamed and never stored): each artifact is checked as
// soon as it is complete, then finish() gives the report validate-package
// would give for the whole package. Internal to the publish library.
//
// Thread-safety: check_artifact may be called from any thread, one call
// at a time per artifact; finish() after the last.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "skippy/manifest.h"
#include "skippy/model_source.h"
#include "skippy/package_layout.h"
#include "skippy/package_validator.h"

namespace skippy {
class IoEnv;
}
namespace skippy::validator_detail {
class Validator;
}

namespace skippy::detail {

class SourceDigests;

// write_validation_result (skippy/package_validator.h) through the writing
// operation's IoEnv (nullptr: the system's): write-package --validate's.
void write_validation_result(const std::filesystem::path& package_dir, const ValidationReport& report,
                             const std::string& manifest_sha256, const std::string& command,
                             std::optional<int64_t> now_unix_secs, IoEnv* env);

// What the manifest says of the model, checked against the source (the
// package-level rules validate-package runs besides each artifact's): the
// generation block (within its schema, a profile only with the evidence it
// needs, and options.generation_model_rules), the layer count, the
// activation width and the number of source files. Appends to `problems`,
// and to `warnings` the pipeline depths that need evidence.
void check_manifest_against_source(const PackageManifest& m, const ModelSource& model, const ValidateOptions& opt,
                                   std::vector<std::string>& problems, std::vector<std::string>& warnings);

class PackageCheck {
 public:
  // `model` is the source; with `digests` (a streamed source) only its
  // headers are read, and the digests stand in for its bytes.
  PackageCheck(const std::filesystem::path& package_dir, const ModelSource& model, const SourceDigests* digests,
               ValidateOptions options);
  ~PackageCheck();
  PackageCheck(const PackageCheck&) = delete;
  PackageCheck& operator=(const PackageCheck&) = delete;

  // `entry` (its SHA-256 the writer's) is complete on disk: read it back and
  // check it now. Returns its problems (kept for finish() too). One call
  // at a time.
  std::vector<std::string> check_artifact(const ArtifactEntry& entry, PartRole role, uint32_t layer = 0);
  // Every shard and artifact of `m` not checked yet, the package-level
  // rules, and the report (validate_package's, for the same package).
  ValidationReport finish(const PackageManifest& m);

 private:
  ValidateOptions opt_;
  const ModelSource& model_;
  std::unique_ptr<validator_detail::Validator> v_;
};

}  // namespace skippy::detail
