// What generation defaults the writer infers from a source model: native MTP
// from blk.N.nextn.* tensors, the glm-dsa-v1 policy only after every check of
// GLM-DSA.md. Real fixtures for MTP / no MTP; tiny synthetic GLM-DSA models
// (one-float tensors) for each policy rule.
#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "publish/generation_inference.h"
#include "skippy/error.h"
#include "util/file.h"
#include "gguf/gguf_writer.h"
#include "skippy/manifest.h"
#include "skippy/model_source.h"
#include "test_util.h"

namespace skippy {
namespace {

using detail::GenerationInference;
using detail::infer_generation;
using test::data_path;
using test::TempDir;

GenerationInference infer(const ModelSource& m) { return infer_generation(m, m.layer_count()); }

// Notes and details alike (details: why nothing was declared).
bool any_note_contains(const GenerationInference& r, const std::string& text) {
  for (const auto* list : {&r.notes, &r.details}) {
    for (const auto& n : *list) {
      if (n.find(text) != std::string::npos) return true;
    }
  }
  return false;
}

std::string all_notes(const GenerationInference& r) {
  std::string s;
  for (const auto& n : r.notes) s += n + "\n";
  for (const auto& n : r.details) s += "(detail) " + n + "\n";
  return s;
}

// The rules serialize_manifest applies to a native-mtp strategy and its window.
void expect_valid_native_mtp(const GenerationDefaults& g, uint32_t layer_count, std::vector<uint32_t> layers) {
  ASSERT_TRUE(g.speculative_decoding);
  const auto& sd = *g.speculative_decoding;
  EXPECT_EQ(sd.default_strategy, "mtp");
  // New packages name the native MTP source under proposers (spec:
  // "Speculative Decoding") and the strategy refers to it.
  ASSERT_EQ(sd.proposers.size(), 1u);
  const auto& p = sd.proposers.at("mtp");
  EXPECT_EQ(p.type, "native-mtp");
  EXPECT_EQ(p.prediction_depth, 1u);
  ASSERT_TRUE(p.layer_indices);
  EXPECT_EQ(*p.layer_indices, layers);
  for (const auto l : *p.layer_indices) EXPECT_LT(l, layer_count);
  ASSERT_EQ(sd.strategies.size(), 1u);
  const auto& s = sd.strategies.at("mtp");
  EXPECT_EQ(s.type, "native-mtp");
  EXPECT_EQ(s.proposer, "mtp");
  EXPECT_FALSE(s.prediction_depth) << "not repeated inline";
  EXPECT_FALSE(s.layer_indices) << "not repeated inline";
  ASSERT_TRUE(s.window_policy);
  EXPECT_EQ(s.window_policy->default_mode, "fixed");
  EXPECT_EQ(s.window_policy->initial_window, 1u);
  EXPECT_EQ(s.window_policy->min_window, 1u);
  EXPECT_EQ(s.window_policy->max_window, 1u);
  EXPECT_EQ(s.window_policy->pipeline_depth, 1u);
}

void expect_glm_dsa_v1(const GenerationDefaults& g) {
  ASSERT_TRUE(g.policy);
  const auto& p = *g.policy;
  EXPECT_EQ(p.profile, "glm-dsa-v1");
  EXPECT_EQ(p.decode, "compact-flash");
  EXPECT_EQ(p.short_prefill, "dense");
  EXPECT_EQ(p.long_prefill, "sparse-chunked");
  EXPECT_EQ(p.verify, "auto");
  EXPECT_EQ(p.indexshare, "required");
  EXPECT_EQ(p.experimental, (std::map<std::string, std::string>{{"selected_row_flash", "evidence-gated"},
                                                                 {"moe_weighted_down", "evidence-gated"},
                                                                 {"moe_merged_shared_gate_up", "evidence-gated"}}));
  EXPECT_TRUE(p.extra.empty());
  ASSERT_TRUE(g.thresholds);
  EXPECT_EQ(g.thresholds->short_prefill_max_tokens, 2048u);
  EXPECT_EQ(g.thresholds->compact_flash_min_kv, 1u);
  EXPECT_EQ(g.thresholds->dense_mask_max_bytes, 268435456u);
}


// A minimal manifest around `g`, serialized and parsed back: the inferred
// defaults must pass the manifest's own validation unchanged.
void expect_manifest_round_trip(const GenerationDefaults& g, uint32_t layer_count) {
  const std::string sha(64, 'a');
  auto artifact = [&](std::string path, uint64_t tensors) {
    ArtifactEntry a;
    a.path = std::move(path);
    a.tensor_count = tensors;
    a.tensor_bytes = tensors * 4;
    a.artifact_bytes = 64 + tensors * 4;
    a.sha256 = sha;
    return a;
  };
  PackageManifest m;
  m.model_id = "test/generation-inference";
  m.source_model.sha256 = sha;
  m.source_model.repo = "test/source";
  m.source_model.revision = "main";
  m.source_model.primary_file = "model.gguf";
  m.source_model.canonical_ref = "test/source@main/model.gguf";
  m.source_model.files = {SourceFile{"model.gguf", 1024, sha}};
  m.layer_count = layer_count;
  m.generation = g;
  m.shared.metadata = artifact("shared/metadata.gguf", 0);
  m.shared.embeddings = artifact("shared/embeddings.gguf", 1);
  m.shared.output = artifact("shared/output.gguf", 1);
  for (uint32_t l = 0; l < layer_count; ++l) {
    LayerEntry e;
    static_cast<ArtifactEntry&>(e) = artifact("layers/layer-0000" + std::to_string(l) + ".gguf", 1);
    e.layer_index = l;
    m.layers.push_back(e);
  }
  m.skippy_abi_version = format_abi_version(kRuntimeAbiVersion);
  std::string text;
  ASSERT_NO_THROW(text = serialize_manifest(m));
  const auto back = parse_manifest(text, "model-package.json");
  ASSERT_TRUE(back.generation);
  EXPECT_EQ(*back.generation, g);
  if (g.policy) {
    EXPECT_TRUE(unsupported_policy_values(*g.policy).empty());
  }
  if (g.speculative_decoding) {
    EXPECT_FALSE(unsupported_default_strategy(*g.speculative_decoding));
  }
}

// ------------------------------------------------------------ fixtures

TEST(GenerationInferenceFixtures, Glm4moeNextnLayer3DeclaresNativeMtp) {
  const auto m = ModelSource::open(data_path("glm4moe-mtp-tiny.gguf"));
  const auto r = infer(m);
  ASSERT_TRUE(r.generation) << all_notes(r);
  expect_valid_native_mtp(*r.generation, 4, {3});
  EXPECT_FALSE(r.generation->policy) << "glm4moe has no execution profile";
  EXPECT_FALSE(r.generation->thresholds);
  EXPECT_TRUE(any_note_contains(r, "native MTP declared")) << all_notes(r);
  EXPECT_TRUE(any_note_contains(r, "glm4moe.nextn_predict_layers = 1 agrees")) << all_notes(r);
  EXPECT_TRUE(any_note_contains(r, "no execution policy declared")) << all_notes(r);
  EXPECT_EQ(r.notes.size(), 1u) << "one line per decision";
  EXPECT_EQ(r.details, std::vector<std::string>{r.details.at(0)}) << "no profile for glm4moe: a detail, not a note";
  expect_manifest_round_trip(*r.generation, 4);
}

TEST(GenerationInferenceFixtures, ModelsWithoutNextnDeclareNothing) {
  for (const char* name : {"llama-tiny-f16.gguf", "qwen3moe-tiny.gguf", "llama-tiny-q4_0-00001-of-00003.gguf"}) {
    SCOPED_TRACE(name);
    const auto m = ModelSource::open(data_path(name));
    const auto r = infer(m);
    EXPECT_FALSE(r.generation);
    EXPECT_TRUE(any_note_contains(r, "no NextN/MTP tensors: no speculative decoding declared")) << all_notes(r);
    EXPECT_TRUE(r.notes.empty()) << "nothing worth a README line: " << all_notes(r);
  }
}

// ------------------------------------------------------ synthetic models

// Writes a GGUF whose every tensor is one F32 read from a shared scratch file.
class ModelBuilder {
 public:
  explicit ModelBuilder(const TempDir& dir) : dir_(dir) {
    const auto scratch = dir_ / "scratch.bin";
    test::write_file(scratch, std::vector<uint8_t>(32, 0));
    scratch_ = MappedFile::open(scratch);
  }
  GgufWriter& writer() { return w_; }
  void add_f32(std::string key, float v) {
    std::vector<uint8_t> b(4);
    std::memcpy(b.data(), &v, 4);
    w_.add_kv(std::move(key), GgufType::kFloat32, std::move(b));
  }
  void add_string_array(std::string key, const std::vector<std::string>& values) {
    w_.add_string_array(std::move(key), values);
  }
  void add_tensor(std::string name) { w_.add_tensor(std::move(name), 0, {1}, scratch_, 0); }
  ModelSource write(const std::string& file) {
    const auto path = dir_ / file;
    AtomicFile af(path);
    w_.write(af);
    af.commit();
    return ModelSource::open(path);
  }

 private:
  const TempDir& dir_;
  std::shared_ptr<const MappedFile> scratch_;
  GgufWriter w_;
};

std::string blk(uint32_t layer, const std::string& suffix) { return "blk." + std::to_string(layer) + "." + suffix; }

const std::vector<std::string> kAttention = {"attn_norm.weight",     "attn_q_a_norm.weight", "attn_kv_a_norm.weight",
                                             "attn_q_a.weight",      "attn_q_b.weight",      "attn_kv_a_mqa.weight",
                                             "attn_k_b.weight",      "attn_v_b.weight",      "attn_output.weight",
                                             "ffn_norm.weight"};
const std::vector<std::string> kDense = {"ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"};
const std::vector<std::string> kMoe = {"ffn_gate_inp.weight",   "ffn_gate_exps.weight", "ffn_up_exps.weight",
                                       "ffn_down_exps.weight",  "ffn_gate_shexp.weight", "ffn_up_shexp.weight",
                                       "ffn_down_shexp.weight"};
const std::vector<std::string> kIndexer = {"indexer.k_norm.weight", "indexer.k_norm.bias", "indexer.proj.weight",
                                           "indexer.attn_k.weight", "indexer.attn_q_b.weight"};
const std::vector<std::string> kNextn = {"nextn.eh_proj.weight", "nextn.enorm.weight", "nextn.hnorm.weight"};

// A tiny but complete GLM-DSA model: 4 decoder layers (layer 0 dense, 1..3
// MoE; layers 0 and 2 Full, 1 and 3 Shared) plus one MTP layer (4). Tests
// change one thing at a time.
struct DsaModel {
  uint32_t decoder_layers = 4;
  uint32_t mtp_layers = 1;
  uint32_t dense_layers = 1;
  std::set<uint32_t> indexed = {0, 2};  // decoder layers with an indexer group
  std::optional<std::vector<std::string>> types = std::vector<std::string>{"full", "shared", "full", "shared"};
  std::optional<uint32_t> top_k_frequency;
  std::optional<uint32_t> skip_top_k_offset;
  std::set<std::string> omit;      // tensor names or metadata keys left out
  std::vector<std::string> extra;  // tensors added

  ModelSource write(const TempDir& dir) const {
    ModelBuilder b(dir);
    auto& w = b.writer();
    const uint32_t blocks = decoder_layers + mtp_layers;
    auto u32 = [&](const std::string& k, uint32_t v) {
      if (!omit.contains("glm-dsa." + k)) w.add_u32("glm-dsa." + k, v);
    };
    w.add_string("general.architecture", "glm-dsa");
    u32("context_length", 4096);
    u32("embedding_length", 64);
    u32("block_count", blocks);
    u32("feed_forward_length", 128);
    u32("attention.head_count", 4);
    u32("attention.head_count_kv", 1);
    u32("attention.key_length", 48);
    u32("attention.value_length", 32);
    u32("attention.q_lora_rank", 32);
    u32("attention.kv_lora_rank", 16);
    u32("rope.dimension_count", 16);
    u32("expert_count", 8);
    u32("expert_used_count", 2);
    u32("expert_shared_count", 1);
    u32("expert_feed_forward_length", 32);
    u32("leading_dense_block_count", dense_layers);
    u32("attention.indexer.head_count", 2);
    u32("attention.indexer.key_length", 16);
    u32("attention.indexer.top_k", 8);
    if (!omit.contains("glm-dsa.attention.layer_norm_rms_epsilon")) {
      b.add_f32("glm-dsa.attention.layer_norm_rms_epsilon", 1e-5f);
    }
    if (!omit.contains("glm-dsa.expert_weights_scale")) b.add_f32("glm-dsa.expert_weights_scale", 2.5f);
    if (!omit.contains("glm-dsa.expert_weights_norm")) w.add_bool("glm-dsa.expert_weights_norm", true);
    if (mtp_layers > 0) u32("nextn_predict_layers", mtp_layers);
    if (types) b.add_string_array("glm-dsa.attention.indexer.types", *types);
    if (top_k_frequency) u32("attention.indexer.top_k_frequency", *top_k_frequency);
    if (skip_top_k_offset) u32("attention.indexer.skip_top_k_offset", *skip_top_k_offset);

    auto tensor = [&](const std::string& name) {
      if (!omit.contains(name)) b.add_tensor(name);
    };
    tensor("token_embd.weight");
    for (uint32_t l = 0; l < blocks; ++l) {
      const bool mtp = l >= decoder_layers;
      for (const auto& s : kAttention) tensor(blk(l, s));
      for (const auto& s : (!mtp && l < dense_layers) ? kDense : kMoe) tensor(blk(l, s));
      if (mtp || indexed.contains(l)) {
        for (const auto& s : kIndexer) tensor(blk(l, s));
      }
      if (mtp) {
        for (const auto& s : kNextn) tensor(blk(l, s));
        tensor(blk(l, "nextn.shared_head_norm.weight"));
      }
    }
    for (const auto& name : extra) b.add_tensor(name);
    tensor("output_norm.weight");
    tensor("output.weight");
    return b.write("glm-dsa-tiny.gguf");
  }
};

TEST(GenerationInferenceGlmDsa, CompleteModelWithIndexerTypesDeclaresPolicyAndMtp) {
  TempDir dir;
  const auto m = DsaModel{}.write(dir);
  const auto r = infer(m);
  ASSERT_TRUE(r.generation) << all_notes(r);
  expect_glm_dsa_v1(*r.generation);
  expect_valid_native_mtp(*r.generation, 5, {4});
  EXPECT_TRUE(r.generation->extra.empty());
  EXPECT_TRUE(any_note_contains(r, "glm-dsa-v1 policy declared")) << all_notes(r);
  EXPECT_TRUE(any_note_contains(r, "IndexShare roles from glm-dsa.attention.indexer.types (2 Full, 2 Shared)"))
      << all_notes(r);
  EXPECT_TRUE(any_note_contains(r, "1 dense + 3 MoE decoder layers")) << all_notes(r);
  EXPECT_FALSE(any_note_contains(r, "warning")) << all_notes(r);
  EXPECT_EQ(r.notes.size(), 2u) << all_notes(r);
  expect_manifest_round_trip(*r.generation, 5);
}

TEST(GenerationInferenceGlmDsa, NoMtpLayersDeclaresPolicyWithoutSpeculation) {
  TempDir dir;
  DsaModel d;
  d.mtp_layers = 0;
  const auto r = infer(d.write(dir));
  ASSERT_TRUE(r.generation) << all_notes(r);
  expect_glm_dsa_v1(*r.generation);
  EXPECT_FALSE(r.generation->speculative_decoding);
  EXPECT_TRUE(any_note_contains(r, "no NextN/MTP tensors")) << all_notes(r);
}

TEST(GenerationInferenceGlmDsa, RolesFromTopKFrequencyWhenNoIndexerTypes) {
  TempDir dir;
  DsaModel d;
  d.types.reset();
  d.top_k_frequency = 2;  // offset 1: layer 0 (< offset) and layer 2 ((2-1+1) % 2 == 0) are Full
  d.skip_top_k_offset = 1;
  const auto r = infer(d.write(dir));
  ASSERT_TRUE(r.generation) << all_notes(r);
  expect_glm_dsa_v1(*r.generation);
  EXPECT_TRUE(any_note_contains(r, "IndexShare roles from glm-dsa.attention.indexer.top_k_frequency = 2")) << all_notes(r);
  EXPECT_TRUE(any_note_contains(r, "(2 Full, 2 Shared)")) << all_notes(r);
}

TEST(GenerationInferenceGlmDsa, IndexerTypesOfWrongLengthFallBackToTopKFrequency) {
  TempDir dir;
  DsaModel d;
  d.types = std::vector<std::string>{"full", "full", "full", "full", "full"};  // counts the MTP layer too
  d.top_k_frequency = 2;
  d.skip_top_k_offset = 1;
  const auto r = infer(d.write(dir));
  ASSERT_TRUE(r.generation) << all_notes(r);
  expect_glm_dsa_v1(*r.generation);
  EXPECT_TRUE(any_note_contains(r, "has 5 entries for 4 decoder layers, not used")) << all_notes(r);
}

TEST(GenerationInferenceGlmDsa, TopKFrequencyRoleContradictingTensorsThrows) {
  TempDir dir;
  DsaModel d;
  d.types.reset();
  d.top_k_frequency = 1;  // every layer Full, but layers 1 and 3 have no group
  d.skip_top_k_offset = 0;
  const auto m = d.write(dir);
  try {
    infer(m);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_NE(std::string(e.what()).find("layer 1 is a Full IndexShare layer"), std::string::npos) << e.what();
  }
}

TEST(GenerationInferenceGlmDsa, RolesFromPresenceDeclarePolicyWithWarning) {
  TempDir dir;
  DsaModel d;
  d.types.reset();
  const auto r = infer(d.write(dir));
  ASSERT_TRUE(r.generation) << all_notes(r);
  expect_glm_dsa_v1(*r.generation);
  EXPECT_TRUE(any_note_contains(r, "warning: glm-dsa IndexShare roles inferred from indexer tensor presence"))
      << all_notes(r);
  EXPECT_TRUE(any_note_contains(r, "IndexShare roles from indexer tensor presence (2 Full, 2 Shared)")) << all_notes(r);
  EXPECT_EQ(r.notes.size(), 3u) << all_notes(r);
}

TEST(GenerationInferenceGlmDsa, PresenceRolesWithSharedFirstLayerDeclareNoPolicy) {
  TempDir dir;
  DsaModel d;
  d.types.reset();
  d.indexed = {1, 3};
  const auto r = infer(d.write(dir));
  ASSERT_TRUE(r.generation);
  EXPECT_FALSE(r.generation->policy);
  EXPECT_TRUE(any_note_contains(r, "decoder layer 0 is Shared but no Full layer precedes it")) << all_notes(r);
}

TEST(GenerationInferenceGlmDsa, StaleAttnKvBDisqualifiesPolicy) {
  TempDir dir;
  DsaModel d;
  d.extra = {blk(1, "attn_kv_b.weight")};
  const auto r = infer(d.write(dir));
  ASSERT_TRUE(r.generation) << "native MTP still stands on its own tensors";
  EXPECT_FALSE(r.generation->policy);
  EXPECT_FALSE(r.generation->thresholds);
  expect_valid_native_mtp(*r.generation, 5, {4});
  EXPECT_TRUE(any_note_contains(r, "glm-dsa-v1 policy not declared: stale unsplit blk.1.attn_kv_b.weight"))
      << all_notes(r);
}

TEST(GenerationInferenceGlmDsa, MissingMoeTensorNamesItAndDeclaresNoPolicy) {
  TempDir dir;
  DsaModel d;
  d.omit = {blk(2, "ffn_up_exps.weight")};
  const auto r = infer(d.write(dir));
  ASSERT_TRUE(r.generation);
  EXPECT_FALSE(r.generation->policy);
  EXPECT_TRUE(any_note_contains(r, "glm-dsa-v1 policy not declared: missing tensors blk.2.ffn_up_exps.weight"))
      << all_notes(r);
}

TEST(GenerationInferenceGlmDsa, DenseLayerNeedsDenseFfn) {
  TempDir dir;
  DsaModel d;
  d.dense_layers = 2;  // layer 1 becomes dense in metadata and in tensors...
  d.omit = {blk(1, "ffn_down.weight")};
  const auto r = infer(d.write(dir));
  ASSERT_TRUE(r.generation);
  EXPECT_FALSE(r.generation->policy);
  EXPECT_TRUE(any_note_contains(r, "missing tensors blk.1.ffn_down.weight")) << all_notes(r);
}

TEST(GenerationInferenceGlmDsa, MissingMetadataKeyAndGlobalAreNamed) {
  TempDir dir;
  DsaModel d;
  d.omit = {"glm-dsa.attention.indexer.top_k", "glm-dsa.expert_weights_norm", "output_norm.weight"};
  const auto r = infer(d.write(dir));
  ASSERT_TRUE(r.generation);
  EXPECT_FALSE(r.generation->policy);
  EXPECT_TRUE(any_note_contains(
      r, "missing metadata glm-dsa.attention.indexer.top_k and glm-dsa.expert_weights_norm; missing tensors "
         "output_norm.weight"))
      << all_notes(r);
}

TEST(GenerationInferenceGlmDsa, MtpLayerWithoutIndexerGroupDeclaresNoPolicy) {
  TempDir dir;
  DsaModel d;
  for (const auto& s : kIndexer) d.omit.insert(blk(4, s));
  const auto r = infer(d.write(dir));
  ASSERT_TRUE(r.generation);
  EXPECT_FALSE(r.generation->policy);
  EXPECT_TRUE(any_note_contains(r, "missing tensors blk.4.indexer.k_norm.weight")) << all_notes(r);
}

TEST(GenerationInferenceGlmDsa, PartialIndexerGroupThrows) {
  TempDir dir;
  DsaModel d;
  d.omit = {blk(2, "indexer.proj.weight")};
  const auto m = d.write(dir);
  try {
    infer(m);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_NE(msg.find("glm-dsa-tiny.gguf"), std::string::npos) << msg;
    EXPECT_NE(msg.find("layer 2 has a partial indexer group"), std::string::npos) << msg;
    EXPECT_NE(msg.find("blk.2.indexer.proj.weight is missing"), std::string::npos) << msg;
  }
}

TEST(GenerationInferenceGlmDsa, PartialIndexerGroupInSharedLayerThrows) {
  TempDir dir;
  DsaModel d;
  d.extra = {blk(1, "indexer.k_norm.bias")};
  const auto m = d.write(dir);
  EXPECT_THROW(infer(m), Error);
}

TEST(GenerationInferenceGlmDsa, SharedLayerWithIndexerGroupThrows) {
  TempDir dir;
  DsaModel d;
  d.indexed = {0, 1, 2};  // indexer.types says layer 1 is shared
  const auto m = d.write(dir);
  try {
    infer(m);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_NE(msg.find("glm-dsa-tiny.gguf"), std::string::npos) << msg;
    EXPECT_NE(msg.find("layer 1 is a Shared IndexShare layer"), std::string::npos) << msg;
    EXPECT_NE(msg.find("blk.1.indexer.k_norm.weight"), std::string::npos) << msg;
  }
}

TEST(GenerationInferenceGlmDsa, FullLayerWithoutIndexerGroupThrows) {
  TempDir dir;
  DsaModel d;
  d.indexed = {0};  // indexer.types says layer 2 is full
  const auto m = d.write(dir);
  try {
    infer(m);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("layer 2 is a Full IndexShare layer"), std::string::npos) << msg;
    EXPECT_NE(msg.find("blk.2.indexer.k_norm.weight"), std::string::npos) << msg;
  }
}

TEST(GenerationInferenceGlmDsa, IndexerTypeOtherThanFullOrSharedThrows) {
  TempDir dir;
  DsaModel d;
  d.types = std::vector<std::string>{"full", "dense", "full", "shared"};
  const auto m = d.write(dir);
  try {
    infer(m);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_NE(std::string(e.what()).find("glm-dsa.attention.indexer.types[1] (layer 1) is \"dense\""),
              std::string::npos)
        << e.what();
  }
}

TEST(GenerationInferenceGlmDsa, MtpMissingHnormDeclaresNoMtpAndNoPolicy) {
  TempDir dir;
  DsaModel d;
  d.omit = {blk(4, "nextn.hnorm.weight")};
  const auto r = infer(d.write(dir));
  EXPECT_FALSE(r.generation) << all_notes(r);
  EXPECT_TRUE(any_note_contains(r, "nextn tensors found in layer 4 but nextn.hnorm.weight is missing: native MTP not declared"))
      << all_notes(r);
  EXPECT_TRUE(any_note_contains(r, "missing tensors blk.4.nextn.hnorm.weight")) << all_notes(r);
}

// ---------------------------------------- native MTP on other architectures

ModelSource write_toy(const TempDir& dir, uint32_t blocks, std::optional<uint32_t> nextn_predict_layers,
                      const std::vector<std::string>& tensors) {
  ModelBuilder b(dir);
  b.writer().add_string("general.architecture", "toy");
  b.writer().add_u32("toy.block_count", blocks);
  if (nextn_predict_layers) b.writer().add_u32("toy.nextn_predict_layers", *nextn_predict_layers);
  b.add_tensor("token_embd.weight");
  for (const auto& t : tensors) b.add_tensor(t);
  return b.write("toy.gguf");
}

TEST(GenerationInferenceMtp, EveryNextnLayerMustCarryThePredictionTensors) {
  TempDir dir;
  const auto m = write_toy(dir, 3, 1, {blk(2, "nextn.eh_proj.weight"), blk(2, "nextn.embed_tokens.weight")});
  const auto r = infer(m);
  EXPECT_FALSE(r.generation);
  EXPECT_TRUE(any_note_contains(
      r, "nextn tensors found in layer 2 but nextn.enorm.weight and nextn.hnorm.weight are missing: native MTP not declared"))
      << all_notes(r);
}

TEST(GenerationInferenceMtp, CountMustAgreeWithNextnPredictLayers) {
  TempDir dir;
  std::vector<std::string> t;
  for (const auto& s : kNextn) t.push_back(blk(2, s));
  const auto m = write_toy(dir, 3, 2, t);
  const auto r = infer(m);
  EXPECT_FALSE(r.generation);
  EXPECT_TRUE(any_note_contains(r, "but toy.nextn_predict_layers is 2")) << all_notes(r);
}

TEST(GenerationInferenceMtp, NextnLayersMustBeTheLastBlocks) {
  TempDir dir;
  std::vector<std::string> t;
  for (const auto& s : kNextn) t.push_back(blk(1, s));
  const auto m = write_toy(dir, 3, 1, t);
  const auto r = infer(m);
  EXPECT_FALSE(r.generation);
  EXPECT_TRUE(any_note_contains(r, "MTP layers must be the last 1 of 3 blocks")) << all_notes(r);
}

TEST(GenerationInferenceMtp, DeclaredKeyWithoutNextnTensorsIsNoted) {
  TempDir dir;
  const auto m = write_toy(dir, 3, 1, {blk(0, "attn_norm.weight")});
  const auto r = infer(m);
  EXPECT_FALSE(r.generation);
  EXPECT_TRUE(any_note_contains(r, "toy.nextn_predict_layers is 1 but no layer carries blk.N.nextn.* tensors"))
      << all_notes(r);
}

TEST(GenerationInferenceMtp, WithoutNextnPredictLayersKeyTwoCompleteLayersAreDeclared) {
  TempDir dir;
  std::vector<std::string> t;
  for (uint32_t l : {2u, 3u}) {
    for (const auto& s : kNextn) t.push_back(blk(l, s));
  }
  const auto m = write_toy(dir, 4, std::nullopt, t);
  const auto r = infer(m);
  ASSERT_TRUE(r.generation) << all_notes(r);
  expect_valid_native_mtp(*r.generation, 4, {2, 3});
  expect_manifest_round_trip(*r.generation, 4);
  EXPECT_TRUE(any_note_contains(r, "on layers 2, 3")) << all_notes(r);
  EXPECT_TRUE(any_note_contains(r, "toy.nextn_predict_layers absent")) << all_notes(r);
}

// ------------------------------------- validate-package's profile check (#35)

TEST(GenerationProfileEvidence, TheWritersRuleReadBackForADeclaredProfile) {
  using detail::profile_evidence_problem;
  TempDir dir;
  const auto complete = DsaModel{}.write(dir);
  EXPECT_FALSE(profile_evidence_problem(complete, complete.layer_count(), "glm-dsa-v1"));
  TempDir stale_dir;
  DsaModel d;
  d.extra = {blk(1, "attn_kv_b.weight")};
  const auto stale = d.write(stale_dir);
  const auto p = profile_evidence_problem(stale, stale.layer_count(), "glm-dsa-v1");
  ASSERT_TRUE(p);
  EXPECT_NE(p->find("generation.policy.profile: \"glm-dsa-v1\" declared without its model evidence"),
            std::string::npos) << *p;
  EXPECT_NE(p->find("stale unsplit blk.1.attn_kv_b.weight"), std::string::npos) << *p;
  TempDir roles_dir;
  DsaModel r;
  r.types = std::vector<std::string>{"full", "full", "full", "shared"};  // layer 1 has no indexer group
  const auto roles = r.write(roles_dir);
  const auto q = profile_evidence_problem(roles, roles.layer_count(), "glm-dsa-v1");
  ASSERT_TRUE(q);
  EXPECT_NE(q->find("a consistent model"), std::string::npos) << *q;
  EXPECT_NE(q->find("layer 1 is a Full IndexShare layer"), std::string::npos) << *q;
  const auto llama = ModelSource::open(data_path("llama-tiny-q8_0.gguf"));
  const auto a = profile_evidence_problem(llama, llama.layer_count(), "glm-dsa-v1");
  ASSERT_TRUE(a);
  EXPECT_NE(a->find("the source's architecture is \"llama\""), std::string::npos) << *a;
  EXPECT_FALSE(profile_evidence_problem(llama, llama.layer_count(), "glm-dsa-v9")) << "unknown: reported elsewhere";
}

}  // namespace
}  // namespace skippy
