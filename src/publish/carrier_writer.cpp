#include "publish/carrier_writer.h"

#include <cstdio>
#include <cstring>

#include "skippy/error.h"
#include "gguf/gguf_writer.h"
#include "skippy/package_catalog.h"
#include "skippy/package_layout.h"

namespace skippy::detail {
std::vector<uint8_t> carrier_bytes(const GgufFile& src, uint32_t part_count, const std::vector<CarrierTensor>& tensors) {
  GgufWriter w(src.alignment());
  for (const auto& kv : src.kvs()) {
    if (kv.key.starts_with("split.") || is_fragment_key(kv.key) || is_carrier_key(kv.key)) continue;
    w.add_kv_borrowed(std::string(kv.key), kv.value);  // flattened below, while src lives
  }
  if (!w.has_kv("general.alignment")) w.add_u32("general.alignment", src.alignment());
  w.add_bool(std::string(kCarrierMetadataOnlyKey), true);
  w.add_u32(std::string(kCarrierPartCountKey), part_count);
  w.add_u32(std::string(kCarrierLocatorSchemaKey), static_cast<uint32_t>(kCarrierLocatorSchema));
  std::vector<uint64_t> part, offset, size, align;
  for (const auto& t : tensors) {
    part.push_back(t.part);
    offset.push_back(t.offset);
    size.push_back(t.size);
    align.push_back(t.alignment);
  }
  w.add_array(std::string(kCarrierTensorPartKey), GgufType::kUint32, part);
  w.add_array(std::string(kCarrierTensorOffsetKey), GgufType::kUint64, offset);
  w.add_array(std::string(kCarrierTensorSizeKey), GgufType::kUint64, size);
  w.add_array(std::string(kCarrierTensorAlignmentKey), GgufType::kUint32, align);
  for (const auto& t : tensors) w.add_tensor(t.name, t.type, t.ne, nullptr, 0);
  return w.header();  // the directory, padded to the data offset: no payload
}

std::string v2_layer_id(uint32_t layer, int part) {
  char buf[48];
  if (part < 0) {
    std::snprintf(buf, sizeof buf, "layer-%05u", layer);
  } else {
    std::snprintf(buf, sizeof buf, "layer-%05u-part%02d", layer, part);
  }
  return buf;
}

std::string v2_layer_path(uint32_t layer, int part) { return "layers/" + v2_layer_id(layer, part) + ".gguf"; }

}  // namespace skippy::detail
