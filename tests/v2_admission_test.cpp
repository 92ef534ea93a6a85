// Package schema 2 stage residency and stage admission: which tensors a
// stage holds (the reference's graph rule: input-only tensors on the first
// stage, layerless tensors every layer uses on every stage, the NextN/MTP
// block on the final stage), the admission descriptor, and the commands that
// emit and take one. Packages come from the test-side reference-layout
// writer (schema_v2_package.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "gguf/gguf_writer.h"
#include "schema_v2_package.h"
#include "skippy/catalog_stage.h"
#include "skippy/error.h"
#include "skippy/gguf.h"
#include "test_util.h"
#include "util/file.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

// `src` with extra F32 tensors (name, elements) in front of its own.
fs::path admission_source_with(const fs::path& src, const fs::path& dir,
                               const std::vector<std::pair<std::string, int64_t>>& extra) {
  const auto g = GgufFile::open(src);
  GgufWriter w(g.alignment());
  for (const auto& kv : g.kvs()) w.add_kv(std::string(kv.key), kv.value);
  int64_t most = 1;
  for (const auto& [name, n] : extra) most = std::max(most, n);
  const auto zeros = dir / "zeros.bin";
  test::write_file(zeros, std::vector<uint8_t>(static_cast<size_t>(most) * 4, 0));
  const auto scratch = MappedFile::open(zeros);
  for (const auto& [name, n] : extra) w.add_tensor(name, 0 /* F32 */, {n}, scratch, 0);
  for (const auto& t : g.tensors()) w.add_tensor_from(g, t);
  const auto out = dir / ("src-" + src.filename().string());
  AtomicFile af(out);
  w.write(af);
  af.commit();
  return out;
}

std::set<std::string> stage_tensor_names(const CatalogStage& s) {
  std::set<std::string> out;
  for (const auto& t : s.tensors) out.insert(t.name);
  return out;
}

TEST(V2Residency, InputOnlyTensorsOnTheFirstStageLayerlessOnesEverywhere) {
  TempDir tmp;
  const auto src = admission_source_with(test::data_path("llama-tiny-q8_0.gguf"), tmp.path(),
                                         {{"position_embd.weight", 64},
                                          {"per_layer_token_embd.weight", 64},
                                          {"altup_proj.weight", 16},
                                          {"rope_freqs.weight", 16}});
  (void)test::write_schema_v2_package(src, tmp.path() / "pkg");
  const auto pkg = open_local_catalog_v2(tmp.path() / "pkg");
  const auto first = stage_tensor_names(select_catalog_range(pkg.catalog, {0, 3}));
  const auto middle = stage_tensor_names(select_catalog_range(pkg.catalog, {3, 6}));
  const auto last = stage_tensor_names(select_catalog_range(pkg.catalog, {6, 8}));
  for (const char* input : {"position_embd.weight", "per_layer_token_embd.weight", "altup_proj.weight", "token_embd.weight"}) {
    EXPECT_TRUE(first.contains(input)) << input;
    EXPECT_FALSE(middle.contains(input)) << input;
    if (std::string(input) != "token_embd.weight") {  // the tied output reads token_embd on the last stage
      EXPECT_FALSE(last.contains(input)) << input;
    }
  }
  for (const auto* s : {&first, &middle, &last}) EXPECT_TRUE(s->contains("rope_freqs.weight"));
  EXPECT_TRUE(last.contains("output_norm.weight"));
  EXPECT_FALSE(middle.contains("output_norm.weight"));
}

TEST(V2Residency, NextnBlockOnlyOnTheFinalStage) {
  TempDir tmp;
  // The fixture's NextN block is layer 3 of 4; a second NextN layer (2) makes
  // a block of two, so a final stage of 3..4 must still hold layer 2.
  const auto src = admission_source_with(test::data_path("glm4moe-mtp-tiny.gguf"), tmp.path(),
                                         {{"blk.2.nextn.eh_proj.weight", 16}});
  (void)test::write_schema_v2_package(src, tmp.path() / "pkg");
  const auto pkg = open_local_catalog_v2(tmp.path() / "pkg");
  ASSERT_EQ(pkg.catalog.layer_count, 4u);
  const auto first = stage_tensor_names(select_catalog_range(pkg.catalog, {0, 3}));
  const auto last = stage_tensor_names(select_catalog_range(pkg.catalog, {3, 4}));
  auto any_of_layer = [](const std::set<std::string>& s, const std::string& prefix) {
    return std::any_of(s.begin(), s.end(), [&](const std::string& n) { return n.starts_with(prefix); });
  };
  EXPECT_TRUE(any_of_layer(first, "blk.1."));
  EXPECT_FALSE(any_of_layer(first, "blk.2.")) << "a NextN layer on a stage that does not own the output";
  EXPECT_FALSE(any_of_layer(first, "blk.3."));
  EXPECT_TRUE(last.contains("blk.2.nextn.eh_proj.weight"));
  EXPECT_TRUE(last.contains("blk.3.nextn.eh_proj.weight"));
  EXPECT_TRUE(any_of_layer(last, "blk.2."));
  // The unchanged fixture (one NextN layer): the final stage's range holds it.
  TempDir tmp2;
  (void)test::write_schema_v2_package(test::data_path("glm4moe-mtp-tiny.gguf"), tmp2.path() / "pkg");
  const auto plain = open_local_catalog_v2(tmp2.path() / "pkg");
  EXPECT_TRUE(stage_tensor_names(select_catalog_range(plain.catalog, {2, 4})).contains("blk.3.nextn.eh_proj.weight"));
  EXPECT_TRUE(any_of_layer(stage_tensor_names(select_catalog_range(plain.catalog, {0, 3})), "blk.2."));
}

}  // namespace
}  // namespace skippy
