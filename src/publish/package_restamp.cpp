// restamp-package: a schema 2 root moved to another runtime ABI
// (skippy/package_convert.h).
#include "skippy/package_convert.h"

#include <algorithm>
#include <system_error>
#include <thread>
#include <vector>

#include "publish/package_readme.h"
#include "skippy/abi.h"
#include "skippy/error.h"
#include "util/file.h"
#include "skippy/manifest.h"
#include "skippy/manifest_v2.h"
#include "util/parallel.h"
#include "util/sha256.h"
#include "skippy/package_layout.h"
#include "skippy/package.h"

namespace skippy {

namespace fs = std::filesystem;

namespace {

// What --sign requires before it signs a re-stamped root: the signature the
// package carries (if any) still verifies over the root as it is, and every
// artifact the root names is on disk with its declared size and SHA-256.
// Throws Error(kIntegrity) listing what does not hold; nothing is written.
void check_before_resigning(const fs::path& dir, const fs::path& manifest, const PackageRootV2& root) {
  const std::string refuse = dir.string() + ": restamp-package --sign refused";
  try {
    (void)read_package_signature(dir);
  } catch (const Error& e) {
    throw Error(ErrorKind::kIntegrity,
                refuse + ": the package's signature does not verify (" + e.what() +
                    "): model-package.json or validation.json changed after it was signed, and signing again would "
                    "vouch for bytes nobody checked. Fetch a copy whose signature verifies and re-stamp that");
  }
  std::error_code ec;
  const fs::path boundary = local_package_boundary(dir, ec);
  if (ec) throw_io(dir.string() + ": cannot resolve: " + ec.message());
  std::vector<std::string> problems(root.artifacts.size());
  std::vector<uint64_t> sizes;
  for (const auto& a : root.artifacts) sizes.push_back(a.byte_size);
  detail::run_jobs_largest_first(sizes, /*threads=*/0, [&](size_t i) {
    const V2Artifact& a = root.artifacts[i];
    try {
      const fs::path file =
          check_package_file(dir, boundary, a.path, a.byte_size, catalog_file_names(dir.string(), a.id, a.path));
      const std::string got = sha256_file(file);
      if (!sha256_equal(got, a.sha256)) {
        problems[i] = "artifact " + a.id + " (" + a.path + "): SHA-256 is " + got + ", " + manifest.filename().string() +
                      " says " + a.sha256;
      }
    } catch (const Error& e) {
      problems[i] = e.what();
    }
  });
  std::string listed;
  size_t bad = 0;
  for (const auto& p : problems) {
    if (p.empty()) continue;
    if (++bad <= 8) listed += "; " + p;
  }
  if (bad == 0) return;
  if (bad > 8) listed += "; and " + std::to_string(bad - 8) + " more";
  throw Error(ErrorKind::kIntegrity, refuse + ": " + std::to_string(bad) + " of " + std::to_string(problems.size()) +
                                         " artifacts do not match the root, and a signature would vouch for them" +
                                         listed);
}

}  // namespace

RestampResult restamp_package_v2(const RestampOptions& o) {
  const auto abi = parse_abi_version(o.native_abi_version);
  if (!abi) {
    throw Error(ErrorKind::kUsage, "--native-abi-version: \"" + o.native_abi_version +
                                       "\" is not MAJOR.MINOR.PATCH (e.g. 0.1.64)");
  }
  refuse_hf_cache_snapshot(o.package_dir, "restamp-package");
  const fs::path manifest = o.package_dir / std::string(kManifestFileName);
  std::error_code ec;
  if (!fs::exists(manifest, ec)) throw_not_found(o.package_dir.string() + ": no " + std::string(kManifestFileName));
  const std::string text = read_small_file(manifest, kManifestMaxBytes);
  if (const auto s = package_root_schema(text); s.schema != kPackageSchemaV2 && s.declared) {
    throw_invalid(manifest.string() + ": package schema " + std::to_string(*s.declared) +
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
  // A signature vouches for bytes: re-signing may only carry forward what
  // was checked, never launder a root someone edited after it was signed.
  if (o.sign_owner_dir) check_before_resigning(o.package_dir, manifest, root);
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
