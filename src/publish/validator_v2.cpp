// validate-package, schema 2: the reference's certification (certify_catalog)
// with every problem reported in the same ValidationReport schema 1 fills.
#include "publish/validator_v2.h"

#include "skippy/error.h"
#include "util/file.h"
#include "format/generation_v2.h"
#include "skippy/gguf.h"
#include "skippy/manifest.h"
#include "skippy/manifest_v2.h"
#include "skippy/model_source.h"
#include "skippy/package_catalog.h"
#include "skippy/package_convert.h"
#include "skippy/package_layout.h"
#include "util/sha256.h"

namespace skippy::detail {
namespace validator_v2_detail {

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

}  // namespace validator_v2_detail

ValidationReport validate_package_v2(const std::filesystem::path& source, const std::filesystem::path& package_dir, const std::string& root_text,
                                     const ValidateOptions& opt) {
  using namespace validator_v2_detail;
  ValidationReport r;
  r.schema_version = kPackageSchemaV2;
  const fs::path manifest_path = package_dir / std::string(kManifestFileName);
  r.checks = {"root_schema"};
  PackageRootV2 root;
  try {
    root = parse_package_root_v2(root_text, manifest_path.string());  // package_id recomputed and compared
  } catch (const Error& e) {
    r.problems.push_back(e.what());
    return r;
  }
  r.package_id = root.package_id;
  // verify_v2.rs: "only GGUF v2 packages are supported".
  if (root.format != "gguf") r.problems.push_back(manifest_path.string() + ": format is \"" + root.format + "\"; only gguf is supported");
  // A generation block the reference accepts but this runtime cannot read
  // (it has no schema 1 meaning) is served by nobody here: a warning.
  if (root.generation) {
    try {
      (void)generation_v1_of(*root.generation, root.layer_count, manifest_path.string());
    } catch (const Error& e) {
      r.warnings.push_back(e.what());
    }
  }
  r.checks = {"root_schema",     "package_id",   "carrier",        "sidecars",          "catalog",
              "source_files",    "source_sha256", "artifact_sizes", "artifact_sha256",   "tensor_coverage",
              "tensor_type_shape", "tensor_bytes", "carrier_kvs"};
  // Every file through the consumers' rule (check_part: a safe path
  // resolving to a regular file inside the package, of its declared size).
  const fs::path root_dir = fs::absolute(package_dir);
  fs::path boundary;
  {
    std::error_code ec;
    boundary = local_package_boundary(package_dir, ec);  // unresolvable: every artifact is reported missing
  }
  // The carrier and sidecars first: the catalog is only as good as the carrier.
  const V2Artifact* carrier = nullptr;
  for (const auto& a : root.artifacts) {
    if (a.id == root.source_model.metadata_artifact_id) carrier = &a;
  }
  bool carrier_ok = false;
  if (carrier) {  // parse_package_root_v2 guarantees it
    const auto problem = check_artifact(root_dir, boundary, *carrier, r);
    if (problem) r.problems.push_back(*problem + " (the metadata carrier is not the one the package_id commits to)");
    carrier_ok = !problem;
  }
  for (const auto& s : root.sidecars) {
    for (const auto& a : root.artifacts) {
      if (a.id != s.artifact_id) continue;
      if (auto problem = check_artifact(root_dir, boundary, a, r)) r.problems.push_back("sidecar " + s.kind + ": " + *problem);
    }
  }
  for (const auto& p : root.publisher_metadata) {
    for (const auto& a : root.artifacts) {
      if (a.id != p.artifact_id) continue;
      if (auto problem = check_artifact(root_dir, boundary, a, r)) {
        r.problems.push_back("publisher metadata " + p.role + ": " + *problem);
      }
    }
  }
  std::optional<ModelSource> model;
  try {
    model.emplace(ModelSource::open(source));
  } catch (const Error& e) {
    r.problems.push_back(e.what());
    return r;
  }
  if (!carrier_ok) return r;
  PackageCatalog catalog;
  try {
    GgufLimits limits;
    limits.directory_only = true;
    auto file = std::make_shared<const GgufFile>(GgufFile::open(package_dir / carrier->path, limits));
    catalog = build_catalog_v2(root, std::move(file), manifest_path.string() + ": " + carrier->path);
  } catch (const Error& e) {
    r.problems.push_back(e.what());
    return r;
  }
  bool files_ok = true;
  for (const auto& a : catalog.artifacts) {
    if (a.kind != CatalogArtifactKind::kPayload) continue;  // carrier and sidecars: checked above
    try {
      (void)check_package_file(root_dir, boundary, a.path, a.bytes, catalog_file_names(package_dir.string(), a.id, a.path));
    } catch (const Error& e) {
      r.problems.push_back(e.what());
      files_ok = false;
    }
  }
  if (!files_ok) return r;
  try {
    const auto c = certify_catalog(catalog, package_dir, source, /*hash_artifacts=*/true, opt.threads, opt.on_progress);
    r.tensors_checked = c.tensors;
    r.bytes_hashed += c.bytes_hashed;
    for (const auto& a : catalog.artifacts) r.artifacts_checked += a.kind == CatalogArtifactKind::kPayload;
    for (size_t i = 0; i < model->shards().size() && i < c.source_sha256.size(); ++i) {
      r.source_files.push_back({fs::path(model->shards()[i].name()).filename().string(), c.source_bytes[i],
                                c.source_sha256[i]});  // a name, not a local path
    }
  } catch (const Error& e) {
    // Not the source the package was written from: that comes first (the rest follows from it).
    const auto& primary = model->shards().front();
    const std::string got = sha256_file(primary.path());
    if (!sha256_equal(got, root.source_model.sha256)) {
      r.wrong_source = source.string() + ": not the source this package was written from: its SHA-256 is " + got +
                       ", source_model.sha256 is " + root.source_model.sha256;
      r.problems.insert(r.problems.begin(), *r.wrong_source);
    }
    r.problems.push_back(e.what());
  }
  r.valid = r.problems.empty();
  return r;
}

}  // namespace skippy::detail
