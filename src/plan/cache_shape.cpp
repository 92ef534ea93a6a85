// Per-layer KV cache and recurrent state sizes from GGUF metadata, as
// llama.cpp allocates them (llama_hparams, llama_kv_cache, llama_memory_recurrent).
#include <algorithm>
#include <array>
#include <cctype>
#include <string>

#include "skippy/error.h"
#include "skippy/plan.h"
#include "stage_weights.h"

namespace skippy {
namespace {

using plan_detail::checked_add;
using plan_detail::checked_mul;
uint64_t add(uint64_t a, uint64_t b) { return checked_add(a, b); }
uint64_t mul(uint64_t a, uint64_t b) { return checked_mul(a, b); }

struct Keys {
  const GgufFile& f;
  std::string arch;
  uint32_t layers = 0;

  std::string key(std::string_view k) const { return arch + "." + std::string(k); }
  [[noreturn]] void bad(std::string_view k, const std::string& why) const {
    throw_invalid(f.name() + ": " + key(k) + " " + why);
  }
  const GgufValue* value(std::string_view k) const {
    const auto* kv = f.find_kv(key(k));
    return kv ? &kv->value : nullptr;
  }
  std::optional<uint64_t> scalar(std::string_view k) const {
    const auto* v = value(k);
    if (!v) return std::nullopt;
    const auto u = v->as_uint();
    if (!u) bad(k, "must be an unsigned integer, not " + std::string(gguf_type_name(v->type())));
    return u;
  }
  // llama.cpp's get_key_or_arr: one value for every layer, or one per layer.
  std::optional<std::vector<uint64_t>> per_layer(std::string_view k) const {
    const auto* v = value(k);
    if (!v) return std::nullopt;
    if (!v->is_array()) return std::vector<uint64_t>(layers, *scalar(k));
    // The type and the count first, from the array's own header: an array
    // of the wrong length is refused before a value of it is widened (a
    // hostile file's 100 MB i8 array would be 800 MB as 64-bit values).
    const GgufType et = v->array_type();
    const size_t width = gguf_scalar_size(et);
    if (width == 0 || et == GgufType::kFloat32 || et == GgufType::kFloat64 || et == GgufType::kBool) {
      bad(k, "must be an integer or an array of integers");
    }
    if (v->array_size() != layers) {
      bad(k, "has " + std::to_string(v->array_size()) + " entries for " + std::to_string(layers) +
                 " layers (one per layer, as block_count says)");
    }
    std::vector<uint64_t> out;
    out.reserve(layers);
    for (uint32_t il = 0; il < layers; ++il) {
      const auto x = GgufValue(et, v->encoded().subspan(12 + size_t{il} * width, width)).as_int();
      if (!x) bad(k, "must be an integer or an array of integers");  // a u64 beyond int64
      if (*x < 0) bad(k, "has a negative entry");
      out.push_back(static_cast<uint64_t>(*x));
    }
    return out;
  }
};

// Architectures whose every layer is recurrent (llama_model_is_recurrent).
bool recurrent_architecture(std::string_view arch) {
  static constexpr std::array<std::string_view, 6> kArchs = {"mamba", "mamba2", "rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7"};
  return std::find(kArchs.begin(), kArchs.end(), arch) != kArchs.end();
}

// llama.cpp hard-codes the sliding-window pattern of these architectures
// (set_swa_pattern in llama_model::load_hparams) instead of reading a key.
std::optional<uint64_t> builtin_swa_pattern(std::string_view arch) {
  struct Entry {
    std::string_view arch;
    uint64_t period;
  };
  static constexpr std::array<Entry, 5> kPatterns = {
      {{"gemma2", 2}, {"gemma3", 6}, {"gemma3n", 5}, {"cohere2", 4}, {"gpt-oss", 2}}};
  for (const auto& e : kPatterns) {
    if (e.arch == arch) return e.period;
  }
  return std::nullopt;
}

// Which layers use the sliding window; empty when none do.
std::vector<bool> window_layers(const Keys& k, std::vector<std::string>& notes) {
  const auto* pattern = k.value("attention.sliding_window_pattern");
  if (pattern && pattern->is_array()) {
    if (pattern->array_type() != GgufType::kBool) k.bad("attention.sliding_window_pattern", "must be a u32 or a bool array");
    if (pattern->array_size() != k.layers) {
      k.bad("attention.sliding_window_pattern", "has " + std::to_string(pattern->array_size()) + " entries for " +
                                                    std::to_string(k.layers) + " layers");
    }
    std::vector<bool> out(k.layers);
    for (uint32_t il = 0; il < k.layers; ++il) out[il] = pattern->encoded()[12 + il] != 0;
    return out;
  }
  std::optional<uint64_t> period = pattern ? k.scalar("attention.sliding_window_pattern") : std::nullopt;
  if (!period) {
    period = builtin_swa_pattern(k.arch);
    if (period) {
      notes.push_back("sliding-window pattern: every " + std::to_string(*period) + " layers, the last full attention (llama.cpp's fixed pattern for " + k.arch + ")");
    }
  }
  if (!period) {
    notes.push_back(k.key("attention.sliding_window") +
                    " is set but no pattern says which layers use it: every layer is counted at the full context (an upper bound)");
    return {};
  }
  std::vector<bool> out(k.layers);
  for (uint32_t il = 0; il < k.layers; ++il) out[il] = *period == 0 || il % *period < *period - 1;
  return out;
}

}  // namespace

std::string_view kv_cache_type_name(KvCacheType type) noexcept { return type == KvCacheType::kQ8_0 ? "q8_0" : "f16"; }

KvCacheType parse_kv_cache_type(std::string_view text) {
  std::string t(text);
  for (auto& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (t == "f16") return KvCacheType::kF16;
  if (t == "q8_0") return KvCacheType::kQ8_0;
  throw Error(ErrorKind::kUsage, "unknown KV cache type \"" + std::string(text) + "\" (use f16 or q8_0)");
}

uint64_t kv_row_bytes(KvCacheType type, uint64_t elements) {
  if (type == KvCacheType::kF16) return plan_detail::checked_mul(elements, 2);
  if (elements % 32 != 0) {
    throw_invalid("a q8_0 KV cache needs rows whose length is a multiple of 32; this model has a row of " +
                  std::to_string(elements) + " values (use --kv-type f16)");
  }
  return elements / 32 * 34;
}

std::string_view layer_cache_kind_name(LayerCacheKind kind) noexcept {
  switch (kind) {
    case LayerCacheKind::kAttention: return "attention";
    case LayerCacheKind::kSlidingWindow: return "sliding-window";
    case LayerCacheKind::kMla: return "mla";
    case LayerCacheKind::kRecurrent: return "recurrent";
    case LayerCacheKind::kNone: return "none";
  }
  return "attention";
}

CacheShape read_cache_shape(const GgufFile& f, KvCacheType kv_type) {
  CacheShape shape;
  shape.kv_type = kv_type;
  shape.architecture = std::string(f.architecture());
  if (shape.architecture.empty()) throw_invalid(f.name() + ": no general.architecture: cannot read the cache shape");
  Keys k{f, shape.architecture, 0};
  const auto blocks = k.scalar("block_count");
  if (!blocks || *blocks == 0 || *blocks > (1u << 20)) k.bad("block_count", "is missing or out of range");
  k.layers = static_cast<uint32_t>(*blocks);
  auto& notes = shape.notes;

  const bool all_recurrent = recurrent_architecture(shape.architecture);
  // Recurrent state, f32, one sequence (llama_hparams::n_embd_r / n_embd_s).
  const uint64_t n_embd = k.scalar("embedding_length").value_or(0);
  const uint64_t d_conv = k.scalar("ssm.conv_kernel").value_or(0);
  const uint64_t d_inner = k.scalar("ssm.inner_size").value_or(0);
  const uint64_t d_state = k.scalar("ssm.state_size").value_or(0);
  const uint64_t n_group = k.scalar("ssm.group_count").value_or(0);
  const uint64_t wkv_head = k.scalar("wkv.head_size").value_or(0);
  const uint64_t token_shift = k.scalar("token_shift_count").value_or(2);
  const uint64_t shortconv = k.scalar("shortconv.l_cache").value_or(0);
  const bool has_recurrent_keys = d_state != 0 || d_conv != 0 || wkv_head != 0 || shortconv != 0;
  uint64_t state_elements = 0;
  if (wkv_head != 0) {
    state_elements = add(mul(token_shift, n_embd), mul(n_embd, wkv_head));
  } else {
    const uint64_t r = shortconv != 0 ? mul(n_embd, shortconv - 1)
                                      : mul(d_conv > 0 ? d_conv - 1 : 0, add(d_inner, mul(2, mul(n_group, d_state))));
    state_elements = add(r, mul(d_state, d_inner));
  }
  const uint64_t state_bytes = mul(state_elements, 4);
  // qwen3next-style hybrids: every full_attention_interval-th layer attends.
  const auto full_interval = k.scalar("full_attention_interval");

  std::vector<uint64_t> heads, heads_kv;
  uint64_t head_k = 0, head_v = 0;
  if (!all_recurrent) {
    if (n_embd == 0) k.bad("embedding_length", "is missing or zero");
    const auto h = k.per_layer("attention.head_count");
    if (!h) k.bad("attention.head_count", "is missing");
    heads = *h;
    heads_kv = k.per_layer("attention.head_count_kv").value_or(heads);
    if (!k.value("attention.head_count_kv")) notes.push_back("no attention.head_count_kv: every head has its own K and V (head_count)");
    const auto kl = k.scalar("attention.key_length");
    const auto vl = k.scalar("attention.value_length");
    if (!kl || !vl) {
      if (heads[0] == 0) k.bad("attention.head_count", "is zero for layer 0 (key_length cannot be derived)");
      if (!kl) notes.push_back("no attention.key_length: embedding_length / head_count = " + std::to_string(n_embd / heads[0]));
      if (!vl) notes.push_back("no attention.value_length: embedding_length / head_count = " + std::to_string(n_embd / heads[0]));
    }
    head_k = kl.value_or(heads[0] != 0 ? n_embd / heads[0] : 0);
    head_v = vl.value_or(heads[0] != 0 ? n_embd / heads[0] : 0);
  }

  // MLA (deepseek2-style): llama.cpp caches one latent row, kv_lora_rank +
  // the RoPE dimensions, and reads V from it (no V cache).
  const auto k_mla = k.scalar("attention.key_length_mla");
  const auto lora = k.scalar("attention.kv_lora_rank");
  const bool mla = k_mla && *k_mla != 0 && lora && *lora != 0;
  const uint64_t rope = k.scalar("rope.dimension_count").value_or(0);
  if (mla) notes.push_back("multi-head latent attention: one K row of kv_lora_rank + rope dimensions per token, no V");

  const uint64_t window = k.scalar("attention.sliding_window").value_or(0);
  const std::vector<bool> swa = window != 0 && !all_recurrent ? window_layers(k, notes) : std::vector<bool>{};

  auto row = [&](uint32_t il, uint64_t elements) {
    try {
      return kv_row_bytes(kv_type, elements);
    } catch (const Error& e) {
      throw_invalid(f.name() + ": layer " + std::to_string(il) + ": " + e.what());
    }
  };
  for (uint32_t il = 0; il < k.layers; ++il) {
    LayerCacheShape l;
    l.layer = il;
    const bool recurrent = all_recurrent || (full_interval && *full_interval != 0 && (il + 1) % *full_interval != 0) ||
                           (!all_recurrent && heads_kv[il] == 0 && has_recurrent_keys);
    if (recurrent) {
      if (state_elements == 0) {
        throw_invalid(f.name() + ": layer " + std::to_string(il) +
                      " is recurrent but the model declares no state size (" + k.key("ssm.state_size") + ", " +
                      k.key("wkv.head_size") + ")");
      }
      l.kind = LayerCacheKind::kRecurrent;
      l.state_bytes = state_bytes;
    } else if (heads_kv[il] == 0) {
      l.kind = LayerCacheKind::kNone;
    } else if (mla) {
      l.kind = LayerCacheKind::kMla;
      l.k_elements = add(*lora, rope);
      l.kv_bytes_per_token = row(il, l.k_elements);
    } else {
      l.kind = !swa.empty() && swa[il] ? LayerCacheKind::kSlidingWindow : LayerCacheKind::kAttention;
      l.window = l.kind == LayerCacheKind::kSlidingWindow ? window : 0;
      l.k_elements = mul(head_k, heads_kv[il]);
      l.v_elements = mul(head_v, heads_kv[il]);
      l.kv_bytes_per_token = add(row(il, l.k_elements), row(il, l.v_elements));
    }
    shape.layers.push_back(l);
  }
  if (full_interval && *full_interval != 0) {
    notes.push_back("hybrid model: every " + std::to_string(*full_interval) + "th layer attends, the others are recurrent");
  }
  const bool any_recurrent = std::any_of(shape.layers.begin(), shape.layers.end(),
                                         [](const auto& l) { return l.kind == LayerCacheKind::kRecurrent; });
  if (any_recurrent) {
    notes.push_back("recurrent layers hold a fixed f32 state of " + std::to_string(state_bytes) +
                    " bytes per sequence (one sequence counted), whatever the context");
  }
  return shape;
}

uint64_t layer_cache_bytes(const LayerCacheShape& l, uint64_t context) {
  switch (l.kind) {
    case LayerCacheKind::kRecurrent: return l.state_bytes;
    case LayerCacheKind::kNone: return 0;
    case LayerCacheKind::kSlidingWindow: return mul(l.kv_bytes_per_token, std::min(context, l.window));
    default: return mul(l.kv_bytes_per_token, context);
  }
}

}  // namespace skippy
