// publish of a package schema 2 directory (src/hub/publish_v2.h).
#include "hub/publish_v2.h"

#include <set>

#include "skippy/catalog_stage.h"
#include "skippy/error.h"
#include "util/file.h"
#include "skippy/manifest.h"
#include "skippy/manifest_v2.h"
#include "skippy/package_signature.h"
#include "skippy/verify.h"

namespace skippy::detail {

namespace fs = std::filesystem;

PublishResult publish_package_v2(const fs::path& dir, const HubConfig& hub, const PushTarget& target,
                                 const PublishSettings& settings, const std::string& message,
                                 const std::function<void(uint64_t, uint64_t)>& on_verify) {
  // The strict reader: the root's rules, package_id recomputed, the carrier's
  // size and SHA-256 and every locator rule.
  const OpenedCatalog pkg = open_local_catalog_v2(dir);
  const auto parts = all_parts(pkg.catalog);
  // Every artifact: a safe path to a regular file inside the package, of its
  // declared size, then SHA-256 (through the verification cache).
  VerifyOptions vo;
  vo.on_progress = on_verify;
  const auto report = verify_parts(pkg, parts, vo);
  if (!report.verified) {
    std::string msg = dir.string() + ": the schema 2 package fails its own checks, so it is not published:";
    for (const auto& p : report.problems) msg += "\n  " + p;
    throw_integrity(msg);
  }
  std::vector<VerifiedFile> files;
  for (const auto& p : parts) files.push_back({p.rel_path, check_part(pkg, p), p.bytes, p.sha256});
  const std::string summary = message.empty() ? "Publish layer package " + pkg.catalog.model_id + " (schema 2, " +
                                                    std::to_string(pkg.catalog.layer_count) + " layers)"
                                              : message;
  return commit_verified_package(dir, hub, target, settings, files, pkg.manifest_sha256, summary,
                                 "model-package.json sha256 " + pkg.manifest_sha256 + ", package_id " +
                                     pkg.catalog.package_id + ", written by skippy-model-package");
}

}  // namespace skippy::detail
