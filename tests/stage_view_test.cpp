// Direct load (spec: "Layer Selection": a runtime SHOULD load the selected
// parts directly): StageView's one tensor table and one metadata view, and
// the rules it refuses — a tensor in two parts, a layer in range with no
// tensors, a fragment whose own role keys disagree with its part.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <set>

#include "skippy/error.h"
#include "util/file.h"
#include "skippy/gguf.h"
#include "gguf/gguf_writer.h"
#include "skippy/manifest.h"
#include "skippy/model_source.h"
#include "skippy/package_layout.h"
#include "util/sha256.h"
#include "skippy/stage.h"
#include "skippy/stage_view.h"
#include "test_util.h"

namespace skippy {
// Named: the unity build compiles this file with others that have their
// own World, kRepo, expect_refused...
namespace stage_view_test {
namespace {

namespace fs = std::filesystem;
using test::data_path;

using test::write_pkg;

template <typename F>
void expect_refused(F&& fn, const std::vector<std::string>& needles) {
  try {
    fn();
    ADD_FAILURE() << "expected a refusal containing: " << needles.front();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput) << e.what();
    for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

// Replaces a fragment of an unpacked package with one built by `fill` (KVs
// and tensors), and updates its manifest entry so consumer validation
// (sizes) passes: only StageView's own rules are left to catch it.
void replace_fragment(const fs::path& pkg, const std::string& rel, const std::function<void(GgufWriter&)>& fill) {
  const auto manifest_path = pkg / "model-package.json";
  auto m = parse_manifest(test::read_text(manifest_path), "model-package.json");
  GgufWriter w(GgufFile::open(pkg / rel).alignment());
  fill(w);
  AtomicFile out(pkg / rel);
  const auto sha = w.write(out);
  out.commit();
  auto update = [&](ArtifactEntry& e) {
    if (e.path != rel) return;
    e.artifact_bytes = w.total_size();
    e.sha256 = sha;
    e.tensor_count = w.tensors().size();
    e.tensor_bytes = w.tensor_bytes();
  };
  update(m.shared.metadata);
  update(m.shared.embeddings);
  update(m.shared.output);
  for (auto& l : m.layers) update(l);
  write_file_atomic(manifest_path, serialize_manifest(m));
}

// KVs of `from`, with the role keys replaced by `role` (and layer keys).
void copy_kvs(GgufWriter& w, const GgufFile& from, std::string_view role, std::optional<uint32_t> layer) {
  for (const auto& kv : from.kvs()) {
    if (kv.key.starts_with("skippy.package.")) continue;
    w.add_kv(std::string(kv.key), kv.value);
  }
  w.add_string(std::string(kRoleKey), role);
  if (layer) {
    w.add_u32(std::string(kLayerStartKey), *layer);
    w.add_u32(std::string(kLayerEndKey), *layer + 1);
  }
}

TEST(StageView, EveryRangeOfEveryFixtureIsOneTableOfExactlyItsTensors) {
  test::TempDir tmp;
  for (const auto& src : test::model_fixtures()) {
    SCOPED_TRACE(src.string());
    const auto dir = tmp / src.stem().string();
    ASSERT_EQ(write_pkg(src, dir).exit_code, 0);
    const auto model = ModelSource::open(src);
    const auto pkg = open_local_package(dir.string());
    const uint32_t layers = model.layer_count();
    for (uint32_t a = 0; a < layers; ++a) {
      for (uint32_t b = a + 1; b <= layers; ++b) {
        SCOPED_TRACE(std::to_string(a) + ".." + std::to_string(b));
        const auto view = test::view_v1(pkg, {a, b});
        EXPECT_EQ(view.range(), (LayerRange{a, b}));
        std::set<std::string> names;
        uint64_t bytes = 0;
        for (const auto& t : view.tensors()) {
          names.insert(std::string(t.info->name));
          bytes += t.info->bytes;
          EXPECT_EQ(view.find_tensor(t.info->name), &t);
          const auto* s = model.find_tensor(t.info->name);
          ASSERT_NE(s, nullptr);
          EXPECT_EQ(t.info->type, s->info->type);
          EXPECT_EQ(t.info->ne, s->info->ne);
          EXPECT_TRUE(std::ranges::equal(view.tensor_data(t), model.shards()[s->shard].tensor_data(*s->info)));
          if (s->placement.role == TensorRole::kLayer) {
            EXPECT_EQ(view.part_of(t).layer_index, s->placement.layer);
          }
        }
        EXPECT_EQ(names, test::expected_stage_tensors(model, a, b));
        EXPECT_EQ(names.size(), view.tensors().size());
        EXPECT_EQ(view.tensor_bytes(), bytes);
        EXPECT_EQ(view.find_tensor("no.such.tensor"), nullptr);
        // One metadata view: the source's KVs, from the metadata part.
        EXPECT_EQ(view.metadata().path(), view.parts().front().path);
        EXPECT_EQ(view.find_kv("general.architecture")->value.as_string(), model.architecture());
        EXPECT_EQ(view.alignment(), model.primary().alignment());
      }
    }
  }
}

TEST(StageView, RefusesATensorThatAppearsInTwoParts) {
  test::TempDir tmp;
  const auto dir = tmp / "p";
  ASSERT_EQ(write_pkg(data_path("llama-tiny-q8_0.gguf"), dir).exit_code, 0);
  // layer-00002 also carries a tensor of layer 3.
  const auto l2 = GgufFile::open(dir / "layers/layer-00002.gguf");
  const auto l3 = GgufFile::open(dir / "layers/layer-00003.gguf");
  replace_fragment(dir, "layers/layer-00002.gguf", [&](GgufWriter& w) {
    copy_kvs(w, l2, "layer", 2);
    for (const auto& t : l2.tensors()) w.add_tensor_from(l2, t);
    w.add_tensor_from(l3, *l3.find_tensor("blk.3.attn_q.weight"));
  });
  const auto pkg = open_local_package(dir.string());
  expect_refused([&] { (void)test::view_v1(pkg, {2, 4}); },
                 {"blk.3.attn_q.weight", "appears in both", "layers/layer-00002.gguf", "layers/layer-00003.gguf"});
  // Alone, layer 2's fragment still holds a tensor that is not its own.
  expect_refused([&] { (void)test::view_v1(pkg, {2, 3}); },
                 {"layers/layer-00002.gguf", "blk.3.attn_q.weight", "does not belong to layer 2"});
  // Ranges that do not touch layer 2 load.
  EXPECT_NO_THROW((void)test::view_v1(pkg, {3, 6}));
}

TEST(StageView, RefusesATensorRepeatedAcrossSharedParts) {
  test::TempDir tmp;
  const auto dir = tmp / "p";
  ASSERT_EQ(write_pkg(data_path("qwen3moe-tiny.gguf"), dir).exit_code, 0);
  // The metadata part also carries token_embd.weight (the embeddings part's).
  const auto meta = GgufFile::open(dir / "shared/metadata.gguf");
  const auto emb = GgufFile::open(dir / "shared/embeddings.gguf");
  replace_fragment(dir, "shared/metadata.gguf", [&](GgufWriter& w) {
    copy_kvs(w, meta, "metadata", std::nullopt);
    w.add_tensor_from(emb, *emb.find_tensor("token_embd.weight"));
  });
  const auto pkg = open_local_package(dir.string());
  expect_refused([&] { (void)test::view_v1(pkg, {0, 1}); },
                 {"token_embd.weight", "shared/metadata.gguf", "shared/embeddings.gguf"});
}

TEST(StageView, RefusesALayerInRangeWithNoTensors) {
  test::TempDir tmp;
  const auto dir = tmp / "p";
  ASSERT_EQ(write_pkg(data_path("llama-tiny-f16.gguf"), dir).exit_code, 0);
  const auto l1 = GgufFile::open(dir / "layers/layer-00001.gguf");
  replace_fragment(dir, "layers/layer-00001.gguf", [&](GgufWriter& w) { copy_kvs(w, l1, "layer", 1); });
  const auto pkg = open_local_package(dir.string());
  expect_refused([&] { (void)test::view_v1(pkg, {0, 3}); },
                 {"layers/layer-00001.gguf", "layer 1 is in range 0..3", "no tensors"});
  EXPECT_NO_THROW((void)test::view_v1(pkg, {2, 4}));
}

TEST(StageView, RefusesAFragmentWhoseRoleKeysDisagreeWithItsPart) {
  test::TempDir tmp;
  const auto dir = tmp / "p";
  ASSERT_EQ(write_pkg(data_path("llama-tiny-f16.gguf"), dir).exit_code, 0);
  // layer-00004 claims to be layer 5 (a swapped or renamed fragment).
  const auto l4 = GgufFile::open(dir / "layers/layer-00004.gguf");
  replace_fragment(dir, "layers/layer-00004.gguf", [&](GgufWriter& w) {
    copy_kvs(w, l4, "layer", 5);
    for (const auto& t : l4.tensors()) w.add_tensor_from(l4, t);
  });
  // The output part says it is the embeddings.
  const auto out = GgufFile::open(dir / "shared/output.gguf");
  replace_fragment(dir, "shared/output.gguf", [&](GgufWriter& w) {
    copy_kvs(w, out, "embeddings", std::nullopt);
    for (const auto& t : out.tensors()) w.add_tensor_from(out, t);
  });
  const auto pkg = open_local_package(dir.string());
  expect_refused([&] { (void)test::view_v1(pkg, {4, 5}); },
                 {"layers/layer-00004.gguf", "skippy.package.layer_start says layer 5, expected 4"});
  const uint32_t n = test::manifest(pkg).layer_count;
  expect_refused([&] { (void)test::view_v1(pkg, {n - 1, n}); },
                 {"shared/output.gguf", "skippy.package.role says it is the embeddings", "output part"});
  EXPECT_NO_THROW((void)test::view_v1(pkg, {0, 4}));
}

TEST(StageView, RefusesAFragmentWhoseTensorCountDisagreesWithTheManifest) {
  test::TempDir tmp;
  const auto dir = tmp / "p";
  ASSERT_EQ(write_pkg(data_path("llama-tiny-f16.gguf"), dir).exit_code, 0);
  auto m = parse_manifest(test::read_text(dir / "model-package.json"), "model-package.json");
  m.layers[0].tensor_count += 1;
  write_file_atomic(dir / "model-package.json", serialize_manifest(m));
  const auto pkg = open_local_package(dir.string());
  expect_refused([&] { (void)test::view_v1(pkg, {0, 1}); },
                 {"layers/layer-00000.gguf", "the manifest says tensor_count"});
}

TEST(StageView, ProjectorIsNeverMergedIntoTheView) {
  test::TempDir tmp;
  const auto dir = tmp / "p";
  test::make_projector(tmp / "mmproj-model-f16.gguf");
  ASSERT_EQ(write_pkg(data_path("llama-tiny-q8_0.gguf"), dir, {"--projector", (tmp / "mmproj-model-f16.gguf").string()})
                .exit_code,
            0);
  const auto pkg = open_local_package(dir.string());
  const auto cat = test::catalog_of(pkg, LayerRange{0, test::manifest(pkg).layer_count});
  const auto sel = open_stage(cat, {0, test::manifest(pkg).layer_count});
  ASSERT_TRUE(sel.projector);
  const auto view = StageView::open(cat.catalog, sel);
  for (const auto& p : view.parts()) EXPECT_NE(p.role, PartRole::kProjector);
  EXPECT_EQ(view.tensors().size(), ModelSource::open(data_path("llama-tiny-q8_0.gguf")).tensors().size());
  // Handing it a projector as a part is a caller error.
  auto bad = sel;
  bad.parts.push_back(*sel.projector);
  try {
    (void)StageView::open(cat.catalog, bad);
    ADD_FAILURE() << "a projector part must be refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUsage);
  }
}

TEST(StageView, MovesKeepTheTableValid) {
  test::TempDir tmp;
  ASSERT_EQ(write_pkg(data_path("glm4moe-mtp-tiny.gguf"), tmp / "p").exit_code, 0);
  const auto pkg = open_local_package((tmp / "p").string());
  std::vector<StageView> views;
  for (uint32_t l = 0; l < test::manifest(pkg).layer_count; ++l) views.push_back(test::view_v1(pkg, {l, l + 1}));
  for (const auto& v : views) {
    for (const auto& t : v.tensors()) {
      EXPECT_EQ(v.find_tensor(t.info->name), &t);
      EXPECT_EQ(v.tensor_data(t).size(), t.info->bytes);
    }
  }
}

}  // namespace
}  // namespace stage_view_test
}  // namespace skippy
