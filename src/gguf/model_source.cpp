#include "skippy/model_source.h"

#include <algorithm>
#include <charconv>
#include <set>

#include "skippy/error.h"
#include "gguf/ggml_types.h"

namespace skippy {

std::string_view tensor_role_name(TensorRole r) noexcept {
  switch (r) {
    case TensorRole::kEmbeddings: return "embeddings";
    case TensorRole::kLayer: return "layer";
    case TensorRole::kOutput: return "output";
    case TensorRole::kGlobal: return "global";
  }
  return "global";
}

namespace {

// Base names (before the first '.') of input-boundary tensors across the
// families llama.cpp converts: token embeddings, their norms, learned
// positions, token types, and per-layer input embeddings and the input
// altup projection (Gemma 3n). Only the input embedding path uses these, so,
// as in the reference's graph-derived stage slices, only the first stage
// holds them. A layerless tensor that every layer uses (rope_freqs, rope
// factors) is not here: it stays kGlobal, on every stage.
constexpr std::string_view kEmbeddingBases[] = {
    "token_embd", "token_embd_norm", "position_embd", "token_types",
    "per_layer_token_embd", "per_layer_model_proj", "per_layer_proj_norm", "altup_proj",
};
// The output path only: the final norm, the projection, and Gemma 3n's altup
// un-embedding before the final norm.
constexpr std::string_view kOutputBases[] = {"output", "output_norm", "altup_unembd_proj"};

std::string_view base_of(std::string_view name) {
  const auto dot = name.find('.');
  return dot == std::string_view::npos ? name : name.substr(0, dot);
}

bool in(std::string_view v, std::span<const std::string_view> set) {
  return std::find(set.begin(), set.end(), v) != set.end();
}

}  // namespace

TensorPlacement classify_tensor(std::string_view name) {
  constexpr std::string_view kBlk = "blk.";
  if (name.starts_with(kBlk)) {
    const auto rest = name.substr(kBlk.size());
    uint32_t layer = 0;
    const auto [p, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), layer);
    const bool digits_only_then_dot = ec == std::errc() && p != rest.data() && p < rest.data() + rest.size() &&
                                      *p == '.' && !(rest[0] == '0' && p - rest.data() > 1);
    if (digits_only_then_dot) return {TensorRole::kLayer, layer};
  }
  const auto base = base_of(name);
  if (in(base, kEmbeddingBases)) return {TensorRole::kEmbeddings, 0};
  if (in(base, kOutputBases)) return {TensorRole::kOutput, 0};
  return {TensorRole::kGlobal, 0};
}

ModelSource ModelSource::open(const std::filesystem::path& path) {
  ModelSource m;
  const auto split_name = parse_split_name(path);
  m.shards_.push_back(GgufFile::open(path));
  if (split_name) {
    m.split_ = true;
    // Reopen in order: shard 1 first, then the rest.
    std::vector<GgufFile> shards;
    for (uint32_t i = 1; i <= split_name->count; ++i) {
      const auto p = split_path(split_name->prefix, i, split_name->count);
      if (i == split_name->index) {
        shards.push_back(std::move(m.shards_.front()));
        continue;
      }
      std::error_code ec;
      if (!std::filesystem::exists(p, ec)) {
        throw_not_found(p.string() + ": shard " + std::to_string(i) + " of " + std::to_string(split_name->count) +
                        " is missing (given " + path.filename().string() + ")");
      }
      shards.push_back(GgufFile::open(p));
    }
    m.shards_ = std::move(shards);
  }
  // Split keys must agree with the file names (or, for a single file that
  // carries them, say count 1).
  uint64_t declared_total = 0;
  bool have_declared_total = false;
  for (size_t i = 0; i < m.shards_.size(); ++i) {
    const auto& f = m.shards_[i];
    const auto info = read_split_info(f);
    if (!info) {
      if (m.split_) throw_invalid(f.name() + ": shard has no split.no/split.count keys");
      continue;
    }
    if (info->count != m.shards_.size()) {
      throw_invalid(f.name() + ": split.count is " + std::to_string(info->count) + " but " +
                    std::to_string(m.shards_.size()) + " shard(s) were found");
    }
    if (info->no != i) {
      throw_invalid(f.name() + ": split.no is " + std::to_string(info->no) + ", expected " + std::to_string(i) +
                    " for shard " + std::to_string(i + 1));
    }
    if (i == 0 && f.find_kv("split.tensors.count")) {
      declared_total = info->tensors_count;
      have_declared_total = true;
    }
  }
  for (size_t s = 0; s < m.shards_.size(); ++s) {
    for (const auto& t : m.shards_[s].tensors()) {
      const auto [it, inserted] = m.index_.emplace(t.name, m.tensors_.size());
      if (!inserted) {
        const auto& other = m.shards_[m.tensors_[it->second].shard];
        throw_invalid(m.shards_[s].name() + ": tensor '" + std::string(t.name) + "' also appears in " + other.name());
      }
      m.tensors_.push_back(SourceTensor{&t, s, classify_tensor(t.name)});
    }
  }
  if (have_declared_total && declared_total != m.tensors_.size()) {
    throw_invalid(m.primary().name() + ": split.tensors.count is " + std::to_string(declared_total) + " but the " +
                  std::to_string(m.shards_.size()) + " shard(s) hold " + std::to_string(m.tensors_.size()) +
                  " tensors");
  }
  return m;
}

const SourceTensor* ModelSource::find_tensor(std::string_view name) const noexcept {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

uint32_t ModelSource::layer_count() const {
  const auto arch = architecture();
  if (arch.empty()) throw_invalid(primary().name() + ": no general.architecture key");
  const auto bc = primary().block_count();
  if (!bc) throw_invalid(primary().name() + ": no " + std::string(arch) + ".block_count key");
  if (*bc == 0) throw_invalid(primary().name() + ": model has no layers (" + std::string(arch) + ".block_count = 0)");
  if (*bc > 100000) throw_invalid(primary().name() + ": implausible block_count " + std::to_string(*bc));
  for (const auto& t : tensors_) {
    if (t.placement.role == TensorRole::kLayer && t.placement.layer >= *bc) {
      throw_invalid(primary().name() + ": tensor '" + std::string(t.info->name) + "' names layer " +
                    std::to_string(t.placement.layer) + " but block_count is " + std::to_string(*bc));
    }
  }
  return static_cast<uint32_t>(*bc);
}

uint64_t ModelSource::tensor_bytes() const noexcept {
  uint64_t n = 0;
  for (const auto& t : tensors_) n += t.info->bytes;
  return n;
}

bool is_multimodal_projector(const GgufFile& file) noexcept {
  if (file.architecture() == "clip") return true;
  for (const auto& kv : file.kvs()) {
    if (kv.key.starts_with("clip.")) return true;
  }
  return false;
}

ModelSummary summarize(const ModelSource& model) {
  ModelSummary s;
  const auto& p = model.primary();
  s.architecture = std::string(model.architecture());
  s.activation_width = model.activation_width();
  s.gguf_version = p.version();
  const std::string arch(model.architecture());
  s.expert_count = p.get_uint(arch + ".expert_count");
  s.expert_used_count = p.get_uint(arch + ".expert_used_count");
  s.expert_shared_count = p.get_uint(arch + ".expert_shared_count");
  if (s.expert_count == 0) s.expert_count.reset();
  s.alignment = p.alignment();
  if (is_multimodal_projector(p)) {
    ModelSummary::Projector pj;
    pj.projector_type = std::string(p.get_string("clip.projector_type").value_or(""));
    pj.vision_block_count = p.get_uint("clip.vision.block_count");
    pj.audio_block_count = p.get_uint("clip.audio.block_count");
    s.projector = std::move(pj);
  }
  uint32_t layers = 0;
  if (const auto bc = p.block_count(); bc && *bc <= 100000) layers = static_cast<uint32_t>(*bc);
  for (const auto& t : model.tensors()) {
    if (t.placement.role == TensorRole::kLayer) layers = std::max(layers, t.placement.layer + 1);
  }
  s.layer_count = layers;
  s.layers.resize(layers);
  for (const auto& t : model.tensors()) {
    RoleTotals* r = nullptr;
    switch (t.placement.role) {
      case TensorRole::kEmbeddings: r = &s.embeddings; break;
      case TensorRole::kOutput: r = &s.output; break;
      case TensorRole::kGlobal: r = &s.globals; break;
      case TensorRole::kLayer: r = &s.layers[t.placement.layer]; break;
    }
    r->tensor_count++;
    r->tensor_bytes += t.info->bytes;
    auto& ty = s.by_type[ggml_type_name(t.info->type)];
    ty.tensor_count++;
    ty.tensor_bytes += t.info->bytes;
    s.tensor_count++;
    s.tensor_bytes += t.info->bytes;
  }
  for (const auto& f : model.shards()) {
    s.file_bytes += f.file_size();
    if (model.is_split()) s.shards.push_back(f.path().filename().string());
  }
  return s;
}

}  // namespace skippy
