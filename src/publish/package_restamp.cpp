// restamp-package: a schema 2 root moved to another runtime ABI
// (skippy/package_restamp.h).
#include "skippy/package_restamp.h"

#include <system_error>

#include "publish/package_readme.h"
#include "skippy/abi.h"
#include "skippy/error.h"
#include "util/file.h"
#include "skippy/manifest.h"
#include "skippy/manifest_v2.h"
#include "util/sha256.h"

namespace skippy {

namespace fs = std::filesystem;

RestampResult restamp_package_v2(const RestampOptions& o) {
  const auto abi = parse_abi_version(o.native_abi_version);
  if (!abi) {
    throw Error(ErrorKind::kUsage, "--native-abi-version: \"" + o.native_abi_version +
                                       "\" is not MAJOR.MINOR.PATCH (e.g. 0.1.64)");
  }
  const fs::path manifest = o.package_dir / std::string(kManifestFileName);
  std::error_code ec;
  if (!fs::exists(manifest, ec)) throw_not_found(o.package_dir.string() + ": no " + std::string(kManifestFileName));
  const std::string text = read_small_file(manifest, kManifestMaxBytes);
  if (const auto v = peek_schema_version(text); v && *v != kPackageSchemaV2) {
    throw_invalid(manifest.string() + ": package schema " + std::to_string(*v) +
                  "; restamp-package re-stamps a schema 2 root (a schema 1 package's skippy_abi_version is written "
                  "by write-package for its runtime; convert-package --to 2 --native-abi-version makes a schema 2 one)");
  }
  PackageRootV2 root = parse_package_root_v2(text, manifest.string());  // the package_id checked too

  RestampResult r;
  r.old_native_abi_version = root.native_abi_version;
  r.old_package_id = root.package_id;
  r.native_abi_version = format_abi_version(*abi);
  if (root.native_abi_version == r.native_abi_version) {
    r.package_id = root.package_id;
    r.manifest_sha256 = sha256_hex(text);
    return r;  // already there: nothing to write, nothing to invalidate
  }
  root.native_abi_version = r.native_abi_version;
  root.package_id = compute_package_id_v2(root);
  validate_package_root_v2(root, manifest.string() + " (re-stamped)");
  const std::string new_text = package_root_v2_json(root);
  // Checked by our own strict reader before anything on disk changes.
  (void)parse_package_root_v2(new_text, manifest.string() + " (re-stamped)");

  // A signature and a verdict bound to the old bytes go first: a crash
  // between here and the rename leaves the old root without them, never
  // the new root with them.
  auto drop = [&](std::string_view name, const std::string& why) {
    const fs::path f = o.package_dir / std::string(name);
    if (!fs::exists(fs::symlink_status(f, ec))) return;
    if (!fs::remove(f, ec) || ec) throw_io(f.string() + ": cannot remove");
    r.removed.push_back(std::string(name) + ": " + why);
  };
  drop(kSignatureFileName, o.sign_owner_dir ? "it signed the old root (signed again below)"
                                            : "it signed the old root's bytes (sign-package signs the new one)");
  drop(kValidationFileName,
       "it judged the old root's bytes (manifest_sha256); the artifacts are unchanged: validate-package "
       "SOURCE DIR --write-result records a verdict for the new root");
  write_file_atomic(manifest, new_text);
  r.changed = true;
  r.package_id = root.package_id;
  r.manifest_sha256 = sha256_hex(new_text);
  if (o.sign_owner_dir) {
    try {
      r.signature = sign_package(o.package_dir, *o.sign_owner_dir);
    } catch (const Error& e) {
      throw e.with_context(o.package_dir.string() + ": re-stamped for ABI " + r.native_abi_version +
                           " (package_id " + r.package_id + ") but not signed");
    }
  }
  const fs::path readme = o.package_dir / "README.md";
  std::string card;
  try {
    card = read_small_file(readme, uint64_t{4} << 20);
  } catch (const Error&) {
    // No README, or none a person reads: nothing to say about it.
  }
  if (card.find(detail::kReadmeV2Marker) != std::string::npos) {
    // Our model card: it names the package_id and the ABI, so it follows the root.
    const bool certified = card.find("Certified against the source model") != std::string::npos;
    write_file_atomic(readme, detail::package_readme_v2(root, r.manifest_sha256, certified));
    r.rewritten.push_back("README.md");
  } else if (!card.empty() && card.find(r.old_native_abi_version) != std::string::npos) {
    r.notes.push_back("README.md names the old ABI " + r.old_native_abi_version +
                      " and is not skippy-model-package's model card: left as it is");
  }
  return r;
}

}  // namespace skippy
