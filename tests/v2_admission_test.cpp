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
#include "skippy/stage.h"
#include "skippy/error.h"
#include "skippy/gguf.h"
#include "skippy/stage_admission.h"
#include "test_util.h"
#include "util/file.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using test::TempDir;


std::set<std::string> stage_tensor_names(const StageSelection& s) {
  std::set<std::string> out;
  for (const auto& t : s.tensors) out.insert(t.name);
  return out;
}

TEST(V2Residency, InputOnlyTensorsOnTheFirstStageLayerlessOnesEverywhere) {
  TempDir tmp;
  const auto src = test::with_extra_tensors(test::data_path("llama-tiny-q8_0.gguf"), tmp.path(),
                                         {{"position_embd.weight", 64},
                                          {"per_layer_token_embd.weight", 64},
                                          {"altup_proj.weight", 16},
                                          {"rope_freqs.weight", 16}});
  (void)test::write_schema_v2_package(src, tmp.path() / "pkg");
  const auto pkg = test::local_catalog(tmp.path() / "pkg");
  const auto first = stage_tensor_names(select_stage(pkg.catalog, {0, 3}));
  const auto middle = stage_tensor_names(select_stage(pkg.catalog, {3, 6}));
  const auto last = stage_tensor_names(select_stage(pkg.catalog, {6, 8}));
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
  const auto src = test::with_extra_tensors(test::data_path("glm4moe-mtp-tiny.gguf"), tmp.path(),
                                         {{"blk.2.nextn.eh_proj.weight", 16}});
  (void)test::write_schema_v2_package(src, tmp.path() / "pkg");
  const auto pkg = test::local_catalog(tmp.path() / "pkg");
  ASSERT_EQ(pkg.catalog.layer_count, 4u);
  const auto first = stage_tensor_names(select_stage(pkg.catalog, {0, 3}));
  const auto last = stage_tensor_names(select_stage(pkg.catalog, {3, 4}));
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
  const auto plain = test::local_catalog(tmp2.path() / "pkg");
  EXPECT_TRUE(stage_tensor_names(select_stage(plain.catalog, {2, 4})).contains("blk.3.nextn.eh_proj.weight"));
  EXPECT_TRUE(any_of_layer(stage_tensor_names(select_stage(plain.catalog, {0, 3})), "blk.2."));
}

void expect_admission_refused(std::string_view text, const std::string& needle) {
  try {
    (void)parse_stage_admission(text, "stage.json");
    ADD_FAILURE() << "parsed, expected a refusal containing: " << needle;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("stage.json"), std::string::npos) << e.what();
  }
}

const std::string kSomeId = "sha256:" + std::string(64, 'a');

TEST(V2Admission, ParsesAndSerializesAsTheReference) {
  const std::string text = R"({"package_id":")" + kSomeId +
                           R"(","resident_tensor_ids":["blk.0.attn_k.weight","blk.0.attn_q.weight","token_embd.weight"],)"
                           R"("sidecars":[{"kind":"mmproj","artifact_id":"mmproj-b"},{"kind":"mmproj","artifact_id":"mmproj-a","name":"vision"}]})";
  const auto a = parse_stage_admission(text, "stage.json");
  EXPECT_EQ(a.package_id, kSomeId);
  ASSERT_EQ(a.resident_tensor_ids.size(), 3u);
  ASSERT_EQ(a.sidecars.size(), 2u);
  EXPECT_FALSE(a.sidecars[0].name.has_value());
  EXPECT_EQ(a.sidecars[1].name, "vision");
  EXPECT_EQ(stage_admission_json(a), text);  // compact, the reference's member order, name left out when none
  EXPECT_EQ(parse_stage_admission(stage_admission_json(a), "again"), a);
}

TEST(V2Admission, RefusesWhatTheReferenceRefuses) {
  const std::string id = R"({"package_id":")" + kSomeId + R"(",)";
  expect_admission_refused(id + R"("resident_tensor_ids":["b","a"],"sidecars":[]})", "not strictly sorted");
  expect_admission_refused(id + R"("resident_tensor_ids":["a","a"],"sidecars":[]})", "named twice");
  expect_admission_refused(id + R"("resident_tensor_ids":[],"sidecars":[{"kind":"mmproj","artifact_id":"a","name":"x"},)"
                                R"({"kind":"mmproj","artifact_id":"b"}]})",
                           "sidecars are not strictly sorted");
  expect_admission_refused(id + R"("resident_tensor_ids":[],"sidecars":[{"kind":"mmproj","artifact_id":"a"},)"
                                R"({"kind":"mmproj","artifact_id":"a"}]})",
                           "sidecars are not strictly sorted");
  expect_admission_refused(id + R"("resident_tensor_ids":[],"sidecars":[{"kind":"future","artifact_id":"a"}]})",
                           "unknown sidecar kind");
  expect_admission_refused(id + R"("resident_tensor_ids":[],"sidecars":[],"layers":"0..2"})", "layers");
  expect_admission_refused(id + R"("resident_tensor_ids":[],"resident_tensor_ids":[],"sidecars":[]})", "resident_tensor_ids");
  expect_admission_refused(R"({"package_id":"sha256:AB","resident_tensor_ids":[],"sidecars":[]})", "not a package id");
  expect_admission_refused(id + R"("sidecars":[]})", "resident_tensor_ids");
  expect_admission_refused(id + R"("resident_tensor_ids":[1],"sidecars":[]})", "resident_tensor_ids[0]");
}

TEST(V2Admission, AgainstAPackageRequiredArtifactsAndRefusals) {
  TempDir tmp;
  auto o = test::SchemaV2Options{};
  o.projectors = {test::data_path("llama-tiny-q8_0.gguf")};  // any GGUF serves as a sidecar's bytes
  const auto written = test::write_schema_v2_package(test::data_path("llama-tiny-q8_0.gguf"), tmp.path() / "pkg", o);
  const auto pkg = test::local_catalog(tmp.path() / "pkg");
  const auto& cat = pkg.catalog;
  ASSERT_EQ(test::root_v2(pkg).sidecars.size(), 1u);
  // The stage of layers 2..4 as a descriptor: exactly its tensors, sorted.
  const auto stage = select_stage(cat, {2, 4});
  auto a = stage_admission_of(cat, stage);
  EXPECT_EQ(a.package_id, cat.package_id);
  EXPECT_TRUE(std::is_sorted(a.resident_tensor_ids.begin(), a.resident_tensor_ids.end()));
  EXPECT_EQ(a.resident_tensor_ids.size(), stage.tensors.size());
  check_stage_admission(a, cat, "stage.json");
  // Required: the carrier and the two layer artifacts, by id.
  std::set<std::string> required;
  for (const size_t i : stage_admission_artifacts(a, cat)) required.insert(cat.artifacts[i].id);
  std::set<std::string> expected = {cat.artifacts[cat.carrier].id};
  for (const auto& t : stage.tensors) expected.insert(t.artifact_id);
  EXPECT_EQ(required, expected);
  EXPECT_EQ(required.size(), 3u);
  uint64_t bytes = 0;
  for (const auto& t : stage.tensors) bytes += t.stored_bytes;
  EXPECT_EQ(stage_admission_tensor_bytes(a, cat), bytes);
  // With the package's sidecar: its artifact too, and the stage's parts are the required set.
  a.sidecars = test::root_v2(pkg).sidecars;
  const auto with_sidecar = select_stage_admission(cat, a, "stage.json");
  std::set<std::string> parts;
  for (const auto& p : with_sidecar.parts) parts.insert(p.artifact_id);
  std::set<std::string> required2;
  for (const size_t i : stage_admission_artifacts(a, cat)) required2.insert(cat.artifacts[i].id);
  EXPECT_EQ(parts, required2);
  EXPECT_EQ(required2.size(), 4u);
  auto refused = [&](StageAdmission bad, const std::string& needle) {
    try {
      check_stage_admission(bad, cat, "stage.json");
      ADD_FAILURE() << "admitted, expected: " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  auto other = a;
  other.package_id = kSomeId;
  refused(other, "does not match the package's");
  auto unknown = a;
  unknown.resident_tensor_ids.push_back("zz_not_a_tensor.weight");
  refused(unknown, "unknown tensor \"zz_not_a_tensor.weight\"");
  auto bad_sidecar = a;
  bad_sidecar.sidecars[0].name = "other";
  refused(bad_sidecar, "unknown sidecar");
}

nlohmann::json admission_cli_ok(const std::vector<std::string>& args) {
  const auto r = test::run_cli(args);
  EXPECT_EQ(r.exit_code, 0) << r.err << r.out;
  return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
}

TEST(V2AdmissionCli, SelectEmitsTheDescriptorAndCommandsTakeIt) {
  TempDir tmp;
  const auto src = test::with_extra_tensors(test::data_path("llama-tiny-q8_0.gguf"), tmp.path(), {{"position_embd.weight", 64}});
  (void)test::write_schema_v2_package(src, tmp.path() / "pkg");
  const std::string pkg = (tmp.path() / "pkg").string();
  const auto first = admission_cli_ok({"select", pkg, "--layers", "0..4", "--json"});
  const auto later = admission_cli_ok({"select", pkg, "--layers", "4..8", "--json"});
  const auto& a0 = first["stage_admission"];
  const auto& a1 = later["stage_admission"];
  ASSERT_TRUE(a0.is_object()) << first.dump(2);
  EXPECT_EQ(a0["package_id"], first["package_id"]);
  const auto ids0 = a0["resident_tensor_ids"].get<std::vector<std::string>>();
  const auto ids1 = a1["resident_tensor_ids"].get<std::vector<std::string>>();
  EXPECT_TRUE(std::is_sorted(ids0.begin(), ids0.end()));
  EXPECT_NE(std::find(ids0.begin(), ids0.end(), "position_embd.weight"), ids0.end());
  EXPECT_EQ(std::find(ids1.begin(), ids1.end(), "position_embd.weight"), ids1.end());
  EXPECT_NE(std::find(ids1.begin(), ids1.end(), "blk.7.attn_q.weight"), ids1.end());
  EXPECT_EQ(ids0.size(), first["tensors"].size());
  EXPECT_TRUE(a0["sidecars"].is_array() && a0["sidecars"].empty());

  // The descriptor as a file defines the same stage for select and verify.
  const auto file = tmp.path() / "stage1.json";
  test::write_file(file, [&] {
    const std::string t = a1.dump();
    return std::vector<uint8_t>(t.begin(), t.end());
  }());
  const auto again = admission_cli_ok({"select", pkg, "--admission", file.string(), "--json"});
  EXPECT_EQ(again["selected_by"], "admission");
  EXPECT_EQ(again["stage_admission"], a1);
  EXPECT_EQ(again["parts"].size(), later["parts"].size());
  EXPECT_EQ(again["total_bytes"], later["total_bytes"]);
  const auto v = test::run_cli({"verify", pkg, "--admission", file.string(), "--json"});
  EXPECT_EQ(v.exit_code, 0) << v.err << v.out;

  // materialize writes exactly the descriptor's tensors, as --tensors would.
  const auto m = admission_cli_ok({"materialize", pkg, "--admission", file.string(), "--out",
                                   (tmp.path() / "stage1.gguf").string(), "--json"});
  EXPECT_EQ(m["tensor_count"], ids1.size());
  EXPECT_EQ(GgufFile::open(tmp.path() / "stage1.gguf").tensors().size(), ids1.size());

  // Refused: a descriptor for another package, an unknown tensor, --admission with --layers.
  auto other = a1;
  other["package_id"] = "sha256:" + std::string(64, 'b');
  const auto other_file = tmp.path() / "other.json";
  const std::string ot = other.dump();
  test::write_file(other_file, std::vector<uint8_t>(ot.begin(), ot.end()));
  auto r = test::run_cli({"select", pkg, "--admission", other_file.string(), "--json"});
  EXPECT_EQ(r.exit_code, 1);
  test::expect_json_error(r, "invalid_input", "does not match the package's");
  auto unknown = a1;
  unknown["resident_tensor_ids"].push_back("zz.weight");
  const auto unknown_file = tmp.path() / "unknown.json";
  const std::string ut = unknown.dump();
  test::write_file(unknown_file, std::vector<uint8_t>(ut.begin(), ut.end()));
  r = test::run_cli({"verify", pkg, "--admission", unknown_file.string(), "--json"});
  EXPECT_EQ(r.exit_code, 1);
  test::expect_json_error(r, "invalid_input", "unknown tensor \"zz.weight\"");
  r = test::run_cli({"materialize", pkg, "--admission", other_file.string(), "--out", (tmp.path() / "o.gguf").string(),
                     "--json"});
  EXPECT_EQ(r.exit_code, 1);
  test::expect_json_error(r, "invalid_input", "does not match the package's");
  EXPECT_FALSE(fs::exists(tmp.path() / "o.gguf"));
  r = test::run_cli({"select", pkg, "--admission", file.string(), "--layers", "0..1", "--json"});
  EXPECT_EQ(r.exit_code, 2);
  test::expect_json_error(r, "usage", "two ways");
}

}  // namespace
}  // namespace skippy
