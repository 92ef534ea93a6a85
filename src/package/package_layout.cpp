#include "skippy/package_layout.h"

#include <cstdio>

namespace skippy {

std::string layer_artifact_path(uint32_t layer_index) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "layers/layer-%05u.gguf", layer_index);
  return buf;
}

std::string_view part_role_name(PartRole r) noexcept {
  switch (r) {
    case PartRole::kMetadata: return "metadata";
    case PartRole::kEmbeddings: return "embeddings";
    case PartRole::kLayer: return "layer";
    case PartRole::kOutput: return "output";
    case PartRole::kProjector: return "projector";
  }
  return "metadata";
}

}  // namespace skippy
