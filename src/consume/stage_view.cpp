#include "skippy/stage_view.h"

#include <algorithm>
#include <string>

#include "skippy/error.h"
#include "skippy/model_source.h"
#include "skippy/package_layout.h"

namespace skippy {
namespace {

std::string describe(const StagePart& p) {
  std::string s = p.rel_path + " (" + std::string(part_role_name(p.role));
  if (p.layer_index) s += " " + std::to_string(*p.layer_index);
  return s + ")";
}

// A fragment's own role keys (ours or the reference's skippy.slice.*), when
// present, must agree with the part it was selected as: a renamed or
// swapped fragment is caught here.
void check_role_keys(const StagePart& part, const GgufFile& f) {
  const auto id = read_fragment_identity(f, part.rel_path);
  if (!id.role) return;
  const bool ours = id.dialect == FragmentDialect::kPackage;
  if (*id.role != part.role) {
    const std::string key(ours ? kRoleKey : kSliceStageIndexKey);
    throw_invalid(part.rel_path + ": " + key + " says it is the " + std::string(part_role_name(*id.role)) +
                  " fragment but the manifest lists it as the " + std::string(part_role_name(part.role)) + " part");
  }
  if (id.role == PartRole::kLayer && id.layer != part.layer_index) {
    const std::string key(ours ? kLayerStartKey : kSliceStageIndexKey);
    throw_invalid(part.rel_path + ": " + key + " says layer " + std::to_string(*id.layer) + ", expected " +
                  (part.layer_index ? std::to_string(*part.layer_index) : std::string("none")));
  }
}

// Two copies of one tensor: the same type, shape and bytes.
bool same_tensor(const GgufFile& fa, const GgufTensorInfo& a, const GgufFile& fb, const GgufTensorInfo& b) {
  if (a.type != b.type || a.ne != b.ne || a.bytes != b.bytes) return false;
  const auto x = fa.tensor_data(a), y = fb.tensor_data(b);
  return std::equal(x.begin(), x.end(), y.begin(), y.end());
}

}  // namespace

StageView StageView::open(const StageSelection& selection) {
  if (selection.parts.empty() || selection.parts.front().role != PartRole::kMetadata) {
    throw Error(ErrorKind::kUsage, "stage selection must start with the metadata part");
  }
  StageView v;
  v.range_ = selection.range;
  v.parts_ = selection.parts;
  v.files_.reserve(v.parts_.size());
  size_t total_tensors = 0;
  for (const auto& part : v.parts_) {
    if (part.role == PartRole::kProjector) {
      throw Error(ErrorKind::kUsage, part.rel_path + ": a projector is not a stage part (it is never merged)");
    }
    try {
      v.files_.push_back(GgufFile::open(part.path));
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::kInvalidInput) throw;
      throw_invalid(part.rel_path + ": not a valid GGUF: " + e.what());
    }
    const auto& f = v.files_.back();
    if (f.tensors().size() != part.tensor_count) {
      throw_invalid(part.rel_path + ": holds " + std::to_string(f.tensors().size()) +
                    " tensors, the manifest says tensor_count " + std::to_string(part.tensor_count));
    }
    check_role_keys(part, f);
    if (v.files_.size() == 1) {
      v.alignment_ = f.alignment();
    } else if (f.alignment() != v.alignment_) {
      throw_invalid(part.rel_path + ": alignment " + std::to_string(f.alignment()) + " differs from " +
                    v.parts_.front().rel_path + "'s " + std::to_string(v.alignment_) +
                    " (fragments of one package share the source's alignment)");
    }
    total_tensors += f.tensors().size();
  }

  v.tensors_.reserve(total_tensors);
  v.index_.reserve(total_tensors);
  for (size_t p = 0; p < v.files_.size(); ++p) {
    for (const auto& t : v.files_[p].tensors()) {
      const auto [it, inserted] = v.index_.emplace(t.name, v.tensors_.size());
      if (!inserted) {
        // The reference writer repeats each global "extra" (rope_freqs, ...)
        // in every fragment: identical copies of a global tensor are one
        // tensor (the first copy wins); anything else is an error.
        const auto& first = v.tensors_[it->second];
        const auto& first_part = v.parts_[first.part];
        if (classify_tensor(t.name).role == TensorRole::kGlobal &&
            same_tensor(v.files_[first.part], *first.info, v.files_[p], t)) {
          ++v.merged_duplicates_;
          continue;
        }
        throw_invalid("tensor '" + std::string(t.name) + "' appears in both " + describe(first_part) + " and " +
                      describe(v.parts_[p]) +
                      (classify_tensor(t.name).role == TensorRole::kGlobal ? " with different bytes" : "") +
                      ": a stage must hold each tensor once");
      }
      v.tensors_.push_back({p, &t});
      v.tensor_bytes_ += t.bytes;
    }
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
    if (v.files_[p].tensors().empty()) {
      throw_invalid(part.rel_path + ": layer " + std::to_string(layer) + " is in range " +
                    format_layer_range(v.range_) + " but its fragment has no tensors");
    }
    for (const auto& t : v.files_[p].tensors()) {
      const auto place = classify_tensor(t.name);
      if (place.role == TensorRole::kGlobal) continue;  // a repeated extra (reference dialect), checked above
      if (place.role != TensorRole::kLayer || place.layer != layer) {
        throw_invalid(part.rel_path + ": tensor '" + std::string(t.name) + "' does not belong to layer " +
                      std::to_string(layer));
      }
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
