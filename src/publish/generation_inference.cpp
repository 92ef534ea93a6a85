#include "publish/generation_inference.h"

#include <algorithm>
#include <array>
#include <set>
#include <string_view>

#include "skippy/error.h"

namespace skippy::detail {
namespace {

// ------------------------------------------------------------ tensor sets

// Native MTP prediction tensors every blk.N.nextn.* layer must carry.
constexpr std::array<std::string_view, 3> kNextnRequired = {
    "nextn.eh_proj.weight", "nextn.enorm.weight", "nextn.hnorm.weight"};

// GLM-DSA, per layer (GLM-DSA.md "Tensors, per layer").
constexpr std::array<std::string_view, 10> kDsaAttention = {
    "attn_norm.weight", "attn_q_a_norm.weight", "attn_kv_a_norm.weight", "attn_q_a.weight",
    "attn_q_b.weight",  "attn_kv_a_mqa.weight", "attn_k_b.weight",       "attn_v_b.weight",
    "attn_output.weight", "ffn_norm.weight"};
constexpr std::string_view kDsaStaleKvB = "attn_kv_b.weight";
constexpr std::array<std::string_view, 3> kDsaDenseFfn = {"ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"};
constexpr std::array<std::string_view, 7> kDsaMoeFfn = {
    "ffn_gate_inp.weight",   "ffn_gate_exps.weight", "ffn_up_exps.weight",  "ffn_down_exps.weight",
    "ffn_gate_shexp.weight", "ffn_up_shexp.weight",  "ffn_down_shexp.weight"};
constexpr std::array<std::string_view, 5> kDsaIndexer = {
    "indexer.k_norm.weight", "indexer.k_norm.bias", "indexer.proj.weight", "indexer.attn_k.weight",
    "indexer.attn_q_b.weight"};
constexpr std::array<std::string_view, 2> kDsaGlobals = {"token_embd.weight", "output_norm.weight"};

// GLM-DSA metadata (GLM-DSA.md "Metadata"), without the "glm-dsa." prefix.
enum class KeyKind { kUint, kFloat, kBool };
struct RequiredKey {
  std::string_view name;
  KeyKind kind;
};
constexpr std::array<RequiredKey, 22> kDsaKeys = {{
    {"context_length", KeyKind::kUint},
    {"embedding_length", KeyKind::kUint},
    {"block_count", KeyKind::kUint},
    {"feed_forward_length", KeyKind::kUint},
    {"attention.head_count", KeyKind::kUint},
    {"attention.head_count_kv", KeyKind::kUint},
    {"attention.key_length", KeyKind::kUint},
    {"attention.value_length", KeyKind::kUint},
    {"attention.q_lora_rank", KeyKind::kUint},
    {"attention.kv_lora_rank", KeyKind::kUint},
    {"rope.dimension_count", KeyKind::kUint},
    {"expert_count", KeyKind::kUint},
    {"expert_used_count", KeyKind::kUint},
    {"expert_shared_count", KeyKind::kUint},
    {"expert_feed_forward_length", KeyKind::kUint},
    {"leading_dense_block_count", KeyKind::kUint},
    {"attention.indexer.head_count", KeyKind::kUint},
    {"attention.indexer.key_length", KeyKind::kUint},
    {"attention.indexer.top_k", KeyKind::kUint},
    {"attention.layer_norm_rms_epsilon", KeyKind::kFloat},
    {"expert_weights_scale", KeyKind::kFloat},
    {"expert_weights_norm", KeyKind::kBool},
}};

constexpr std::string_view kDsaArch = "glm-dsa";
constexpr std::string_view kDsaProfile = "glm-dsa-v1";
constexpr uint64_t kShortPrefillMaxTokens = 2048;
constexpr uint64_t kCompactFlashMinKv = 1;
constexpr uint64_t kDenseMaskMaxBytes = 268435456;  // 256 MiB
// How many names a note lists before "and N more".
constexpr size_t kNoteMaxNames = 12;

// ---------------------------------------------------------------- helpers

std::string layer_tensor(uint32_t layer, std::string_view suffix) {
  return "blk." + std::to_string(layer) + "." + std::string(suffix);
}

bool has_tensor(const ModelSource& model, uint32_t layer, std::string_view suffix) {
  return model.find_tensor(layer_tensor(layer, suffix)) != nullptr;
}

// "a, b and c"; more than `max` names end in "(and N more)".
std::string join_names(const std::vector<std::string>& names, size_t max = kNoteMaxNames) {
  std::string out;
  const size_t shown = std::min(names.size(), max);
  for (size_t i = 0; i < shown; ++i) {
    if (i > 0) out += (i + 1 == shown && shown == names.size()) ? " and " : ", ";
    out += names[i];
  }
  if (names.size() > shown) out += " (and " + std::to_string(names.size() - shown) + " more)";
  return out;
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += sep;
    out += parts[i];
  }
  return out;
}

std::string layer_list(const std::vector<uint32_t>& layers) {
  std::string out = layers.size() == 1 ? "layer " : "layers ";
  for (size_t i = 0; i < layers.size(); ++i) {
    if (i > 0) out += ", ";
    out += std::to_string(layers[i]);
  }
  return out;
}

// The part of a layer tensor's name after "blk.N.".
std::string_view layer_suffix(std::string_view name) {
  const auto dot = name.find('.', 4);  // after "blk."
  return dot == std::string_view::npos ? std::string_view{} : name.substr(dot + 1);
}

std::string kind_name(KeyKind k) {
  switch (k) {
    case KeyKind::kUint: return "an unsigned integer";
    case KeyKind::kFloat: return "a float";
    case KeyKind::kBool: return "a bool";
  }
  return "?";
}

bool value_has_kind(const GgufValue& v, KeyKind k) {
  switch (k) {
    case KeyKind::kUint: return v.as_uint().has_value();
    case KeyKind::kFloat: return v.as_float().has_value();
    case KeyKind::kBool: return v.as_bool().has_value();
  }
  return false;
}

// ------------------------------------------------------------- native MTP

struct MtpFinding {
  bool declare = false;
  std::vector<uint32_t> layers;  // every layer that carries blk.N.nextn.*, ascending
  std::string note;
};

MtpFinding find_native_mtp(const ModelSource& model, uint32_t layer_count) {
  MtpFinding f;
  std::set<uint32_t> layers;
  for (const auto& t : model.tensors()) {
    if (t.placement.role == TensorRole::kLayer && layer_suffix(t.info->name).starts_with("nextn.")) {
      layers.insert(t.placement.layer);
    }
  }
  f.layers.assign(layers.begin(), layers.end());

  const std::string key = std::string(model.architecture()) + ".nextn_predict_layers";
  const GgufKv* kv = model.primary().find_kv(key);
  const std::optional<uint64_t> declared = kv ? kv->value.as_uint() : std::nullopt;
  constexpr std::string_view kNot = ": native MTP not declared";

  if (f.layers.empty()) {
    if (declared && *declared > 0) {
      f.note = key + " is " + std::to_string(*declared) +
               " but no layer carries blk.N.nextn.* tensors: no speculative decoding declared";
    } else {
      f.note = "no NextN/MTP tensors: no speculative decoding declared";
    }
    return f;
  }
  if (kv && !declared) {
    f.note = "nextn tensors found in " + layer_list(f.layers) + " but " + key + " is not an unsigned integer (type " +
             std::string(gguf_type_name(kv->value.type())) + ")" + std::string(kNot);
    return f;
  }
  if (f.layers.back() >= layer_count) {
    f.note = "nextn tensors found in layer " + std::to_string(f.layers.back()) + ", beyond the " +
             std::to_string(layer_count) + " package layers" + std::string(kNot);
    return f;
  }
  std::vector<std::string> problems;
  for (const uint32_t layer : f.layers) {
    std::vector<std::string> missing;
    for (const auto s : kNextnRequired) {
      if (!has_tensor(model, layer, s)) missing.emplace_back(s);
    }
    if (!missing.empty()) {
      problems.push_back("nextn tensors found in layer " + std::to_string(layer) + " but " + join_names(missing) +
                         (missing.size() == 1 ? " is" : " are") + " missing");
    }
  }
  if (!problems.empty()) {
    f.note = join(problems, "; ") + std::string(kNot);
    return f;
  }
  std::string evidence = "; " + key + " absent, nothing to cross-check";
  if (declared) {
    const uint64_t n = *declared;
    bool last_blocks = n == f.layers.size() && n <= layer_count;
    for (size_t i = 0; last_blocks && i < f.layers.size(); ++i) {
      last_blocks = f.layers[i] == layer_count - n + i;
    }
    if (!last_blocks) {
      f.note = "nextn tensors found in " + layer_list(f.layers) + " but " + key + " is " + std::to_string(n) +
               " (MTP layers must be the last " + std::to_string(n) + " of " + std::to_string(layer_count) +
               " blocks)" + std::string(kNot);
      return f;
    }
    evidence = "; " + key + " = " + std::to_string(n) + " agrees";
  }
  f.declare = true;
  f.note = "native MTP declared: proposer \"mtp\" (native-mtp, prediction_depth 1) and strategy \"mtp\" "
           "(fixed window 1) on " +
           layer_list(f.layers) + ", carrying nextn.eh_proj, nextn.enorm and nextn.hnorm" + evidence;
  return f;
}

// The spec asks new packages to name the native MTP source under
// `proposers` and reference it from the strategy, so an N-gram sidecar can
// be added later without touching the MTP source.
SpeculativeDecoding mtp_strategy(const std::vector<uint32_t>& layers) {
  Proposer p;
  p.type = std::string(kNativeMtp);
  p.prediction_depth = 1;
  p.layer_indices = layers;
  Strategy s;
  s.type = std::string(kNativeMtp);
  s.proposer = "mtp";
  WindowPolicy w;
  w.default_mode = "fixed";
  w.initial_window = 1;
  w.min_window = 1;
  w.max_window = 1;
  w.pipeline_depth = 1;
  s.window_policy = std::move(w);
  SpeculativeDecoding sd;
  sd.default_strategy = "mtp";
  sd.proposers.emplace("mtp", std::move(p));
  sd.strategies.emplace("mtp", std::move(s));
  return sd;
}

// ---------------------------------------------------------------- GLM-DSA

enum class Role { kFull, kShared };

struct DsaFinding {
  bool declare = false;
  std::vector<std::string> notes;
};

// Every check of GLM-DSA.md. Contradictions throw; anything missing or
// disqualifying leaves `declare` false with a note naming it.
DsaFinding check_glm_dsa(const ModelSource& model, uint32_t layer_count) {
  const GgufFile& meta = model.primary();
  const std::string& file = meta.name();
  const std::string prefix = std::string(kDsaArch) + ".";
  auto key_of = [&](std::string_view k) { return prefix + std::string(k); };

  DsaFinding out;
  std::vector<std::string> missing_keys;     // "glm-dsa.x" or "glm-dsa.x (type ..., expected ...)"
  std::vector<std::string> missing_tensors;  // full tensor names
  std::vector<std::string> problems;         // anything else that disqualifies

  // Metadata.
  for (const auto& rk : kDsaKeys) {
    const std::string k = key_of(rk.name);
    const GgufKv* kv = meta.find_kv(k);
    if (!kv) {
      missing_keys.push_back(k);
    } else if (!value_has_kind(kv->value, rk.kind)) {
      problems.push_back(k + " is " + std::string(gguf_type_name(kv->value.type())) + ", expected " +
                         kind_name(rk.kind));
    }
  }
  // Optional: MTP layer count (at the end of the block range).
  uint32_t mtp_count = 0;
  if (const GgufKv* kv = meta.find_kv(key_of("nextn_predict_layers"))) {
    const auto n = kv->value.as_uint();
    if (!n) {
      problems.push_back(key_of("nextn_predict_layers") + " is not an unsigned integer");
    } else if (*n >= layer_count) {
      problems.push_back(key_of("nextn_predict_layers") + " = " + std::to_string(*n) + " leaves no decoder layer of " +
                         std::to_string(layer_count));
    } else {
      mtp_count = static_cast<uint32_t>(*n);
    }
  }
  const uint32_t decoder_count = layer_count - mtp_count;
  std::optional<uint32_t> dense_count;
  if (const auto l = meta.get_uint(key_of("leading_dense_block_count"))) {
    if (*l > decoder_count) {
      problems.push_back(key_of("leading_dense_block_count") + " = " + std::to_string(*l) + " exceeds the " +
                         std::to_string(decoder_count) + " decoder layers");
    } else {
      dense_count = static_cast<uint32_t>(*l);
    }
  }

  // Indexer groups: all five or none, in every layer (a partial group is a
  // contradiction wherever it is).
  std::vector<bool> has_group(layer_count, false);
  for (uint32_t l = 0; l < layer_count; ++l) {
    std::vector<std::string> present, absent;
    for (const auto s : kDsaIndexer) {
      (has_tensor(model, l, s) ? present : absent).push_back(layer_tensor(l, s));
    }
    if (!present.empty() && !absent.empty()) {
      throw_invalid(file + ": layer " + std::to_string(l) + " has a partial indexer group: " + join_names(absent) +
                    (absent.size() == 1 ? " is" : " are") + " missing beside " + join_names(present) +
                    " (GLM-DSA: all five indexer tensors or none)");
    }
    has_group[l] = absent.empty();
  }

  // indexer.types: when present, every value must be full or shared.
  const std::string types_key = key_of("attention.indexer.types");
  std::optional<std::vector<std::string_view>> types;
  if (const GgufKv* kv = meta.find_kv(types_key)) {
    types = kv->value.as_string_array();
    if (!types) throw_invalid(file + ": " + types_key + " is not an array of strings");
    for (size_t i = 0; i < types->size(); ++i) {
      const auto v = (*types)[i];
      if (v != "full" && v != "shared") {
        throw_invalid(file + ": " + types_key + "[" + std::to_string(i) + "] (layer " + std::to_string(i) + ") is \"" +
                      std::string(v) + "\", expected \"full\" or \"shared\"");
      }
    }
  }

  // IndexShare roles for the decoder layers.
  std::vector<Role> roles(decoder_count, Role::kShared);
  std::string role_source;
  std::string role_warning;
  const auto freq = meta.get_uint(key_of("attention.indexer.top_k_frequency"));
  if (types && types->size() == decoder_count) {
    for (uint32_t l = 0; l < decoder_count; ++l) roles[l] = (*types)[l] == "full" ? Role::kFull : Role::kShared;
    role_source = types_key;
  } else if (freq && *freq > 0) {
    const std::string offset_key = key_of("attention.indexer.skip_top_k_offset");
    const uint64_t offset = meta.get_uint(offset_key).value_or(0);
    for (uint32_t l = 0; l < decoder_count; ++l) {
      roles[l] = (l < offset || (l - offset + 1) % *freq == 0) ? Role::kFull : Role::kShared;
    }
    role_source = key_of("attention.indexer.top_k_frequency") + " = " + std::to_string(*freq) + ", " +
                  (meta.find_kv(offset_key) ? offset_key + " = " + std::to_string(offset)
                                            : offset_key + " absent, taken as 0");
    if (types) {
      role_source += " (" + types_key + " has " + std::to_string(types->size()) + " entries for " +
                     std::to_string(decoder_count) + " decoder layers, not used)";
    }
  } else {
    for (uint32_t l = 0; l < decoder_count; ++l) roles[l] = has_group[l] ? Role::kFull : Role::kShared;
    role_source = "indexer tensor presence";
    role_warning = "warning: glm-dsa IndexShare roles inferred from indexer tensor presence: " +
                   (types ? types_key + " has " + std::to_string(types->size()) + " entries for " +
                                std::to_string(decoder_count) + " decoder layers"
                          : "no " + types_key) +
                   " and no positive " + key_of("attention.indexer.top_k_frequency");
  }
  uint32_t full = 0;
  for (uint32_t l = 0; l < decoder_count; ++l) {
    if (roles[l] == Role::kFull) {
      ++full;
      if (!has_group[l]) {
        throw_invalid(file + ": layer " + std::to_string(l) + " is a Full IndexShare layer (from " + role_source +
                      ") but has no indexer group (" + layer_tensor(l, kDsaIndexer[0]) + " and the rest are missing)");
      }
    } else if (has_group[l]) {
      throw_invalid(file + ": layer " + std::to_string(l) + " is a Shared IndexShare layer (from " + role_source +
                    ") but carries an indexer group (" + layer_tensor(l, kDsaIndexer[0]) + ", ...)");
    }
  }
  if (decoder_count > 0 && roles[0] == Role::kShared) {
    problems.push_back("decoder layer 0 is Shared but no Full layer precedes it to share top-k from");
  }
  if (!role_warning.empty()) out.notes.push_back(role_warning);

  // Tensors, per layer.
  auto require = [&](uint32_t l, std::string_view s) {
    if (!has_tensor(model, l, s)) missing_tensors.push_back(layer_tensor(l, s));
  };
  std::vector<std::string> stale;
  std::vector<std::string> misplaced_nextn;
  for (uint32_t l = 0; l < layer_count; ++l) {
    const bool mtp = l >= decoder_count;
    for (const auto s : kDsaAttention) require(l, s);
    if (has_tensor(model, l, kDsaStaleKvB)) stale.push_back(layer_tensor(l, kDsaStaleKvB));
    if (mtp || (dense_count && l >= *dense_count)) {
      for (const auto s : kDsaMoeFfn) require(l, s);
    } else if (dense_count) {
      for (const auto s : kDsaDenseFfn) require(l, s);
    }
    if (mtp) {
      if (!has_group[l]) {
        for (const auto s : kDsaIndexer) missing_tensors.push_back(layer_tensor(l, s));
      }
      for (const auto s : kNextnRequired) require(l, s);
    } else {
      for (const auto s : kNextnRequired) {
        if (has_tensor(model, l, s)) misplaced_nextn.push_back(layer_tensor(l, s));
      }
    }
  }
  for (const auto g : kDsaGlobals) {
    if (!model.find_tensor(g)) missing_tensors.emplace_back(g);
  }
  if (!stale.empty()) {
    problems.push_back("stale unsplit " + join_names(stale) + " (sparse attention needs the split attn_k_b/attn_v_b form)");
  }
  if (!misplaced_nextn.empty()) {
    problems.push_back(join_names(misplaced_nextn) + " in decoder layers, outside the last " + std::to_string(mtp_count) +
                       " (" + key_of("nextn_predict_layers") + ") blocks");
  }

  if (!missing_keys.empty() || !missing_tensors.empty() || !problems.empty()) {
    std::vector<std::string> why;
    if (!missing_keys.empty()) why.push_back("missing metadata " + join_names(missing_keys));
    if (!missing_tensors.empty()) why.push_back("missing tensors " + join_names(missing_tensors));
    for (auto& p : problems) why.push_back(std::move(p));
    out.notes.push_back(std::string(kDsaProfile) + " policy not declared: " + join(why, "; "));
    return out;
  }

  const uint32_t dense = dense_count.value_or(0);
  std::string note = std::string(kDsaProfile) +
                     " policy declared (decode compact-flash, short_prefill dense, long_prefill sparse-chunked, "
                     "verify auto, indexshare required, experimental evidence-gated; thresholds "
                     "short_prefill_max_tokens 2048, compact_flash_min_kv 1, dense_mask_max_bytes 268435456) from: " +
                     std::to_string(kDsaKeys.size()) + " required glm-dsa metadata keys; split-K/V MLA attention in all " +
                     std::to_string(layer_count) + " layers; " + std::to_string(dense) + " dense + " +
                     std::to_string(decoder_count - dense) + " MoE decoder layers; IndexShare roles from " + role_source +
                     " (" + std::to_string(full) + " Full, " + std::to_string(decoder_count - full) + " Shared)";
  if (mtp_count > 0) {
    note += "; " + std::to_string(mtp_count) + " MTP layer(s) with attention, MoE, indexer and nextn tensors";
  }
  note += "; token_embd and output_norm present";
  out.notes.push_back(std::move(note));
  out.declare = true;
  return out;
}

GenerationPolicy glm_dsa_policy() {
  GenerationPolicy p;
  p.profile = std::string(kDsaProfile);
  p.decode = "compact-flash";
  p.short_prefill = "dense";
  p.long_prefill = "sparse-chunked";
  p.verify = "auto";
  p.indexshare = "required";
  p.experimental = {{"selected_row_flash", "evidence-gated"},
                    {"moe_weighted_down", "evidence-gated"},
                    {"moe_merged_shared_gate_up", "evidence-gated"}};
  return p;
}

GenerationThresholds glm_dsa_thresholds() {
  GenerationThresholds t;
  t.short_prefill_max_tokens = kShortPrefillMaxTokens;
  t.compact_flash_min_kv = kCompactFlashMinKv;
  t.dense_mask_max_bytes = kDenseMaskMaxBytes;
  return t;
}

}  // namespace

GenerationInference infer_generation(const ModelSource& model, uint32_t layer_count) {
  GenerationInference out;
  GenerationDefaults gen;
  bool any = false;

  const MtpFinding mtp = find_native_mtp(model, layer_count);
  (mtp.declare || !mtp.layers.empty() ? out.notes : out.details).push_back(mtp.note);
  if (mtp.declare) {
    gen.speculative_decoding = mtp_strategy(mtp.layers);
    any = true;
  }

  const std::string_view arch = model.architecture();
  if (arch == kDsaArch) {
    DsaFinding dsa = check_glm_dsa(model, layer_count);
    for (auto& n : dsa.notes) out.notes.push_back(std::move(n));
    if (dsa.declare) {
      gen.policy = glm_dsa_policy();
      gen.thresholds = glm_dsa_thresholds();
      any = true;
    }
  } else {
    out.details.push_back("no execution policy declared: no known profile for architecture \"" + std::string(arch) +
                          "\" (" + std::string(kDsaProfile) + " is for " + std::string(kDsaArch) + ")");
  }

  if (any) out.generation = std::move(gen);
  return out;
}

std::optional<std::string> profile_evidence_problem(const ModelSource& model, uint32_t layer_count,
                                                    std::string_view profile) {
  if (profile != kDsaProfile) return std::nullopt;
  const std::string head = "generation.policy.profile: \"" + std::string(kDsaProfile) + "\" declared without ";
  if (model.architecture() != kDsaArch) {
    return head + "its model evidence: the source's architecture is \"" + std::string(model.architecture()) +
           "\", the profile is for \"" + std::string(kDsaArch) + "\"";
  }
  try {
    const DsaFinding dsa = check_glm_dsa(model, layer_count);
    if (dsa.declare) return std::nullopt;
    return head + "its model evidence: " + join(dsa.notes, "; ");
  } catch (const Error& e) {
    return head + "a consistent model: " + e.what();
  }
}

}  // namespace skippy::detail
