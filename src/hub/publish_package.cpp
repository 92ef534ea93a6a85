// publish_package (skippy/hub_publish.h): a local package directory of any
// schema, checked and verified, then uploaded in one commit through HubPublisher.
#include <set>

#include "hub/publish_commit.h"
#include "skippy/error.h"
#include "skippy/hub_publish.h"
#include "skippy/manifest.h"
#include "skippy/package_signature.h"
#include "skippy/stage.h"
#include "skippy/verify.h"

namespace skippy {

namespace fs = std::filesystem;

PublishResult publish_package(const fs::path& dir, const HubConfig& hub, const PushTarget& target,
                              const PublishSettings& settings, const std::string& message,
                              const std::function<void(uint64_t, uint64_t)>& on_verify) {
  const auto pkg = open_local_package(dir);
  const PackageIdentity& id = pkg.identity();
  // Consumers set a broken generation block aside so that layers still load;
  // the publisher's gate is where it gets fixed, not where it spreads.
  if (id.generation_problem) {
    throw_invalid(dir.string() + "/model-package.json: " + *id.generation_problem +
                  "; consumers would ignore the package's generation defaults: fix the block before publishing");
  }
  const auto& src = id.source_model;
  if (!src.path.empty() && (fs::path(src.path).is_absolute() || src.path.starts_with("~"))) {
    throw_invalid(dir.string() + "/model-package.json: source_model.path records a local path (\"" + src.path +
                  "\"); nothing private goes to the Hub: write the package again with this tool's write-package, which "
                  "records only the source file's name there");
  }
  // The reader's own checks (a carrier's size, SHA-256 and locators), then
  // the consumer's: every artifact a safe relative path to a regular file
  // inside the package, of its declared size; then SHA-256.
  const OpenedCatalog opened = pkg.catalog(CatalogNeed::artifacts());
  auto parts = all_parts(opened.catalog);
  provide_parts(opened, parts);
  VerifyOptions vo;
  vo.on_progress = on_verify;
  const auto report = verify_parts(opened, parts, vo);
  if (!report.verified) {
    std::string msg = dir.string() + ": the package fails its own checks, so it is not published:";
    for (const auto& p : report.problems) msg += "\n  " + p;
    throw_integrity(msg);
  }
  std::vector<detail::VerifiedFile> files;
  for (const auto& p : parts) files.push_back({p.rel_path, p.path, p.bytes, p.sha256});
  const std::string schema = id.schema_version > 1 ? "schema " + std::to_string(id.schema_version) + ", " : "";
  const std::string summary =
      message.empty() ? "Publish layer package " + id.model_id + " (" + schema + std::to_string(id.layer_count) + " layers)"
                      : message;
  return detail::commit_verified_package(dir, hub, target, settings, files, pkg.manifest_sha256, summary,
                                         "model-package.json sha256 " + pkg.manifest_sha256 +
                                             (id.package_id.empty() ? "" : ", package_id " + id.package_id) +
                                             ", written by skippy-model-package");
}

namespace detail {

PublishResult commit_verified_package(const fs::path& dir, const HubConfig& hub, const PushTarget& target,
                                      const PublishSettings& settings, const std::vector<VerifiedFile>& files,
                                      const std::string& manifest_sha256, const std::string& summary,
                                      const std::string& description) {
  // Sign once the package is known good, so the sidecar goes up in the same commit.
  if (!settings.sign_owner.empty()) (void)sign_package(dir, settings.sign_owner);
  HubPublisher pub(hub, target, settings);
  pub.begin();
  std::set<std::string> added;
  for (const auto& f : files) {
    if (added.insert(f.rel_path).second) pub.add(f.rel_path, f.path, f.bytes, f.sha256);
  }
  const auto meta = add_package_metadata(pub, dir, manifest_sha256);
  auto res = pub.commit(summary, description);
  res.signed_by = meta.signed_by;
  res.validation_result = meta.validation_result;
  return res;
}

}  // namespace detail

}  // namespace skippy
