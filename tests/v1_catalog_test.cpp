// Package schema 1 read into the catalog (build_catalog_v1 and
// read_catalog_v1): every source tensor once, where its bytes lie in which
// fragment; the artifacts with their paths, sizes, digests and roles; the
// reference writer's repeated extras folded; the fragment rules refused.
#include <gtest/gtest.h>

#include <map>

#include "reference_package.h"
#include "skippy/stage.h"
#include "skippy/error.h"
#include "util/file.h"
#include "skippy/gguf.h"
#include "skippy/model_source.h"
#include "skippy/package_catalog.h"
#include "util/sha256.h"
#include "test_util.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

std::vector<uint8_t> v1cat_bytes_at(const fs::path& file, uint64_t offset, uint64_t n) {
  std::vector<uint8_t> out(static_cast<size_t>(n));
  MappedFile::open(file)->pread_exact(offset, out);
  return out;
}

std::vector<uint8_t> v1cat_source_bytes(const ModelSource& model, const SourceTensor& t) {
  const GgufFile& shard = model.shards()[t.shard];
  const auto d = shard.tensor_data(*t.info);
  return {d.begin(), d.end()};
}

// The catalog lists exactly the source's tensors, each once, with the
// source's type and dims, and the bytes at its locator are the source's.
void v1cat_expect_catalog_is_the_source(const PackageCatalog& cat, const fs::path& dir, const ModelSource& model) {
  ASSERT_EQ(cat.tensors.size(), model.tensors().size());
  for (const auto& st : model.tensors()) {
    const std::string name(st.info->name);
    SCOPED_TRACE(name);
    const CatalogTensor* t = cat.find_tensor(name);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->ggml_type, st.info->type);
    ASSERT_EQ(t->dims.size(), st.info->ne.size());
    for (size_t i = 0; i < t->dims.size(); ++i) EXPECT_EQ(t->dims[i], static_cast<uint64_t>(st.info->ne[i]));
    EXPECT_EQ(t->stored_bytes, st.info->bytes);
    EXPECT_EQ(t->role, st.placement.role);
    EXPECT_EQ(t->layer.has_value(), st.placement.role == TensorRole::kLayer);
    if (t->layer) {
      EXPECT_EQ(*t->layer, st.placement.layer);
    }
    EXPECT_EQ(t->offset % t->alignment, 0u);
    const CatalogArtifact& a = cat.artifact_of(*t);
    EXPECT_EQ(v1cat_bytes_at(dir / a.path, t->offset, t->stored_bytes), v1cat_source_bytes(model, st));
  }
}

TEST(V1Catalog, ListsEveryTensorOnceWhereItsBytesLie) {
  for (const auto& fixture : test::model_fixtures()) {
    SCOPED_TRACE(fixture.string());
    TempDir tmp;
    const fs::path dir = tmp / "p";
    ASSERT_EQ(test::write_pkg(fixture, dir).exit_code, 0);
    const auto pkg = open_local_package(dir);
    const PackageCatalog cat = test::catalog_of(pkg).catalog;
    const auto model = ModelSource::open(fixture);
    EXPECT_EQ(cat.schema_version, 1u);
    EXPECT_EQ(cat.model_id, test::manifest(pkg).model_id);
    EXPECT_EQ(cat.layer_count, model.layer_count());
    EXPECT_EQ(cat.architecture, model.architecture());
    EXPECT_TRUE(cat.package_id.empty());
    ASSERT_NE(cat.carrier_file, nullptr);
    EXPECT_EQ(cat.carrier_file->find_kv("general.architecture") != nullptr, true);
    EXPECT_EQ(cat.merged_duplicates, 0u);
    v1cat_expect_catalog_is_the_source(cat, dir, model);
  }
}

TEST(V1Catalog, ArtifactsCarryTheManifestsPathsSizesDigestsAndRoles) {
  TempDir tmp;
  const fs::path dir = tmp / "p";
  const fs::path projector = tmp / "mmproj.gguf";
  (void)test::make_projector(projector);
  ASSERT_EQ(test::write_pkg(test::data_path("llama-tiny-q8_0.gguf"), dir, {"--projector", projector.string()}).exit_code, 0);
  const auto pkg = open_local_package(dir);
  const PackageCatalog cat = test::catalog_of(pkg).catalog;
  const auto& m = test::manifest(pkg);
  // Load order: metadata (the carrier), embeddings, layers, output, then the projector.
  ASSERT_EQ(cat.artifacts.size(), 3 + m.layers.size() + m.projectors.size());
  ASSERT_EQ(m.projectors.size(), 1u);
  EXPECT_EQ(cat.carrier, 0u);
  std::vector<std::pair<std::string, PartRole>> want = {{"shared/metadata.gguf", PartRole::kMetadata},
                                                        {"shared/embeddings.gguf", PartRole::kEmbeddings}};
  for (const auto& l : m.layers) want.emplace_back(l.path, PartRole::kLayer);
  want.emplace_back("shared/output.gguf", PartRole::kOutput);
  want.emplace_back(m.projectors[0].path, PartRole::kProjector);
  std::map<PartRole, uint64_t> tensors_by_role;
  for (const auto& t : cat.tensors) tensors_by_role[*cat.artifact_of(t).role]++;
  for (size_t i = 0; i < want.size(); ++i) {
    const CatalogArtifact& a = cat.artifacts[i];
    SCOPED_TRACE(a.path);
    EXPECT_EQ(a.path, want[i].first);
    EXPECT_EQ(a.id, a.path);
    EXPECT_EQ(a.role, want[i].second);
    EXPECT_EQ(a.bytes, fs::file_size(dir / a.path));
    EXPECT_EQ(a.sha256, sha256_file(dir / a.path));
    EXPECT_EQ(cat.find_artifact(a.id), &a);
    const bool projector_part = want[i].second == PartRole::kProjector;
    EXPECT_EQ(a.kind, i == 0 ? CatalogArtifactKind::kCarrier
                      : projector_part ? CatalogArtifactKind::kSidecar
                                       : CatalogArtifactKind::kPayload);
    EXPECT_EQ(a.tensors_listed, !projector_part);  // a projector is listed, never read
    if (projector_part) {
      EXPECT_EQ(a.sidecar_kind, "mmproj");
    }
    if (a.role == PartRole::kLayer) {
      EXPECT_EQ(a.layer, static_cast<uint32_t>(i - 2));
    } else {
      EXPECT_FALSE(a.layer.has_value());
    }
    EXPECT_EQ(a.part_index.has_value(), a.kind == CatalogArtifactKind::kPayload);
    if (a.part_index) {
      EXPECT_EQ(*a.part_index, i - 1);
    }
  }
  // Each model part's listed tensors are the ones it declares.
  uint64_t layer_tensors = 0;
  for (const auto& l : m.layers) layer_tensors += l.tensor_count;
  EXPECT_EQ(tensors_by_role[PartRole::kMetadata], m.shared.metadata.tensor_count);
  EXPECT_EQ(tensors_by_role[PartRole::kEmbeddings], m.shared.embeddings.tensor_count);
  EXPECT_EQ(tensors_by_role[PartRole::kOutput], m.shared.output.tensor_count);
  EXPECT_EQ(tensors_by_role[PartRole::kLayer], layer_tensors);
  EXPECT_EQ(tensors_by_role.count(PartRole::kProjector), 0u);
}

TEST(V1Catalog, FoldsTheReferenceWritersRepeatedExtras) {
  for (const auto& fixture : test::model_fixtures()) {
    SCOPED_TRACE(fixture.string());
    TempDir tmp;
    const fs::path dir = tmp / "ref";
    const uint64_t repeated = test::write_reference_package(fixture, dir);
    const auto pkg = open_local_package(dir);
    const PackageCatalog cat = test::catalog_of(pkg).catalog;
    EXPECT_EQ(cat.merged_duplicates, repeated);
    v1cat_expect_catalog_is_the_source(cat, dir, ModelSource::open(fixture));
  }
}

TEST(V1Catalog, BuildsFromPartOfTheFragments) {
  TempDir tmp;
  const fs::path dir = tmp / "p";
  ASSERT_EQ(test::write_pkg(test::data_path("llama-tiny-q8_0.gguf"), dir).exit_code, 0);
  const auto m = test::load_manifest(dir);
  std::unordered_map<std::string, std::shared_ptr<const GgufFile>> headers;
  for (const auto& path : {std::string("shared/metadata.gguf"), std::string("shared/output.gguf"), m.layers[1].path}) {
    headers[path] = std::make_shared<const GgufFile>(GgufFile::open(dir / path));
  }
  const PackageCatalog cat = build_catalog_v1(m, headers);
  uint64_t want = m.shared.metadata.tensor_count + m.shared.output.tensor_count + m.layers[1].tensor_count;
  EXPECT_EQ(cat.tensors.size(), want);
  for (const auto& a : cat.artifacts) EXPECT_EQ(a.tensors_listed, headers.contains(a.path)) << a.path;
  EXPECT_NE(cat.find_tensor("output_norm.weight"), nullptr);
  EXPECT_EQ(cat.find_tensor("token_embd.weight"), nullptr);  // its fragment was not read
  for (const auto& t : cat.tensors) {
    if (t.layer) {
      EXPECT_EQ(*t.layer, 1u) << t.name;
    }
  }
}

void v1cat_expect_refused(const std::function<void()>& f, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "not refused";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput) << e.what();
    for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

TEST(V1Catalog, RefusesAFragmentThatIsNotThePartTheManifestSays) {
  TempDir tmp;
  const fs::path dir = tmp / "p";
  ASSERT_EQ(test::write_pkg(test::data_path("llama-tiny-q8_0.gguf"), dir).exit_code, 0);
  const auto m = test::load_manifest(dir);
  const auto open = [&](const std::string& path) { return std::make_shared<const GgufFile>(GgufFile::open(dir / path)); };
  // A declared tensor count the fragment does not hold.
  {
    auto bad = m;
    bad.layers[0].tensor_count += 1;
    PackageCatalog cat = catalog_artifacts_v1(bad);
    v1cat_expect_refused([&] { add_fragment_v1(cat, 2, open(m.layers[0].path)); },
                   {m.layers[0].path, "holds " + std::to_string(m.layers[0].tensor_count) + " tensors",
                    "tensor_count " + std::to_string(m.layers[0].tensor_count + 1)});
  }
  // Layer 1's fragment read as layer 0's: its own keys say otherwise.
  {
    PackageCatalog cat = catalog_artifacts_v1(m);
    cat.artifacts[2].tensor_count = m.layers[1].tensor_count;
    v1cat_expect_refused([&] { add_fragment_v1(cat, 2, open(m.layers[1].path)); },
                   {m.layers[0].path, "skippy.package.layer_start says layer 1, expected 0"});
  }
  // The output fragment read as the embeddings.
  {
    PackageCatalog cat = catalog_artifacts_v1(m);
    cat.artifacts[1].tensor_count = m.shared.output.tensor_count;
    v1cat_expect_refused([&] { add_fragment_v1(cat, 1, open("shared/output.gguf")); },
                   {"says it is the output fragment but the manifest lists it as the embeddings part"});
  }
  // The same fragment read twice: each of its tensors would be listed twice.
  {
    PackageCatalog cat = catalog_artifacts_v1(m);
    add_fragment_v1(cat, 1, open("shared/embeddings.gguf"));
    EXPECT_THROW(add_fragment_v1(cat, 1, open("shared/embeddings.gguf")), Error);
  }
  // A projector is never read into the catalog.
  {
    PackageCatalog cat = catalog_artifacts_v1(m);
    EXPECT_THROW(add_fragment_v1(cat, cat.artifacts.size(), open("shared/output.gguf")), Error);
  }
}

TEST(V1Catalog, ReadCatalogNamesThePackageAndTheFragment) {
  TempDir tmp;
  const fs::path dir = tmp / "p";
  ASSERT_EQ(test::write_pkg(test::data_path("llama-tiny-q8_0.gguf"), dir).exit_code, 0);
  const auto pkg = open_local_package(dir);
  // A layer file of another size than declared: the file rule, before any header is read.
  const auto layer = dir / test::manifest(pkg).layers[2].path;
  auto bytes = test::read_file(layer);
  bytes.push_back(0);
  test::write_file(layer, bytes);
  v1cat_expect_refused([&] { (void)test::catalog_of(pkg).catalog; }, {dir.string(), test::manifest(pkg).layers[2].path});
}

}  // namespace
}  // namespace skippy
