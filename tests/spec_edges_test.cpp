// The spec's edges, round two: operator values that would widen
// a package's VerifyWindow, a policy profile without its model evidence,
// validate-package and the NextN layer rule, unknown keys inside the
// generation block, the C API on a tampered hf:// cache, a tampered cached
// manifest, and the tests that could have passed with a wrong
// implementation (a tensor in two fragments, layer_count against the
// source, the first declared mmproj behind an unknown kind). Real packages
// written by the real CLI from the fixtures, the real CLI and C API on them,
// the Hub stand-in on 127.0.0.1.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "hub_standin.h"
#include "util/file.h"
#include "skippy/gguf.h"
#include "gguf/gguf_writer.h"
#include "util/sha256.h"
#include "test_util.h"

// Named: unity builds put several test files in one translation unit.
namespace skippy::spec_edges_test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::CliResult;
using test::data_path;
using test::run_cli;
using test::TempDir;

fs::path write_package(const fs::path& src, const TempDir& dir, const std::string& name = "pkg") {
  const auto out = dir / name;
  const auto r = test::write_pkg(src, out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return out;
}

json read_manifest(const fs::path& pkg) { return json::parse(test::read_text(pkg / "model-package.json")); }
void write_manifest(const fs::path& pkg, const json& j) {
  const auto s = j.dump(2);
  test::write_file(pkg / "model-package.json", std::vector<uint8_t>(s.begin(), s.end()));
}

json parsed(const CliResult& r) {
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

size_t count_has(const json& list, const std::string& needle) {
  size_t n = 0;
  for (const auto& w : list) n += w.is_string() && w.get<std::string>().find(needle) != std::string::npos;
  return n;
}

CliResult validate(const fs::path& src, const fs::path& pkg) {
  return run_cli({"validate-package", src.string(), pkg.string(), "--json"});
}

// An environment for hf:// runs against `hub` with caches under `tmp`.
std::vector<std::string> hub_env(const test::HubStandin& hub, const TempDir& tmp, bool offline) {
  return {"HF_ENDPOINT=" + hub.endpoint(),
          "HF_HUB_CACHE=" + (tmp / "hf").string(),
          "HF_HOME=" + (tmp / "hfhome").string(),
          "SKIPPY_CACHE_DIR=" + (tmp / "skippy").string(),
          "HF_TOKEN=",
          std::string("HF_HUB_OFFLINE=") + (offline ? "1" : "")};
}

// Flips one byte in the middle of `file` in place (a cached blob), keeping its size.
void flip_byte(const fs::path& file) {
  auto bytes = test::read_file(file);
  ASSERT_FALSE(bytes.empty());
  bytes[bytes.size() / 2] ^= 0x5a;
  const fs::path blob = fs::canonical(file);
  test::write_file(blob, bytes);
}

// --------------------------------------------- 1. operator bounds never widen

TEST(SpecEdges, OperatorVerifyWindowValuesTightenThePackagesBoundsNeverWiden) {
  TempDir tmp;
  const auto pkg = write_package(data_path("glm4moe-mtp-tiny.gguf"), tmp);
  auto j = read_manifest(pkg);
  auto& sd = j["generation"]["speculative_decoding"];
  sd["proposers"]["suffix"] = {{"type", "ngram-suffix"}, {"ngram_min", 4}, {"ngram_max", 32},
                               {"max_proposal_tokens", 16}, {"history_scope", "request"}};
  sd["strategies"]["ngram-suffix"] = {{"type", "ngram-suffix"},
                                      {"proposer", "suffix"},
                                      {"window_policy", {{"min_window", 1}, {"max_window", 3}, {"pipeline_depth", 1}}}};
  write_manifest(pkg, j);
  auto spec = [&](std::vector<std::string> flags) {
    std::vector<std::string> args = {"speculative", pkg.string(), "--strategy", "ngram-suffix", "--json"};
    args.insert(args.end(), flags.begin(), flags.end());
    const auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return parsed(r);
  };
  // Wider than the package: the package's bound is kept, and the log says why.
  auto s = spec({"--verify-window-max-tokens", "9"});
  EXPECT_EQ(s["plan"]["verify_window"]["max_tokens"], 3) << s.dump(2);
  EXPECT_EQ(s["field_sources"]["verify_window.max_tokens"], "package") << s.dump(2);
  EXPECT_TRUE(any_has(s["notes"], {"verify_window_max_tokens 9 would widen the package's 3", "package bound kept"}))
      << s.dump(2);
  s = spec({"--verify-window-pipeline-depth", "8"});
  EXPECT_EQ(s["plan"]["verify_window"]["pipeline_depth"], 1) << s.dump(2);
  EXPECT_EQ(s["field_sources"]["verify_window.pipeline_depth"], "package") << s.dump(2);
  EXPECT_TRUE(any_has(s["notes"], {"verify_window_pipeline_depth 8 would widen the package's 1", "package bound kept"}))
      << s.dump(2);
  // Tighter (or equal): the operator's value, from the CLI, with nothing to note.
  s = spec({"--verify-window-max-tokens", "2", "--verify-window-pipeline-depth", "1"});
  EXPECT_EQ(s["plan"]["verify_window"]["max_tokens"], 2) << s.dump(2);
  EXPECT_EQ(s["field_sources"]["verify_window.max_tokens"], "cli") << s.dump(2);
  EXPECT_EQ(s["plan"]["verify_window"]["pipeline_depth"], 1);
  EXPECT_FALSE(any_has(s["notes"], {"would widen"})) << s.dump(2);
}

// ------------------------------------- 2. a profile without its model evidence

TEST(SpecEdges, AProfileWithoutItsModelEvidenceIsIgnoredByTheResolverAndReportedByValidate) {
  TempDir tmp;
  const auto src = data_path("llama-tiny-q8_0.gguf");
  const auto pkg = write_package(src, tmp);
  auto j = read_manifest(pkg);
  j["generation"]["policy"] = {{"profile", "glm-dsa-v1"}, {"decode", "compact-flash"}};
  write_manifest(pkg, j);
  const auto r = run_cli({"policy", pkg.string(), "--phase", "decode", "--n-tokens", "1", "--n-kv", "64", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto d = parsed(r);
  EXPECT_EQ(d["selected_path"], "dense") << d.dump(2);
  EXPECT_EQ(d["package_recommendation_used"], false) << d.dump(2);
  const std::string why = "generation.policy.profile \"glm-dsa-v1\" ignored: it is for architecture \"glm-dsa\" and "
                          "this model's is \"llama\"";
  EXPECT_TRUE(any_has(d["unsupported"], {why})) << d.dump(2);
  EXPECT_NE(d["fallback_reason"].dump().find("ignored"), std::string::npos) << d.dump(2);
  EXPECT_NE(d["telemetry"]["profile"], "glm-dsa-v1") << d.dump(2);
  // The decision's log line says it too.
  EXPECT_NE(r.err.find("\"event\":\"skippy.generation_policy\""), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ignored: it is for architecture"), std::string::npos) << r.err;
  // validate-package: the writer's rule read back.
  const auto v = validate(src, pkg);
  EXPECT_EQ(v.exit_code, 1) << v.out << v.err;
  const auto vj = parsed(v);
  EXPECT_EQ(vj["valid"], false);
  EXPECT_TRUE(any_has(vj["problems"], {"generation.policy.profile: \"glm-dsa-v1\" declared without its model evidence",
                                       "architecture is \"llama\""}))
      << vj.dump(2);
  // Without the profile, the same package validates.
  j["generation"]["policy"] = {{"decode", "dense"}};
  write_manifest(pkg, j);
  EXPECT_EQ(parsed(validate(src, pkg))["valid"], true);
}

// ----------------------------------- 3. layer_indices that hold no NextN tensors

TEST(SpecEdges, ValidatePackageAppliesTheNextnLayerRuleSpeculativeApplies) {
  TempDir tmp;
  const auto src = data_path("glm4moe-mtp-tiny.gguf");
  const auto pkg = write_package(src, tmp);
  // As written (layer 3 holds NextN): valid.
  const auto ok = parsed(validate(src, pkg));
  EXPECT_EQ(ok["valid"], true) << ok.dump(2);
  auto j = read_manifest(pkg);
  j["generation"]["speculative_decoding"]["proposers"]["mtp"]["layer_indices"] = json::array({2});
  write_manifest(pkg, j);
  const auto sp = run_cli({"speculative", pkg.string(), "--json"});
  EXPECT_EQ(sp.exit_code, 1);
  EXPECT_EQ(parsed(sp)["error"]["rule"], "layer_indices_hold_nextn") << sp.out;
  const auto v = validate(src, pkg);
  EXPECT_EQ(v.exit_code, 1) << v.out << v.err;
  const auto vj = parsed(v);
  EXPECT_EQ(vj["valid"], false);
  EXPECT_TRUE(any_has(vj["problems"], {"generation.speculative_decoding.proposers.mtp.layer_indices: layer 2 holds no "
                                       "NextN/MTP prediction tensors",
                                       "layer_indices_hold_nextn"}))
      << vj.dump(2);
}

TEST(SpecEdges, OverHfAnUncachedLayerSaysTheNextnCheckWasNotMade) {
  TempDir tmp;
  const auto pkg = write_package(data_path("glm4moe-mtp-tiny.gguf"), tmp);
  auto j = read_manifest(pkg);
  j["generation"]["speculative_decoding"]["proposers"]["mtp"]["layer_indices"] = json::array({2});
  write_manifest(pkg, j);
  test::HubStandin hub;
  const auto commit = hub.publish("org/nextn-layers", pkg);
  const std::string ref = "hf://org/nextn-layers@" + commit;
  // Only the metadata is cached: layer 2 is not, and is not downloaded for this.
  ASSERT_EQ(run_cli({"fetch", ref, "--layers", "0..1", "--json"}, hub_env(hub, tmp, false)).exit_code, 0);
  const auto r = run_cli({"speculative", ref, "--json"}, hub_env(hub, tmp, true));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto s = parsed(r);
  EXPECT_TRUE(any_has(s["notes"], {"layer 2 is not in the cache", "not checked", "layer_indices_hold_nextn"}))
      << s.dump(2);
  // Once cached, the rule applies as it does locally.
  ASSERT_EQ(run_cli({"fetch", ref, "--layers", "2..3", "--json"}, hub_env(hub, tmp, false)).exit_code, 0);
  const auto c = run_cli({"speculative", ref, "--json"}, hub_env(hub, tmp, true));
  EXPECT_EQ(c.exit_code, 1) << c.out;
  EXPECT_EQ(parsed(c)["error"]["rule"], "layer_indices_hold_nextn") << c.out;
}

// ------------------------------------ 4. unknown keys inside the generation block

TEST(SpecEdges, UnknownKeysAtEveryLevelOfTheGenerationBlockAreNamed) {
  TempDir tmp;
  const auto src = data_path("glm4moe-mtp-tiny.gguf");
  const auto pkg = write_package(src, tmp);
  auto j = read_manifest(pkg);
  j["generation"]["policy"] = {{"decode", "dense"}, {"cuda_kernel", "flash_mla_sm90"}};
  j["generation"]["thresholds"] = {{"short_prefill_max_tokens", 2048}, {"metal_simdgroup", 4}};
  auto& sd = j["generation"]["speculative_decoding"];
  sd["metal_queue"] = 2;
  sd["proposers"]["mtp"]["cuda_graph"] = true;
  sd["strategies"]["mtp"]["window_policy"]["metal_rows"] = 8;
  write_manifest(pkg, j);
  const std::vector<std::string> fields = {
      "generation.policy.cuda_kernel: unknown policy field",
      "generation.thresholds.metal_simdgroup: unknown threshold field",
      "generation.speculative_decoding.metal_queue: unknown speculative_decoding field",
      "generation.speculative_decoding.proposers.mtp.cuda_graph: unknown proposer field",
      "generation.speculative_decoding.strategies.mtp.window_policy.metal_rows: unknown window_policy field"};
  const auto v = validate(src, pkg);
  EXPECT_EQ(v.exit_code, 1) << v.out << v.err;
  const auto vj = parsed(v);
  for (const auto& f : fields) EXPECT_EQ(count_has(vj["problems"], f), 1u) << f << "\n" << vj.dump(2);
  EXPECT_EQ(vj["problems"].size(), fields.size()) << vj.dump(2);
  // Consumers name each once and ignore it.
  const auto s = run_cli({"select", pkg.string(), "--layers", "0..2", "--json"});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  const auto sj = parsed(s);
  for (const auto& f : fields) EXPECT_EQ(count_has(sj["warnings"], f), 1u) << f << "\n" << sj.dump(2);
}

// ------------------------------------------ 5. the C API on a tampered hf:// cache

TEST(SpecEdges, TheCApiRefusesATamperedHfCacheHitAtSelectAsTheCliDoes) {
  TempDir tmp;
  const auto pkg = write_package(data_path("llama-tiny-q8_0.gguf"), tmp);
  test::HubStandin hub;
  const auto commit = hub.publish("org/tampered-layers", pkg);
  const std::string ref = "hf://org/tampered-layers@" + commit;
  ASSERT_EQ(run_cli({"fetch", ref, "--layers", "0..2", "--json"}, hub_env(hub, tmp, false)).exit_code, 0);
  const fs::path cached = tmp / "hf" / "models--org--tampered-layers" / "snapshots" / commit / "layers" /
                          "layer-00001.gguf";
  ASSERT_TRUE(fs::is_symlink(cached)) << cached;
  // Untouched, the C API selects and verifies the cached stage.
  auto c = test::run_program(SKIPPY_CAPI_TEST_PATH, {ref, "0", "2"}, hub_env(hub, tmp, true));
  ASSERT_EQ(c.exit_code, 0) << c.out << c.err;
  flip_byte(cached);
  const auto cli = run_cli({"select", ref, "--layers", "0..2", "--json"}, hub_env(hub, tmp, true));
  EXPECT_EQ(cli.exit_code, 1) << cli.out;
  EXPECT_EQ(parsed(cli)["error"]["kind"], "integrity") << cli.out;
  c = test::run_program(SKIPPY_CAPI_TEST_PATH, {ref, "0", "2"}, hub_env(hub, tmp, true));
  EXPECT_NE(c.exit_code, 0) << c.out;
  EXPECT_NE(c.out.find("error select integrity"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("layers/layer-00001.gguf"), std::string::npos) << c.out;
  EXPECT_EQ(c.out.find("\npart "), std::string::npos) << "no path of an unverified part is handed out\n" << c.out;
}

// ---------------------------------------------- a cached manifest edited in place

TEST(SpecEdges, AManifestEditedInTheHfCacheIsRefusedOffline) {
  TempDir tmp;
  const auto pkg = write_package(data_path("llama-tiny-q8_0.gguf"), tmp);
  test::HubStandin hub;
  const auto commit = hub.publish("org/edited-manifest", pkg);
  const std::string ref = "hf://org/edited-manifest@" + commit;
  ASSERT_EQ(run_cli({"fetch", ref, "--layers", "0..2", "--json"}, hub_env(hub, tmp, false)).exit_code, 0);
  ASSERT_EQ(run_cli({"select", ref, "--layers", "0..2", "--json"}, hub_env(hub, tmp, true)).exit_code, 0);
  const fs::path manifest = tmp / "hf" / "models--org--edited-manifest" / "snapshots" / commit / "model-package.json";
  ASSERT_TRUE(fs::is_symlink(manifest));
  // Still valid JSON, still a valid manifest: only its blob name can tell.
  std::string text = test::read_text(manifest);
  const auto at = text.find("org/tiny");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 8, "org/tinz");
  test::write_file(fs::canonical(manifest), std::vector<uint8_t>(text.begin(), text.end()));
  for (const std::string cmd : {"select", "inspect"}) {
    std::vector<std::string> args = {cmd, ref, "--json"};
    if (cmd == "select") args.insert(args.end(), {"--layers", "0..2"});
    const auto r = run_cli(args, hub_env(hub, tmp, true));
    EXPECT_EQ(r.exit_code, 1) << cmd << ": " << r.out;
    const auto e = parsed(r);
    EXPECT_EQ(e["error"]["kind"], "integrity") << r.out;
    EXPECT_NE(r.err.find("model-package.json"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("git blob id"), std::string::npos) << r.err;
  }
  const auto c = test::run_program(SKIPPY_CAPI_TEST_PATH, {ref, "0", "2"}, hub_env(hub, tmp, true));
  EXPECT_NE(c.out.find("error open integrity"), std::string::npos) << c.out;
}

// --------------------------------------- tests that could pass a wrong implementation

// `pkg`'s fragment `rel` rewritten with `extra` (a tensor of `src`) added,
// and its manifest entry updated so that only the extra tensor is wrong.
void add_tensor_to_fragment(const fs::path& pkg, const std::string& rel, const fs::path& src,
                            const std::string& extra) {
  const auto frag = GgufFile::open(pkg / rel);
  const auto source = GgufFile::open(src);
  GgufWriter w(frag.alignment());
  for (const auto& kv : frag.kvs()) w.add_kv(std::string(kv.key), kv.value);
  for (const auto& t : frag.tensors()) w.add_tensor_from(frag, t);
  const auto* t = source.find_tensor(extra);
  ASSERT_NE(t, nullptr) << extra;
  w.add_tensor_from(source, *t);
  const auto tmp_out = pkg / (rel + ".new");
  {
    AtomicFile af(tmp_out);
    w.write(af);
    af.commit();
  }
  fs::rename(tmp_out, pkg / rel);
  const auto g = GgufFile::open(pkg / rel);
  auto j = read_manifest(pkg);
  for (auto& l : j["layers"]) {
    if (l["path"] != rel) continue;
    l["tensor_count"] = g.tensors().size();
    l["tensor_bytes"] = g.tensor_bytes_total();
    l["artifact_bytes"] = fs::file_size(pkg / rel);
    l["sha256"] = sha256_file(pkg / rel);
  }
  write_manifest(pkg, j);
}

TEST(SpecEdges, ValidatePackageReportsATensorHeldByTwoFragments) {
  TempDir tmp;
  const auto src = data_path("llama-tiny-q8_0.gguf");
  const auto pkg = write_package(src, tmp);
  add_tensor_to_fragment(pkg, "layers/layer-00001.gguf", src, "blk.0.attn_norm.weight");
  const auto v = validate(src, pkg);
  EXPECT_EQ(v.exit_code, 1) << v.out << v.err;
  const auto vj = parsed(v);
  EXPECT_TRUE(any_has(vj["problems"], {"tensor 'blk.0.attn_norm.weight' of the source appears in 2 artifacts"}))
      << vj.dump(2);
  EXPECT_TRUE(any_has(vj["problems"], {"layers/layer-00001.gguf: tensor 'blk.0.attn_norm.weight' belongs in "
                                       "layers/layer-00000.gguf"}))
      << vj.dump(2);
  EXPECT_EQ(vj["problems"].size(), 2u) << vj.dump(2);
}

TEST(SpecEdges, ValidatePackageComparesLayerCountWithTheSource) {
  TempDir tmp;
  const auto src = data_path("llama-tiny-q8_0.gguf");
  const auto pkg = write_package(src, tmp);
  auto j = read_manifest(pkg);
  const uint32_t n = j["layer_count"];
  ASSERT_GE(n, 2u);
  j["layers"].erase(j["layers"].size() - 1);
  j["layer_count"] = n - 1;
  write_manifest(pkg, j);
  const auto vj = parsed(validate(src, pkg));
  EXPECT_EQ(vj["valid"], false);
  EXPECT_TRUE(any_has(vj["problems"], {"layer_count: manifest says " + std::to_string(n - 1) + ", the source has " +
                                       std::to_string(n)}))
      << vj.dump(2);
}

TEST(SpecEdges, TheFirstDeclaredMmprojIsTheDefaultBehindAnUnknownKind) {
  TempDir tmp;
  const auto pkg = write_package(data_path("llama-tiny-q8_0.gguf"), tmp);
  fs::create_directories(pkg / "projectors");
  const std::vector<std::pair<std::string, std::string>> declared = {
      {"audio-encoder", "audio.gguf"}, {"mmproj", "vision-a.gguf"}, {"mmproj", "vision-b.gguf"}};
  auto j = read_manifest(pkg);
  j["projectors"] = json::array();
  uint8_t seed = 1;
  for (const auto& [kind, file] : declared) {
    const auto path = pkg / "projectors" / file;
    test::make_projector(path, seed++);
    const auto g = GgufFile::open(path);
    j["projectors"].push_back({{"kind", kind},
                               {"path", "projectors/" + file},
                               {"tensor_count", g.tensors().size()},
                               {"tensor_bytes", g.tensor_bytes_total()},
                               {"artifact_bytes", fs::file_size(path)},
                               {"sha256", sha256_file(path)}});
  }
  write_manifest(pkg, j);
  const auto s = run_cli({"select", pkg.string(), "--layers", "0..2", "--json"});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  const auto sj = parsed(s);
  EXPECT_EQ(sj["parts"].back()["relative_path"], "projectors/vision-a.gguf") << sj.dump(2);
  const auto c = test::run_program(SKIPPY_CAPI_TEST_PATH, {pkg.string(), "0", "2"},
                                   {"HF_HUB_OFFLINE=1", "SKIPPY_CACHE_DIR=" + (tmp / "c-cache").string()});
  ASSERT_EQ(c.exit_code, 0) << c.out << c.err;
  EXPECT_NE(c.out.find(" projectors/vision-a.gguf "), std::string::npos) << c.out;
  EXPECT_EQ(c.out.find(" projectors/vision-b.gguf "), std::string::npos) << c.out;
  EXPECT_EQ(c.out.find(" projectors/audio.gguf "), std::string::npos) << c.out;
}

}  // namespace
}  // namespace skippy::spec_edges_test
