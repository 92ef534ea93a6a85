#include "skippy/stage_view.h"

#include <algorithm>
#include <string>

#include "skippy/error.h"
#include "skippy/package_catalog.h"

namespace skippy {

StageView StageView::open(const PackageCatalog& catalog, const StageSelection& selection) {
  if (selection.parts.empty() || selection.parts.front().role != PartRole::kMetadata) {
    throw Error(ErrorKind::kUsage, "stage selection must start with the metadata part");
  }
  if (!selection.range) throw Error(ErrorKind::kUsage, "a stage view needs a layer range");
  if (!catalog.selects_whole_parts) throw Error(ErrorKind::kUsage, "a stage view is of a package of whole fragments");
  StageView v;
  v.range_ = *selection.range;
  v.parts_ = selection.parts;
  // The fragments as the schema 1 reader read them into the catalog (it
  // applied the fragment rules: tensor counts, role keys, one alignment,
  // each tensor once, a layer fragment holding only its layer).
  auto& files = v.files_;
  files.reserve(v.parts_.size());
  for (const auto& part : v.parts_) {
    if (part.role == PartRole::kProjector) {
      throw Error(ErrorKind::kUsage, part.rel_path + ": a projector is not a stage part (it is never merged)");
    }
    const auto it = catalog.artifact_index.find(part.artifact_id);
    if (it == catalog.artifact_index.end()) {
      throw Error(ErrorKind::kUsage, part.rel_path + ": not an artifact of the catalog the stage view reads");
    }
    const auto file = it->second < catalog.fragment_files.size() ? catalog.fragment_files[it->second] : nullptr;
    if (!file) {
      throw Error(ErrorKind::kUsage, part.rel_path + ": its header is not in the catalog (CatalogNeed::stage with "
                                     "the stage's range reads it)");
    }
    for (const auto& f : files) {
      if (f == file) throw Error(ErrorKind::kUsage, part.rel_path + ": listed twice in the stage");
    }
    files.push_back(file);
  }
  // The tensor table in load order: each name once, the first copy (the
  // reader checked that a repeated one is an identical global).
  size_t copies = 0;
  for (size_t p = 0; p < files.size(); ++p) {
    for (const auto& t : files[p]->tensors()) {
      ++copies;
      if (!v.index_.emplace(t.name, v.tensors_.size()).second) continue;
      v.tensors_.push_back({p, &t});
      v.tensor_bytes_ += t.bytes;
    }
  }
  v.alignment_ = files.front()->alignment();
  v.merged_duplicates_ = copies - v.tensors_.size();

  // Each layer in range: a part within the range, its fragment holding tensors.
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
