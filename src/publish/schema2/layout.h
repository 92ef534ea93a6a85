// Package schema 2's files and headers (mesh-llm's package v2): the
// payload parts, split by a byte budget as the reference's
// package_v2/layout.rs does. Internal to the publish library.
#pragma once

#include <cstdint>
#include <vector>

#include "skippy/model_source.h"

namespace skippy::detail {

// Schema 2's budget split of one group (a layer, or the layerless tensors),
// as the reference's package_v2/layout.rs: names sorted, a new part whenever
// the next tensor would take the current one over `budget` (so a tensor
// larger than the budget stays whole, alone). One group when it fits.
std::vector<std::vector<const SourceTensor*>> split_v2_group(std::vector<const SourceTensor*> group, uint64_t budget);

}  // namespace skippy::detail
