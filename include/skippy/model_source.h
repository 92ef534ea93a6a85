// A source model: one GGUF file, or every shard of a split model
// ("-00001-of-00003.gguf") presented as one tensor table. Also where tensor
// names are mapped to the package roles the spec defines.
//
// Thread-safety: a ModelSource is immutable once opened: any number of threads
// may read it at once. The free functions are pure.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "skippy/gguf.h"

namespace skippy {

// Where a source tensor belongs in a layer package.
enum class TensorRole {
  kEmbeddings,  // input boundary: shared/embeddings.gguf
  kLayer,       // blk.N.*: layers/layer-NNNNN.gguf
  kOutput,      // output boundary: shared/output.gguf
  kGlobal,      // any other global (rope_freqs, ...): shared/metadata.gguf
};
std::string_view tensor_role_name(TensorRole r) noexcept;

struct TensorPlacement {
  TensorRole role;
  uint32_t layer = 0;  // for kLayer
};
// blk.N.* (including blk.N.nextn.*) -> layer N; token_embd and other input
// embeddings -> embeddings; output_norm / output -> output; else global.
TensorPlacement classify_tensor(std::string_view name);

struct SourceTensor {
  const GgufTensorInfo* info;  // owned by shards()[shard]
  size_t shard;
  TensorPlacement placement;
};

class ModelSource {
 public:
  // Opens `path`; when it names a split shard, opens every shard and checks
  // they belong together (count, numbering, split keys, unique tensor
  // names, split.tensors.count). Throws Error naming the file and problem.
  static ModelSource open(const std::filesystem::path& path);

  const std::vector<GgufFile>& shards() const noexcept { return shards_; }
  const GgufFile& primary() const noexcept { return shards_.front(); }  // holds the KVs
  bool is_split() const noexcept { return shards_.size() > 1 || split_; }
  const std::vector<SourceTensor>& tensors() const noexcept { return tensors_; }
  const SourceTensor* find_tensor(std::string_view name) const noexcept;

  std::string_view architecture() const noexcept { return primary().architecture(); }
  // <arch>.block_count; throws when missing or inconsistent with blk.N.
  uint32_t layer_count() const;
  std::optional<uint64_t> activation_width() const noexcept { return primary().embedding_length(); }
  uint64_t tensor_bytes() const noexcept;

 private:
  std::vector<GgufFile> shards_;
  bool split_ = false;
  std::vector<SourceTensor> tensors_;
  std::map<std::string_view, size_t> index_;
};

// Whether a GGUF is a multimodal projector (llama.cpp's mmproj convention:
// general.architecture "clip", as its converters write it, or clip.* keys).
// A projector is an encoder, not a decoder: it has no <arch>.block_count
// (its blocks are clip.vision.block_count / clip.audio.block_count, its
// tensors v.blk.N / a.blk.N) and reads nothing per decoded token.
bool is_multimodal_projector(const GgufFile& file) noexcept;

// What `inspect` reports for a source model.
struct RoleTotals {
  uint64_t tensor_count = 0;
  uint64_t tensor_bytes = 0;
};
struct ModelSummary {
  std::string architecture;
  uint32_t layer_count = 0;
  std::optional<uint64_t> activation_width;
  uint64_t tensor_count = 0;
  uint64_t tensor_bytes = 0;
  uint64_t file_bytes = 0;
  uint32_t gguf_version = 0;
  uint32_t alignment = 0;
  RoleTotals embeddings, output, globals;
  std::vector<RoleTotals> layers;              // index = layer
  std::map<std::string, RoleTotals> by_type;   // ggml type name -> totals
  std::vector<std::string> shards;             // file names, in order (empty unless split)
  // Mixture of experts: <arch>.expert_count and <arch>.expert_used_count
  // (nullopt for a dense model), and <arch>.expert_shared_count when present.
  std::optional<uint64_t> expert_count, expert_used_count, expert_shared_count;
  // Set for a multimodal projector (is_multimodal_projector): its encoders'
  // block counts and clip.projector_type, as the file declares them.
  struct Projector {
    std::string projector_type;                     // clip.projector_type ("" when absent)
    std::optional<uint64_t> vision_block_count;     // clip.vision.block_count
    std::optional<uint64_t> audio_block_count;      // clip.audio.block_count
  };
  std::optional<Projector> projector;
};
ModelSummary summarize(const ModelSource& model);

}  // namespace skippy
