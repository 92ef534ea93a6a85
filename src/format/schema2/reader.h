// Package schema 2's reader (skippy/package.h): mesh-llm's root
// (skippy/manifest_v2.h) and its metadata carrier (every KV, the whole
// tensor directory, a locator per tensor). Internal: what outside this
// folder needs of schema 2 is the reader's identity, catalog and
// description; writers, validate-package, convert-package and tests reach
// the parsed root through root_of.
#pragma once

#include <memory>
#include <string_view>

#include "skippy/manifest_v2.h"
#include "skippy/package.h"

namespace skippy::schema2 {

// The reader of `text` as a schema 2 root (package_root_schema decided it):
// parse_package_root_v2's rules, the package_id checked. Throws
// Error(kInvalidInput) naming `origin` for a root that breaks a rule.
std::shared_ptr<const PackageReader> make_reader(std::string_view text, std::string_view origin);

// The root behind a schema 2 reader; nullptr for another schema.
const PackageRootV2* root_of(const PackageReader& reader) noexcept;
const PackageRootV2* root_of(const OpenedPackage& pkg) noexcept;

// What inspect shows of the package that only the root and the carrier's
// catalog (`catalog`) know.
PackageDescription describe_root(const PackageRootV2& root, const OpenedPlace& place, const PackageCatalog& catalog);

// The source's layout the root and carrier carry (the reader's
// source_layout; `catalog` built from the carrier).
SourceLayout source_layout_v2(const PackageRootV2& root, const PackageCatalog& catalog);

// The identity a schema 2 root declares (`origin` names it in the
// generation block's refusal, kept as generation_problem).
PackageIdentity identity_of(const PackageRootV2& root, std::string_view origin);

}  // namespace skippy::schema2
