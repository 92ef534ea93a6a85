#include "skippy/stage.h"

#include <algorithm>
#include <charconv>
#include <set>

#include "skippy/error.h"
#include "util/file.h"
#include "skippy/gguf.h"
#include "skippy/model_source.h"
#include "util/sha256.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(const OpenedPackage& pkg, const std::string& what) { throw_invalid(pkg.ref + ": " + what); }


StagePart make_part(const OpenedPackage& pkg, const ArtifactEntry& e, PartRole role, std::optional<uint32_t> layer,
                    std::string reason) {
  StagePart part;
  part.artifact_id = e.path;
  part.rel_path = e.path;
  part.kind = role == PartRole::kMetadata ? CatalogArtifactKind::kCarrier : CatalogArtifactKind::kPayload;
  part.role = role;
  part.layer_index = layer;
  part.path = check_artifact_file(pkg, e, part_role_name(role));
  part.bytes = e.artifact_bytes;
  part.tensor_count = e.tensor_count;
  part.sha256 = e.sha256;
  part.reason = std::move(reason);
  return part;
}

// Asks the package's artifact source (if any) for these entries, once each.
void provide(const OpenedPackage& pkg, std::vector<const ArtifactEntry*> entries) {
  if (!pkg.source || entries.empty()) return;
  for (const auto* e : entries) {
    if (!is_safe_relative_path(e->path)) fail(pkg, "artifact path \"" + e->path + "\" is not a safe relative path");
  }
  std::sort(entries.begin(), entries.end());
  entries.erase(std::unique(entries.begin(), entries.end()), entries.end());
  pkg.source->provide(entries);
}

}  // namespace

fs::path check_artifact_file(const OpenedPackage& pkg, const ArtifactEntry& e, std::string_view what) {
  const auto names = manifest_file_names(pkg.ref, e.path, what);
  const fs::path real = check_package_file(pkg.root, pkg.boundary, e.path, e.artifact_bytes, names);
  check_cached_blob_name(real, pkg.boundary, e.sha256, names.label);
  return real;
}


OpenedPackage open_local_package(const fs::path& root) {
  const std::string name = root.string();
  std::error_code ec;
  if (!fs::exists(root, ec)) throw_not_found(name + ": no such package directory");
  if (!fs::is_directory(root, ec)) throw_invalid(name + ": not a package directory");
  const fs::path boundary = local_package_boundary(root, ec);
  if (ec) throw_invalid(name + ": cannot resolve: " + ec.message());
  OpenedPackage pkg = open_package_dir(name, fs::absolute(root), boundary);
  // A Hugging Face cache snapshot: the cache's rule, as through hf://.
  pkg.always_verify = is_hf_cache_snapshot(root);
  return pkg;
}

OpenedPackage open_package_dir(std::string ref, const fs::path& root, const fs::path& boundary) {
  OpenedPackage pkg;
  pkg.ref = std::move(ref);
  pkg.root = root;
  pkg.boundary = boundary;
  std::error_code ec;
  const fs::path manifest_path = root / std::string(kManifestFileName);
  if (!fs::exists(manifest_path, ec)) {
    if (const auto interrupted = interrupted_write_package(root)) throw_not_found(pkg.ref + ": " + *interrupted);
    throw_not_found(pkg.ref + ": no " + std::string(kManifestFileName) + " (not a layer package)");
  }
  const std::string text = read_small_file(manifest_path, kManifestMaxBytes);
  pkg.manifest = parse_manifest(text, manifest_path.string(), GenerationProblems::kSetAside);
  pkg.manifest_sha256 = sha256_hex(text);
  if (pkg.manifest.generation_problem) {
    pkg.warnings.push_back(*pkg.manifest.generation_problem +
                           "; the generation block is ignored (it is policy, not tensor layout): layers are "
                           "selected, verified and materialized as usual, while policy and speculative refuse");
  }
  for (size_t i = 0; i < pkg.manifest.projectors.size(); ++i) {
    const auto& p = pkg.manifest.projectors[i];
    if (!is_known_projector_kind(p.kind)) {
      pkg.warnings.push_back("projectors[" + std::to_string(i) + "] (" + p.path + "): kind \"" + p.kind +
                             "\" is not supported by this runtime, so no stage uses it (text stages are served; "
                             "stage 0 gets the first mmproj, if any); a stage that asks for it is refused");
    }
  }
  const auto abi = parse_abi_version(pkg.manifest.skippy_abi_version);
  if (!abi || !abi_compatible(*abi, kRuntimeAbiVersion)) {
    throw_invalid(manifest_path.string() + ": skippy_abi_version " + pkg.manifest.skippy_abi_version +
                  " is not compatible with this runtime's ABI " + format_abi_version(kRuntimeAbiVersion) +
                  " (needs major " + std::to_string(kRuntimeAbiVersion.major) + " and minor <= " +
                  std::to_string(kRuntimeAbiVersion.minor) + "); refusing to load it");
  }
  return pkg;
}

StagePart check_metadata_only(const OpenedPackage& pkg) {
  provide(pkg, {&pkg.manifest.shared.metadata});
  auto part = make_part(pkg, pkg.manifest.shared.metadata, PartRole::kMetadata, std::nullopt, "metadata");
  try {
    (void)GgufFile::open(part.path);
  } catch (const Error& e) {
    throw e.with_context(pkg.ref + ": " + part.rel_path);
  }
  return part;
}

std::optional<WidthTensor> activation_width_tensor(const GgufFile& layer_fragment, uint32_t layer) {
  const std::string blk = "blk." + std::to_string(layer) + ".";
  // Exact names: blk.N.cross_attn_norm.weight or blk.N.nextn.attn_norm.weight never count.
  for (const std::string& name : {blk + "hc_attn_norm.weight", blk + "attn_norm.weight"}) {
    if (const auto* t = layer_fragment.find_tensor(name)) {
      uint64_t n = 1;
      for (const int64_t d : t->ne) n *= static_cast<uint64_t>(d);
      return WidthTensor{name, n};
    }
  }
  return std::nullopt;
}

ActivationWidth activation_width_of(const OpenedPackage& pkg) {
  const auto& m = pkg.manifest;
  if (m.activation_width) return {m.activation_width, false, ""};
  const std::string missing = "the manifest has no activation_width";
  if (m.layers.empty()) return {std::nullopt, false, missing + " and no layers: the activation width is unknown"};
  const auto& first = m.layers.front();
  std::error_code ec;
  if (!is_safe_relative_path(first.path) || !fs::exists(pkg.root / first.path, ec)) {
    return {std::nullopt, false,
            missing + " and " + first.path + " is not on disk to read it from: the activation width is unknown"};
  }
  try {
    const auto part = make_part(pkg, first, PartRole::kLayer, first.layer_index, "activation width");
    const auto g = GgufFile::open(part.path);
    if (const auto t = activation_width_tensor(g, first.layer_index)) {
      return {t->elements, true,
              missing + "; using " + std::to_string(t->elements) + ", the element count of " + t->name + " in " +
                  first.path + " (the reference runtime's fallback)"};
    }
    const std::string blk = "blk." + std::to_string(first.layer_index) + ".";
    return {std::nullopt, false,
            missing + " and " + first.path + " has neither " + blk + "hc_attn_norm.weight nor " + blk +
                "attn_norm.weight: the activation width is unknown"};
  } catch (const Error& e) {
    return {std::nullopt, false, missing + " and " + first.path + " cannot be read (" + e.what() + ")"};
  }
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
  const auto names = pkg.schema_version == kManifestSchemaVersion
                         ? manifest_file_names(pkg.ref, part.rel_path, part_role_label(part))
                         : catalog_file_names(pkg.ref, part.artifact_id, part.rel_path);
  const fs::path real = check_package_file(pkg.root, pkg.boundary, part.rel_path, part.bytes, names);
  check_cached_blob_name(real, pkg.boundary, part.sha256, names.label);
  return real;
}

void provide_parts(const OpenedPlace& pkg, std::vector<StagePart>& parts) {
  if (pkg.source && !parts.empty()) {
    std::vector<ArtifactEntry> entries;
    std::set<std::string> seen;
    for (const auto& p : parts) {
      if (!is_safe_relative_path(p.rel_path)) {
        throw_invalid(pkg.schema_version == kManifestSchemaVersion
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
