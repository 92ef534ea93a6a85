// The consumer at the spec's edges: unknown projector kinds,
// whitespace-only identity fields, a malformed generation block, package
// default pipeline depths, backend-specific generation fields, the
// activation width fallback, integrity errors, and validate-package against
// the wrong source. Each test writes a real package from a fixture with the
// real CLI, changes its manifest, and runs the real CLI on it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "hub_standin.h"
#include "util/file.h"
#include "skippy/gguf.h"
#include "gguf/gguf_writer.h"
#include "util/sha256.h"
#include "test_util.h"

// A named namespace of its own: unity builds put several test files in one
// translation unit, where helpers of the same name in anonymous namespaces collide.
namespace skippy::consumer_edges_test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::CliResult;
using test::data_path;
using test::run_cli;
using test::TempDir;

// A package of `fixture` written by the real CLI into `dir`/pkg.
fs::path write_package(const fs::path& src, const TempDir& dir) {
  const auto out = dir / "pkg";
  const auto r = test::write_pkg(src, out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return out;
}

json read_manifest(const fs::path& pkg) { return json::parse(test::read_text(pkg / "model-package.json")); }
void write_manifest(const fs::path& pkg, const json& j) {
  const auto s = j.dump(2);
  test::write_file(pkg / "model-package.json", std::vector<uint8_t>(s.begin(), s.end()));
}

// The one JSON document of a successful --json run.
json ok_json(const CliResult& r) {
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  try {
    return json::parse(r.out);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not JSON (" << e.what() << "): " << r.out << r.err;
    return json::object();
  }
}

// True when some string of `list` (a JSON array) contains every needle.
bool any_has(const json& list, std::initializer_list<std::string> needles) {
  if (!list.is_array()) return false;
  for (const auto& w : list) {
    if (!w.is_string()) continue;
    const std::string s = w;
    bool all = true;
    for (const auto& n : needles) all = all && s.find(n) != std::string::npos;
    if (all) return true;
  }
  return false;
}

std::vector<std::string> cache_env(const TempDir& tmp) { return {"SKIPPY_CACHE_DIR=" + (tmp / "cache").string()}; }

// tests/capi_test.c on a stage of `pkg`: one line per fact ("warning ...", "error policy ...", "part ...").
CliResult run_c(const fs::path& pkg, const std::string& start, const std::string& end, const TempDir& tmp) {
  return test::run_program(SKIPPY_CAPI_TEST_PATH, {pkg.string(), start, end},
                           {"HF_HUB_OFFLINE=1", "SKIPPY_CACHE_DIR=" + (tmp / "c-cache").string()});
}

// ------------------------------------------------------ 1. projector kinds

TEST(ConsumerEdges, UnknownProjectorKindIsNeverUsedAndEveryStageCommandReportsIt) {
  TempDir tmp;
  const auto pkg = write_package(data_path("llama-tiny-q8_0.gguf"), tmp);
  fs::create_directories(pkg / "projectors");
  test::make_projector(pkg / "projectors" / "audio.gguf", 1);
  test::make_projector(pkg / "projectors" / "mmproj.gguf", 2);
  auto j = read_manifest(pkg);
  j["projectors"] = json::array();
  for (const auto& [kind, file] : {std::pair{"audio-encoder", "audio.gguf"}, std::pair{"mmproj", "mmproj.gguf"}}) {
    const auto path = pkg / "projectors" / file;
    const auto g = GgufFile::open(path);
    j["projectors"].push_back({{"kind", kind},
                               {"path", std::string("projectors/") + file},
                               {"tensor_count", g.tensors().size()},
                               {"tensor_bytes", g.tensor_bytes_total()},
                               {"artifact_bytes", fs::file_size(path)},
                               {"sha256", sha256_file(path)}});
  }
  write_manifest(pkg, j);
  const std::string needle = "projectors[0] (projectors/audio.gguf): kind \"audio-encoder\" is not supported";

  // select: stage 0 and single-stage serving get the mmproj, never the audio encoder.
  for (const std::vector<std::string>& extra : {std::vector<std::string>{"--layers", "0..2"},
                                                 std::vector<std::string>{"--layers", "4..8", "--single-stage"},
                                                 std::vector<std::string>{"--layers", "2..4"}}) {
    std::vector<std::string> args = {"select", pkg.string(), "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_cli(args);
    const auto doc = ok_json(r);
    EXPECT_TRUE(any_has(doc["warnings"], {needle})) << doc.dump(2);
    EXPECT_NE(r.err.find("warning: " + needle), std::string::npos) << r.err;
    for (const auto& p : doc["parts"]) EXPECT_NE(p["relative_path"], "projectors/audio.gguf") << doc.dump(2);
    const bool gets_projector = extra[1] == "0..2" || extra.size() == 3;
    EXPECT_EQ(doc["parts"].back()["relative_path"] == "projectors/mmproj.gguf", gets_projector) << doc.dump(2);
  }
  // Text mode says it on stderr too.
  const auto text = run_cli({"select", pkg.string(), "--layers", "0..2"});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.err.find(needle), std::string::npos) << text.err;
  // verify and materialize of a stage, and inspect.
  const auto v = ok_json(run_cli({"verify", pkg.string(), "--layers", "0..2", "--json"}, cache_env(tmp)));
  EXPECT_TRUE(any_has(v["warnings"], {needle})) << v.dump(2);
  const auto m = ok_json(run_cli({"materialize", pkg.string(), "--layers", "0..2", "--json"}, cache_env(tmp)));
  EXPECT_TRUE(any_has(m["warnings"], {needle})) << m.dump(2);
  EXPECT_TRUE(m["projector"].get<std::string>().ends_with("/projectors/mmproj.gguf")) << m.dump(2);
  const auto i = ok_json(run_cli({"inspect", pkg.string(), "--json"}));
  EXPECT_TRUE(any_has(i["warnings"], {needle})) << i.dump(2);
  // The C API: the same warning, and stage 0 gets the mmproj.
  const auto c = run_c(pkg, "0", "2", tmp);
  EXPECT_EQ(c.exit_code, 0) << c.out << c.err;
  EXPECT_NE(c.out.find("\nwarning " + needle), std::string::npos) << c.out;
  EXPECT_NE(c.out.find(" projectors/mmproj.gguf "), std::string::npos) << c.out;
  EXPECT_EQ(c.out.find(" projectors/audio.gguf "), std::string::npos) << c.out;
  // An explicit --projector of the unknown kind stays refused.
  test::expect_json_error(
      run_cli({"select", pkg.string(), "--layers", "0..2", "--projector", "projectors/audio.gguf", "--json"}),
      "invalid_input", "has kind \"audio-encoder\", which this runtime does not support");
}

// ---------------------------------------------- 2. whitespace-only identity

TEST(ConsumerEdges, WhitespaceOnlyIdentityFieldsAreRefusedNamingTheField) {
  TempDir tmp;
  const auto pkg = write_package(data_path("llama-tiny-q8_0.gguf"), tmp);
  const json original = read_manifest(pkg);
  struct Case {
    std::vector<std::string> field;
    std::string value;
  };
  const std::vector<Case> cases = {
      {{"source_model", "revision"}, "  "},
      {{"source_model", "canonical_ref"}, " "},
      {{"source_model", "primary_file"}, "   "},
      {{"source_model", "repo"}, "\u00a0 \u3000"},  // Unicode spaces count (the reference's trim)
      {{"model_id"}, "  "},
  };
  for (const auto& c : cases) {
    std::string name;
    for (const auto& f : c.field) name += (name.empty() ? "" : ".") + f;
    SCOPED_TRACE(name);
    json j = original;
    json* at = &j;
    for (const auto& f : c.field) at = &(*at)[f];
    *at = c.value;
    write_manifest(pkg, j);
    const auto needle = name + ": must not be empty or whitespace-only";
    test::expect_json_error(run_cli({"select", pkg.string(), "--layers", "0..2", "--json"}), "invalid_input", needle);
    test::expect_json_error(run_cli({"inspect", pkg.string(), "--json"}), "invalid_input", needle);
  }
  // Surrounding whitespace is not whitespace-only: kept as written.
  json j = original;
  j["source_model"]["revision"] = " 0123abc ";
  write_manifest(pkg, j);
  EXPECT_EQ(run_cli({"select", pkg.string(), "--layers", "0..2", "--json"}).exit_code, 0);
}

// ------------------------------------------------ 3. a malformed generation

// A package with a generation block whose short_prefill_max_tokens is "big".
fs::path malformed_generation_package(const TempDir& tmp) {
  const auto pkg = write_package(data_path("llama-tiny-q8_0.gguf"), tmp);
  auto j = read_manifest(pkg);
  j["generation"]["policy"] = {{"decode", "dense"}};
  j["generation"]["thresholds"] = {{"short_prefill_max_tokens", "big"}};
  write_manifest(pkg, j);
  return pkg;
}
constexpr const char* kBadThreshold = "generation.thresholds.short_prefill_max_tokens: must be a non-negative integer";

TEST(ConsumerEdges, MalformedGenerationBlockNeverStopsLayerLoading) {
  TempDir tmp;
  const auto pkg = malformed_generation_package(tmp);
  const auto env = cache_env(tmp);
  const auto s = run_cli({"select", pkg.string(), "--layers", "0..3", "--json"});
  const auto sel = ok_json(s);
  EXPECT_TRUE(any_has(sel["warnings"], {kBadThreshold, "the generation block is ignored"})) << sel.dump(2);
  EXPECT_NE(s.err.find(kBadThreshold), std::string::npos) << s.err;
  EXPECT_EQ(sel["parts"].size(), 5u);  // metadata, embeddings, three layers
  const auto v = ok_json(run_cli({"verify", pkg.string(), "--layers", "0..3", "--json"}, env));
  EXPECT_EQ(v["verified"], true);
  EXPECT_TRUE(any_has(v["warnings"], {kBadThreshold})) << v.dump(2);
  const auto m = ok_json(run_cli({"materialize", pkg.string(), "--layers", "3..8", "--verify", "--json"}, env));
  EXPECT_TRUE(fs::is_regular_file(m["path"].get<std::string>()));
  EXPECT_TRUE(any_has(m["warnings"], {kBadThreshold})) << m.dump(2);
  const auto p = run_cli({"plan", pkg.string(), "--stages", "2", "--json"});
  EXPECT_EQ(ok_json(p)["stages"].size(), 2u);
  EXPECT_NE(p.err.find(kBadThreshold), std::string::npos) << p.err;
  const auto i = ok_json(run_cli({"inspect", pkg.string(), "--json"}));
  EXPECT_TRUE(any_has(i["warnings"], {kBadThreshold})) << i.dump(2);
  // What resolves generation refuses, naming the field.
  test::expect_json_error(
      run_cli({"policy", pkg.string(), "--phase", "prefill", "--n-tokens", "16", "--n-kv", "16", "--json"}),
      "invalid_input", kBadThreshold);
  test::expect_json_error(run_cli({"speculative", pkg.string(), "--json"}), "invalid_input", kBadThreshold);
  // The C API: the warning, a policy refusal naming the field, and the stage loads and verifies.
  const auto c = run_c(pkg, "0", "2", tmp);
  EXPECT_EQ(c.exit_code, 0) << c.out << c.err;
  EXPECT_NE(c.out.find("\nwarning "), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("error policy invalid_input: "), std::string::npos) << c.out;
  EXPECT_NE(c.out.find(kBadThreshold), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("speculative invalid_input"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("\nverified hashed_bytes "), std::string::npos) << c.out;
  // The publisher's gate lists it as a problem, and nothing else is wrong.
  const auto val = run_cli({"validate-package", data_path("llama-tiny-q8_0.gguf").string(), pkg.string(), "--json"});
  EXPECT_EQ(val.exit_code, 1) << val.out;
  const auto vj = json::parse(val.out);
  ASSERT_EQ(vj["problems"].size(), 1u) << vj.dump(2);
  EXPECT_TRUE(any_has(vj["problems"], {kBadThreshold})) << vj.dump(2);
}

TEST(ConsumerEdges, MalformedGenerationBlockStillFetchesFromTheHub) {
  TempDir tmp;
  const auto pkg = malformed_generation_package(tmp);
  test::HubStandin hub;
  const auto commit = hub.publish("org/bad-generation-layers", pkg);
  const std::vector<std::string> env = {"HF_ENDPOINT=" + hub.endpoint(),
                                        "HF_HUB_CACHE=" + (tmp / "hf").string(),
                                        "HF_HOME=" + (tmp / "hfhome").string(),
                                        "SKIPPY_CACHE_DIR=" + (tmp / "skippy").string(),
                                        "HF_TOKEN=",
                                        "HF_HUB_OFFLINE="};
  const std::string ref = "hf://org/bad-generation-layers@" + commit;
  const auto f = ok_json(run_cli({"fetch", ref, "--layers", "0..2", "--json"}, env));
  EXPECT_EQ(f["verified"], true) << f.dump(2);
  EXPECT_EQ(f["parts"].size(), 4u) << f.dump(2);
  EXPECT_TRUE(any_has(f["warnings"], {kBadThreshold})) << f.dump(2);
  // And the cached stage selects offline (SHA-256 verified, as for every hf:// package).
  auto offline = env;
  offline.back() = "HF_HUB_OFFLINE=1";
  const auto sel = ok_json(run_cli({"select", ref, "--layers", "0..2", "--json"}, offline));
  EXPECT_EQ(sel["verified"], true) << sel.dump(2);
  // publish is a publisher's gate: the block is fixed there, not spread.
  auto writer = env;
  writer[4] = "HF_TOKEN=hf_test";
  const auto pub = run_cli({"publish", pkg.string(), "hf://org/bad-generation-again", "--create"}, writer);
  EXPECT_EQ(pub.exit_code, 1) << pub.err;
  EXPECT_NE(pub.err.find("fix the block before publishing"), std::string::npos) << pub.err;
  EXPECT_NE(pub.err.find(kBadThreshold), std::string::npos) << pub.err;
}

// ------------------------------------------------- 4. pipeline_depth above 1

TEST(ConsumerEdges, PackageDefaultPipelineDepthAboveOneIsReported) {
  TempDir tmp;
  const auto src = data_path("glm4moe-mtp-tiny.gguf");
  const auto pkg = write_package(src, tmp);
  auto j = read_manifest(pkg);
  ASSERT_TRUE(j["generation"]["speculative_decoding"]["strategies"].contains("mtp")) << j.dump(2);
  const auto layers = "0.." + std::to_string(j["layer_count"].get<uint32_t>());
  const std::string field = "generation.speculative_decoding.strategies.mtp.window_policy.pipeline_depth: ";
  // As written (depth 1): nothing to say.
  EXPECT_FALSE(any_has(ok_json(run_cli({"inspect", pkg.string(), "--json"}))["warnings"], {field}));
  j["generation"]["speculative_decoding"]["strategies"]["mtp"]["window_policy"]["pipeline_depth"] = 3;
  write_manifest(pkg, j);
  const std::string needle = field + "3 in a package default";
  const auto i = run_cli({"inspect", pkg.string(), "--json"});
  EXPECT_TRUE(any_has(ok_json(i)["warnings"], {needle, "topology/workload-specific evidence"})) << i.out;
  EXPECT_NE(i.err.find(needle), std::string::npos) << i.err;
  EXPECT_TRUE(any_has(ok_json(run_cli({"select", pkg.string(), "--layers", layers, "--json"}))["warnings"], {needle}));
  const auto val = run_cli({"validate-package", src.string(), pkg.string(), "--json"});
  const auto vj = ok_json(val);  // a warning, not a problem: the evidence may exist
  EXPECT_EQ(vj["valid"], true) << vj.dump(2);
  EXPECT_TRUE(any_has(vj["warnings"], {needle})) << vj.dump(2);
}

// --------------------------------------- 5. backend-specific generation fields

TEST(ConsumerEdges, BackendSpecificGenerationObjectsAreIgnoredButRefusedForPublishing) {
  TempDir tmp;
  const auto src = data_path("llama-tiny-q8_0.gguf");
  const auto pkg = write_package(src, tmp);
  auto j = read_manifest(pkg);
  j["generation"]["policy"] = {{"decode", "dense"}};
  j["generation"]["metal"] = {{"simdgroups", 4}};
  j["generation"]["glm_dsa"] = {{"compact_flash", true}};
  write_manifest(pkg, j);
  for (const std::string key : {"generation.metal", "generation.glm_dsa"}) {
    SCOPED_TRACE(key);
    const std::string needle = key + ": not a generation field";
    const auto s = run_cli({"select", pkg.string(), "--layers", "0..2", "--json"});
    EXPECT_TRUE(any_has(ok_json(s)["warnings"], {needle, "; ignored"})) << s.out;
    EXPECT_NE(s.err.find(needle), std::string::npos) << s.err;
    EXPECT_TRUE(any_has(ok_json(run_cli({"inspect", pkg.string(), "--json"}))["warnings"], {needle}));
    // The package's policy still resolves: the objects are ignored, not obeyed.
    const auto pol = ok_json(
        run_cli({"policy", pkg.string(), "--phase", "decode", "--n-tokens", "1", "--n-kv", "8", "--json"}));
    EXPECT_EQ(pol["selected_path"], "dense") << pol.dump(2);
    EXPECT_TRUE(any_has(pol["warnings"], {needle})) << pol.dump(2);
  }
  const auto val = run_cli({"validate-package", src.string(), pkg.string(), "--json"});
  EXPECT_EQ(val.exit_code, 1) << val.out;
  const auto vj = json::parse(val.out);
  EXPECT_EQ(vj["problems"].size(), 2u) << vj.dump(2);
  EXPECT_TRUE(any_has(vj["problems"], {"generation.metal: not a generation field"})) << vj.dump(2);
  EXPECT_TRUE(any_has(vj["problems"], {"generation.glm_dsa: not a generation field"})) << vj.dump(2);
}

// ------------------------------------------------ 6. activation width rule


// plan, inspect and the C API agree on the derived width of a package
// without activation_width.
void expect_derived_width(const fs::path& pkg, uint64_t width, const std::string& tensor) {
  const auto plan = ok_json(run_cli({"plan", pkg.string(), "--stages", "2", "--json"}));
  EXPECT_EQ(plan["activation_width"], width) << plan.dump(2);
  EXPECT_NE(plan["notes"].dump().find(tensor), std::string::npos) << plan.dump(2);
  const auto ins = ok_json(run_cli({"inspect", pkg.string(), "--json"}));
  EXPECT_EQ(ins["activation_width"], width);
  EXPECT_EQ(ins["activation_width_declared"], false);
  EXPECT_NE(ins["activation_width_note"].dump().find(tensor), std::string::npos) << ins.dump(2);
  TempDir tmp;
  const auto c = run_c(pkg, "0", "2", tmp);
  ASSERT_EQ(c.exit_code, 0) << c.out << c.err;
  EXPECT_NE(c.out.find("\nactivation_width " + std::to_string(width) + "\n"), std::string::npos) << c.out;
}

TEST(ConsumerEdges, ActivationWidthFallbackPrefersTheHyperConnectionNorm) {
  const auto fixture = data_path("llama-tiny-q8_0.gguf");
  const auto file = GgufFile::open(fixture);
  const auto* norm = file.find_tensor("blk.0.attn_norm.weight");
  ASSERT_NE(norm, nullptr);
  const int64_t w = norm->ne[0];
  {
    // Hyper-connected: hc_attn_norm (4 x width) wins over attn_norm; cross_attn_norm,
    // listed first, never counts.
    TempDir tmp;
    const auto src = test::with_extra_tensors(fixture, tmp.path(), {{"blk.0.cross_attn_norm.weight", 3 * w},
                                                        {"blk.0.hc_attn_norm.weight", 4 * w}});
    const auto pkg = write_package(src, tmp);
    auto j = read_manifest(pkg);
    j.erase("activation_width");
    write_manifest(pkg, j);
    expect_derived_width(pkg, static_cast<uint64_t>(4 * w), "blk.0.hc_attn_norm.weight");
  }
  {
    // No hc_attn_norm: attn_norm, still not cross_attn_norm.
    TempDir tmp;
    const auto src = test::with_extra_tensors(fixture, tmp.path(), {{"blk.0.cross_attn_norm.weight", 3 * w}});
    const auto pkg = write_package(src, tmp);
    auto j = read_manifest(pkg);
    j.erase("activation_width");
    write_manifest(pkg, j);
    expect_derived_width(pkg, static_cast<uint64_t>(w), "blk.0.attn_norm.weight");
  }
}

// -------------------------------------------------------- 7. integrity kinds

TEST(ConsumerEdges, ShaMismatchIsAnIntegrityError) {
  TempDir tmp;
  const auto pkg = write_package(data_path("llama-tiny-q8_0.gguf"), tmp);
  auto j = read_manifest(pkg);
  std::string sha = j["layers"][1]["sha256"];
  sha[0] = sha[0] == '0' ? '1' : '0';  // same size, another digest
  j["layers"][1]["sha256"] = sha;
  write_manifest(pkg, j);
  auto env = cache_env(tmp);
  env.push_back("SKIPPY_VERIFY_PACKAGE_SHA=1");
  test::expect_json_error(run_cli({"select", pkg.string(), "--layers", "0..3", "--json"}, env), "integrity",
                          "layers/layer-00001.gguf");
  test::expect_json_error(
      run_cli({"materialize", pkg.string(), "--layers", "1..2", "--verify", "--json"}, cache_env(tmp)), "integrity",
      "layers/layer-00001.gguf");
  // Without verification a same-size file passes consumer validation (no hashing).
  EXPECT_EQ(run_cli({"select", pkg.string(), "--layers", "0..3", "--json"}, cache_env(tmp)).exit_code, 0);
}

// --------------------------------------------- 8. validate against the wrong source

TEST(ConsumerEdges, ValidateAgainstTheWrongSourceSaysSoFirst) {
  TempDir tmp;
  const auto right = data_path("llama-tiny-q8_0.gguf");
  const auto pkg = write_package(right, tmp);
  const std::string headline = "this is not the source the package was written from: ";
  {
    // Another model with the same shape: dozens of problems, the cause first.
    const auto r = run_cli({"validate-package", data_path("llama-tiny-f16.gguf").string(), pkg.string(), "--json"});
    EXPECT_EQ(r.exit_code, 1);
    const auto j = json::parse(r.out);
    ASSERT_GT(j["problems"].size(), 10u) << j.dump(2);
    EXPECT_EQ(j["problems"][0].get<std::string>().rfind(headline, 0), 0u) << j["problems"][0];
    EXPECT_EQ(j["wrong_source"], j["problems"][0]);
    const auto rest = std::to_string(j["problems"].size() - 1) + " problem(s) after this one come from comparing";
    EXPECT_NE(j["problems"][0].get<std::string>().find(rest), std::string::npos) << j["problems"][0];
    const auto text = run_cli({"validate-package", data_path("llama-tiny-f16.gguf").string(), pkg.string()});
    const auto first = text.err.find("\n  ");
    ASSERT_NE(first, std::string::npos) << text.err;
    EXPECT_EQ(text.err.compare(first + 3, headline.size(), headline), 0) << text.err;
  }
  {
    // The right file, but a manifest whose source_model.sha256 was changed.
    auto j = read_manifest(pkg);
    std::string sha = j["source_model"]["sha256"];
    sha[5] = sha[5] == 'a' ? 'b' : 'a';
    j["source_model"]["sha256"] = sha;
    write_manifest(pkg, j);
    const auto r = run_cli({"validate-package", right.string(), pkg.string(), "--json"});
    EXPECT_EQ(r.exit_code, 1);
    const auto v = json::parse(r.out);
    ASSERT_EQ(v["problems"].size(), 1u) << v.dump(2);
    EXPECT_EQ(v["problems"][0].get<std::string>().rfind(headline, 0), 0u) << v.dump(2);
    EXPECT_NE(v["problems"][0].get<std::string>().find("source_model.sha256 declares " + sha), std::string::npos);
    EXPECT_EQ(v["problems"][0].get<std::string>().find("after this one"), std::string::npos) << v["problems"][0];
  }
  // The right source and manifest: valid, no wrong_source.
  TempDir ok;
  const auto good = write_package(right, ok);
  const auto v = ok_json(run_cli({"validate-package", right.string(), good.string(), "--json"}));
  EXPECT_EQ(v["valid"], true);
  EXPECT_TRUE(v["wrong_source"].is_null());
}

}  // namespace
}  // namespace skippy::consumer_edges_test
