// The ggml tensor type table, as data: every type llama.cpp knows, with its
// block size (elements per block) and block byte size. Removed ids (4, 5,
// 31-33, 36-38) are not valid in a file.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace skippy {

struct GgmlTypeTraits {
  uint32_t id;
  std::string_view name;   // as llama.cpp prints it: "F32", "Q4_K", "MXFP4"
  uint32_t block_size;     // elements per block
  uint32_t type_size;      // bytes per block
};

// nullptr when `id` is not a type a GGUF file may carry.
const GgmlTypeTraits* ggml_type_traits(uint32_t id) noexcept;

// All valid types, in id order.
std::span<const GgmlTypeTraits> ggml_type_table() noexcept;

// Name for any id; "type#<id>" for an unknown one.
std::string ggml_type_name(uint32_t id);

// Bytes of a tensor of `type` with dims `ne` (ne[0] fastest). Returns nullopt
// when the type is unknown, ne[0] is not a multiple of the block size, a dim
// is negative, or the element count or byte size overflows int64.
std::optional<uint64_t> ggml_tensor_bytes(uint32_t type, std::span<const int64_t> ne) noexcept;

}  // namespace skippy
