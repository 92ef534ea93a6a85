// The README.md a published package carries (spec: "Publishing Rules").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "skippy/manifest.h"
#include "skippy/manifest_v2.h"

namespace skippy::detail {

// What validate-package said when write-package ran it (--validate).
struct ReadmeValidation {
  uint64_t artifacts = 0;
  uint64_t tensors = 0;
  std::string tool;  // "skippy-model-package 0.2.0"
};

// Every item the spec lists: source coordinate and revision, source files
// and checksums, manifest checksum, projectors, layer count and activation
// width, ABI, generation defaults, the validation command and its result,
// and the writer's notes (model-family certification, inferred policy).
// The README says the package was validated only when `validation` is
// given (write-package ran the validation and it passed); otherwise it
// gives the command to run.
std::string package_readme(const PackageManifest& m, const std::string& manifest_sha256,
                           const std::vector<std::string>& notes, const std::optional<ReadmeValidation>& validation);

// The model card of a package schema 2 (README.md beside model-package.json):
// identity (model, package_id, source), the native ABI and the two rules
// mesh-llm's lines judge it by (exact, provenance), layers, every artifact with its size and SHA-256, sidecars,
// publisher files, request defaults, and how to validate. `validated`: the
// writer certified it against the source. The card ends with
// kReadmeV2Marker, so restamp-package knows the card is ours to rewrite.
inline constexpr std::string_view kReadmeV2Marker = "<!-- skippy-model-package: schema 2 model card -->";
std::string package_readme_v2(const PackageRootV2& root, const std::string& manifest_sha256, bool validated);

}  // namespace skippy::detail
