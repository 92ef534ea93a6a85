#include "skippy/stage.h"

#include <algorithm>
#include <charconv>
#include <set>

#include "skippy/error.h"
#include "util/file.h"
#include "skippy/gguf.h"
#include "skippy/model_source.h"
#include "util/sha256.h"
#include "skippy/verify.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;

}  // namespace

StagePart check_metadata_only(const OpenedCatalog& pkg) {
  const auto& cat = pkg.catalog;
  std::vector<StagePart> parts = {all_parts(cat).front()};  // the carrier
  parts.front().reason = "metadata";
  provide_parts(pkg, parts);
  if (cat.carrier_file) return parts.front();  // read (and checked) by the reader already
  try {
    (void)GgufFile::open(parts.front().path);
  } catch (const Error& e) {
    throw e.with_context(pkg.ref + ": " + parts.front().rel_path);
  }
  return parts.front();
}

std::shared_ptr<const GgufFile> package_metadata(const OpenedCatalog& pkg) {
  if (pkg.catalog.carrier_file) {
    (void)verify_catalog_reads(pkg);
    return pkg.catalog.carrier_file;
  }
  const auto meta = check_metadata_only(pkg);
  (void)verify_if_required(pkg, {meta});
  return std::make_shared<const GgufFile>(GgufFile::open(meta.path));
}

std::string_view part_role_label(const StagePart& part) noexcept {
  return part.role ? part_role_name(*part.role) : std::string_view("common");
}

std::vector<StagePart> StageSelection::parts_with_projector() const {
  std::vector<StagePart> out = parts;
  if (projector) out.push_back(*projector);
  return out;
}

ArtifactEntry part_entry(const StagePart& part) {
  ArtifactEntry e;
  e.path = part.rel_path;
  e.tensor_count = part.tensor_count;
  e.artifact_bytes = part.bytes;
  e.sha256 = part.sha256;
  return e;
}

fs::path check_part(const OpenedPlace& pkg, const StagePart& part) {
  return check_place_file(pkg, part.artifact_id, part.rel_path, part.bytes, part.sha256, part_role_label(part));
}

void provide_parts(const OpenedPlace& pkg, std::vector<StagePart>& parts) {
  if (pkg.source && !parts.empty()) {
    std::vector<ArtifactEntry> entries;
    std::set<std::string> seen;
    for (const auto& p : parts) {
      if (!is_safe_relative_path(p.rel_path)) {
        throw_invalid(!pkg.names_artifacts_by_id
                          ? pkg.ref + ": artifact path \"" + p.rel_path + "\" is not a safe relative path"
                          : pkg.ref + ": artifact " + p.artifact_id + " (" + p.rel_path + "): not a safe relative path");
      }
      if (seen.insert(p.rel_path).second) entries.push_back(part_entry(p));
    }
    std::vector<const ArtifactEntry*> want;
    for (const auto& e : entries) want.push_back(&e);
    pkg.source->provide(want);
  }
  for (auto& p : parts) p.path = check_part(pkg, p);
}

}  // namespace skippy
