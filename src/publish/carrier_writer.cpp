#include "publish/carrier_writer.h"

#include <cstdio>
#include <cstring>

#include "skippy/error.h"
#include "gguf/gguf_writer.h"
#include "skippy/package_catalog.h"
#include "skippy/package_layout.h"

namespace skippy::detail {
namespace carrier_writer_detail {

std::vector<uint8_t> locator_array(GgufType element, const std::vector<uint64_t>& values) {
  const size_t width = element == GgufType::kUint64 ? 8 : 4;
  std::vector<uint8_t> out(12 + values.size() * width);
  const auto t = static_cast<uint32_t>(element);
  const uint64_t n = values.size();
  std::memcpy(out.data(), &t, 4);
  std::memcpy(out.data() + 4, &n, 8);
  for (size_t i = 0; i < values.size(); ++i) {
    if (width == 8) {
      std::memcpy(out.data() + 12 + i * 8, &values[i], 8);
    } else {
      const auto v = static_cast<uint32_t>(values[i]);
      std::memcpy(out.data() + 12 + i * 4, &v, 4);
    }
  }
  return out;
}

}  // namespace carrier_writer_detail

std::vector<uint8_t> carrier_bytes(const GgufFile& src, uint32_t part_count, const std::vector<CarrierTensor>& tensors) {
  using carrier_writer_detail::locator_array;
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
  w.add_kv(std::string(kCarrierTensorPartKey), GgufType::kArray, locator_array(GgufType::kUint32, part));
  w.add_kv(std::string(kCarrierTensorOffsetKey), GgufType::kArray, locator_array(GgufType::kUint64, offset));
  w.add_kv(std::string(kCarrierTensorSizeKey), GgufType::kArray, locator_array(GgufType::kUint64, size));
  w.add_kv(std::string(kCarrierTensorAlignmentKey), GgufType::kArray, locator_array(GgufType::kUint32, align));
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
