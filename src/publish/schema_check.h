// validate-package is one pipeline (package_validator.cpp: the root read,
// the schema named by package_root_schema, the package's own files checked,
// the source opened, the package judged against it). What a package schema
// decides is asked of its check: how its root is parsed, which of its files
// need no source, how it is judged against the source, and in what order the
// report says so. Schema 1: schema1/validator.cpp; schema 2:
// schema2/validator.cpp. A third schema is a third check, and
// make_schema_check the one place that learns it. Internal to the publish
// library.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "skippy/model_source.h"
#include "skippy/package_validator.h"

namespace skippy::detail {

// The package's model-package.json as the pipeline read it: its text, or
// why it could not be read.
struct RootRead {
  std::optional<std::string> text;
  std::string error;
};

class SchemaCheck {
 public:
  virtual ~SchemaCheck() = default;

  // Parses the root. False when nothing else can be judged: `r` then says
  // why, and the checks it ran.
  virtual bool read_root(ValidationReport& r) = 0;
  // What needs only the package's files (schema 2: the carrier, sidecars and
  // publisher metadata, whose digests the root commits to).
  virtual void check_package_files(ValidationReport& r) { (void)r; }
  // The source could not be opened (its error is already in r.problems):
  // the checks the report names as run.
  virtual void source_unopened(ValidationReport& r) = 0;
  // Every check against the opened `model` (`source` as given, for
  // messages), the report's problems left in the order it gives them.
  virtual void check_against_source(const std::filesystem::path& source, const ModelSource& model,
                                    ValidationReport& r) = 0;
};

std::unique_ptr<SchemaCheck> make_schema1_check(const std::filesystem::path& package_dir, RootRead root,
                                                const ValidateOptions& opt);
std::unique_ptr<SchemaCheck> make_schema2_check(const std::filesystem::path& package_dir, RootRead root,
                                                const ValidateOptions& opt);

}  // namespace skippy::detail
