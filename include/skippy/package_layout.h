// Where things live in a layer package (spec: "Repository Layout") and the
// GGUF keys that name a fragment's role.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace skippy {

// The manifest file name is kManifestFileName (manifest.h).
inline constexpr std::string_view kPackageReadme = "README.md";
inline constexpr std::string_view kMetadataPath = "shared/metadata.gguf";
inline constexpr std::string_view kEmbeddingsPath = "shared/embeddings.gguf";
inline constexpr std::string_view kOutputPath = "shared/output.gguf";
inline constexpr std::string_view kLayersDir = "layers";
inline constexpr std::string_view kProjectorsDir = "projectors";

// "layers/layer-00007.gguf" (five digits, wider only past 99999 layers).
std::string layer_artifact_path(uint32_t layer_index);

// Keys every fragment carries besides the source's own metadata.
inline constexpr std::string_view kRoleKey = "skippy.package.role";            // string
inline constexpr std::string_view kLayerStartKey = "skippy.package.layer_start";  // u32
inline constexpr std::string_view kLayerEndKey = "skippy.package.layer_end";      // u32, exclusive

// Parts of a package, in the order a stage loads them.
enum class PartRole { kMetadata, kEmbeddings, kLayer, kOutput, kProjector };
std::string_view part_role_name(PartRole r) noexcept;

}  // namespace skippy
