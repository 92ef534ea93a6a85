// Direct load, the normal path (spec: "Layer Selection": "A normal
// package-backed runtime SHOULD load selected parts directly"): the selected
// parts of a stage, each mapped (header parsed, tensor data untouched), seen
// as one tensor table and one metadata view.
//
// The parts are the fragments the schema 1 catalog reader read
// (OpenedPackage::catalog(CatalogNeed::stage(range)), skippy/package.h), which
// checked what a loader relies on beyond select_stage()'s file checks:
//   - every part parses as GGUF and holds the tensor count its manifest entry
//     declares;
//   - a fragment's own role keys (skippy.package.role, .layer_start,
//     .layer_end, or the reference writer's skippy.slice.*), when present,
//     agree with the part it was selected as;
//   - no tensor name appears in two parts (or twice in one), except a global
//     "extra" (rope_freqs, ...) that the reference writer repeats in every
//     fragment: identical copies are one tensor (the first copy wins),
//     differing bytes are an error naming both fragments;
//   - a layer fragment holds only blk.N.* tensors of its own layer N;
//   - all parts share one alignment.
// The view adds the stage's own: every layer in range has a part, within
// the range, holding tensors.
// A projector is never merged into the view (spec: projectors are selected
// independently; StageSelection::projector stays a separate file).
//
// Thread-safety: a StageView is immutable once open: its const members may be used
// from any number of threads; views of different stages may be opened concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "skippy/gguf.h"
#include "skippy/package_catalog.h"
#include "skippy/stage.h"

namespace skippy {

// One tensor of the stage: where it lives.
struct StageTensor {
  size_t part = 0;                      // index into StageView::parts() / files()
  const GgufTensorInfo* info = nullptr; // owned by files()[part]
};

class StageView {
 public:
  // The views of `selection`'s parts (in its load order) over the files the
  // reader mapped into `catalog` (its fragment_files; the catalog must list
  // every part's tensors). Throws Error(kInvalidInput) naming the part and
  // the rule broken; Error(kUsage) for a projector part, a part listed
  // twice, or one the catalog has not read.
  static StageView open(const PackageCatalog& catalog, const StageSelection& selection);

  // Move-only: tensors() points into files().
  StageView(StageView&&) noexcept = default;
  StageView& operator=(StageView&&) noexcept = default;
  StageView(const StageView&) = delete;
  StageView& operator=(const StageView&) = delete;

  LayerRange range() const noexcept { return range_; }
  const std::vector<StagePart>& parts() const noexcept { return parts_; }
  const std::vector<std::shared_ptr<const GgufFile>>& files() const noexcept { return files_; }  // parallel to parts()

  // The metadata view: the KVs of the metadata part (shared/metadata.gguf),
  // in file order: the source's KVs (other fragments carry only what reading
  // their own tensors needs), the part a loader reads them from.
  const GgufFile& metadata() const noexcept { return *files_.front(); }
  const std::vector<GgufKv>& kvs() const noexcept { return metadata().kvs(); }
  const GgufKv* find_kv(std::string_view key) const noexcept { return metadata().find_kv(key); }

  // The tensor table, in load order (parts in order, each part's tensors in
  // file order).
  const std::vector<StageTensor>& tensors() const noexcept { return tensors_; }
  const StageTensor* find_tensor(std::string_view name) const noexcept;
  uint64_t tensor_bytes() const noexcept { return tensor_bytes_; }
  uint32_t alignment() const noexcept { return alignment_; }
  // Identical copies of global tensors folded into their first copy.
  size_t merged_duplicates() const noexcept { return merged_duplicates_; }
  // The part a tensor lives in, and a view of its bytes in that part's map.
  const StagePart& part_of(const StageTensor& t) const noexcept { return parts_[t.part]; }
  std::span<const uint8_t> tensor_data(const StageTensor& t) const noexcept {
    return files_[t.part]->tensor_data(*t.info);
  }

 private:
  StageView() = default;
  LayerRange range_;
  std::vector<StagePart> parts_;
  std::vector<std::shared_ptr<const GgufFile>> files_;
  std::vector<StageTensor> tensors_;
  std::unordered_map<std::string_view, size_t> index_;  // names view the maps
  uint64_t tensor_bytes_ = 0;
  uint32_t alignment_ = kGgufDefaultAlignment;
  size_t merged_duplicates_ = 0;
};

}  // namespace skippy
