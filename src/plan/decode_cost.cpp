// read_decode_cost(): bytes one decoded token reads, per layer (skippy/plan.h).
#include "skippy/plan.h"

#include <iterator>
#include <limits>

#include "skippy/error.h"
#include "skippy/model_source.h"
#include "skippy/package_catalog.h"

namespace skippy {
namespace {

struct Sum {
  std::string_view origin;
  uint64_t add(uint64_t a, uint64_t b) const {
    if (a > std::numeric_limits<uint64_t>::max() - b) {
      throw_invalid(std::string(origin) + ": tensor byte counts overflow 64 bits");
    }
    return a + b;
  }
};

// ceil(bytes * used / count), exactly.
uint64_t routed_share(uint64_t bytes, uint64_t used, uint64_t count) {
  __extension__ using u128 = unsigned __int128;
  return static_cast<uint64_t>((u128{bytes} * used + count - 1) / count);
}

bool is_expert_tensor(const DecodeTensor& t, uint64_t expert_count) {
  if (expert_count < 2 || t.dims.empty() || t.dims.back() != expert_count) return false;
  if (t.name.find("_shexp") != std::string::npos) return false;
  return t.name.find("_exps") != std::string::npos || t.dims.size() == 3;
}

}  // namespace

uint64_t DecodeCost::total_bytes() const {
  Sum s{"decode cost"};
  uint64_t n = s.add(s.add(embedding_bytes, global_bytes), output_bytes);
  for (const auto& l : layers) n = s.add(n, l.weight_bytes);
  return n;
}

uint64_t DecodeCost::active_bytes_per_token() const {
  Sum s{"decode cost"};
  uint64_t n = s.add(s.add(embedding_bytes_per_token, output_bytes_per_token), global_bytes);
  for (const auto& l : layers) n = s.add(n, l.active_bytes);
  return n;
}

std::vector<DecodeTensor> decode_tensors_of(const GgufFile& file) {
  std::vector<DecodeTensor> out;
  out.reserve(file.tensors().size());
  for (const auto& t : file.tensors()) {
    DecodeTensor d;
    d.name = std::string(t.name);
    for (int64_t n : t.ne) d.dims.push_back(static_cast<uint64_t>(n));
    d.bytes = t.bytes;
    out.push_back(std::move(d));
  }
  return out;
}

DecodeCost read_decode_cost(const GgufFile& meta, const std::vector<DecodeTensor>& tensors, uint32_t layer_count,
                            std::string_view origin) {
  const Sum sum{origin};
  DecodeCost c;
  c.architecture = std::string(meta.architecture());
  const std::string arch = c.architecture;
  c.expert_count = meta.get_uint(arch + ".expert_count").value_or(0);
  c.expert_used_count = meta.get_uint(arch + ".expert_used_count").value_or(0);
  if (c.expert_count > 1 && (c.expert_used_count == 0 || c.expert_used_count > c.expert_count)) {
    throw_invalid(std::string(origin) + ": " + arch + ".expert_used_count is " + std::to_string(c.expert_used_count) +
                  " for " + std::to_string(c.expert_count) + " experts (must be 1.." + std::to_string(c.expert_count) +
                  ")");
  }
  const uint64_t nextn = meta.get_uint(arch + ".nextn_predict_layers").value_or(0);
  if (nextn > layer_count) {
    throw_invalid(std::string(origin) + ": " + arch + ".nextn_predict_layers is " + std::to_string(nextn) +
                  " but the model has " + std::to_string(layer_count) + " layers");
  }
  c.nextn_layers = static_cast<uint32_t>(nextn);
  c.layers.assign(layer_count, {});
  for (uint32_t l = layer_count - c.nextn_layers; l < layer_count; ++l) c.layers[l].nextn = true;

  uint64_t embd_matrix = 0;  // token_embd.weight, whole: the head when tied
  bool has_output_matrix = false;
  for (const auto& t : tensors) {
    const auto layer = tensor_name_layer(t.name);
    if (layer) {
      if (*layer >= layer_count) {
        throw_invalid(std::string(origin) + ": tensor '" + t.name + "' names layer " + std::to_string(*layer) +
                      " but the model has " + std::to_string(layer_count));
      }
      auto& L = c.layers[*layer];
      L.weight_bytes = sum.add(L.weight_bytes, t.bytes);
      if (L.nextn) continue;
      if (is_expert_tensor(t, c.expert_count)) {
        L.expert_bytes = sum.add(L.expert_bytes, t.bytes);
        L.active_bytes = sum.add(L.active_bytes, routed_share(t.bytes, c.expert_used_count, c.expert_count));
      } else {
        L.active_bytes = sum.add(L.active_bytes, t.bytes);
      }
      continue;
    }
    switch (classify_tensor(t.name).role) {
      case TensorRole::kEmbeddings: {
        c.embedding_bytes = sum.add(c.embedding_bytes, t.bytes);
        const bool matrix = t.dims.size() == 2 && t.dims[1] > 0;
        c.embedding_bytes_per_token = sum.add(c.embedding_bytes_per_token, matrix ? t.bytes / t.dims[1] : t.bytes);
        if (t.name == "token_embd.weight") embd_matrix = t.bytes;
        break;
      }
      case TensorRole::kOutput:
        if (t.name == "output.weight") has_output_matrix = true;
        c.output_bytes = sum.add(c.output_bytes, t.bytes);
        break;
      case TensorRole::kLayer:
      case TensorRole::kGlobal:
        c.global_bytes = sum.add(c.global_bytes, t.bytes);
        break;
    }
  }
  c.output_bytes_per_token = c.output_bytes;
  if (!has_output_matrix && embd_matrix > 0) {
    c.output_tied = true;
    c.output_bytes_per_token = sum.add(c.output_bytes_per_token, embd_matrix);
    c.notes.push_back("the output head is tied to token_embd.weight: the final stage reads that matrix whole per token");
  }
  if (c.expert_count > 1) {
    c.notes.push_back("routed experts (" + arch + ".expert_count " + std::to_string(c.expert_count) +
                      ", expert_used_count " + std::to_string(c.expert_used_count) + "): each token reads " +
                      std::to_string(c.expert_used_count) + "/" + std::to_string(c.expert_count) +
                      " of every expert tensor; dense and shared-expert tensors whole");
  }
  if (c.nextn_layers > 0) {
    c.notes.push_back("the last " + std::to_string(c.nextn_layers) + " layer(s) are the native MTP (NextN) block (" +
                      arch + ".nextn_predict_layers): ordinary decoding does not run them");
  }
  return c;
}

std::optional<DecodeCost> model_decode_cost(const ModelSource& model) {
  if (is_multimodal_projector(model.primary())) return std::nullopt;
  std::vector<DecodeTensor> tensors;
  for (const auto& shard : model.shards()) {
    auto t = decode_tensors_of(shard);
    tensors.insert(tensors.end(), std::make_move_iterator(t.begin()), std::make_move_iterator(t.end()));
  }
  return read_decode_cost(model.primary(), tensors, model.layer_count(), model.primary().name());
}

}  // namespace skippy
