// Package schema 1's reader (skippy/package.h): the spec's manifest
// (skippy/manifest.h) and each fragment's GGUF header. Internal: what
// outside this folder needs of schema 1 is the reader's identity, catalog
// and description; validate-package, convert-package and tests reach the
// parsed manifest through manifest_of.
#pragma once

#include <memory>
#include <optional>
#include <string_view>

#include "skippy/manifest.h"
#include "skippy/package.h"

namespace skippy::schema1 {

// A reader for `text` (parse_manifest's rules, a malformed generation block
// set aside). Throws Error(kInvalidInput) naming `origin`. Every root that
// no other reader claims ends here, so its parser says what is wrong.
std::shared_ptr<const PackageReader> make_reader(std::string_view text, std::string_view origin);

// The manifest behind a schema 1 reader; nullptr for another schema.
const PackageManifest* manifest_of(const PackageReader& reader) noexcept;
const PackageManifest* manifest_of(const OpenedPackage& pkg) noexcept;

// What inspect shows of the package that only the manifest knows.
PackageDescription describe_manifest(const PackageManifest& m, const OpenedPlace& place, const ActivationWidth& width);

// The source's layout a package records in its metadata fragment (the
// reader's source_layout; `catalog` built for CatalogNeed::all()). Throws
// Error(kInvalidInput) for a record that contradicts the package.
SourceLayout source_layout_v1(const PackageManifest& m, const PackageCatalog& catalog);

// The identity a schema 1 manifest declares.
PackageIdentity identity_of(const PackageManifest& m);

}  // namespace skippy::schema1
