// validate-package for a schema 2 package (skippy/package_validator.h).
// Internal to the publish library.
#pragma once

#include <filesystem>
#include <string>

#include "skippy/package_validator.h"

namespace skippy::detail {

// `root_text` is the package's model-package.json as read (it declares schema 2).
ValidationReport validate_package_v2(const std::filesystem::path& source, const std::filesystem::path& package_dir,
                                     const std::string& root_text, const ValidateOptions& options);

}  // namespace skippy::detail
