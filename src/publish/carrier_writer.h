// The metadata carrier of a package schema 2 package (mesh-llm's "package
// v2"; reader: skippy/package_catalog.h): a GGUF holding the source's KVs,
// the complete tensor directory and the skippy.package.* locators, with no
// payload. Written by write-package --schema 2 and convert-package --to 2.
// Internal to the publish library.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "skippy/gguf.h"

namespace skippy::detail {

struct CarrierTensor {
  std::string name;
  uint32_t type = 0;
  std::vector<int64_t> ne;
  uint32_t part = 0;        // payload part index (rank by artifact id)
  uint64_t offset = 0;      // absolute, inside that part
  uint64_t size = 0;        // stored bytes, no padding
  uint32_t alignment = 0;   // a power of two dividing offset
};

// The carrier's bytes (header only, padded to its data offset: no payload).
// KVs: every KV of `kv_source` in its order except split.*, the fragment
// keys of schema 1 (skippy.package.*, skippy.slice.*) and the carrier keys;
// general.alignment added (u32) when absent. Then metadata_only, part_count,
// locator_schema and the four locator arrays, one entry per tensor in
// `tensors` order (the directory's order). Throws Error(kInvalidInput) for a
// tensor the GGUF writer refuses.
std::vector<uint8_t> carrier_bytes(const GgufFile& kv_source, uint32_t part_count,
                                   const std::vector<CarrierTensor>& tensors);

// The reference's own carrier (its native skippy_write_gguf_metadata_from_parts
// over the parts' header stubs in id order, through ggml's GGUF writer), for
// parts in the reference layout: the source's KVs minus split.no,
// split.count, split.tensors.count, skippy.package.materialized and the
// carrier keys, general.alignment appended when absent, the carrier keys as
// carrier_bytes sets them; the directory in `tensors` order (the parts by
// id, each part's tensors in its order) at offsets laid out at 32, the
// header padded to 32. Byte for byte the reference's when
// reference_carrier_refusal(src, tensors) is nullopt; otherwise that names
// what the reference's writer cannot carry for this source (an alignment
// other than 32, more than 4 dimensions, dimensions ending in 1 that ggml
// drops, a name over 63 bytes, a string with a NUL byte).
std::optional<std::string> reference_carrier_refusal(const GgufFile& kv_source, const std::vector<CarrierTensor>& tensors);
std::vector<uint8_t> reference_carrier_bytes(const GgufFile& kv_source, uint32_t part_count,
                                             const std::vector<CarrierTensor>& tensors);

// The reference's names: "layers/layer-NNNNN.gguf", "-partMM" parts, ids
// "layer-NNNNN[-partMM]".
std::string v2_layer_id(uint32_t layer, int part = -1);
std::string v2_layer_path(uint32_t layer, int part = -1);

}  // namespace skippy::detail
