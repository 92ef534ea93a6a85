// The commit of a verified package (publish_package, write-package --push's
// final commit): internal to the hub library.
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

}  // namespace skippy::detail
