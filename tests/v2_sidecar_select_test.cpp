// Package schema 2 sidecars in stage selection: select (and verify, fetch,
// materialize) choose the projector sidecar a stage loads as schema 1 does
// (the first mmproj for the stage at layer 0, --single-stage, --projector
// PATH), the stage admission descriptor names the stage's sidecars sorted as
// the reference sorts them, and fetch / materialize --admission with such a
// descriptor bring them from the Hub stand-in.
#include <gtest/gtest.h>

#include <set>

#include <nlohmann/json.hpp>

#include "hub_standin.h"
#include "schema_v2_package.h"
#include "skippy/stage.h"
#include "skippy/stage_admission.h"
#include "test_util.h"

namespace skippy {
namespace v2sidecarsel_test {

namespace fs = std::filesystem;
using nlohmann::json;
using test::run_cli;
using test::TempDir;

// A package with two mmproj sidecars whose ids rank unlike their names:
// mm-7 "vision-0" (projectors/projector-00000.gguf), mm-6 "vision-1"
// (projectors/projector-00001.gguf).
struct TwoSidecars {
  TempDir dir;
  fs::path pkg;
  test::SchemaV2Package written;
  TwoSidecars() : pkg(dir / "pkg") {
    test::make_projector(dir / "a.gguf", 1);
    test::make_projector(dir / "b.gguf", 2);
    test::SchemaV2Options o;
    o.projectors = {dir / "a.gguf", dir / "b.gguf"};
    written = test::write_schema_v2_package(test::data_path("llama-tiny-q8_0.gguf"), pkg, o);
  }
};

json select_json(const fs::path& pkg, std::vector<std::string> extra) {
  std::vector<std::string> args = {"select", pkg.string(), "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = run_cli(args);
  if (r.exit_code != 0) throw std::runtime_error("select failed: " + r.err);
  return json::parse(r.out);
}

std::set<std::string> sidecar_parts(const json& doc) {
  std::set<std::string> out;
  for (const auto& p : doc["parts"]) {
    if (p["kind"] == "sidecar") out.insert(p["artifact_id"].get<std::string>());
  }
  return out;
}

TEST(V2SidecarSelect, TheStageAtLayerZeroLoadsTheDefaultProjectorAndItsDescriptorNamesIt) {
  TwoSidecars t;
  const auto cat = test::local_catalog(t.pkg).catalog;
  // The default: the first declared mmproj sidecar, as select_projector picks it.
  const auto def = select_projector(test::local_catalog(t.pkg), {0, 2});
  ASSERT_TRUE(def.has_value());
  const json first = select_json(t.pkg, {"--layers", "0..2"});
  EXPECT_EQ(sidecar_parts(first), std::set<std::string>{def->artifact_id});
  ASSERT_EQ(first["stage_admission"]["sidecars"].size(), 1u);
  const json& named = first["stage_admission"]["sidecars"][0];
  EXPECT_EQ(named["kind"], "mmproj");
  EXPECT_EQ(named["artifact_id"], def->artifact_id);
  EXPECT_EQ(named["name"], def->artifact_id == "mm-7" ? "vision-0" : "vision-1");
  // The descriptor is one the package admits, and requires the sidecar's artifact.
  const auto a = parse_stage_admission(first["stage_admission"].dump(), "select");
  check_stage_admission(a, cat, "select");
  std::set<std::string> required;
  for (const size_t i : stage_admission_artifacts(a, cat)) required.insert(cat.artifacts[i].id);
  EXPECT_TRUE(required.contains(def->artifact_id));

  // A later stage loads none, unless it serves alone (--single-stage).
  const json later = select_json(t.pkg, {"--layers", "2..4"});
  EXPECT_TRUE(sidecar_parts(later).empty());
  EXPECT_TRUE(later["stage_admission"]["sidecars"].empty());
  const json alone = select_json(t.pkg, {"--layers", "2..4", "--single-stage"});
  EXPECT_EQ(sidecar_parts(alone), std::set<std::string>{def->artifact_id});
  EXPECT_EQ(alone["stage_admission"]["sidecars"].size(), 1u);

  // --projector PATH: exactly that declared sidecar.
  const json chosen = select_json(t.pkg, {"--layers", "0..2", "--projector", "projectors/projector-00001.gguf"});
  EXPECT_EQ(sidecar_parts(chosen), std::set<std::string>{"mm-6"});
  EXPECT_EQ(chosen["stage_admission"]["sidecars"],
            json::parse(R"([{"kind":"mmproj","artifact_id":"mm-6","name":"vision-1"}])"));
  const auto undeclared = run_cli({"select", t.pkg.string(), "--layers", "0..2", "--projector", "x.gguf", "--json"});
  test::expect_json_error(undeclared, "invalid_input", "is not declared");
  const auto no_range =
      run_cli({"select", t.pkg.string(), "--tensors", "output_norm.weight", "--single-stage", "--json"});
  EXPECT_EQ(no_range.exit_code, 2) << no_range.out;
}

TEST(V2SidecarSelect, TheDescriptorSortsSidecarsByKindNameThenId) {
  TwoSidecars t;
  const auto pkg = test::local_catalog(t.pkg);
  // Both sidecars in the stage, in the order that sorts by id (mm-6 first).
  auto stage = select_stage(pkg.catalog, {0, 1});
  for (const char* path : {"projectors/projector-00001.gguf", "projectors/projector-00000.gguf"}) {
    SelectOptions o;
    o.projector_path = std::string(path);
    stage.parts.push_back(*select_projector(pkg, {0, 1}, o));
  }
  const auto a = stage_admission_of(pkg.catalog, stage);
  ASSERT_EQ(a.sidecars.size(), 2u);
  EXPECT_EQ(a.sidecars[0].artifact_id, "mm-7");  // "vision-0" < "vision-1", though "mm-6" < "mm-7"
  EXPECT_EQ(a.sidecars[1].artifact_id, "mm-6");
  // Its JSON reads back strictly (a reversed order would be refused).
  EXPECT_EQ(parse_stage_admission(stage_admission_json(a), "x"), a);
}

TEST(V2SidecarSelect, FetchAndMaterializeWithSuchADescriptorBringThem) {
  TwoSidecars t;
  test::HubStandin hub;
  const std::string commit = hub.publish("org/v2-sidecars", t.pkg);
  const std::string ref = "hf://org/v2-sidecars@" + commit;
  // The descriptor select prints for the stage at layer 0 with the second projector.
  const json chosen = select_json(t.pkg, {"--layers", "0..2", "--projector", "projectors/projector-00001.gguf"});
  const fs::path desc = t.dir / "stage0.json";
  const std::string text = chosen["stage_admission"].dump();
  test::write_file(desc, std::vector<uint8_t>(text.begin(), text.end()));
  auto env = [&](const std::string& cache) {
    return std::vector<std::string>{"HF_ENDPOINT=" + hub.endpoint(), "HF_HUB_CACHE=" + (t.dir / cache / "hf").string(),
                                    "HF_HOME=" + (t.dir / cache / "home").string(),
                                    "SKIPPY_CACHE_DIR=" + (t.dir / cache / "skippy").string(), "HF_TOKEN=",
                                    "HF_HUB_OFFLINE=", "SKIPPY_HF_BACKOFF_MS=20"};
  };
  const fs::path snapshot_rel = fs::path("models--org--v2-sidecars") / "snapshots" / commit;

  const auto f = run_cli({"fetch", ref, "--admission", desc.string(), "--json"}, env("fetch"));
  ASSERT_EQ(f.exit_code, 0) << f.err;
  const json fj = json::parse(f.out);
  std::set<std::string> parts;
  for (const auto& p : fj["parts"]) parts.insert(p.get<std::string>());
  EXPECT_TRUE(parts.contains("projectors/projector-00001.gguf"));
  EXPECT_FALSE(parts.contains("projectors/projector-00000.gguf"));
  const fs::path snap = t.dir / "fetch" / "hf" / snapshot_rel;
  EXPECT_EQ(test::read_file(snap / "projectors/projector-00001.gguf"), test::read_file(t.pkg / "projectors/projector-00001.gguf"));
  EXPECT_FALSE(fs::exists(snap / "projectors/projector-00000.gguf"));

  const auto m = run_cli({"materialize", ref, "--admission", desc.string(), "--out", (t.dir / "s0.gguf").string(), "--json"},
                         env("materialize"));
  ASSERT_EQ(m.exit_code, 0) << m.err;
  const json mj = json::parse(m.out);
  ASSERT_EQ(mj["sidecars"].size(), 1u);
  const fs::path brought = mj["sidecars"][0].get<std::string>();
  EXPECT_EQ(mj["projector"], brought.string());
  EXPECT_TRUE(brought.string().starts_with((t.dir / "materialize" / "hf").string())) << brought;  // brought into the cache
  EXPECT_EQ(test::read_file(brought), test::read_file(t.pkg / "projectors/projector-00001.gguf"));
  EXPECT_TRUE(fs::exists(t.dir / "s0.gguf"));
}

}  // namespace v2sidecarsel_test
}  // namespace skippy
