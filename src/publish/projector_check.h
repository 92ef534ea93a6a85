// Whether a GGUF is a multimodal projector (kind "mmproj"): what
// write-package --projector and validate-package both insist on. Internal.
#pragma once

#include <string>

#include "skippy/gguf.h"

namespace skippy::detail {

// llama.cpp's mmproj convention: general.architecture "clip" (its converters
// write it, and so do the mmproj files published beside GGUF models), with
// clip.* hyper-parameters.
inline bool is_projector_gguf(const GgufFile& g) {
  if (g.architecture() == "clip") return true;
  for (const auto& kv : g.kvs()) {
    if (kv.key.starts_with("clip.")) return true;
  }
  return false;
}

// Why a file is not one, for messages.
inline std::string describe_projector(const GgufFile& g) {
  const auto arch = g.architecture();
  return (arch.empty() ? std::string("no general.architecture") : "general.architecture is \"" + std::string(arch) + "\"") +
         ", a projector has \"clip\"";
}

}  // namespace skippy::detail
