// The GGUF engine against llama.cpp's own files: every fixture parses, and
// writing it back reproduces it.
#include <gtest/gtest.h>

#include <cstring>

#include <nlohmann/json.hpp>

#include "skippy/error.h"
#include "gguf/ggml_types.h"
#include "skippy/gguf.h"
#include "gguf/gguf_writer.h"
#include "skippy/model_source.h"
#include "util/sha256.h"
#include "test_util.h"

namespace skippy {
namespace {

using test::data_path;

std::vector<std::filesystem::path> all_fixture_files() {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(SKIPPY_TEST_DATA_DIR)) {
    if (e.path().extension() == ".gguf") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Rewrites `f` with GgufWriter: same KVs in order, same tensors in order.
std::filesystem::path rewrite(const GgufFile& f, const std::filesystem::path& out) {
  GgufWriter w(f.alignment());
  for (const auto& kv : f.kvs()) w.add_kv(std::string(kv.key), kv.value);
  for (const auto& t : f.tensors()) w.add_tensor_from(f, t);
  AtomicFile af(out);
  w.write(af);
  af.commit();
  return out;
}

TEST(GgmlTypes, TableMatchesGgml) {
  EXPECT_EQ(ggml_type_traits(0)->type_size, 4u);
  EXPECT_EQ(ggml_type_traits(8)->name, "Q8_0");
  EXPECT_EQ(ggml_type_traits(8)->block_size, 32u);
  EXPECT_EQ(ggml_type_traits(8)->type_size, 34u);
  EXPECT_EQ(ggml_type_traits(12)->type_size, 144u);  // Q4_K
  EXPECT_EQ(ggml_type_traits(14)->type_size, 210u);  // Q6_K
  EXPECT_EQ(ggml_type_traits(30)->name, "BF16");
  EXPECT_EQ(ggml_type_traits(34)->type_size, 54u);   // TQ1_0
  EXPECT_EQ(ggml_type_traits(39)->name, "MXFP4");
  EXPECT_EQ(ggml_type_traits(39)->type_size, 17u);
  for (uint32_t removed : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 40u, 1000u}) {
    EXPECT_EQ(ggml_type_traits(removed), nullptr) << removed;
  }
  EXPECT_EQ(ggml_type_table().size(), 32u);
}

TEST(GgmlTypes, TensorBytesChecksBlocksAndOverflow) {
  const std::vector<int64_t> q8{64, 3};
  EXPECT_EQ(ggml_tensor_bytes(8, q8), 2u * 34u * 3u);
  const std::vector<int64_t> bad_block{33, 1};
  EXPECT_FALSE(ggml_tensor_bytes(8, bad_block));
  const std::vector<int64_t> huge{int64_t{1} << 40, int64_t{1} << 40};
  EXPECT_FALSE(ggml_tensor_bytes(0, huge));
  const std::vector<int64_t> neg{-1};
  EXPECT_FALSE(ggml_tensor_bytes(0, neg));
  const std::vector<int64_t> zero{0, 5};
  EXPECT_EQ(ggml_tensor_bytes(0, zero), 0u);
}

TEST(GgufReader, EveryFixtureParses) {
  const auto files = all_fixture_files();
  ASSERT_GE(files.size(), 9u);
  for (const auto& p : files) {
    SCOPED_TRACE(p.string());
    const auto f = GgufFile::open(p);
    EXPECT_EQ(f.version(), 3u);
    if (!read_split_info(f) || read_split_info(f)->no == 0) {
      EXPECT_FALSE(f.architecture().empty());
    }
    if (!f.tensors().empty()) {
      EXPECT_LE(f.data_offset(), f.file_size());
    }
  }
}

TEST(GgufReader, LlamaTinyFacts) {
  const auto f = GgufFile::open(data_path("llama-tiny-f16.gguf"));
  EXPECT_EQ(f.architecture(), "llama");
  EXPECT_EQ(f.block_count(), 8u);
  EXPECT_EQ(f.embedding_length(), 64u);
  EXPECT_EQ(f.tensors().size(), 74u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.find_tensor("output.weight"), nullptr);  // tied
  const auto* embd = f.find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(ggml_type_name(embd->type), "F16");
  EXPECT_EQ(embd->ne, (std::vector<int64_t>{64, 32000}));
  EXPECT_EQ(embd->bytes, 64u * 32000u * 2u);
  const auto tokens = f.find_kv("tokenizer.ggml.tokens")->value.as_string_array();
  ASSERT_TRUE(tokens);
  EXPECT_EQ(tokens->size(), 32000u);
  EXPECT_EQ((*tokens)[1], "<s>");
}

TEST(GgufReader, QwenAlignmentAndEveryValueType) {
  const auto f = GgufFile::open(data_path("qwen3moe-tiny.gguf"));
  EXPECT_EQ(f.alignment(), 128u);
  EXPECT_EQ(f.data_offset() % 128, 0u);
  for (const auto& t : f.tensors()) EXPECT_EQ(t.offset % 128, 0u) << t.name;
  std::set<GgufType> seen, seen_array;
  for (const auto& kv : f.kvs()) {
    if (!kv.key.starts_with("anchors.kv.")) continue;
    seen.insert(kv.value.type());
    if (kv.value.is_array()) seen_array.insert(kv.value.array_type());
  }
  EXPECT_EQ(seen.size(), 13u) << "fixture covers every GGUF value type";
  EXPECT_GE(seen_array.size(), 8u);
  EXPECT_NE(f.find_tensor("output.weight"), nullptr);
}

TEST(GgufReader, TypedAccessors) {
  const auto f = GgufFile::open(data_path("qwen3moe-tiny.gguf"));
  const auto* bc = f.find_kv("qwen3moe.block_count");
  ASSERT_NE(bc, nullptr);
  EXPECT_EQ(bc->value.type(), GgufType::kUint32);
  EXPECT_EQ(bc->value.as_uint(), 4u);
  EXPECT_EQ(bc->value.as_int(), 4);
  EXPECT_FALSE(bc->value.as_string());
  EXPECT_FALSE(bc->value.as_float());
  EXPECT_EQ(f.get_string("general.architecture"), "qwen3moe");
}

TEST(GgufWriter, RoundTripEveryFixture) {
  test::TempDir tmp;
  for (const auto& p : all_fixture_files()) {
    SCOPED_TRACE(p.string());
    const auto src = GgufFile::open(p);
    const auto out = rewrite(src, tmp / p.filename().string());
    const auto back = GgufFile::open(out);
    ASSERT_EQ(back.kvs().size(), src.kvs().size());
    for (size_t i = 0; i < src.kvs().size(); ++i) {
      EXPECT_EQ(back.kvs()[i].key, src.kvs()[i].key);
      EXPECT_EQ(back.kvs()[i].value.type(), src.kvs()[i].value.type());
      EXPECT_TRUE(std::ranges::equal(back.kvs()[i].value.encoded(), src.kvs()[i].value.encoded()));
    }
    ASSERT_EQ(back.tensors().size(), src.tensors().size());
    for (size_t i = 0; i < src.tensors().size(); ++i) {
      const auto& a = src.tensors()[i];
      const auto& b = back.tensors()[i];
      EXPECT_EQ(a.name, b.name);
      EXPECT_EQ(a.type, b.type);
      EXPECT_EQ(a.ne, b.ne);
      EXPECT_TRUE(std::ranges::equal(src.tensor_data(a), back.tensor_data(b))) << a.name;
    }
    // llama.cpp's files are laid out contiguously in tensor-info order, as
    // ours are: the rewrite must be byte-identical.
    EXPECT_EQ(sha256_file(out), sha256_file(p));
  }
}

TEST(GgufWriter, DeterministicAndStreaming) {
  test::TempDir tmp;
  const auto src = GgufFile::open(data_path("glm4moe-mtp-tiny.gguf"));
  rewrite(src, tmp / "a.gguf");
  rewrite(src, tmp / "b.gguf");
  EXPECT_EQ(sha256_file(tmp / "a.gguf"), sha256_file(tmp / "b.gguf"));
}

TEST(GgufWriter, ReturnsShaOfWhatItWrote) {
  test::TempDir tmp;
  const auto src = GgufFile::open(data_path("llama-tiny-q8_0.gguf"));
  GgufWriter w(src.alignment());
  for (const auto& kv : src.kvs()) w.add_kv(std::string(kv.key), kv.value);
  w.add_tensor_from(src, *src.find_tensor("blk.0.attn_q.weight"));
  w.add_u32("skippy.test", 7);
  AtomicFile af(tmp / "x.gguf");
  const auto sha = w.write(af);
  af.commit();
  EXPECT_EQ(sha, sha256_file(tmp / "x.gguf"));
  EXPECT_EQ(std::filesystem::file_size(tmp / "x.gguf"), w.total_size());
  const auto back = GgufFile::open(tmp / "x.gguf");
  EXPECT_EQ(back.get_uint("skippy.test"), 7u);
}

TEST(GgufReader, NestedArraysRoundTrip) {
  // [[1, 2], ["a"]]: an array of two arrays of different element types.
  std::vector<uint8_t> v;
  auto put32 = [&](uint32_t x) { for (int i = 0; i < 4; ++i) v.push_back(static_cast<uint8_t>(x >> (8 * i))); };
  auto put64 = [&](uint64_t x) { for (int i = 0; i < 8; ++i) v.push_back(static_cast<uint8_t>(x >> (8 * i))); };
  put32(9); put64(2);                  // array of 2 arrays
  put32(4); put64(2); put32(1); put32(2);  // [u32 1, 2]
  put32(8); put64(1); put64(1); v.push_back('a');  // ["a"]
  GgufWriter w;
  w.add_kv("nested", GgufType::kArray, v);
  test::TempDir tmp;
  AtomicFile af(tmp / "n.gguf");
  w.write(af);
  af.commit();
  const auto f = GgufFile::open(tmp / "n.gguf");
  const auto* kv = f.find_kv("nested");
  ASSERT_NE(kv, nullptr);
  EXPECT_EQ(kv->value.array_type(), GgufType::kArray);
  EXPECT_EQ(kv->value.array_size(), 2u);
  EXPECT_TRUE(std::ranges::equal(kv->value.encoded(), v));
}

// Arrays through the writer read back as written, whatever the element
// type; a value that does not fit its element is refused, never truncated.
TEST(GgufWriter, ArraysRoundTripAndRefuseWhatDoesNotFit) {
  GgufWriter w;
  const std::vector<uint64_t> u32s = {0, 7, 0xFFFFFFFFu};
  const std::vector<uint64_t> u64s = {0, uint64_t{1} << 40, UINT64_MAX};
  const std::vector<uint64_t> bools = {1, 0, 1};
  const std::vector<int64_t> i32s = {-2147483648LL, -1, 2147483647LL};
  const std::vector<int64_t> i16s = {-32768, 5};
  const std::vector<double> f32s = {-1.5, 0.0, 3.25};
  const std::vector<std::string> strs = {"", "a", "\xE2\x96\x81word"};
  w.add_array("u32", GgufType::kUint32, u32s);
  w.add_array("u64", GgufType::kUint64, u64s);
  w.add_array("bool", GgufType::kBool, bools);
  w.add_array("i32", GgufType::kInt32, i32s);
  w.add_array("i16", GgufType::kInt16, i16s);
  w.add_array("f32", GgufType::kFloat32, f32s);
  w.add_array("f64", GgufType::kFloat64, f32s);
  w.add_string_array("str", strs);
  w.add_array("empty", GgufType::kUint8, std::vector<uint64_t>{});
  const auto bytes = w.header();
  const auto f = GgufFile::parse(bytes, "arrays.gguf");
  auto element_bytes = [&](const char* key) {
    const auto* kv = f.find_kv(key);
    EXPECT_NE(kv, nullptr) << key;
    return kv ? kv->value.encoded().subspan(12) : std::span<const uint8_t>();
  };
  auto ints = [&](const char* key) { return f.find_kv(key)->value.as_int_array().value_or(std::vector<int64_t>{-999}); };
  EXPECT_EQ(ints("u32"), (std::vector<int64_t>{0, 7, 0xFFFFFFFFLL}));
  const auto bool_bytes = element_bytes("bool");
  EXPECT_EQ(std::vector<uint8_t>(bool_bytes.begin(), bool_bytes.end()), (std::vector<uint8_t>{1, 0, 1}));
  EXPECT_EQ(ints("i32"), i32s);
  EXPECT_EQ(ints("i16"), i16s);
  EXPECT_EQ(f.find_kv("u64")->value.array_type(), GgufType::kUint64);
  std::vector<uint64_t> u64_back(3);
  std::memcpy(u64_back.data(), element_bytes("u64").data(), 24);
  EXPECT_EQ(u64_back, u64s);
  std::vector<float> f32_back(3);
  std::memcpy(f32_back.data(), element_bytes("f32").data(), 12);
  EXPECT_EQ(f32_back, (std::vector<float>{-1.5f, 0.0f, 3.25f}));
  std::vector<double> f64_back(3);
  std::memcpy(f64_back.data(), element_bytes("f64").data(), 24);
  EXPECT_EQ(f64_back, f32s);
  const auto str_back = *f.find_kv("str")->value.as_string_array();
  EXPECT_EQ(std::vector<std::string>(str_back.begin(), str_back.end()), strs);
  EXPECT_EQ(f.find_kv("empty")->value.array_size(), 0u);

  GgufWriter bad;
  EXPECT_THROW(bad.add_array("a", GgufType::kUint32, std::vector<uint64_t>{uint64_t{1} << 32}), Error);
  EXPECT_THROW(bad.add_array("b", GgufType::kBool, std::vector<uint64_t>{2}), Error);
  EXPECT_THROW(bad.add_array("c", GgufType::kInt8, std::vector<int64_t>{128}), Error);
  EXPECT_THROW(bad.add_array("d", GgufType::kUint16, std::vector<int64_t>{-1}), Error);
  EXPECT_THROW(bad.add_array("e", GgufType::kInt64, std::vector<uint64_t>{UINT64_MAX}), Error);
  EXPECT_THROW(bad.add_array("f", GgufType::kString, std::vector<uint64_t>{1}), Error);
  EXPECT_THROW(bad.add_array("g", GgufType::kUint32, std::vector<double>{1.0}), Error);
  EXPECT_TRUE(bad.kvs().empty()) << "nothing half-added";
}

TEST(GgufWriter, RejectsBadInput) {
  GgufWriter w;
  w.add_u32("a", 1);
  EXPECT_THROW(w.add_u32("a", 2), Error);
  EXPECT_THROW(w.add_tensor(std::string(64, 'x'), 0, {4}, nullptr, 0), Error);
  EXPECT_THROW(w.add_tensor("q", 8, {33}, nullptr, 0), Error);  // not a block multiple
  EXPECT_THROW(w.add_tensor("t", 4, {4}, nullptr, 0), Error);   // removed type id
  EXPECT_THROW(GgufWriter(48), Error);
  GgufWriter w128(128);
  EXPECT_THROW(w128.header(), Error);  // needs general.alignment
}

TEST(ModelSource, SplitModelFromAnyShard) {
  for (int i = 1; i <= 3; ++i) {
    const auto m = ModelSource::open(data_path("llama-tiny-q4_0-0000" + std::to_string(i) + "-of-00003.gguf"));
    EXPECT_EQ(m.shards().size(), 3u);
    EXPECT_EQ(m.tensors().size(), 74u);
    EXPECT_EQ(m.layer_count(), 8u);
    EXPECT_EQ(m.architecture(), "llama");
    EXPECT_EQ(m.primary().path().filename(), "llama-tiny-q4_0-00001-of-00003.gguf");
  }
}

TEST(ModelSource, MissingShardIsNamed) {
  test::TempDir tmp;
  std::filesystem::copy_file(data_path("llama-tiny-q4_0-00001-of-00003.gguf"), tmp / "m-00001-of-00003.gguf");
  std::filesystem::copy_file(data_path("llama-tiny-q4_0-00003-of-00003.gguf"), tmp / "m-00003-of-00003.gguf");
  try {
    ModelSource::open(tmp / "m-00001-of-00003.gguf");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("m-00002-of-00003.gguf"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos) << e.what();
  }
}

TEST(ModelSource, ShardsOfDifferentModelsAreRefused) {
  test::TempDir tmp;
  std::filesystem::copy_file(data_path("llama-tiny-q4_0-00001-of-00003.gguf"), tmp / "m-00001-of-00002.gguf");
  std::filesystem::copy_file(data_path("llama-tiny-q4_0-00002-of-00003.gguf"), tmp / "m-00002-of-00002.gguf");
  EXPECT_THROW(ModelSource::open(tmp / "m-00001-of-00002.gguf"), Error);
}

TEST(ModelSource, TensorInTwoShardsIsRefused) {
  test::TempDir tmp;
  // Shard 2 stands in for shard 3 as well: same tensors twice.
  std::filesystem::copy_file(data_path("llama-tiny-q4_0-00001-of-00003.gguf"), tmp / "m-00001-of-00003.gguf");
  std::filesystem::copy_file(data_path("llama-tiny-q4_0-00002-of-00003.gguf"), tmp / "m-00002-of-00003.gguf");
  // Rewrite shard 2 with split.no = 2 so numbering passes and duplication is what fails.
  const auto s2 = GgufFile::open(data_path("llama-tiny-q4_0-00002-of-00003.gguf"));
  GgufWriter w(s2.alignment());
  for (const auto& kv : s2.kvs()) {
    if (kv.key == "split.no") {
      w.add_u16("split.no", 2);
    } else {
      w.add_kv(std::string(kv.key), kv.value);
    }
  }
  for (const auto& t : s2.tensors()) w.add_tensor_from(s2, t);
  AtomicFile af(tmp / "m-00003-of-00003.gguf");
  w.write(af);
  af.commit();
  try {
    ModelSource::open(tmp / "m-00002-of-00003.gguf");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("also appears in"), std::string::npos) << e.what();
  }
}

TEST(TensorRoles, Classification) {
  EXPECT_EQ(classify_tensor("token_embd.weight").role, TensorRole::kEmbeddings);
  EXPECT_EQ(classify_tensor("output_norm.weight").role, TensorRole::kOutput);
  EXPECT_EQ(classify_tensor("output.weight").role, TensorRole::kOutput);
  EXPECT_EQ(classify_tensor("rope_freqs.weight").role, TensorRole::kGlobal);
  // Input-only tensors (the first stage's), output-only tensors (the last's).
  for (const char* in : {"position_embd.weight", "per_layer_token_embd.weight", "per_layer_model_proj.weight",
                         "per_layer_proj_norm.weight", "altup_proj.weight", "token_embd_norm.weight"}) {
    EXPECT_EQ(classify_tensor(in).role, TensorRole::kEmbeddings) << in;
  }
  EXPECT_EQ(classify_tensor("altup_unembd_proj.weight").role, TensorRole::kOutput);
  EXPECT_EQ(classify_tensor("rope_factors_long.weight").role, TensorRole::kGlobal);
  const auto l = classify_tensor("blk.12.attn_q.weight");
  EXPECT_EQ(l.role, TensorRole::kLayer);
  EXPECT_EQ(l.layer, 12u);
  const auto n = classify_tensor("blk.3.nextn.eh_proj.weight");
  EXPECT_EQ(n.role, TensorRole::kLayer);
  EXPECT_EQ(n.layer, 3u);
  EXPECT_EQ(classify_tensor("blk.x.attn_q.weight").role, TensorRole::kGlobal);
  EXPECT_EQ(classify_tensor("blk.01.attn_q.weight").role, TensorRole::kGlobal);  // not canonical
  EXPECT_EQ(classify_tensor("blk.5").role, TensorRole::kGlobal);
}

TEST(InspectCli, SplitModelGivenAnyShardReportsWholeModel) {
  const auto r = test::run_cli({"inspect", data_path("llama-tiny-q4_0-00002-of-00003.gguf").string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["architecture"], "llama");
  EXPECT_EQ(j["layer_count"], 8);
  EXPECT_EQ(j["activation_width"], 64);
  EXPECT_EQ(j["tensor_count"], 74);
  EXPECT_EQ(j["shards"].size(), 3u);
  EXPECT_EQ(j["roles"]["layers"].size(), 8u);
  EXPECT_TRUE(j["quantization_types"].contains("Q4_0"));
}

TEST(InspectCli, RolesAddUp) {
  for (const auto& p : test::model_fixtures()) {
    const auto r = test::run_cli({"inspect", p.string(), "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    uint64_t count = j["roles"]["embeddings"]["tensor_count"].get<uint64_t>() +
                     j["roles"]["output"]["tensor_count"].get<uint64_t>() +
                     j["roles"]["globals"]["tensor_count"].get<uint64_t>();
    for (const auto& l : j["roles"]["layers"]) count += l["tensor_count"].get<uint64_t>();
    EXPECT_EQ(count, j["tensor_count"].get<uint64_t>()) << p;
  }
}

TEST(InspectCli, ErrorsAndUsage) {
  test::TempDir tmp;
  test::write_file(tmp / "bad.gguf", {'G', 'G', 'U', 'F', 9, 0, 0, 0});
  auto r = test::run_cli({"inspect", (tmp / "bad.gguf").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("bad.gguf"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("unsupported GGUF version 9"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
  r = test::run_cli({"inspect"});
  EXPECT_EQ(r.exit_code, 2);
  r = test::run_cli({"inspect", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("Example"), std::string::npos);
  r = test::run_cli({"inspect", (tmp / "missing.gguf").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("missing.gguf"), std::string::npos);
}

}  // namespace
}  // namespace skippy
