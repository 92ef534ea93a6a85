// Package schema 2: the metadata carrier and the catalog built from it, and
// stage selection from the catalog, on packages written by the test-side
// reference-layout writer (schema_v2_package.h), never by our own writer.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "schema_v2_package.h"
#include "skippy/stage.h"
#include "skippy/error.h"
#include "skippy/model_source.h"
#include "skippy/package_catalog.h"
#include "test_util.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using test::SchemaV2Locators;
using test::SchemaV2Options;
using test::TempDir;

const fs::path kLlama = test::data_path("llama-tiny-q8_0.gguf");

size_t index_of(const SchemaV2Locators& l, const std::string& name) {
  return static_cast<size_t>(std::find(l.names.begin(), l.names.end(), name) - l.names.begin());
}

void expect_open_refused(const SchemaV2Options& o, const std::string& needle, ErrorKind kind = ErrorKind::kInvalidInput) {
  TempDir dir;
  (void)test::write_schema_v2_package(kLlama, dir.path(), o);
  try {
    (void)test::local_catalog(dir.path());
    ADD_FAILURE() << "opened, expected a refusal containing: " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(V2Catalog, ReadsEveryTensorLocatorOfAReferenceLayoutPackage) {
  for (const auto& fixture : test::model_fixtures()) {
    SCOPED_TRACE(fixture.string());
    TempDir dir;
    const auto written = test::write_schema_v2_package(fixture, dir.path());
    const auto opened = test::local_catalog(dir.path());
    const PackageCatalog& cat = opened.catalog;
    const auto model = ModelSource::open(fixture);
    EXPECT_EQ(cat.schema_version, 2u);
    EXPECT_EQ(cat.package_id, written.root["package_id"].get<std::string>());
    EXPECT_EQ(cat.layer_count, model.layer_count());
    EXPECT_EQ(cat.architecture, model.architecture());
    EXPECT_EQ(cat.artifacts.at(cat.carrier).path, "shared/metadata.gguf");
    // The MTP fixture gets the reference writer's native-mtp generation.
    EXPECT_EQ(test::root_v2(opened).generation.has_value(), written.root.contains("generation"));
    if (fixture.filename() == "glm4moe-mtp-tiny.gguf") {
      ASSERT_TRUE(test::root_v2(opened).generation.has_value());
      const auto root = test::root_v2(opened);
      const auto& mtp = root.generation->speculative_decoding->strategies.at("mtp");
      EXPECT_EQ(mtp.layer_indices, std::vector<uint32_t>{cat.layer_count - 1});
      EXPECT_EQ(mtp.window_policy->max_window, 1u);
    }
    ASSERT_EQ(cat.tensors.size(), model.tensors().size());
    for (const auto& t : cat.tensors) {
      const auto& want = written.tensors.at(t.name);
      EXPECT_EQ(cat.artifact_of(t).id, want.artifact_id) << t.name;
      EXPECT_EQ(t.offset, want.offset) << t.name;
      EXPECT_EQ(t.stored_bytes, want.size) << t.name;
      const auto* src = model.find_tensor(t.name);
      ASSERT_NE(src, nullptr);
      EXPECT_EQ(t.ggml_type, src->info->type);
      EXPECT_EQ(t.stored_bytes, src->info->bytes);
      if (src->placement.role == TensorRole::kLayer) {
        EXPECT_EQ(t.layer, src->placement.layer) << t.name;
        EXPECT_EQ(cat.artifact_of(t).layer, src->placement.layer) << t.name;
      } else {
        EXPECT_FALSE(t.layer.has_value()) << t.name;
        EXPECT_EQ(cat.artifact_of(t).path, "shared/common.gguf") << t.name;
      }
    }
    // Part indexes are ranks by id among payload artifacts: "m-common" < the
    // layers' "q-<999-L>", so layer L's part index is layer_count - L.
    for (const auto& a : cat.artifacts) {
      if (a.kind != CatalogArtifactKind::kPayload) {
        EXPECT_FALSE(a.part_index.has_value());
        continue;
      }
      if (a.layer) {
        EXPECT_EQ(a.part_index, cat.layer_count - *a.layer) << a.id;
      } else {
        EXPECT_EQ(a.part_index, 0u) << a.id;
      }
    }
  }
}

TEST(V2Catalog, LayerPartsAndSidecars) {
  TempDir dir, proj;
  test::make_projector(proj / "mmproj.gguf");
  SchemaV2Options o;
  o.split_first_layer = true;
  o.projectors = {proj / "mmproj.gguf"};
  const auto written = test::write_schema_v2_package(kLlama, dir.path(), o);
  const auto cat = test::local_catalog(dir.path()).catalog;
  const auto* p0 = cat.find_artifact("q-999-b");
  const auto* p1 = cat.find_artifact("q-999-a");
  ASSERT_TRUE(p0 && p1);
  EXPECT_EQ(p0->path, "layers/layer-00000-part00.gguf");
  EXPECT_EQ(p0->layer, 0u);
  EXPECT_EQ(p1->layer, 0u);
  EXPECT_LT(p1->part_index, p0->part_index);  // "q-999-a" ranks first
  const auto* mm = cat.find_artifact("mm-7");
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(mm->kind, CatalogArtifactKind::kSidecar);
  EXPECT_EQ(mm->sidecar_kind, "mmproj");
  EXPECT_EQ(mm->sidecar_name, "vision-0");
  const auto s = select_stage(cat, {0, 1});
  std::set<std::string> ids;
  for (const auto& p : s.parts) ids.insert(p.artifact_id);
  EXPECT_EQ(ids, (std::set<std::string>{"zz-carrier", "m-common", "q-999-a", "q-999-b"}));
}

TEST(V2Catalog, ACarrierDirectoryMayPutEveryTensorAtOffsetZero) {
  // The carrier's directory names types and dims; where the bytes are is
  // the locators' business (the reference's own test carriers do this).
  TempDir dir;
  SchemaV2Options o;
  o.carrier_directory_offsets_zero = true;
  const auto written = test::write_schema_v2_package(kLlama, dir.path(), o);
  const auto cat = test::local_catalog(dir.path()).catalog;
  ASSERT_GT(cat.carrier_file->tensors().size(), 1u);
  for (const auto& t : cat.carrier_file->tensors()) EXPECT_EQ(t.offset, 0u);
  for (const auto& t : cat.tensors) EXPECT_EQ(t.offset, written.tensors.at(t.name).offset);
}

TEST(V2Catalog, PathAndNameLayers) {
  EXPECT_EQ(artifact_path_layer("layers/layer-00042.gguf"), 42u);
  EXPECT_EQ(artifact_path_layer("layers/layer-00042-part01.gguf"), 42u);
  EXPECT_EQ(artifact_path_layer("layers/layer-x.gguf"), std::nullopt);
  EXPECT_EQ(artifact_path_layer("layers/layer-00001-partx.gguf"), std::nullopt);
  EXPECT_EQ(artifact_path_layer("shared/common.gguf"), std::nullopt);
  EXPECT_EQ(tensor_name_layer("blk.17.attn_q.weight"), 17u);
  EXPECT_EQ(tensor_name_layer("blk.3.nextn.eh_proj.weight"), 3u);
  EXPECT_EQ(tensor_name_layer("blk.01.attn_q.weight"), std::nullopt);
  EXPECT_EQ(tensor_name_layer("token_embd.weight"), std::nullopt);
}

// ------------------------------------------------------------ refusals

TEST(V2Catalog, RefusesALocatorPastItsArtifact) {
  SchemaV2Options o;
  o.edit_locators = [](SchemaV2Locators& l) { l.offset[index_of(l, "output_norm.weight")] += 1u << 20; };
  expect_open_refused(o, "tensor 'output_norm.weight': extent");
  o.edit_locators = [](SchemaV2Locators& l) { l.offset[index_of(l, "blk.0.attn_q.weight")] = UINT64_MAX - 63; };
  expect_open_refused(o, "runs past the end of artifact q-999 (layers/layer-00000.gguf");
}

TEST(V2Catalog, RefusesOverlappingExtents) {
  SchemaV2Options o;
  o.edit_locators = [](SchemaV2Locators& l) {
    l.offset[index_of(l, "blk.0.attn_k.weight")] = l.offset[index_of(l, "blk.0.attn_q.weight")];
  };
  expect_open_refused(o, "overlaps tensor 'blk.0.attn_");
}

TEST(V2Catalog, RefusesBadAlignments) {
  SchemaV2Options o;
  o.edit_locators = [](SchemaV2Locators& l) { l.alignment[index_of(l, "blk.1.ffn_up.weight")] = 48; };
  expect_open_refused(o, "tensor 'blk.1.ffn_up.weight': alignment 48 is not a non-zero power of two");
  o.edit_locators = [](SchemaV2Locators& l) { l.alignment[index_of(l, "blk.1.ffn_up.weight")] = 0; };
  expect_open_refused(o, "tensor 'blk.1.ffn_up.weight': alignment 0");
  o.edit_locators = [](SchemaV2Locators& l) { l.offset[index_of(l, "blk.1.ffn_up.weight")] += 32; };
  expect_open_refused(o, "tensor 'blk.1.ffn_up.weight': offset");  // 64-aligned parts
}

TEST(V2Catalog, RefusesABadPartIndex) {
  SchemaV2Options o;
  o.edit_locators = [](SchemaV2Locators& l) { l.part[index_of(l, "token_embd.weight")] = 99; };
  expect_open_refused(o, "tensor 'token_embd.weight': part index 99 names no payload artifact");
}

TEST(V2Catalog, RefusesATensorStoredInAnotherLayersArtifact) {
  // blk.0's tensor pointed at the same extent in layer 1's artifact (whose
  // part index is one less: ids rank in reverse layer order).
  SchemaV2Options o;
  o.edit_locators = [](SchemaV2Locators& l) {
    const size_t a = index_of(l, "blk.0.attn_norm.weight");
    const size_t b = index_of(l, "blk.1.attn_norm.weight");
    l.part[a] = l.part[b];
    l.offset[a] = l.offset[b] + 0;
  };
  expect_open_refused(o, "tensor 'blk.0.attn_norm.weight' of layer 0 is stored in artifact q-998 (layers/layer-00001.gguf), which holds layer 1");
}

TEST(V2Catalog, RefusesAStoredSizeThatDiffersFromTheTensor) {
  SchemaV2Options o;
  o.edit_locators = [](SchemaV2Locators& l) { l.size[index_of(l, "blk.0.ffn_down.weight")] -= 2; };
  expect_open_refused(o, "tensor 'blk.0.ffn_down.weight': stored size");
  o.edit_locators = [](SchemaV2Locators& l) { l.size[index_of(l, "blk.0.ffn_down.weight")] = 0; };
  expect_open_refused(o, "stored size is 0");
}

TEST(V2Catalog, RefusesLocatorArraysOfTheWrongLength) {
  SchemaV2Options o;
  o.edit_locators = [](SchemaV2Locators& l) { l.alignment.pop_back(); };
  expect_open_refused(o, "skippy.package.tensor_alignment: holds");
}

TEST(V2Catalog, RefusesLocatorArraysOfTheWrongType) {
  SchemaV2Options o;
  o.carrier_offsets_as_u32 = true;
  expect_open_refused(o, "skippy.package.tensor_offset: must be u64[], found u32[]");
}

TEST(V2Catalog, RefusesACarrierWithPayloadOrWithoutItsMarkers) {
  SchemaV2Options o;
  o.carrier_trailing_bytes = 64;
  expect_open_refused(o, "the metadata carrier holds 64 bytes of tensor payload");
  o = {};
  o.carrier_metadata_only = false;
  expect_open_refused(o, "skippy.package.metadata_only must be the bool true");
  o = {};
  o.carrier_locator_schema = 2;
  expect_open_refused(o, "skippy.package.locator_schema is 2");
}

TEST(V2Catalog, RefusesACarrierWhoseBytesDifferFromTheCatalog) {
  TempDir dir;
  (void)test::write_schema_v2_package(kLlama, dir.path());
  auto bytes = test::read_file(dir / "shared/metadata.gguf");
  bytes[40] ^= 1;
  test::write_file(dir / "shared/metadata.gguf", bytes);
  try {
    (void)test::local_catalog(dir.path());
    ADD_FAILURE() << "opened a carrier with other bytes";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIntegrity);
    EXPECT_NE(std::string(e.what()).find("zz-carrier (shared/metadata.gguf): SHA-256"), std::string::npos) << e.what();
  }
}

TEST(V2Catalog, RefusesTamperedRoots) {
  SchemaV2Options o;
  o.edit_root = [](nlohmann::ordered_json& r) { r["package_id"] = "sha256:" + std::string(64, '0'); };
  expect_open_refused(o, "package_id: package identity");
  o.edit_root = [](nlohmann::ordered_json& r) { r["tensor_catalog"] = nlohmann::ordered_json::object(); };
  o.recompute_id_after_edit = true;
  expect_open_refused(o, "tensor_catalog: must not appear in the root");
  o.edit_root = [](nlohmann::ordered_json& r) { r["future"] = 1; };
  expect_open_refused(o, "future: unknown field");
  // An extra payload artifact the carrier does not count.
  o.edit_root = [](nlohmann::ordered_json& r) {
    r["artifact_catalog"]["entries"].push_back(
        {{"id", "extra"}, {"path", "shared/extra.gguf"}, {"byte_size", 1}, {"sha256", std::string(64, '0')}});
  };
  expect_open_refused(o, "skippy.package.part_count is");
  // A carrier of the wrong recorded size.
  o.edit_root = [](nlohmann::ordered_json& r) {
    for (auto& e : r["artifact_catalog"]["entries"]) {
      if (e["id"] == "zz-carrier") e["byte_size"] = e["byte_size"].get<uint64_t>() + 1;
    }
  };
  expect_open_refused(o, "artifact zz-carrier (shared/metadata.gguf): ");
}

// -------------------------------------------------------------- selection

std::set<std::string> names_of(const StageSelection& s) {
  std::set<std::string> out;
  for (const auto& t : s.tensors) out.insert(t.name);
  return out;
}

TEST(V2Select, RangesSelectTheCarrierAndTheArtifactsOfTheirTensors) {
  for (const auto& fixture : test::model_fixtures()) {
    SCOPED_TRACE(fixture.string());
    TempDir dir;
    const auto written = test::write_schema_v2_package(fixture, dir.path());
    const auto opened = test::local_catalog(dir.path());
    const auto& cat = opened.catalog;
    const auto model = ModelSource::open(fixture);
    const uint32_t n = cat.layer_count;
    const bool tied = model.find_tensor("output.weight") == nullptr;
    // A NextN/MTP block's layers (the last ones): a range ending before them
    // is the terminal stage too, holding them (docs/schema-2.md).
    uint32_t trunk = n;
    while (trunk > 0 && model.find_tensor("blk." + std::to_string(trunk - 1) + ".nextn.eh_proj.weight") != nullptr) --trunk;
    for (const LayerRange r : {LayerRange{0, n}, LayerRange{0, 1}, LayerRange{1, n}, LayerRange{n / 2, n / 2 + 1}}) {
      if (r.empty()) continue;
      SCOPED_TRACE(format_layer_range(r));
      const auto s = select_stage(cat, r);
      const bool terminal = r.end == n || r.end == trunk;
      // The expected tensors, from the source by our v1 rule; a tied final
      // stage here reads token_embd.weight only, not the whole embeddings.
      auto want = test::expected_stage_tensors(model, r.start, terminal ? n : r.end);
      if (tied && r.start != 0 && terminal) {
        for (const auto& t : model.tensors()) {
          if (t.placement.role == TensorRole::kEmbeddings && std::string(t.info->name) != "token_embd.weight") {
            want.erase(std::string(t.info->name));
          }
        }
      }
      EXPECT_EQ(names_of(s), want);
      ASSERT_FALSE(s.parts.empty());
      EXPECT_EQ(s.parts[0].artifact_id, "zz-carrier");
      EXPECT_EQ(s.parts[0].rel_path, "shared/metadata.gguf");
      std::set<std::string> want_parts;
      for (const auto& name : want) want_parts.insert(written.tensors.at(name).artifact_id);
      std::set<std::string> got_parts;
      for (size_t i = 1; i < s.parts.size(); ++i) {
        got_parts.insert(s.parts[i].artifact_id);
        EXPECT_EQ(s.parts[i].rel_path, written.artifact_path.at(s.parts[i].artifact_id));
        EXPECT_EQ(check_part(opened, s.parts[i]), fs::canonical(dir / s.parts[i].rel_path));
        if (i > 1) {
          EXPECT_LT(cat.find_artifact(s.parts[i - 1].artifact_id)->part_index, cat.find_artifact(s.parts[i].artifact_id)->part_index);
        }
      }
      EXPECT_EQ(got_parts, want_parts);
      for (const auto& t : s.tensors) {
        EXPECT_EQ(t.artifact_id, written.tensors.at(t.name).artifact_id);
        EXPECT_EQ(t.offset, written.tensors.at(t.name).offset);
      }
      if (tied && r.start != 0 && terminal) {
        EXPECT_FALSE(s.notes.empty());
      }
    }
    EXPECT_THROW((void)select_stage(cat, {0, n + 1}), Error);
    EXPECT_THROW((void)select_stage(cat, {1, 1}), Error);
  }
}

TEST(V2Select, ByTensorNames) {
  TempDir dir;
  const auto written = test::write_schema_v2_package(kLlama, dir.path());
  const auto cat = test::local_catalog(dir.path()).catalog;
  const auto s = select_stage_tensors(cat, {"blk.1.attn_v.weight", "output_norm.weight"});
  ASSERT_EQ(s.parts.size(), 3u);
  EXPECT_EQ(s.parts[0].artifact_id, "zz-carrier");
  EXPECT_EQ(s.parts[1].artifact_id, "m-common");
  EXPECT_EQ(s.parts[1].tensors, std::vector<std::string>{"output_norm.weight"});
  EXPECT_EQ(s.parts[2].artifact_id, "q-998");
  ASSERT_EQ(s.tensors.size(), 2u);
  for (const auto& t : s.tensors) {
    EXPECT_EQ(t.artifact_id, written.tensors.at(t.name).artifact_id);
    EXPECT_EQ(t.offset, written.tensors.at(t.name).offset);
    EXPECT_EQ(t.stored_bytes, written.tensors.at(t.name).size);
  }
  EXPECT_THROW((void)select_stage_tensors(cat, {"blk.99.attn_v.weight"}), Error);
  EXPECT_THROW((void)select_stage_tensors(cat, {"output_norm.weight", "output_norm.weight"}), Error);
}

TEST(V2Select, PartFileRules) {
  TempDir dir;
  (void)test::write_schema_v2_package(kLlama, dir.path());
  const auto opened = test::local_catalog(dir.path());
  const auto s = select_stage(opened.catalog, {0, 1});
  const StagePart& layer = s.parts.back();
  fs::resize_file(dir / layer.rel_path, layer.bytes - 1);
  EXPECT_THROW((void)check_part(opened, layer), Error);
  fs::remove(dir / layer.rel_path);
  fs::create_symlink("/etc/hostname", dir / layer.rel_path);
  EXPECT_THROW((void)check_part(opened, layer), Error);
}

}  // namespace
}  // namespace skippy

namespace skippy {
namespace {

// ------------------------------------------------------------------ CLI

TEST(V2Cli, SelectJsonReadsASchema2Package) {
  TempDir dir;
  const auto written = test::write_schema_v2_package(kLlama, dir.path());
  const auto r = test::run_cli({"select", dir.path().string(), "--layers", "1..2", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["schema_version"], 2);
  EXPECT_EQ(j["package_id"].get<std::string>(), written.root["package_id"].get<std::string>());
  EXPECT_EQ(j["layer_start"], 1);
  ASSERT_EQ(j["parts"].size(), 2u);  // a middle stage of llama-tiny (no global tensors): the carrier and layer 1
  EXPECT_EQ(j["parts"][0]["artifact_id"], "zz-carrier");
  std::set<std::string> ids;
  for (const auto& p : j["parts"]) ids.insert(p["artifact_id"].get<std::string>());
  EXPECT_TRUE(ids.contains("q-998"));
  for (const auto& t : j["tensors"]) {
    EXPECT_EQ(t["artifact_id"], written.tensors.at(t["name"].get<std::string>()).artifact_id);
    EXPECT_EQ(t["offset"], written.tensors.at(t["name"].get<std::string>()).offset);
  }
  EXPECT_EQ(j["verified"], false);
  // SKIPPY_VERIFY_PACKAGE_SHA: the payload parts are hashed, and a changed
  // byte is an integrity error naming the artifact.
  const auto v = test::run_cli({"select", dir.path().string(), "--layers", "1..2", "--json"}, {"SKIPPY_VERIFY_PACKAGE_SHA=1"});
  ASSERT_EQ(v.exit_code, 0) << v.err;
  EXPECT_EQ(nlohmann::json::parse(v.out)["verified"], true);
  {
    auto bytes = test::read_file(dir / "layers/layer-00001.gguf");
    bytes.back() ^= 1;
    test::write_file(dir / "layers/layer-00001.gguf", bytes);
  }
  test::expect_json_error(test::run_cli({"select", dir.path().string(), "--layers", "1..2", "--json"}, {"SKIPPY_VERIFY_PACKAGE_SHA=1"}),
                          "integrity", "artifact q-998 (layers/layer-00001.gguf): SHA-256");
  const auto bad = test::run_cli({"select", dir.path().string(), "--layers", "0..99", "--json"});
  test::expect_json_error(bad, "invalid_input", "outside the package's");
  // --projector names a declared sidecar (this package has none).
  const auto proj = test::run_cli({"select", dir.path().string(), "--layers", "0..1", "--projector", "x", "--json"});
  test::expect_json_error(proj, "invalid_input", "projector \"x\" is not declared");
}

TEST(V2Cli, InspectJsonNamesSchemaAndPackageId) {
  TempDir dir;
  const auto written = test::write_schema_v2_package(kLlama, dir.path());
  const auto r = test::run_cli({"inspect", dir.path().string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kind"], "package");
  EXPECT_EQ(j["schema_version"], 2);
  EXPECT_EQ(j["package_id"].get<std::string>(), written.root["package_id"].get<std::string>());
  EXPECT_EQ(j["architecture"], "llama");
  EXPECT_EQ(j["artifacts"].size(), written.root["artifact_catalog"]["entries"].size());
  // A tampered root is refused with the field named.
  auto root = written.root;
  root["future"] = 1;
  test::write_file(dir / "model-package.json", [&] {
    const std::string t = root.dump(2);
    return std::vector<uint8_t>(t.begin(), t.end());
  }());
  test::expect_json_error(test::run_cli({"inspect", dir.path().string(), "--json"}), "invalid_input", "future: unknown field");
}

}  // namespace
}  // namespace skippy

namespace skippy {
namespace {

// ----------------------------------------------------------- robustness

// Random byte mutations of a real root and carrier: each must either parse
// or be refused with skippy::Error; any other exception (or, under the
// sanitizers, a memory error) fails. A cheap stand-in for a fuzz target.
TEST(V2Robustness, MutatedRootsAndCarriersFailOnlyWithErrors) {
  TempDir dir;
  (void)test::write_schema_v2_package(kLlama, dir.path());
  const std::string root_text = test::read_text(dir / "model-package.json");
  const auto carrier = test::read_file(dir / "shared/metadata.gguf");
  const PackageRootV2 root = parse_package_root_v2(root_text, "root");
  uint64_t state = 0x9e3779b97f4a7c15ull;
  auto next = [&] {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return state;
  };
  size_t accepted = 0;
  for (int i = 0; i < 1500; ++i) {
    std::string text = root_text;
    for (int k = 0, n = 1 + static_cast<int>(next() % 4); k < n; ++k) {
      text[next() % text.size()] = static_cast<char>(next() & 0xff);
    }
    try {
      (void)parse_package_root_v2(text, "mutated");
      ++accepted;
    } catch (const Error&) {
    }
  }
  for (int i = 0; i < 1500; ++i) {
    std::vector<uint8_t> bytes = carrier;
    for (int k = 0, n = 1 + static_cast<int>(next() % 4); k < n; ++k) {
      bytes[next() % bytes.size()] = static_cast<uint8_t>(next() & 0xff);
    }
    try {
      GgufLimits limits;
      limits.directory_only = true;
      auto file = std::make_shared<const GgufFile>(GgufFile::parse(bytes, "mutated", limits));
      (void)build_catalog_v2(root, file, "mutated");
      ++accepted;
    } catch (const Error&) {
    }
  }
  // Some mutations land in values that are free text (or padding): not all
  // can be refused, and not all must be.
  EXPECT_LT(accepted, 3000u);
}

}  // namespace
}  // namespace skippy
