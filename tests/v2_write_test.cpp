// write-package --schema 2: our writer of mesh-llm's package v2 layout,
// compared with the test-side reference-layout writer (schema_v2_package.h)
// on every fixture, read back with our strict reader, certified against the
// source.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "schema_v2_package.h"
#include "skippy/stage.h"
#include "skippy/error.h"
#include "skippy/model_source.h"
#include "skippy/package_convert.h"
#include "skippy/package_writer.h"
#include "util/sha256.h"
#include "publish/schema2/layout.h"
#include "gguf/gguf_writer.h"
#include "test_util.h"

namespace skippy {
namespace v2write_test {

namespace fs = std::filesystem;
using test::TempDir;

WritePackageOptions v2_options(const fs::path& src, const fs::path& out) {
  WritePackageOptions o;
  o.schema = 2;
  o.source = src;
  o.out_dir = out;
  o.provenance.model_id = "org/Model-GGUF:Q8_0";
  o.provenance.revision = "0123456789abcdef0123456789abcdef01234567";
  o.provenance.primary_file = src.filename().string();
  o.created_at_unix_secs = 1790000000;
  return o;
}

struct TensorShape {
  uint32_t type;
  std::vector<uint64_t> dims;
  uint64_t bytes;
  std::optional<uint32_t> layer;
  bool operator==(const TensorShape&) const = default;
};

std::map<std::string, TensorShape> shapes(const PackageCatalog& c) {
  std::map<std::string, TensorShape> m;
  for (const auto& t : c.tensors) m[t.name] = {t.ggml_type, t.dims, t.stored_bytes, c.artifact_of(t).layer};
  return m;
}

TEST(V2Write, EveryFixtureMatchesTheReferenceLayoutAndCertifies) {
  for (const auto& fixture : test::model_fixtures()) {
    SCOPED_TRACE(fixture.string());
    TempDir ours, theirs;
    const auto r = write_package(v2_options(fixture, ours / "pkg"));
    EXPECT_EQ(r.schema, 2u);
    const auto opened = test::local_catalog(ours / "pkg");  // our reader's strict rules
    (void)test::write_schema_v2_package(fixture, theirs.path());
    const auto reference = test::local_catalog(theirs.path());
    const auto& c = opened.catalog;
    EXPECT_EQ(c.package_id, r.package_id);
    EXPECT_EQ(c.package_id, compute_package_id_v2(test::root_v2(opened)));
    // Same tensors, types, dims, stored bytes and layers as the reference's layout.
    EXPECT_EQ(shapes(c), shapes(reference.catalog));
    EXPECT_EQ(c.layer_count, reference.catalog.layer_count);
    // The reference writer's ids, paths and identity fields.
    std::set<std::string> paths;
    for (const auto& a : c.artifacts) paths.insert(a.path);
    EXPECT_TRUE(paths.contains("shared/metadata.gguf"));
    EXPECT_TRUE(paths.contains("shared/common.gguf"));
    EXPECT_TRUE(paths.contains("layers/layer-00000.gguf"));
    EXPECT_EQ(c.artifacts.at(c.carrier).id, "metadata");
    EXPECT_NE(c.find_artifact("common"), nullptr);
    EXPECT_NE(c.find_artifact("layer-00000"), nullptr);
    const auto& root = test::root_v2(opened);
    EXPECT_EQ(root.format, "gguf");
    EXPECT_EQ(root.source_model.metadata_artifact_id, "metadata");
    EXPECT_EQ(*root.source_model.canonical_ref,
              "org/Model-GGUF@0123456789abcdef0123456789abcdef01234567/" + fixture.filename().string());
    EXPECT_EQ(root.created_at_unix_secs, 1790000000u);
    const auto model = ModelSource::open(fixture);
    ASSERT_EQ(root.source_model.files.size(), model.shards().size());
    EXPECT_EQ(root.source_model.files[0].sha256, sha256_file(model.shards()[0].path()));
    // writer_canonicalizes_an_implicit_default_alignment: the carrier states
    // general.alignment even when the source (these fixtures) does not.
    const GgufKv* align = c.carrier_file->find_kv("general.alignment");
    ASSERT_NE(align, nullptr);
    EXPECT_EQ(align->value.type(), GgufType::kUint32);
    EXPECT_EQ(align->value.as_uint(), model.primary().alignment());
    // Exactly the reference's generation rule (the MTP fixture only).
    EXPECT_EQ(root.generation.has_value(), test::root_v2(reference).generation.has_value());
    EXPECT_EQ(root.generation, test::root_v2(reference).generation);
    // Every tensor's bytes at its locator are the source's.
    const auto cert = certify_catalog(c, ours / "pkg", fixture, /*hash_artifacts=*/true);
    EXPECT_EQ(cert.tensors, model.tensors().size());
    EXPECT_EQ(cert.bytes_compared, model.tensor_bytes());
    // The reference's package passes the same certification: one rule for both writers.
    (void)certify_catalog(reference.catalog, theirs.path(), fixture, true);
  }
}

TEST(V2Write, LayersOverTheArtifactBudgetBecomeParts) {
  const auto src = test::data_path("llama-tiny-q8_0.gguf");
  TempDir dir;
  auto o = v2_options(src, dir / "pkg");
  o.max_artifact_bytes = 20000;  // a layer of this fixture holds 39680 bytes
  (void)write_package(o);
  const auto opened = test::local_catalog(dir / "pkg");
  size_t part_artifacts = 0;
  for (const auto& a : opened.catalog.artifacts) {
    if (a.path.find("-part") == std::string::npos) continue;
    ++part_artifacts;
    EXPECT_TRUE(a.id.find("-part") != std::string::npos) << a.id;
    EXPECT_TRUE(a.path.starts_with("layers/layer-") || a.path.starts_with("shared/common-part")) << a.path;
    uint64_t payload = 0, largest = 0;
    size_t n = 0;
    for (const auto& t : opened.catalog.tensors) {
      if (&opened.catalog.artifact_of(t) != &a) continue;
      payload += t.stored_bytes;
      largest = std::max(largest, t.stored_bytes);
      ++n;
    }
    EXPECT_GT(n, 0u);
    EXPECT_TRUE(payload <= 20000 || n == 1) << a.path << " holds " << payload;
  }
  EXPECT_GE(part_artifacts, 16u);  // every layer in two parts or more
  (void)certify_catalog(opened.catalog, dir / "pkg", src, true);
  // The same source without a budget has no part at all.
  TempDir whole;
  (void)write_package(v2_options(src, whole / "pkg"));
  for (const auto& a : test::local_catalog(whole / "pkg").catalog.artifacts) {
    EXPECT_EQ(a.path.find("-part"), std::string::npos) << a.path;
  }
}

TEST(V2Write, AProjectorBecomesAnMmprojSidecarWithItsBytes) {
  const auto src = test::data_path("llama-tiny-q8_0.gguf");
  TempDir dir;
  test::make_projector(dir / "mmproj-a.gguf");
  auto o = v2_options(src, dir / "pkg");
  o.projectors = {dir / "mmproj-a.gguf"};
  (void)write_package(o);
  const auto opened = test::local_catalog(dir / "pkg");
  const auto& root = test::root_v2(opened);
  ASSERT_EQ(root.sidecars.size(), 1u);
  EXPECT_EQ(root.sidecars[0].kind, "mmproj");
  EXPECT_EQ(root.sidecars[0].artifact_id, "projector-00000");
  const auto* a = opened.catalog.find_artifact("projector-00000");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->path, "projectors/projector-00000.gguf");
  EXPECT_EQ(a->kind, CatalogArtifactKind::kSidecar);
  EXPECT_EQ(test::read_file(dir / "pkg" / a->path), test::read_file(dir / "mmproj-a.gguf"));
}

TEST(V2Write, TheCliDefaultStaysSchema1AndSchema2SaysItsPackageId) {
  const auto src = test::data_path("llama-tiny-q8_0.gguf");
  TempDir dir;
  auto r1 = test::write_pkg(src, dir / "v1");
  ASSERT_EQ(r1.exit_code, 0) << r1.err;
  EXPECT_EQ(nlohmann::json::parse(r1.out)["schema_version"], 1);
  EXPECT_EQ(nlohmann::json::parse(test::read_text(dir / "v1/model-package.json"))["schema_version"], 1);
  auto r2 = test::write_pkg(src, dir / "v2", {"--schema", "2", "--validate"});
  ASSERT_EQ(r2.exit_code, 0) << r2.err;
  const auto doc = nlohmann::json::parse(r2.out);
  EXPECT_EQ(doc["schema_version"], 2);
  EXPECT_EQ(doc["validated"], true);
  EXPECT_EQ(doc["package_id"], test::local_catalog(dir / "v2").catalog.package_id);
  EXPECT_FALSE(fs::exists(dir / "v2/.skippy-write-package-in-progress"));
  auto bad = test::write_pkg(src, dir / "v3", {"--max-artifact-bytes", "1M"});
  EXPECT_EQ(bad.exit_code, 2);
  test::expect_json_error(bad, "usage", "--max-artifact-bytes goes with --schema 2");
}

TEST(V2Write, ARerunFinishesTheDirectoryOfAnInterruptedRunAndRefusesAForeignOne) {
  const auto src = test::data_path("llama-tiny-q8_0.gguf");
  TempDir dir;
  // What a killed run leaves: the marker, a half-written part under a temporary name.
  fs::create_directories(dir / "pkg/layers");
  test::write_file(dir / "pkg/.skippy-write-package-in-progress", {});
  test::write_file(dir / "pkg/layers/.layer-00003.gguf.partial-0123456789ab", {1, 2, 3});
  (void)write_package(v2_options(src, dir / "pkg"));
  EXPECT_NO_THROW((void)test::local_catalog(dir / "pkg"));
  EXPECT_FALSE(fs::exists(dir / "pkg/layers/.layer-00003.gguf.partial-0123456789ab"));
  EXPECT_FALSE(fs::exists(dir / "pkg/.skippy-write-package-in-progress"));
  // A directory that holds something else is not ours without --force.
  fs::create_directories(dir / "other");
  test::write_file(dir / "other/notes.txt", {1});
  EXPECT_THROW((void)write_package(v2_options(src, dir / "other")), Error);
  EXPECT_FALSE(fs::exists(dir / "other/model-package.json"));
}

// The reference's package_v2/layout tests.rs cases for the budget split.
std::vector<std::vector<std::string>> split_names(const std::vector<std::pair<std::string, uint64_t>>& tensors,
                                                  uint64_t budget) {
  std::vector<GgufTensorInfo> infos(tensors.size());
  std::vector<SourceTensor> st(tensors.size());
  std::vector<const SourceTensor*> group;
  for (size_t i = 0; i < tensors.size(); ++i) {
    infos[i].name = tensors[i].first;
    infos[i].bytes = tensors[i].second;
    st[i] = {&infos[i], 0, classify_tensor(tensors[i].first)};
    group.push_back(&st[i]);
  }
  std::vector<std::vector<std::string>> out;
  for (const auto& part : detail::split_v2_group(group, budget)) {
    out.emplace_back();
    for (const auto* t : part) out.back().emplace_back(t->info->name);
  }
  return out;
}

TEST(V2Write, TheBudgetSplitIsTheReferences) {
  // oversized_layer_splits_into_budget_bounded_parts: 4 x 10 bytes, budget 21 -> 20 / 20.
  using V = std::vector<std::vector<std::string>>;
  EXPECT_EQ(split_names({{"blk.0.attn_q.weight", 10}, {"blk.0.attn_k.weight", 10}, {"blk.0.attn_v.weight", 10},
                         {"blk.0.ffn_down.weight", 10}},
                        21),
            (V{{"blk.0.attn_k.weight", "blk.0.attn_q.weight"}, {"blk.0.attn_v.weight", "blk.0.ffn_down.weight"}}));
  // indivisible_oversized_tensors_get_separate_parts: 2 x 100, budget 21 -> one each.
  EXPECT_EQ(split_names({{"blk.0.attn_q.weight", 100}, {"blk.0.ffn_down.weight", 100}}, 21),
            (V{{"blk.0.attn_q.weight"}, {"blk.0.ffn_down.weight"}}));
  // Within the budget: one part (every_tensor_is_bound_exactly_once in one artifact).
  EXPECT_EQ(split_names({{"blk.1.b", 10}, {"blk.1.a", 10}}, 20), (V{{"blk.1.a", "blk.1.b"}}));
}

// A copy of the MTP fixture with its nextn_predict_layers KV changed
// (nullopt: removed), every tensor as it was.
fs::path mtp_variant(const TempDir& dir, std::optional<uint32_t> depth) {
  const auto src = GgufFile::open(test::data_path("glm4moe-mtp-tiny.gguf"));
  const std::string key = std::string(src.architecture()) + ".nextn_predict_layers";
  GgufWriter w(src.alignment());
  for (const auto& kv : src.kvs()) {
    if (kv.key == key) {
      if (depth) w.add_u32(key, *depth);
      continue;
    }
    w.add_kv(std::string(kv.key), kv.value);
  }
  for (const auto& t : src.tensors()) w.add_tensor_from(src, t);
  const auto out = dir / "glm4moe-variant.gguf";
  AtomicFile f(out);
  (void)w.write(f);
  f.commit();
  return out;
}

TEST(V2Write, NativeMtpIsDeclaredOnlyWhenTheKeyAndTheTensorsAgree) {
  TempDir dir;
  auto refused = [&](std::optional<uint32_t> depth, const std::string& needle) {
    const auto src = mtp_variant(dir, depth);
    try {
      (void)write_package(v2_options(src, dir / "pkg"));
      ADD_FAILURE() << "wrote a package whose native-MTP evidence disagrees";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(dir / "pkg/model-package.json"));
  };
  refused(std::nullopt, "nextn_predict_layers is absent");  // nextn tensors, no key
  refused(0u, "nextn_predict_layers is 0");
  refused(2u, "executes depth 1 only");
  // The key at 1 with the tensors at the last layer: the one declaration.
  const auto src = mtp_variant(dir, 1u);
  (void)write_package(v2_options(src, dir / "ok"));
  const auto ok = test::local_catalog(dir / "ok");
  const auto g = test::root_v2(ok).generation;
  ASSERT_TRUE(g && g->speculative_decoding);
  EXPECT_EQ(g->speculative_decoding->default_strategy, "mtp");
  EXPECT_EQ(g->speculative_decoding->strategies.at("mtp").prediction_depth, 1u);
  // A model without MTP gets no generation block at all.
  (void)write_package(v2_options(test::data_path("qwen3moe-tiny.gguf"), dir / "plain"));
  EXPECT_FALSE(test::root_v2(dir / "plain").generation.has_value());
}

TEST(V2Write, CertifyingAgainstAnotherSourceNamesATensor) {
  const auto src = test::data_path("llama-tiny-q8_0.gguf");
  TempDir dir;
  auto o = v2_options(src, dir / "pkg");
  o.validate = true;
  o.source = src;
  (void)write_package(o);
  const auto opened = test::local_catalog(dir / "pkg");
  try {
    (void)certify_catalog(opened.catalog, dir / "pkg", test::data_path("llama-tiny-f16.gguf"), true);
    ADD_FAILURE() << "certified against the wrong source";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIntegrity);
    EXPECT_NE(std::string(e.what()).find("tensor '"), std::string::npos) << e.what();
  }
}

}  // namespace v2write_test
}  // namespace skippy
