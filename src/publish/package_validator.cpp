// validate-package as one pipeline (publish/schema_check.h): the root read,
// its schema named by the one rule (package_root_schema), the package's own
// files checked, the source opened, the package judged against it.
#include "skippy/package_validator.h"

#include "publish/schema_check.h"
#include "skippy/error.h"
#include "skippy/manifest.h"
#include "skippy/manifest_v2.h"
#include "skippy/package.h"
#include "util/file.h"

namespace skippy {
namespace detail {
namespace {

// The one place validate-package learns a schema. write-package --validate's
// manifest (opt.manifest, not yet committed) is schema 1's.
std::unique_ptr<SchemaCheck> make_schema_check(const std::filesystem::path& package_dir, const ValidateOptions& opt) {
  RootRead root;
  if (!opt.manifest) {
    try {
      root.text = read_small_file(package_dir / std::string(kManifestFileName), kManifestMaxBytes);
    } catch (const Error& e) {
      root.error = e.what();  // schema 1's reader reports it, as for any root no other schema claims
    }
  }
  const RootSchema schema = root.text ? package_root_schema(*root.text) : RootSchema{};
  if (auto why = schema.unsupported()) {
    root.error = (package_dir / std::string(kManifestFileName)).string() + ": " + *why;  // as schema 1 reports a root it cannot read
    root.text.reset();
  }
  if (schema.schema == kPackageSchemaV2) {
    return make_schema2_check(package_dir, std::move(root), opt);
  }
  return make_schema1_check(package_dir, std::move(root), opt);
}

}  // namespace
}  // namespace detail

ValidationReport validate_package(const std::filesystem::path& source, const std::filesystem::path& package_dir,
                                  const ValidateOptions& opt) {
  ValidationReport r;
  const auto check = detail::make_schema_check(package_dir, opt);
  if (!check->read_root(r)) return r;
  check->check_package_files(r);
  std::optional<ModelSource> model;
  try {
    model.emplace(ModelSource::open(source));
  } catch (const Error& e) {
    r.problems.push_back(e.what());
    check->source_unopened(r);
    return r;
  }
  check->check_against_source(source, *model, r);
  r.valid = r.problems.empty();
  return r;
}

}  // namespace skippy
