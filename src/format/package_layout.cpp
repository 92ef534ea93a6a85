#include "skippy/package_layout.h"

#include <charconv>
#include <cstdio>

#include "skippy/error.h"

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

bool fragment_keeps_kv(PartRole role, std::string_view key, std::string_view architecture) noexcept {
  if (key.starts_with("split.")) return false;
  if (role == PartRole::kMetadata) return true;
  if (key == "general.architecture" || key == "general.alignment") return true;
  return !architecture.empty() && key.size() > architecture.size() + 1 && key.starts_with(architecture) &&
         key[architecture.size()] == '.';
}

LayerRange parse_layer_range(std::string_view text) {
  const auto dots = text.find("..");
  auto bad = [&]() -> LayerRange {
    throw Error(ErrorKind::kUsage, "layer range \"" + std::string(text) + "\" is not START..END (half-open, e.g. 0..4)");
  };
  if (dots == std::string_view::npos) return bad();
  auto num = [&](std::string_view s, uint32_t& out) {
    if (s.empty() || s.size() > 9) return false;
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && p == s.data() + s.size();
  };
  LayerRange r;
  if (!num(text.substr(0, dots), r.start) || !num(text.substr(dots + 2), r.end)) return bad();
  if (r.end < r.start) {
    throw Error(ErrorKind::kUsage, "layer range " + std::string(text) + " ends before it starts");
  }
  return r;
}

std::string format_layer_range(LayerRange r) { return std::to_string(r.start) + ".." + std::to_string(r.end); }

}  // namespace skippy
