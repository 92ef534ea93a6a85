// The README.md a published package carries (spec: "Publishing Rules").
#pragma once

#include <string>
#include <vector>

#include "skippy/manifest.h"

namespace skippy::detail {

// Every item the spec lists: source coordinate and revision, source files
// and checksums, manifest checksum, projectors, layer count and activation
// width, ABI, generation defaults, the validation command, and the writer's
// notes (model-family certification, inferred policy).
std::string package_readme(const PackageManifest& m, const std::string& manifest_sha256,
                           const std::vector<std::string>& notes);

}  // namespace skippy::detail
