#include "skippy/stage_view.h"

#include <algorithm>
#include <string>

#include "skippy/error.h"
#include "skippy/package_catalog.h"

namespace skippy {

StageView StageView::open(const StageSelection& selection) {
  if (selection.parts.empty() || selection.parts.front().role != PartRole::kMetadata) {
    throw Error(ErrorKind::kUsage, "stage selection must start with the metadata part");
  }
  if (!selection.range) throw Error(ErrorKind::kUsage, "a stage view needs a layer range");
  StageView v;
  v.range_ = *selection.range;
  v.parts_ = selection.parts;
  // The stage's parts as a schema 1 catalog (the reader holds the fragment
  // rules: tensor counts, role keys, one alignment, each tensor once).
  PackageCatalog& cat = v.catalog_;
  cat.schema_version = kManifestSchemaVersion;
  for (const auto& part : v.parts_) {
    if (part.role == PartRole::kProjector) {
      throw Error(ErrorKind::kUsage, part.rel_path + ": a projector is not a stage part (it is never merged)");
    }
    CatalogArtifact a;
    a.id = part.rel_path + "#" + std::to_string(cat.artifacts.size());  // a part may be listed twice
    a.path = part.rel_path;
    a.kind = cat.artifacts.empty() ? CatalogArtifactKind::kCarrier : CatalogArtifactKind::kPayload;
    a.role = part.role.value_or(PartRole::kMetadata);
    a.layer = part.layer_index;
    a.tensor_count = part.tensor_count;
    a.tensors_listed = false;
    cat.artifacts.push_back(std::move(a));
  }
  auto& files = v.files_;
  files.reserve(v.parts_.size());
  for (const auto& part : v.parts_) {
    try {
      files.push_back(std::make_shared<const GgufFile>(GgufFile::open(part.path)));
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kInvalidInput) throw;
      throw_invalid(part.rel_path + ": not a valid GGUF: " + e.what());
    }
  }
  for (size_t p = 0; p < files.size(); ++p) add_fragment_v1(cat, p, files[p]);
  v.alignment_ = files.front()->alignment();
  v.merged_duplicates_ = cat.merged_duplicates;
  v.tensors_.reserve(cat.tensors.size());
  v.index_.reserve(cat.tensors.size());
  for (const auto& t : cat.tensors) {
    const GgufTensorInfo* info = files[t.artifact]->find_tensor(t.name);
    v.index_.emplace(info->name, v.tensors_.size());
    v.tensors_.push_back({t.artifact, info});
    v.tensor_bytes_ += info->bytes;
  }

  // Each layer in range: its fragment holds tensors, all of its own layer.
  for (size_t p = 0; p < v.parts_.size(); ++p) {
    const auto& part = v.parts_[p];
    if (part.role != PartRole::kLayer) continue;
    if (!part.layer_index) throw_invalid(part.rel_path + ": a layer part without a layer index");
    const uint32_t layer = *part.layer_index;
    if (layer < v.range_.start || layer >= v.range_.end) {
      throw_invalid(part.rel_path + ": layer " + std::to_string(layer) + " is outside the stage's range " +
                    format_layer_range(v.range_));
    }
    if (files[p]->tensors().empty()) {
      throw_invalid(part.rel_path + ": layer " + std::to_string(layer) + " is in range " +
                    format_layer_range(v.range_) + " but its fragment has no tensors");
    }
    check_layer_fragment_v1(cat, p);
  }
  for (uint32_t l = v.range_.start; l < v.range_.end; ++l) {
    bool found = false;
    for (const auto& part : v.parts_) found = found || (part.role == PartRole::kLayer && part.layer_index == l);
    if (!found) throw_invalid("layer " + std::to_string(l) + " is in range " + format_layer_range(v.range_) +
                              " but no part provides it");
  }
  return v;
}

const StageTensor* StageView::find_tensor(std::string_view name) const noexcept {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace skippy
