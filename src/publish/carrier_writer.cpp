#include "publish/carrier_writer.h"

#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "skippy/error.h"
#include "gguf/gguf_writer.h"
#include "skippy/package_catalog.h"
#include "skippy/package_layout.h"

namespace skippy::detail {
namespace {

// The carrier keys after the source's: the markers, then the four locator
// arrays, one entry per tensor in `tensors` order.
void add_carrier_keys(GgufWriter& w, uint32_t part_count, const std::vector<CarrierTensor>& tensors) {
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
}

// GGML_MAX_NAME: ggml keeps a tensor name in 64 bytes with its NUL.
constexpr size_t kGgmlMaxName = 64;

}  // namespace

std::vector<uint8_t> carrier_bytes(const GgufFile& src, uint32_t part_count, const std::vector<CarrierTensor>& tensors) {
  GgufWriter w(src.alignment());
  for (const auto& kv : src.kvs()) {
    if (kv.key.starts_with("split.") || is_fragment_key(kv.key) || is_carrier_key(kv.key)) continue;
    w.add_kv_borrowed(std::string(kv.key), kv.value);  // flattened below, while src lives
  }
  if (!w.has_kv("general.alignment")) w.add_u32("general.alignment", src.alignment());
  add_carrier_keys(w, part_count, tensors);
  for (const auto& t : tensors) w.add_tensor(t.name, t.type, t.ne, nullptr, 0);
  return w.header();  // the directory, padded to the data offset: no payload
}

std::optional<std::string> reference_carrier_refusal(const GgufFile& src, const std::vector<CarrierTensor>& tensors) {
  if (src.alignment() != kGgufDefaultAlignment) {
    return "the source's alignment is " + std::to_string(src.alignment()) +
           ", and the reference's carrier writer lays the directory out at 32 whatever general.alignment says";
  }
  for (const auto& t : tensors) {
    if (t.ne.size() > kGgufMaxDims) return "tensor " + t.name + " has more than 4 dimensions (ggml's limit)";
    if (t.ne.size() > 1 && t.ne.back() == 1) {
      return "tensor " + t.name + "'s dimensions end in 1, which ggml's writer drops (the carrier would not keep the source's shape)";
    }
    if (t.name.size() >= kGgmlMaxName) return "tensor " + t.name + "'s name is longer than ggml's 63 bytes";
  }
  for (const auto& kv : src.kvs()) {
    const auto has_nul = [](std::string_view v) { return v.find('\0') != std::string_view::npos; };
    if (const auto v = kv.value.as_string(); v && has_nul(*v)) {
      return "KV " + std::string(kv.key) + " holds a NUL byte, where ggml's writer would cut it";
    }
    if (kv.value.is_array() && kv.value.array_type() == GgufType::kString) {
      if (const auto a = kv.value.as_string_array()) {
        for (const auto& v : *a) {
          if (has_nul(v)) return "KV " + std::string(kv.key) + " holds a NUL byte, where ggml's writer would cut it";
        }
      }
    }
  }
  return std::nullopt;
}

std::vector<uint8_t> reference_carrier_bytes(const GgufFile& src, uint32_t part_count,
                                             const std::vector<CarrierTensor>& tensors) {
  // gguf_init_empty: a directory laid out at 32 (reference_carrier_refusal
  // holds the sources where that is not the source's alignment).
  GgufWriter w(kGgufDefaultAlignment);
  // gguf_set_kv from the first part's header (the source's KVs minus
  // part_writer's three split keys, general.alignment appended when
  // absent), then skippy_clear_split_metadata, the materialized marker
  // removed, and every carrier key set anew (ggml's setters remove a key
  // before appending it).
  for (const auto& kv : src.kvs()) {
    if (kv.key == "split.no" || kv.key == "split.count" || kv.key == "split.tensors.count" ||
        kv.key == "skippy.package.materialized" || is_carrier_key(kv.key)) {
      continue;
    }
    w.add_kv_borrowed(std::string(kv.key), kv.value);
  }
  if (!w.has_kv("general.alignment")) w.add_u32("general.alignment", src.alignment());
  add_carrier_keys(w, part_count, tensors);
  for (const auto& t : tensors) w.add_tensor(t.name, t.type, t.ne, nullptr, 0);
  return w.header();  // ggml's gguf_write_to_file(only_meta): padded to 32, no payload
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
