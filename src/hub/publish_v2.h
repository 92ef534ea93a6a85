// publish of a package schema 2 directory (issue #22): internal to the hub
// library; publish_package (skippy/hub_publish.h) dispatches here when the
// directory's model-package.json says schema_version 2
// (declares_schema_v2).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "skippy/hub_publish.h"

namespace skippy::detail {

// One artifact of a verified package, as it goes into the commit.
struct VerifiedFile {
  std::string rel_path;
  std::filesystem::path path;  // resolved, checked
  uint64_t bytes = 0;
  std::string sha256;
};

// publish_package's work once a package of either schema passed its own
// checks: sign it when settings.sign_owner asks (the sidecar then goes up in
// the same commit), then one commit of `files` (each path once) plus
// add_package_metadata's files, with `summary` and `description`.
PublishResult commit_verified_package(const std::filesystem::path& dir, const HubConfig& hub, const PushTarget& target,
                                      const PublishSettings& settings, const std::vector<VerifiedFile>& files,
                                      const std::string& manifest_sha256, const std::string& summary,
                                      const std::string& description);

// publish_package for schema 2: the root read with the strict reader
// (open_local_catalog_v2: unknown fields, package_id, catalog and carrier
// rules), every catalog artifact (carrier, payload parts, sidecars) checked
// (path inside the package, size) and SHA-256-verified through the
// verification cache, then the artifacts, model-package.json and, when
// present, README.md, validation.json and model-package.json.sig in one
// commit (add_package_metadata). Objects the Hub's LFS store already holds
// (the fragments of a schema 1 package converted to schema 2, published
// before on another branch) get no upload action from the LFS batch and are
// not sent again.
PublishResult publish_package_v2(const std::filesystem::path& dir, const HubConfig& hub, const PushTarget& target,
                                 const PublishSettings& settings, const std::string& message,
                                 const std::function<void(uint64_t, uint64_t)>& on_verify);

}  // namespace skippy::detail
