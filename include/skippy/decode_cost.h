// What one decoded token reads, per layer, from a package's tensor table and
// metadata alone (no weight bytes are read): the input of planning for time
// per token (skippy/time_plan.h) and of inspect's "active bytes per token".
//
// The rules, as llama.cpp's decode graph reads weights for one token:
//   - a dense tensor of a layer is read whole;
//   - an expert tensor (a routed-expert weight: its outermost dimension is
//     <arch>.expert_count, "_exps" in its name or a 3-D shape) is read at
//     expert_used_count / expert_count of its bytes (rounded up): the token is
//     routed to that many experts; shared experts ("_shexp") are dense;
//   - the input embedding matrices (token_embd, per-layer token embeddings,
//     position/type embeddings) are read one row per token: bytes / rows;
//   - the output head (output.weight, output_norm; the input embedding matrix
//     whole when the output is tied to it) is read whole by the final stage;
//   - other global tensors (rope_freqs, ...) are read by every stage;
//   - the last <arch>.nextn_predict_layers layers (the native MTP / NextN
//     block) are not run by ordinary decoding: they read nothing per token.
//
// Thread-safety: every function is safe to call concurrently (no shared state);
// its results are plain values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "skippy/gguf.h"
#include "skippy/model_source.h"

namespace skippy {

// One entry of a package's tensor table: a fragment's header (schema 1) or
// the carrier's directory (schema 2) gives these.
struct DecodeTensor {
  std::string name;
  std::vector<uint64_t> dims;  // ne[0] first
  uint64_t bytes = 0;          // stored bytes
};

struct LayerDecodeCost {
  uint64_t weight_bytes = 0;   // every tensor of the layer, whole
  uint64_t active_bytes = 0;   // what one decoded token reads of them
  uint64_t expert_bytes = 0;   // routed-expert tensors, whole (part of weight_bytes)
  bool nextn = false;          // a NextN/MTP layer: not run in ordinary decode
};

struct DecodeCost {
  std::string architecture;
  uint64_t expert_count = 0;       // 0: a dense model
  uint64_t expert_used_count = 0;
  uint32_t nextn_layers = 0;
  std::vector<LayerDecodeCost> layers;
  uint64_t embedding_bytes = 0;            // input embedding tensors, whole
  uint64_t embedding_bytes_per_token = 0;  // one row of each (first stage)
  uint64_t output_bytes = 0;               // output-boundary tensors, whole
  uint64_t output_bytes_per_token = 0;     // the output head, whole (final stage)
  bool output_tied = false;                // no output.weight: the head is token_embd
  uint64_t global_bytes = 0;               // other non-layer tensors (every stage)
  std::vector<std::string> notes;

  // Every tensor's bytes, and what one token reads through the whole model
  // (one stage holding everything).
  uint64_t total_bytes() const;
  uint64_t active_bytes_per_token() const;
};

// Builds the per-layer costs from the tensor table and the model's metadata
// (the source's KVs: shared/metadata.gguf or a schema 2 carrier). Throws
// Error(kInvalidInput) naming `origin` when a tensor names a layer at or past
// layer_count, a sum overflows 64 bits, expert_used_count exceeds
// expert_count, or nextn_predict_layers exceeds layer_count.
DecodeCost read_decode_cost(const GgufFile& metadata, const std::vector<DecodeTensor>& tensors, uint32_t layer_count,
                            std::string_view origin);

// The tensor table of a GGUF file's header (a source model or a fragment).
std::vector<DecodeTensor> decode_tensors_of(const GgufFile& file);

// What one decoded token reads of a source model (every shard's tensors);
// nullopt for a multimodal projector (is_multimodal_projector): an encoder
// run once per image or clip, which decoding reads nothing of.
std::optional<DecodeCost> model_decode_cost(const ModelSource& model);

}  // namespace skippy
