// package schema 1: the manifest and the fragments' headers -> a
// PackageCatalog (see skippy/package_catalog.h). The one home of the rules a
// loader relies on in a fragment (StageView reads through it).
#include <algorithm>
#include <set>
#include <string>

#include "skippy/error.h"
#include "skippy/package_catalog.h"
#include "format/schema1/reader.h"

namespace skippy {
namespace {

std::string describe_v1(const CatalogArtifact& a) {
  std::string s = a.path + " (" + std::string(part_role_name(a.role.value_or(PartRole::kMetadata)));
  if (a.layer) s += " " + std::to_string(*a.layer);
  return s + ")";
}

// A fragment's own role keys (ours or the reference's skippy.slice.*), when
// present, must agree with the part it is listed as: a renamed or swapped
// fragment is caught here.
void check_fragment_role(const CatalogArtifact& a, const GgufFile& f) {
  const auto id = read_fragment_identity(f, a.path);
  if (!id.role) return;
  const bool ours = id.dialect == FragmentDialect::kPackage;
  const PartRole role = a.role.value_or(PartRole::kMetadata);
  if (*id.role != role) {
    const std::string key(ours ? kRoleKey : kSliceStageIndexKey);
    throw_invalid(a.path + ": " + key + " says it is the " + std::string(part_role_name(*id.role)) +
                  " fragment but the manifest lists it as the " + std::string(part_role_name(role)) + " part");
  }
  if (id.role == PartRole::kLayer && id.layer != a.layer) {
    const std::string key(ours ? kLayerStartKey : kSliceStageIndexKey);
    throw_invalid(a.path + ": " + key + " says layer " + std::to_string(*id.layer) + ", expected " +
                  (a.layer ? std::to_string(*a.layer) : std::string("none")));
  }
}

// Two copies of one tensor: the same type, shape and bytes.
bool same_tensor_bytes(const GgufFile& fa, const GgufTensorInfo& a, const GgufFile& fb, const GgufTensorInfo& b,
                       bool shape_only) {
  if (a.type != b.type || a.ne != b.ne || a.bytes != b.bytes) return false;
  if (shape_only) return true;
  const auto x = fa.tensor_data(a), y = fb.tensor_data(b);
  return std::equal(x.begin(), x.end(), y.begin(), y.end());
}

CatalogArtifact v1_artifact(const ArtifactEntry& e, CatalogArtifactKind kind, PartRole role,
                            std::optional<uint32_t> layer) {
  CatalogArtifact a;
  a.id = e.path;
  a.path = e.path;
  a.bytes = e.artifact_bytes;
  a.sha256 = e.sha256;
  a.kind = kind;
  a.layer = layer;
  a.role = role;
  a.tensor_count = e.tensor_count;
  a.tensors_listed = false;
  return a;
}

}  // namespace

PackageCatalog catalog_artifacts_v1(const PackageManifest& m) {
  PackageCatalog cat;
  static_cast<PackageIdentity&>(cat) = schema1::identity_of(m);
  cat.bookkeeping_key = [](std::string_view key) { return is_fragment_key(key); };
  cat.artifacts.push_back(v1_artifact(m.shared.metadata, CatalogArtifactKind::kCarrier, PartRole::kMetadata, std::nullopt));
  cat.artifacts.push_back(v1_artifact(m.shared.embeddings, CatalogArtifactKind::kPayload, PartRole::kEmbeddings, std::nullopt));
  for (const auto& l : m.layers) {
    cat.artifacts.push_back(v1_artifact(l, CatalogArtifactKind::kPayload, PartRole::kLayer, l.layer_index));
  }
  cat.artifacts.push_back(v1_artifact(m.shared.output, CatalogArtifactKind::kPayload, PartRole::kOutput, std::nullopt));
  uint32_t part = 0;
  for (auto& a : cat.artifacts) {
    if (a.kind == CatalogArtifactKind::kPayload) a.part_index = part++;
  }
  for (const auto& p : m.projectors) {
    auto a = v1_artifact(p, CatalogArtifactKind::kSidecar, PartRole::kProjector, std::nullopt);
    a.sidecar_kind = p.kind;
    cat.artifacts.push_back(std::move(a));
  }
  for (size_t i = 0; i < cat.artifacts.size(); ++i) cat.artifact_index.emplace(cat.artifacts[i].id, i);
  cat.carrier = 0;
  cat.fragment_files.resize(cat.artifacts.size());
  return cat;
}

void add_fragment_v1(PackageCatalog& cat, size_t artifact, std::shared_ptr<const GgufFile> fragment, bool header_only) {
  if (artifact >= cat.artifacts.size() || !fragment) throw Error(ErrorKind::kUsage, "add_fragment_v1: no such artifact");
  cat.fragment_files.resize(cat.artifacts.size());
  CatalogArtifact& a = cat.artifacts[artifact];
  if (a.kind == CatalogArtifactKind::kSidecar) {
    throw Error(ErrorKind::kUsage, a.path + ": a projector is not a stage part (it is never merged)");
  }
  if (a.tensors_listed && cat.fragment_files[artifact]) {
    throw Error(ErrorKind::kUsage, a.path + ": add_fragment_v1: the fragment was read already");
  }
  const GgufFile& f = *fragment;
  if (f.tensors().size() != a.tensor_count) {
    throw_invalid(a.path + ": holds " + std::to_string(f.tensors().size()) +
                  " tensors, the manifest says tensor_count " + std::to_string(a.tensor_count));
  }
  check_fragment_role(a, f);
  // The alignment every fragment shares: the first fragment read sets it.
  for (size_t i = 0; i < cat.fragment_files.size(); ++i) {
    const auto& other = cat.fragment_files[i];
    if (!other) continue;
    if (f.alignment() != other->alignment()) {
      throw_invalid(a.path + ": alignment " + std::to_string(f.alignment()) + " differs from " +
                    cat.artifacts[i].path + "'s " + std::to_string(other->alignment()) +
                    " (fragments of one package share the source's alignment)");
    }
    break;
  }
  for (const auto& t : f.tensors()) {
    if (header_only && (t.file_offset > a.bytes || t.bytes > a.bytes - t.file_offset)) {
      throw_invalid(a.path + ": tensor '" + std::string(t.name) + "' lies past the " + std::to_string(a.bytes) +
                    " bytes the manifest declares for the file");
    }
    const auto place = classify_tensor(t.name);
    if (const auto it = cat.tensor_index.find(std::string(t.name)); it != cat.tensor_index.end()) {
      // The reference writer repeats each global "extra" (rope_freqs, ...)
      // in every fragment: identical copies of a global tensor are one
      // tensor (the first copy wins); anything else is an error.
      const CatalogTensor& first = cat.tensors[it->second];
      const GgufFile& first_file = first.artifact == artifact ? f : *cat.fragment_files.at(first.artifact);
      const GgufTensorInfo* first_info = first_file.find_tensor(t.name);
      if (place.role == TensorRole::kGlobal && first_info && same_tensor_bytes(first_file, *first_info, f, t, header_only || cat.artifacts[first.artifact].header_only)) {
        ++cat.merged_duplicates;
        continue;
      }
      throw_invalid("tensor '" + std::string(t.name) + "' appears in both " +
                    describe_v1(cat.artifacts[first.artifact]) + " and " + describe_v1(a) +
                    (place.role == TensorRole::kGlobal ? " with different bytes" : "") +
                    ": a stage must hold each tensor once");
    }
    CatalogTensor ct;
    ct.name = std::string(t.name);
    ct.ggml_type = t.type;
    for (const int64_t d : t.ne) ct.dims.push_back(static_cast<uint64_t>(d));
    ct.artifact = artifact;
    ct.offset = t.file_offset;
    ct.stored_bytes = t.bytes;
    ct.alignment = f.alignment();
    ct.layer = tensor_name_layer(ct.name);
    ct.role = place.role;
    cat.tensor_index.emplace(ct.name, cat.tensors.size());
    cat.tensors.push_back(std::move(ct));
  }
  a.tensors_listed = true;
  a.read_for_catalog = !header_only;  // a prefix cannot be verified; nothing is loaded from it
  a.header_only = header_only;
  if (a.kind == CatalogArtifactKind::kCarrier) {
    cat.architecture = std::string(f.architecture());
    cat.carrier_file = fragment;
  }
  cat.fragment_files[artifact] = std::move(fragment);
}

void check_layer_fragment_v1(const PackageCatalog& cat, size_t artifact) {
  const CatalogArtifact& a = cat.artifacts.at(artifact);
  const auto& f = artifact < cat.fragment_files.size() ? cat.fragment_files[artifact] : nullptr;
  if (a.role != PartRole::kLayer || !a.layer || !f) return;
  for (const auto& t : f->tensors()) {
    const auto place = classify_tensor(t.name);
    if (place.role == TensorRole::kGlobal) continue;  // a repeated extra (reference dialect), checked when read
    if (place.role != TensorRole::kLayer || place.layer != *a.layer) {
      throw_invalid(a.path + ": tensor '" + std::string(t.name) + "' does not belong to layer " +
                    std::to_string(*a.layer));
    }
  }
}

PackageCatalog build_catalog_v1(const PackageManifest& manifest,
                                const std::unordered_map<std::string, std::shared_ptr<const GgufFile>>& fragments) {
  PackageCatalog cat = catalog_artifacts_v1(manifest);
  for (size_t i = 0; i < cat.artifacts.size(); ++i) {
    if (cat.artifacts[i].kind == CatalogArtifactKind::kSidecar) continue;
    const auto it = fragments.find(cat.artifacts[i].path);
    if (it != fragments.end() && it->second) add_fragment_v1(cat, i, it->second);
  }
  for (size_t i = 0; i < cat.artifacts.size(); ++i) check_layer_fragment_v1(cat, i);
  return cat;
}

}  // namespace skippy
