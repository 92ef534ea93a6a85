#include "gguf/ggml_types.h"

#include <array>
#include <limits>
#include <string>

namespace skippy {
namespace {

// Block sizes and byte sizes from ggml's type_traits (ggml/src/ggml.c).
constexpr std::array kTypes = {
    GgmlTypeTraits{0, "F32", 1, 4},
    GgmlTypeTraits{1, "F16", 1, 2},
    GgmlTypeTraits{2, "Q4_0", 32, 18},
    GgmlTypeTraits{3, "Q4_1", 32, 20},
    GgmlTypeTraits{6, "Q5_0", 32, 22},
    GgmlTypeTraits{7, "Q5_1", 32, 24},
    GgmlTypeTraits{8, "Q8_0", 32, 34},
    GgmlTypeTraits{9, "Q8_1", 32, 36},
    GgmlTypeTraits{10, "Q2_K", 256, 84},
    GgmlTypeTraits{11, "Q3_K", 256, 110},
    GgmlTypeTraits{12, "Q4_K", 256, 144},
    GgmlTypeTraits{13, "Q5_K", 256, 176},
    GgmlTypeTraits{14, "Q6_K", 256, 210},
    GgmlTypeTraits{15, "Q8_K", 256, 292},
    GgmlTypeTraits{16, "IQ2_XXS", 256, 66},
    GgmlTypeTraits{17, "IQ2_XS", 256, 74},
    GgmlTypeTraits{18, "IQ3_XXS", 256, 98},
    GgmlTypeTraits{19, "IQ1_S", 256, 50},
    GgmlTypeTraits{20, "IQ4_NL", 32, 18},
    GgmlTypeTraits{21, "IQ3_S", 256, 110},
    GgmlTypeTraits{22, "IQ2_S", 256, 82},
    GgmlTypeTraits{23, "IQ4_XS", 256, 136},
    GgmlTypeTraits{24, "I8", 1, 1},
    GgmlTypeTraits{25, "I16", 1, 2},
    GgmlTypeTraits{26, "I32", 1, 4},
    GgmlTypeTraits{27, "I64", 1, 8},
    GgmlTypeTraits{28, "F64", 1, 8},
    GgmlTypeTraits{29, "IQ1_M", 256, 56},
    GgmlTypeTraits{30, "BF16", 1, 2},
    GgmlTypeTraits{34, "TQ1_0", 256, 54},
    GgmlTypeTraits{35, "TQ2_0", 256, 66},
    GgmlTypeTraits{39, "MXFP4", 32, 17},
};

constexpr uint32_t kMaxId = 39;

constexpr std::array<int8_t, kMaxId + 1> build_index() {
  std::array<int8_t, kMaxId + 1> index{};
  for (auto& slot : index) slot = -1;
  for (size_t i = 0; i < kTypes.size(); ++i) index[kTypes[i].id] = static_cast<int8_t>(i);
  return index;
}
constexpr auto kIndex = build_index();

}  // namespace

const GgmlTypeTraits* ggml_type_traits(uint32_t id) noexcept {
  if (id > kMaxId || kIndex[id] < 0) return nullptr;
  return &kTypes[static_cast<size_t>(kIndex[id])];
}

std::span<const GgmlTypeTraits> ggml_type_table() noexcept { return kTypes; }

std::string ggml_type_name(uint32_t id) {
  if (const auto* t = ggml_type_traits(id)) return std::string(t->name);
  return "type#" + std::to_string(id);
}

std::optional<uint64_t> ggml_tensor_bytes(uint32_t type, std::span<const int64_t> ne) noexcept {
  const auto* t = ggml_type_traits(type);
  if (t == nullptr || ne.empty()) return std::nullopt;
  for (int64_t d : ne) {
    if (d < 0) return std::nullopt;
  }
  if (ne[0] % t->block_size != 0) return std::nullopt;
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  // Element count must fit int64, as ggml requires.
  uint64_t elements = 1;
  for (int64_t d : ne) {
    const auto u = static_cast<uint64_t>(d);
    if (u != 0 && elements > kMax / u) return std::nullopt;
    elements *= u;
  }
  // Bytes = (ne0 / block) * type_size * ne1 * ne2 * ne3.
  uint64_t bytes = static_cast<uint64_t>(ne[0]) / t->block_size;
  if (bytes != 0 && t->type_size > kMax / bytes) return std::nullopt;
  bytes *= t->type_size;
  for (size_t i = 1; i < ne.size(); ++i) {
    const auto u = static_cast<uint64_t>(ne[i]);
    if (u != 0 && bytes > kMax / u) return std::nullopt;
    bytes *= u;
  }
  return bytes;
}

}  // namespace skippy
