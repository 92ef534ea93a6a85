// The catalog consumer serves a schema 1 package: select_stage on the
// catalog of every fragment picks the parts a stage loader (the catalog of
// only the range's fragments, open_stage) picks and the tensors a StageView
// holds, in load order, and materializing from either catalog writes the
// same bytes.
#include <gtest/gtest.h>

#include "reference_package.h"
#include "skippy/stage.h"
#include "skippy/error.h"
#include "skippy/materialize.h"
#include "skippy/stage_view.h"
#include "skippy/verify.h"
#include "test_util.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

std::vector<LayerRange> v1cons_ranges(uint32_t n) {
  std::vector<LayerRange> out = {{0, n}, {0, 1}, {n - 1, n}};
  if (n > 2) out.push_back({1, n - 1});
  return out;
}

void v1cons_expect_one_consumer(const fs::path& dir, const fs::path& scratch) {
  const auto pkg = open_local_package(dir);
  const OpenedCatalog cat = test::catalog_of(pkg);
  EXPECT_EQ(cat.ref, pkg.ref);
  EXPECT_EQ(cat.manifest_sha256, pkg.manifest_sha256);
  for (const auto range : v1cons_ranges(test::manifest(pkg).layer_count)) {
    SCOPED_TRACE(format_layer_range(range));
    const auto sel = test::select_v1(pkg, range);
    const auto stage = select_stage(cat.catalog, range);
    ASSERT_EQ(stage.parts.size(), sel.parts.size());
    for (size_t i = 0; i < sel.parts.size(); ++i) {
      EXPECT_EQ(stage.parts[i].rel_path, sel.parts[i].rel_path);
      EXPECT_EQ(stage.parts[i].layer_index, sel.parts[i].layer_index);
      EXPECT_EQ(stage.parts[i].sha256, sel.parts[i].sha256);
      EXPECT_EQ(stage.parts[i].tensors.size(), sel.parts[i].tensor_count) << sel.parts[i].rel_path;
    }
    EXPECT_EQ(stage.notes, sel.notes);
    // The catalog of only this stage's fragments selects the same stage, and
    // lists no fragment the stage does not read.
    const OpenedCatalog lazy = test::catalog_of(pkg, range);
    const auto lazy_stage = select_stage(lazy.catalog, range);
    ASSERT_EQ(lazy_stage.parts.size(), stage.parts.size());
    for (size_t i = 0; i < stage.parts.size(); ++i) {
      EXPECT_EQ(lazy_stage.parts[i].rel_path, stage.parts[i].rel_path);
      EXPECT_EQ(lazy_stage.parts[i].tensors, stage.parts[i].tensors);
    }
    ASSERT_EQ(lazy_stage.tensors.size(), stage.tensors.size());
    for (size_t i = 0; i < stage.tensors.size(); ++i) {
      EXPECT_EQ(lazy_stage.tensors[i].name, stage.tensors[i].name);
      EXPECT_EQ(lazy_stage.tensors[i].offset, stage.tensors[i].offset);
    }
    EXPECT_EQ(lazy_stage.notes, stage.notes);
    size_t listed = 0;
    for (const auto& a : lazy.catalog.artifacts) listed += a.tensors_listed && a.kind != CatalogArtifactKind::kSidecar;
    EXPECT_EQ(listed, stage.parts.size()) << "only the stage's fragments are read";
    const auto view = StageView::open(lazy.catalog, sel);
    ASSERT_EQ(stage.tensors.size(), view.tensors().size());
    for (size_t i = 0; i < stage.tensors.size(); ++i) {
      EXPECT_EQ(stage.tensors[i].name, std::string(view.tensors()[i].info->name));
      EXPECT_EQ(stage.tensors[i].offset, view.tensors()[i].info->file_offset);
      EXPECT_EQ(stage.tensors[i].artifact_id, view.part_of(view.tensors()[i]).rel_path);
    }
    MaterializeOptions a, b;
    a.out = scratch / ("v1-" + format_layer_range(range) + ".gguf");
    b.out = scratch / ("catalog-" + format_layer_range(range) + ".gguf");
    (void)test::materialize_v1(pkg, sel, a);
    (void)materialize_stage(cat, stage, b);
    EXPECT_EQ(test::read_file(*a.out), test::read_file(*b.out));
    // Verification covers the metadata part too (a schema 1 carrier is a fragment).
    const auto r = verify_stage(cat, stage);
    EXPECT_TRUE(r.verified);
    EXPECT_EQ(r.artifacts, sel.parts.size());
  }
}

TEST(V1CatalogConsumer, SelectsAndMaterializesAsTheSchema1Path) {
  for (const auto& fixture : test::model_fixtures()) {
    SCOPED_TRACE(fixture.string());
    TempDir tmp;
    ASSERT_EQ(test::write_pkg(fixture, tmp / "p").exit_code, 0);
    v1cons_expect_one_consumer(tmp / "p", tmp.path());
  }
}

TEST(V1CatalogConsumer, ReadsTheReferenceDialectAsTheSchema1Path) {
  for (const auto& fixture : test::model_fixtures()) {
    SCOPED_TRACE(fixture.string());
    TempDir tmp;
    (void)test::write_reference_package(fixture, tmp / "ref");
    v1cons_expect_one_consumer(tmp / "ref", tmp.path());
  }
}

TEST(V1CatalogConsumer, RefusesACatalogThatDoesNotListTheFragments) {
  TempDir tmp;
  ASSERT_EQ(test::write_pkg(test::data_path("llama-tiny-q8_0.gguf"), tmp / "p").exit_code, 0);
  const auto m = test::load_manifest(tmp / "p");
  try {
    (void)select_stage(catalog_artifacts_v1(m), {0, 1});
    ADD_FAILURE() << "selected from a catalog without tensors";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUsage);
    EXPECT_NE(std::string(e.what()).find("shared/metadata.gguf's tensors are not in the catalog"), std::string::npos)
        << e.what();
  }
}

TEST(V1CatalogConsumer, VerificationFindsADamagedMetadataPart) {
  TempDir tmp;
  const fs::path dir = tmp / "p";
  ASSERT_EQ(test::write_pkg(test::data_path("llama-tiny-q8_0.gguf"), dir).exit_code, 0);
  const OpenedCatalog cat = test::catalog_of(open_local_package(dir));
  const auto stage = select_stage(cat.catalog, {0, 1});
  auto bytes = test::read_file(dir / "shared/metadata.gguf");
  bytes[bytes.size() - 1] ^= 0x01;  // same size, other bytes
  test::write_file(dir / "shared/metadata.gguf", bytes);
  VerifyOptions o;
  o.use_cache = false;
  const auto r = verify_stage(cat, stage, o);
  EXPECT_FALSE(r.verified);
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_NE(r.problems[0].find("shared/metadata.gguf"), std::string::npos) << r.problems[0];
}

}  // namespace
}  // namespace skippy
