// validate-package's schema 2 step (publish/schema_check.h): the
// reference's certification (certify_catalog) with every problem reported
// in the same ValidationReport schema 1 fills.
#include "format/generation_v2.h"
#include "publish/schema_check.h"
#include "skippy/error.h"
#include "skippy/gguf.h"
#include "skippy/manifest.h"
#include "skippy/manifest_v2.h"
#include "skippy/model_source.h"
#include "skippy/package_catalog.h"
#include "skippy/package_convert.h"
#include "skippy/package_layout.h"
#include "util/file.h"
#include "util/sha256.h"

namespace skippy::detail {
namespace {

namespace fs = std::filesystem;

// Size and SHA-256 of one artifact the certification does not hash (the
// carrier, a sidecar); a problem naming it, or nothing.
std::optional<std::string> check_artifact(const fs::path& root, const fs::path& boundary, const V2Artifact& a,
                                          ValidationReport& r) {
  const std::string label = "artifact " + a.id + " (" + a.path + ")";
  fs::path p;
  try {
    p = check_package_file(root, boundary, a.path, a.byte_size, catalog_file_names(root.string(), a.id, a.path));
  } catch (const Error& e) {
    return e.what();
  }
  const uint64_t size = a.byte_size;
  const std::string got = sha256_file(p);
  r.bytes_hashed += size;
  ++r.artifacts_checked;
  if (!sha256_equal(got, a.sha256)) return label + ": SHA-256 " + got + " differs from the catalog's " + a.sha256;
  return std::nullopt;
}

class Schema2Check final : public SchemaCheck {
 public:
  Schema2Check(fs::path package_dir, RootRead root, const ValidateOptions& opt)
      : dir_(std::move(package_dir)), text_(std::move(*root.text)), opt_(opt) {
    manifest_path_ = dir_ / std::string(kManifestFileName);
    root_dir_ = fs::absolute(dir_);
    std::error_code ec;
    boundary_ = local_package_boundary(dir_, ec);  // unresolvable: every artifact is reported missing
  }

  bool read_root(ValidationReport& r) override {
    r.schema_version = kPackageSchemaV2;
    r.checks = {"root_schema"};
    try {
      root_ = parse_package_root_v2(text_, manifest_path_.string());  // package_id recomputed and compared
    } catch (const Error& e) {
      r.problems.push_back(e.what());
      return false;
    }
    r.package_id = root_.package_id;
    // verify_v2.rs: "only GGUF v2 packages are supported".
    if (root_.format != "gguf") {
      r.problems.push_back(manifest_path_.string() + ": format is \"" + root_.format + "\"; only gguf is supported");
    }
    // A generation block the reference accepts but this runtime cannot read
    // (it has no schema 1 meaning) is served by nobody here: a warning.
    if (root_.generation) {
      try {
        (void)generation_v1_of(*root_.generation, root_.layer_count, manifest_path_.string());
      } catch (const Error& e) {
        r.warnings.push_back(e.what());
      }
    }
    r.checks = {"root_schema",       "package_id",    "carrier",        "sidecars",        "catalog",
                "source_files",      "source_sha256", "artifact_sizes", "artifact_sha256", "tensor_coverage",
                "tensor_type_shape", "tensor_bytes",  "carrier_kvs"};
    return true;
  }

  // The carrier and sidecars first: the catalog is only as good as the
  // carrier. Every file through the consumers' rule (check_part: a safe path
  // resolving to a regular file inside the package, of its declared size).
  void check_package_files(ValidationReport& r) override {
    for (const auto& a : root_.artifacts) {
      if (a.id == root_.source_model.metadata_artifact_id) carrier_ = &a;
    }
    if (carrier_) {  // parse_package_root_v2 guarantees it
      const auto problem = check_artifact(root_dir_, boundary_, *carrier_, r);
      if (problem) r.problems.push_back(*problem + " (the metadata carrier is not the one the package_id commits to)");
      carrier_ok_ = !problem;
    }
    for (const auto& s : root_.sidecars) {
      for (const auto& a : root_.artifacts) {
        if (a.id != s.artifact_id) continue;
        if (auto problem = check_artifact(root_dir_, boundary_, a, r)) r.problems.push_back("sidecar " + s.kind + ": " + *problem);
      }
    }
    for (const auto& p : root_.publisher_metadata) {
      for (const auto& a : root_.artifacts) {
        if (a.id != p.artifact_id) continue;
        if (auto problem = check_artifact(root_dir_, boundary_, a, r)) {
          r.problems.push_back("publisher metadata " + p.role + ": " + *problem);
        }
      }
    }
  }

  void source_unopened(ValidationReport&) override {}  // the checks stay as read_root named them

  void check_against_source(const fs::path& source, const ModelSource& model, ValidationReport& r) override {
    if (!carrier_ok_) return;
    PackageCatalog catalog;
    try {
      GgufLimits limits;
      limits.directory_only = true;
      auto file = std::make_shared<const GgufFile>(GgufFile::open(dir_ / carrier_->path, limits));
      catalog = build_catalog_v2(root_, std::move(file), manifest_path_.string() + ": " + carrier_->path);
    } catch (const Error& e) {
      r.problems.push_back(e.what());
      return;
    }
    if (!payload_files_present(catalog, r)) return;
    try {
      const auto c = certify_catalog(catalog, dir_, source, /*hash_artifacts=*/true, opt_.threads, opt_.on_progress);
      r.tensors_checked = c.tensors;
      r.bytes_hashed += c.bytes_hashed;
      for (const auto& a : catalog.artifacts) r.artifacts_checked += a.kind == CatalogArtifactKind::kPayload;
      for (size_t i = 0; i < model.shards().size() && i < c.source_sha256.size(); ++i) {
        r.source_files.push_back({fs::path(model.shards()[i].name()).filename().string(), c.source_bytes[i],
                                  c.source_sha256[i]});  // a name, not a local path
      }
    } catch (const Error& e) {
      // Not the source the package was written from: that comes first (the rest follows from it).
      const std::string got = sha256_file(model.shards().front().path());
      if (!sha256_equal(got, root_.source_model.sha256)) {
        r.wrong_source = source.string() + ": not the source this package was written from: its SHA-256 is " + got +
                         ", source_model.sha256 is " + root_.source_model.sha256;
        r.problems.insert(r.problems.begin(), *r.wrong_source);
      }
      r.problems.push_back(e.what());
    }
  }

 private:
  // Every payload part on disk at its declared size (carrier and sidecars:
  // check_package_files); false after reporting each one that is not.
  bool payload_files_present(const PackageCatalog& catalog, ValidationReport& r) const {
    bool ok = true;
    for (const auto& a : catalog.artifacts) {
      if (a.kind != CatalogArtifactKind::kPayload) continue;
      try {
        (void)check_package_file(root_dir_, boundary_, a.path, a.bytes, catalog_file_names(dir_.string(), a.id, a.path));
      } catch (const Error& e) {
        r.problems.push_back(e.what());
        ok = false;
      }
    }
    return ok;
  }

  fs::path dir_, manifest_path_, root_dir_, boundary_;
  std::string text_;
  const ValidateOptions& opt_;
  PackageRootV2 root_;
  const V2Artifact* carrier_ = nullptr;
  bool carrier_ok_ = false;
};

}  // namespace

std::unique_ptr<SchemaCheck> make_schema2_check(const std::filesystem::path& package_dir, RootRead root,
                                                const ValidateOptions& opt) {
  return std::make_unique<Schema2Check>(package_dir, std::move(root), opt);
}

}  // namespace skippy::detail
