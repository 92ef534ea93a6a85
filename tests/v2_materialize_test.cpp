// Package schema 2: materialize (one GGUF per stage, byte-identical to the
// source), plan (bytes and memory) on packages written by the test-side
// reference-layout writer (schema_v2_package.h), never by our own writer.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "schema_v2_package.h"
#include "skippy/stage.h"
#include "skippy/error.h"
#include "skippy/gguf.h"
#include "skippy/materialize.h"
#include "skippy/verify.h"
#include "skippy/model_source.h"
#include "skippy/package_catalog.h"
#include "util/sha256.h"
#include "test_util.h"

namespace skippy {
namespace v2mat_test {

namespace fs = std::filesystem;
using test::data_path;
using test::run_cli;
using test::TempDir;

const fs::path kLlama = data_path("llama-tiny-q8_0.gguf");

uint64_t pad_to(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

// The file holds exactly `want` (names), each tensor byte-identical to the
// source with its type and dims, in the source's order, laid out
// contiguously at the carrier's alignment; its KVs are the carrier's in
// order without skippy.package.* and split.*, then the materialized keys.
void check_v2_file(const fs::path& file, const ModelSource& model, const OpenedCatalog& pkg,
                   const std::set<std::string>& want, std::optional<LayerRange> range) {
  const auto g = GgufFile::open(file);
  const GgufFile& carrier = *pkg.catalog.carrier_file;
  EXPECT_EQ(g.alignment(), carrier.alignment());
  std::set<std::string> names;
  std::vector<std::string> order;
  uint64_t next = 0;
  for (const auto& t : g.tensors()) {
    names.insert(std::string(t.name));
    order.emplace_back(t.name);
    const auto* s = model.find_tensor(t.name);
    ASSERT_NE(s, nullptr) << t.name;
    EXPECT_EQ(t.type, s->info->type) << t.name;
    EXPECT_EQ(t.ne, s->info->ne) << t.name;
    EXPECT_TRUE(std::ranges::equal(g.tensor_data(t), model.shards()[s->shard].tensor_data(*s->info))) << t.name;
    EXPECT_EQ(t.offset, next) << t.name;
    next = pad_to(t.offset + t.bytes, g.alignment());
  }
  EXPECT_EQ(names, want);
  EXPECT_EQ(order.size(), want.size());
  std::vector<std::string> source_order;
  for (const auto& t : model.tensors()) {
    if (want.contains(std::string(t.info->name))) source_order.emplace_back(t.info->name);
  }
  EXPECT_EQ(order, source_order);
  EXPECT_EQ(g.file_size(), g.data_offset() + next);

  std::vector<std::string> carrier_keys, file_keys;
  for (const auto& kv : carrier.kvs()) {
    if (!is_carrier_key(kv.key) && !kv.key.starts_with("split.")) carrier_keys.emplace_back(kv.key);
  }
  for (const auto& kv : g.kvs()) {
    EXPECT_FALSE(kv.key.starts_with("skippy.package.")) << kv.key;
    EXPECT_FALSE(kv.key.starts_with("split.")) << kv.key;
    if (!kv.key.starts_with("skippy.materialized.")) file_keys.emplace_back(kv.key);
  }
  EXPECT_EQ(file_keys, carrier_keys);
  for (const auto& kv : model.primary().kvs()) {
    if (kv.key.starts_with("split.")) continue;
    const auto* m = g.find_kv(kv.key);
    ASSERT_NE(m, nullptr) << kv.key;
    EXPECT_EQ(m->value.type(), kv.value.type()) << kv.key;
    EXPECT_TRUE(std::ranges::equal(m->value.encoded(), kv.value.encoded())) << kv.key;
  }
  EXPECT_EQ(g.get_string(kMaterializedManifestKey), pkg.manifest_sha256);
  EXPECT_EQ(g.get_string(kMaterializedModelIdKey), pkg.catalog.model_id);
  EXPECT_EQ(g.get_string(kMaterializedPackageIdKey), pkg.catalog.package_id);
  if (range) {
    EXPECT_EQ(g.get_uint(kMaterializedLayerStartKey), range->start);
    EXPECT_EQ(g.get_uint(kMaterializedLayerEndKey), range->end);
  } else {
    EXPECT_EQ(g.find_kv(kMaterializedLayerStartKey), nullptr);
  }
}

std::set<std::string> all_names(const ModelSource& model) {
  std::set<std::string> s;
  for (const auto& t : model.tensors()) s.insert(std::string(t.info->name));
  return s;
}

void flip_byte(const fs::path& p, uint64_t at) {
  auto bytes = test::read_file(p);
  bytes.at(at) ^= 0x20;
  test::write_file(p, bytes);
}

TEST(V2Materialize, FullRangeOfEveryFixtureIsTheSourceTensorsByteIdentical) {
  for (const auto& fixture : test::model_fixtures()) {
    SCOPED_TRACE(fixture.string());
    TempDir dir;
    (void)test::write_schema_v2_package(fixture, dir / "pkg");
    const auto pkg = test::local_catalog(dir / "pkg");
    const auto model = ModelSource::open(fixture);
    const LayerRange full{0, pkg.catalog.layer_count};
    MaterializeOptions o;
    o.out = dir / "full.gguf";
    const auto r = materialize_stage(pkg, select_stage(pkg.catalog, full), o);
    EXPECT_FALSE(r.cached);
    EXPECT_EQ(r.tensor_count, model.tensors().size());
    EXPECT_EQ(r.bytes, fs::file_size(dir / "full.gguf"));
    check_v2_file(dir / "full.gguf", model, pkg, all_names(model), full);
  }
}

TEST(V2Materialize, MiddleAndBoundaryRangesHoldExactlyTheirTensors) {
  for (const auto& fixture : {kLlama, data_path("qwen3moe-tiny.gguf")}) {
    SCOPED_TRACE(fixture.string());
    TempDir dir;
    test::SchemaV2Options split;
    split.split_first_layer = true;
    (void)test::write_schema_v2_package(fixture, dir / "pkg", split);
    const auto pkg = test::local_catalog(dir / "pkg");
    const auto model = ModelSource::open(fixture);
    const uint32_t n = pkg.catalog.layer_count;
    for (const LayerRange range : {LayerRange{1, n - 1}, LayerRange{0, 1}, LayerRange{n - 1, n}, LayerRange{0, n / 2}}) {
      SCOPED_TRACE(format_layer_range(range));
      MaterializeOptions o;
      o.out = dir / "stage.gguf";
      (void)materialize_stage(pkg, select_stage(pkg.catalog, range), o);
      check_v2_file(dir / "stage.gguf", model, pkg, test::expected_stage_tensors(model, range.start, range.end), range);
    }
  }
}

TEST(V2Materialize, SelectionByTensorNamesNeedsAnOutputFile) {
  TempDir dir;
  (void)test::write_schema_v2_package(kLlama, dir / "pkg");
  const auto pkg = test::local_catalog(dir / "pkg");
  const auto model = ModelSource::open(kLlama);
  const std::vector<std::string> names = {"blk.3.attn_q.weight", "token_embd.weight", "blk.1.ffn_down.weight"};
  const auto stage = select_stage_tensors(pkg.catalog, names);
  MaterializeOptions o;
  o.out = dir / "some.gguf";
  const auto r = materialize_stage(pkg, stage, o);
  EXPECT_EQ(r.tensor_count, 3u);
  check_v2_file(dir / "some.gguf", model, pkg, std::set<std::string>(names.begin(), names.end()), std::nullopt);
  MaterializeOptions cached;
  cached.cache_dir = dir / "cache";
  try {
    (void)materialize_stage(pkg, stage, cached);
    ADD_FAILURE() << "cached a selection by names";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUsage) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir / "cache"));
}

TEST(V2Materialize, CacheEntryIsReusedAndRebuiltUnderTheSchema1Rules) {
  TempDir dir;
  (void)test::write_schema_v2_package(kLlama, dir / "pkg");
  const auto pkg = test::local_catalog(dir / "pkg");
  const auto model = ModelSource::open(kLlama);
  const LayerRange range{2, 6};
  const auto stage = select_stage(pkg.catalog, range);
  MaterializeOptions o;
  o.cache_dir = dir / "cache";
  const auto first = materialize_stage(pkg, stage, o);
  EXPECT_TRUE(first.cached);
  EXPECT_FALSE(first.reused);
  EXPECT_EQ(first.path, fs::absolute(dir / "cache" / (stage_cache_key(pkg.manifest_sha256, range) + ".gguf")));
  EXPECT_TRUE(fs::exists(dir / "cache" / (stage_cache_key(pkg.manifest_sha256, range) + ".json")));
  const std::string digest = sha256_file(first.path);
  check_v2_file(first.path, model, pkg, test::expected_stage_tensors(model, 2, 6), range);

  EXPECT_TRUE(materialize_stage(pkg, stage, o).reused);
  // The cache lists it like a schema 1 entry.
  const auto entries = list_stage_cache(dir / "cache");
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_TRUE(entries[0].complete);
  EXPECT_EQ(entries[0].model_id, pkg.catalog.model_id);

  // A flipped tensor byte keeps the size: reused without --verify, rebuilt with it.
  flip_byte(first.path, GgufFile::open(first.path).tensors().back().file_offset);
  EXPECT_TRUE(materialize_stage(pkg, stage, o).reused);
  MaterializeOptions verify = o;
  verify.verify = true;
  const auto rebuilt = materialize_stage(pkg, stage, verify);
  EXPECT_FALSE(rebuilt.reused);
  EXPECT_EQ(sha256_file(first.path), digest);

  // Truncated: rebuilt.
  fs::resize_file(first.path, fs::file_size(first.path) - 3);
  EXPECT_FALSE(materialize_stage(pkg, stage, o).reused);
  EXPECT_EQ(sha256_file(first.path), digest);

  // Another range is another entry; prune by this package removes both.
  (void)materialize_stage(pkg, select_stage(pkg.catalog, {0, 2}), o);
  EXPECT_EQ(prune_stage_cache(dir / "cache", pkg.manifest_sha256).removed.size(), 2u);
}

TEST(V2Materialize, FlippedPayloadByteWithVerifyIsAnIntegrityErrorNamingTheArtifact) {
  TempDir dir;
  const auto written = test::write_schema_v2_package(kLlama, dir / "pkg");
  const auto& where = written.tensors.at("blk.3.ffn_up.weight");
  flip_byte(dir / "pkg" / written.artifact_path.at(where.artifact_id), where.offset + 5);
  const auto pkg = test::local_catalog(dir / "pkg");
  const auto stage = select_stage(pkg.catalog, {2, 5});
  MaterializeOptions o;
  o.out = dir / "stage.gguf";
  o.verify = true;
  try {
    (void)materialize_stage(pkg, stage, o);
    ADD_FAILURE() << "materialized a tampered artifact with verify";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIntegrity) << e.what();
    EXPECT_NE(std::string(e.what()).find("artifact " + where.artifact_id + " (layers/layer-00003.gguf)"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(dir / "stage.gguf"));
  // A stage that does not read the artifact is not affected.
  EXPECT_NO_THROW((void)materialize_stage(pkg, select_stage(pkg.catalog, {4, 6}), o));
  // The CLI: SKIPPY_VERIFY_PACKAGE_SHA asks for it too.
  const auto r = run_cli({"materialize", (dir / "pkg").string(), "--layers", "0..4", "--out",
                          (dir / "cli.gguf").string(), "--json"},
                         {"SKIPPY_VERIFY_PACKAGE_SHA=1", "SKIPPY_CACHE_DIR=" + (dir / "c").string()});
  test::expect_json_error(r, "integrity", "artifact " + where.artifact_id);
  // Without verification the bytes are copied as they are (the schema 1 rule).
  const auto plain = run_cli({"materialize", (dir / "pkg").string(), "--layers", "0..4", "--out",
                              (dir / "cli.gguf").string(), "--json"},
                             {"SKIPPY_CACHE_DIR=" + (dir / "c").string()});
  EXPECT_EQ(plain.exit_code, 0) << plain.err;
}

TEST(V2Materialize, VerificationUsesTheVerificationCacheAndMissesAfterAChange) {
  TempDir dir;
  const auto written = test::write_schema_v2_package(kLlama, dir / "pkg");
  // Files changed in the last moments are not recorded (the racy-clean rule
  // of the verification cache): let the fresh package age past it.
  std::this_thread::sleep_for(std::chrono::milliseconds(120));
  const auto pkg = test::local_catalog(dir / "pkg");
  const auto stage = select_stage(pkg.catalog, {0, 3});
  VerifyOptions vo;
  vo.cache_dir = dir / "verified";
  const auto first = verify_stage(pkg, stage, vo);
  ASSERT_TRUE(first.verified);
  EXPECT_EQ(first.artifacts, stage.parts.size() - 1);  // the payload parts; the carrier was hashed at open
  EXPECT_GT(first.hashed_bytes, 0u);
  const auto second = verify_stage(pkg, stage, vo);
  EXPECT_TRUE(second.verified);
  EXPECT_EQ(second.hashed_bytes, 0u);
  EXPECT_EQ(second.cache_hits, first.artifacts);
  // Rewritten with a flipped byte: a miss, hashed, and the problem names the artifact.
  const auto& where = written.tensors.at("blk.2.attn_v.weight");
  flip_byte(dir / "pkg" / written.artifact_path.at(where.artifact_id), where.offset);
  const auto third = verify_stage(pkg, stage, vo);
  EXPECT_FALSE(third.verified);
  ASSERT_EQ(third.problems.size(), 1u);
  EXPECT_TRUE(third.problems[0].starts_with("artifact " + where.artifact_id + " (layers/layer-00002.gguf): SHA-256 is "))
      << third.problems[0];
}

TEST(V2Materialize, LocatorLiesAreRefusedBeforeAnythingIsWritten) {
  TempDir dir;
  test::SchemaV2Options o;
  o.edit_locators = [](test::SchemaV2Locators& l) { l.offset[3] += 1u << 20; };
  (void)test::write_schema_v2_package(kLlama, dir / "pkg", o);
  const auto r = run_cli({"materialize", (dir / "pkg").string(), "--layers", "0..8", "--out",
                          (dir / "x.gguf").string(), "--json"},
                         {"SKIPPY_CACHE_DIR=" + (dir / "c").string()});
  test::expect_json_error(r, "invalid_input", "runs past the end of artifact");
  EXPECT_FALSE(fs::exists(dir / "x.gguf"));
  // No stage cache entry either (the verification cache beside it may have
  // recorded the carrier's digest when the package was opened).
  EXPECT_FALSE(fs::exists(dir / "c" / "stages"));
}

TEST(V2Materialize, ReplacedPayloadFileIsRefusedByItsSize) {
  TempDir dir;
  (void)test::write_schema_v2_package(kLlama, dir / "pkg");
  const auto pkg = test::local_catalog(dir / "pkg");
  fs::resize_file(dir / "pkg" / "layers/layer-00001.gguf", 100);
  MaterializeOptions o;
  o.out = dir / "x.gguf";
  try {
    (void)materialize_stage(pkg, select_stage(pkg.catalog, {0, 3}), o);
    ADD_FAILURE() << "materialized a truncated artifact";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput) << e.what();
    EXPECT_NE(std::string(e.what()).find("layers/layer-00001.gguf"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir / "x.gguf"));
}

TEST(V2Materialize, CliWritesTheCacheEntryOrOutNeverInsideThePackage) {
  TempDir dir;
  const auto written = test::write_schema_v2_package(kLlama, dir / "pkg");
  const std::vector<std::string> env = {"SKIPPY_CACHE_DIR=" + (dir / "cache").string()};
  const auto pkgdir = (dir / "pkg").string();
  auto r = run_cli({"materialize", pkgdir, "--layers", "0..8", "--json"}, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["schema_version"], 2);
  EXPECT_EQ(j["package_id"].get<std::string>(), written.root["package_id"].get<std::string>());
  EXPECT_EQ(j["cached"], true);
  EXPECT_EQ(j["reused"], false);
  EXPECT_EQ(j["layer_end"], 8);
  const fs::path path = j["path"].get<std::string>();
  EXPECT_TRUE(path.string().starts_with((dir / "cache" / "stages").string())) << path;
  check_v2_file(path, ModelSource::open(kLlama), test::local_catalog(dir / "pkg"),
                all_names(ModelSource::open(kLlama)), LayerRange{0, 8});
  r = run_cli({"materialize", pkgdir, "--layers", "0..8", "--json"}, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["reused"], true);
  // Human output: the path on stdout.
  r = run_cli({"materialize", pkgdir, "--layers", "3..5"}, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::is_regular_file(r.out.substr(0, r.out.find('\n')))) << r.out;

  r = run_cli({"materialize", pkgdir, "--layers", "0..2", "--out", pkgdir + "/stage.gguf", "--json"}, env);
  test::expect_json_error(r, "invalid_input", "inside the package");
  EXPECT_FALSE(fs::exists(dir / "pkg" / "stage.gguf"));
  r = run_cli({"materialize", pkgdir, "--layers", "0..9", "--json"}, env);
  test::expect_json_error(r, "invalid_input", "outside the package's 8 layers");

  // --tensors: exactly those, with --out only.
  r = run_cli({"materialize", pkgdir, "--tensors", "blk.2.attn_q.weight,output_norm.weight", "--out",
               (dir / "t.gguf").string(), "--json"},
              env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["tensor_count"], 2);
  EXPECT_TRUE(j["layer_start"].is_null());
  check_v2_file(dir / "t.gguf", ModelSource::open(kLlama), test::local_catalog(dir / "pkg"),
                {"blk.2.attn_q.weight", "output_norm.weight"}, std::nullopt);
  r = run_cli({"materialize", pkgdir, "--tensors", "blk.2.attn_q.weight", "--json"}, env);
  test::expect_json_error(r, "usage", "--tensors needs --out");
  r = run_cli({"materialize", pkgdir, "--tensors", "blk.99.attn_q.weight", "--out", (dir / "u.gguf").string(), "--json"},
              env);
  test::expect_json_error(r, "invalid_input", "tensor 'blk.99.attn_q.weight' is not in the package's catalog");

  r = run_cli({"materialize", "--prune", pkgdir, "--json"}, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["removed"].size(), 2u);
}

// ------------------------------------------------------------------ plan

nlohmann::json plan_json(const std::vector<std::string>& args) {
  const auto r = run_cli(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
}

TEST(V2Plan, StageBytesAreTheCatalogsTensorBytesCountedAsSchema1Counts) {
  TempDir dir;
  (void)test::write_schema_v2_package(kLlama, dir / "pkg");
  const auto pkg = test::local_catalog(dir / "pkg");
  const auto model = ModelSource::open(kLlama);
  const uint64_t carrier = fs::file_size(dir / "pkg" / "shared/metadata.gguf");
  const bool tied = model.find_tensor("output.weight") == nullptr;
  auto bytes_of = [&](uint32_t a, uint32_t b) {
    uint64_t n = carrier;
    for (const auto& name : test::expected_stage_tensors(model, a, b)) n += model.find_tensor(name)->info->bytes;
    return n;
  };
  for (const uint32_t stages : {1u, 2u, 3u}) {
    SCOPED_TRACE(stages);
    const auto j = plan_json({"plan", (dir / "pkg").string(), "--stages", std::to_string(stages), "--json"});
    EXPECT_EQ(j["schema_version"], 2);
    EXPECT_EQ(j["package_id"], pkg.catalog.package_id);
    EXPECT_EQ(j["layer_count"], 8);
    EXPECT_EQ(j["output_tied_to_embeddings"], tied && stages > 1);
    ASSERT_EQ(j["stages"].size(), stages);
    uint32_t next = 0;
    for (const auto& s : j["stages"]) {
      const uint32_t a = s["layer_start"], b = s["layer_end"];
      EXPECT_EQ(a, next);
      next = b;
      EXPECT_EQ(s["bytes"].get<uint64_t>(), bytes_of(a, b)) << a << ".." << b;
    }
    EXPECT_EQ(next, 8u);
    EXPECT_EQ(j["activation_width"], model.primary().embedding_length().value());
  }
  // Human output names the schema 2 counting.
  const auto human = run_cli({"plan", (dir / "pkg").string(), "--stages", "2"});
  EXPECT_EQ(human.exit_code, 0) << human.err;
  EXPECT_NE(human.out.find("package schema 2"), std::string::npos) << human.out;
}

TEST(V2Plan, MemoryPlanReadsTheCarriersKvsAsSchema1ReadsItsMetadata) {
  TempDir dir;
  (void)test::write_schema_v2_package(kLlama, dir / "v2");
  ASSERT_EQ(test::write_pkg(kLlama, dir / "v1").exit_code, 0);
  const std::vector<std::string> flags = {"--context", "512", "--budgets", "64MiB,64MiB", "--json"};
  auto args = [&](const fs::path& p) {
    std::vector<std::string> a = {"plan", p.string()};
    a.insert(a.end(), flags.begin(), flags.end());
    return a;
  };
  const auto v1 = plan_json(args(dir / "v1"));
  const auto v2 = plan_json(args(dir / "v2"));
  EXPECT_EQ(v2["schema_version"], 2);
  ASSERT_EQ(v1["stages"].size(), 2u);
  ASSERT_EQ(v2["stages"].size(), 2u);
  EXPECT_EQ(v2["architecture"], v1["architecture"]);
  EXPECT_EQ(v2["context_tokens"], 512);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(v2["stages"][i]["kv_cache_bytes"], v1["stages"][i]["kv_cache_bytes"]) << i;
    EXPECT_GT(v2["stages"][i]["kv_cache_bytes"].get<uint64_t>(), 0u);
    EXPECT_EQ(v2["stages"][i]["layer_start"], v1["stages"][i]["layer_start"]) << i;
  }
  // Too small a budget: refused, naming the stage.
  const auto r = run_cli({"plan", (dir / "v2").string(), "--context", "512", "--budgets", "1MiB,1MiB", "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
}

}  // namespace v2mat_test
}  // namespace skippy
