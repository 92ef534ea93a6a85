// publish's files beside the artifacts: README.md, the manifest,
// validation.json and the signature sidecar, each checked before it is
// queued (skippy/hub_publish.h: add_package_metadata).
#include "skippy/error.h"
#include "skippy/hub_publish.h"
#include "skippy/manifest.h"
#include "skippy/package_signature.h"
#include "util/sha256.h"
#include "skippy/package_validator.h"

namespace skippy {

namespace fs = std::filesystem;

PackageMetadataUpload add_package_metadata(HubPublisher& pub, const fs::path& dir, const std::string& manifest_sha256) {
  PackageMetadataUpload out;
  auto regular = [&](const fs::path& f) {
    std::error_code ec;
    return fs::is_regular_file(fs::symlink_status(f, ec));
  };
  const fs::path manifest = dir / std::string(kManifestFileName);
  if (!regular(manifest)) throw_invalid(manifest.string() + ": not a regular file");
  const std::string manifest_now = sha256_file(manifest);
  if (!sha256_equal(manifest_now, manifest_sha256)) {
    throw_integrity(manifest.string() + ": changed since it was verified (SHA-256 " + manifest_now + ", verified " +
                    manifest_sha256 + "); nothing was committed");
  }
  // validation.json must judge this manifest; a stale one would tell the
  // Hub's readers about another package.
  if (const auto v = read_validation_result(dir, manifest_sha256)) {
    if (v->unreadable) throw_invalid(*v->unreadable + "; fix or remove it before publishing");
    if (!v->matches_manifest) {
      throw_invalid(v->file.string() + ": describes another manifest (manifest_sha256 " + v->manifest_sha256 +
                    ", this package's is " + manifest_sha256 +
                    "); run validate-package --write-result again, or remove it, before publishing");
    }
    out.validation_result = true;
  }
  // A sidecar must verify over exactly these bytes (its signer is the
  // consumers' business: they choose whom to trust).
  if (const auto sig = read_package_signature(dir)) {
    if (!sha256_equal(sig->manifest_sha256, manifest_sha256)) {
      throw_integrity((dir / std::string(kSignatureFileName)).string() + ": signs another manifest (" + sig->manifest_sha256 + ")");
    }
    out.signed_by = sig->owner_id;
  }
  std::vector<std::string> names = {"README.md", std::string(kManifestFileName)};
  if (out.validation_result) names.emplace_back(kValidationFileName);
  if (!out.signed_by.empty()) names.emplace_back(kSignatureFileName);
  for (const auto& name : names) {
    const fs::path f = dir / name;
    if (!regular(f)) {
      if (name == "README.md") continue;
      throw_invalid(f.string() + ": not a regular file");
    }
    pub.add(name, f, fs::file_size(f), sha256_file(f));
  }
  return out;
}

}  // namespace skippy
