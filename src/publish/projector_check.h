// Whether a GGUF is a multimodal projector (kind "mmproj"): what
// write-package --projector and validate-package both insist on. Internal.
#pragma once

#include <string>

#include "skippy/gguf.h"
#include "skippy/model_source.h"

namespace skippy::detail {

// llama.cpp's mmproj convention: general.architecture "clip" (its converters
// write it, and so do the mmproj files published beside GGUF models), with
// clip.* hyper-parameters.
inline bool is_projector_gguf(const GgufFile& g) { return is_multimodal_projector(g); }

// Why a file is not one, for messages.
inline std::string describe_projector(const GgufFile& g) {
  const auto arch = g.architecture();
  return (arch.empty() ? std::string("no general.architecture") : "general.architecture is \"" + std::string(arch) + "\"") +
         ", a projector has \"clip\"";
}

}  // namespace skippy::detail
