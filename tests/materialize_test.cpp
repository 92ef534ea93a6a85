// Materialize (derived cache): a stage's parts as one GGUF. Every valid range
// of every fixture holds exactly its tensors, byte-identical to the source
// (the full range exactly the source's tensor set); the cache is reused when
// valid, rebuilt when not, built once under concurrency, listed and pruned;
// nothing is ever written into the package.
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "skippy/error.h"
#include "skippy/gguf.h"
#include "skippy/materialize.h"
#include "skippy/model_source.h"
#include "util/sha256.h"
#include "skippy/stage.h"
#include "skippy/stage_view.h"
#include "test_util.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using test::data_path;
using test::run_cli;

using test::write_pkg;

// One package per fixture, written once per test binary run (never modified).
const fs::path& package_of(const fs::path& src) {
  static const test::TempDir dir;  // removed at exit
  static std::map<fs::path, fs::path> made;
  if (const auto it = made.find(src); it != made.end()) return it->second;
  const auto out = dir / src.stem().string();
  const auto r = write_pkg(src, out);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return made.emplace(src, out).first->second;
}

uint64_t pad(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

// Checks a materialized file against the source model for range a..b:
// exactly the right tensors, byte-identical, laid out as llama.cpp's loader
// insists (contiguous in info order, padded to the alignment), and the
// source's KVs (minus split.*) type-preserving, plus the derived-file keys.
void check_materialized(const fs::path& file, const ModelSource& model, uint32_t a, uint32_t b,
                        const std::string& manifest_sha) {
  const auto g = GgufFile::open(file);
  std::set<std::string> names;
  uint64_t next = 0;
  for (const auto& t : g.tensors()) {
    names.insert(std::string(t.name));
    const auto* s = model.find_tensor(t.name);
    ASSERT_NE(s, nullptr) << t.name;
    EXPECT_EQ(t.type, s->info->type) << t.name;
    EXPECT_EQ(t.ne, s->info->ne) << t.name;
    EXPECT_TRUE(std::ranges::equal(g.tensor_data(t), model.shards()[s->shard].tensor_data(*s->info))) << t.name;
    EXPECT_EQ(t.offset, next) << t.name;
    next = pad(t.offset + t.bytes, g.alignment());
  }
  EXPECT_EQ(names.size(), g.tensors().size());
  EXPECT_EQ(names, test::expected_stage_tensors(model, a, b));
  EXPECT_EQ(g.file_size(), g.data_offset() + next);
  EXPECT_EQ(g.alignment(), model.primary().alignment());
  size_t source_kvs = 0;
  for (const auto& kv : model.primary().kvs()) {
    if (kv.key.starts_with("split.")) continue;
    ++source_kvs;
    const auto* m = g.find_kv(kv.key);
    ASSERT_NE(m, nullptr) << kv.key;
    EXPECT_EQ(m->value.type(), kv.value.type()) << kv.key;
    EXPECT_TRUE(std::ranges::equal(m->value.encoded(), kv.value.encoded())) << kv.key;
  }
  for (const auto& kv : g.kvs()) EXPECT_FALSE(kv.key.starts_with("skippy.package.")) << kv.key;
  EXPECT_FALSE(g.find_kv("split.no"));
  EXPECT_EQ(g.kvs().size(), source_kvs + 4);
  EXPECT_EQ(g.get_uint(kMaterializedLayerStartKey), a);
  EXPECT_EQ(g.get_uint(kMaterializedLayerEndKey), b);
  EXPECT_EQ(g.get_string(kMaterializedManifestKey), manifest_sha);
  EXPECT_EQ(g.find_kv(kMaterializedLayerStartKey)->value.type(), GgufType::kUint32);
}

nlohmann::json materialize_json(const fs::path& pkg, const std::string& layers, const fs::path& cache,
                                std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"materialize", pkg.string(), "--layers", layers, "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  const auto r = run_cli(args, {"SKIPPY_CACHE_DIR=" + cache.string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
}

struct FileId {
  ino_t ino = 0;
  int64_t mtime_ns = 0;
  bool operator==(const FileId&) const = default;
};
FileId file_id(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
  return {st.st_ino, int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec};
}

std::set<std::string> dir_files(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) out.insert(fs::relative(e.path(), dir).string());
  return out;
}

TEST(Materialize, EveryRangeOfEveryFixtureHoldsExactlyItsTensorsByteIdentical) {
  test::TempDir tmp;
  for (const auto& src : test::model_fixtures()) {
    SCOPED_TRACE(src.string());
    const auto model = ModelSource::open(src);
    const auto pkg = open_local_package(package_of(src).string());
    const auto before = dir_files(package_of(src));
    const uint32_t layers = model.layer_count();
    for (uint32_t a = 0; a < layers; ++a) {
      for (uint32_t b = a + 1; b <= layers; ++b) {
        SCOPED_TRACE(std::to_string(a) + ".." + std::to_string(b));
        const auto sel = test::select_v1(pkg, {a, b});
        MaterializeOptions o;
        o.out = tmp / "stage.gguf";
        o.hash = (a + b) % 2 == 0;  // both write paths: kernel copy, and read + hash + write
        uint64_t last_done = 0, last_total = 0;
        o.on_progress = [&](uint64_t d, uint64_t t) { last_done = d, last_total = t; };
        const auto r = test::materialize_v1(pkg, sel, o);
        EXPECT_FALSE(r.reused);
        EXPECT_FALSE(r.cached);
        EXPECT_EQ(r.path, fs::absolute(tmp / "stage.gguf"));
        EXPECT_EQ(r.bytes, fs::file_size(r.path));
        EXPECT_EQ(r.sha256, o.hash ? sha256_file(r.path) : "");
        EXPECT_EQ(r.tensor_count, test::expected_stage_tensors(model, a, b).size());
        EXPECT_EQ(last_done, r.bytes);
        EXPECT_EQ(last_total, r.bytes);
        check_materialized(r.path, model, a, b, pkg.manifest_sha256);
        if (a == 0 && b == layers) {
          // The full range: exactly the source model's tensor set.
          std::set<std::string> all;
          for (const auto& t : model.tensors()) all.insert(std::string(t.info->name));
          std::set<std::string> got;
          const auto g = GgufFile::open(r.path);
          for (const auto& t : g.tensors()) got.insert(std::string(t.name));
          EXPECT_EQ(got, all);
        }
      }
    }
    EXPECT_EQ(dir_files(package_of(src)), before) << "nothing may be written into the package";
  }
  // No partials left behind.
  for (const auto& e : fs::directory_iterator(tmp.path())) EXPECT_EQ(e.path().filename(), "stage.gguf");
}

TEST(Materialize, CliFullRangeThroughTheCacheMatchesTheSource) {
  test::TempDir tmp;
  for (const auto& src : test::model_fixtures()) {
    SCOPED_TRACE(src.string());
    const auto model = ModelSource::open(src);
    const auto pkg = open_local_package(package_of(src).string());
    const auto j = materialize_json(package_of(src), "0.." + std::to_string(model.layer_count()), tmp / "c");
    ASSERT_TRUE(j.contains("path"));
    EXPECT_EQ(j["reused"], false);
    EXPECT_EQ(j["tensor_count"], model.tensors().size());
    const fs::path path = j["path"].get<std::string>();
    EXPECT_TRUE(path.is_absolute());
    EXPECT_EQ(path.parent_path(), fs::absolute(tmp / "c" / "stages"));
    EXPECT_EQ(path.filename().string(), stage_cache_key(pkg.manifest_sha256, {0, model.layer_count()}) + ".gguf");
    check_materialized(path, model, 0, model.layer_count(), pkg.manifest_sha256);
    const auto side = nlohmann::json::parse(test::read_text(path.parent_path() / (path.stem().string() + ".json")));
    EXPECT_EQ(side["manifest_sha256"], pkg.manifest_sha256);
    EXPECT_EQ(side["model_id"], "org/tiny:Q8_0");
    EXPECT_EQ(side["layer_start"], 0);
    EXPECT_EQ(side["layer_end"], model.layer_count());
    EXPECT_EQ(side["size"], fs::file_size(path));
    EXPECT_TRUE(side["sha256"].is_null()) << "not computed without --sha256";
    EXPECT_EQ(side["tensor_count"], model.tensors().size());
  }
}

TEST(Materialize, ValidCacheEntryIsReusedWithoutRewriting) {
  test::TempDir tmp;
  const auto pkg = package_of(data_path("qwen3moe-tiny.gguf"));
  const auto first = materialize_json(pkg, "1..3", tmp / "c");
  EXPECT_EQ(first["reused"], false);
  const fs::path path = first["path"].get<std::string>();
  const auto id = file_id(path);
  const auto second = materialize_json(pkg, "1..3", tmp / "c");
  EXPECT_EQ(second["reused"], true);
  EXPECT_EQ(second["path"], first["path"]);
  EXPECT_EQ(second["tensor_count"], first["tensor_count"]);
  EXPECT_EQ(file_id(path), id);
  // --verify compares before reuse; an intact file is still reused.
  EXPECT_EQ(materialize_json(pkg, "1..3", tmp / "c", {"--verify"})["reused"], true);
  EXPECT_EQ(file_id(path), id);
  // --sha256 on a reused entry hashes it once and records it.
  const auto hashed = materialize_json(pkg, "1..3", tmp / "c", {"--sha256"});
  EXPECT_EQ(hashed["reused"], true);
  EXPECT_EQ(hashed["sha256"], sha256_file(path));
  EXPECT_EQ(file_id(path), id);
  EXPECT_EQ(materialize_json(pkg, "1..3", tmp / "c")["sha256"], hashed["sha256"]);
  // Another range is another entry.
  EXPECT_EQ(materialize_json(pkg, "1..4", tmp / "c")["reused"], false);
  // Human mode prints the path alone on stdout.
  const auto r = run_cli({"materialize", pkg.string(), "--layers", "1..3"}, {"SKIPPY_CACHE_DIR=" + (tmp / "c").string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, path.string() + "\n");
  EXPECT_NE(r.err.find("reused"), std::string::npos) << r.err;
}

TEST(Materialize, TwoProcessesAtOnceBuildOnceAndBothGetAValidFile) {
  test::TempDir tmp;
  const auto src = data_path("llama-tiny-f16.gguf");
  const auto pkg = package_of(src);
  const auto model = ModelSource::open(src);
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE(round);
    const auto cache = tmp / ("c" + std::to_string(round));
    test::CliResult r1, r2;
    const std::vector<std::string> args = {"materialize", pkg.string(), "--layers", "0..6", "--json"};
    const std::vector<std::string> env = {"SKIPPY_CACHE_DIR=" + cache.string()};
    std::thread t1([&] { r1 = run_cli(args, env); });
    std::thread t2([&] { r2 = run_cli(args, env); });
    t1.join();
    t2.join();
    ASSERT_EQ(r1.exit_code, 0) << r1.err;
    ASSERT_EQ(r2.exit_code, 0) << r2.err;
    const auto j1 = nlohmann::json::parse(r1.out);
    const auto j2 = nlohmann::json::parse(r2.out);
    EXPECT_NE(j1["reused"].get<bool>(), j2["reused"].get<bool>()) << "exactly one builds";
    EXPECT_EQ(j1["path"], j2["path"]);
    const fs::path path = j1["path"].get<std::string>();
    check_materialized(path, model, 0, 6, open_local_package(pkg.string()).manifest_sha256);
    // Only the entry's files: no partials.
    std::set<std::string> files;
    for (const auto& e : fs::directory_iterator(path.parent_path())) files.insert(e.path().filename().string());
    const auto stem = path.stem().string();
    EXPECT_EQ(files, (std::set<std::string>{stem + ".gguf", stem + ".json", stem + ".lock"}));
  }
}

TEST(Materialize, ThreadsOfOneProcessBuildOnce) {
  test::TempDir tmp;
  const auto pkg = open_local_package(package_of(data_path("glm4moe-mtp-tiny.gguf")).string());
  const auto sel = test::select_v1(pkg, {0, 4});
  MaterializeOptions o;
  o.cache_dir = tmp / "c";
  o.hash = true;
  std::vector<MaterializeResult> results(4);
  std::vector<std::thread> threads;
  for (auto& r : results) threads.emplace_back([&] { r = test::materialize_v1(pkg, sel, o); });
  for (auto& t : threads) t.join();
  int built = 0;
  for (const auto& r : results) {
    built += r.reused ? 0 : 1;
    EXPECT_TRUE(r.cached);
    EXPECT_EQ(r.path, results[0].path);
    EXPECT_EQ(r.sha256, results[0].sha256);
  }
  EXPECT_EQ(built, 1);
}

TEST(Materialize, CorruptedOrIncompleteCacheEntryIsRebuilt) {
  test::TempDir tmp;
  const auto src = data_path("llama-tiny-q8_0.gguf");
  const auto pkg = package_of(src);
  const auto model = ModelSource::open(src);
  const auto msha = open_local_package(pkg.string()).manifest_sha256;
  auto first = materialize_json(pkg, "2..6", tmp / "c");
  const fs::path path = first["path"].get<std::string>();
  first["sha256"] = sha256_file(path);
  const fs::path sidecar = path.parent_path() / (path.stem().string() + ".json");

  // Size change (truncated): rebuilt.
  fs::resize_file(path, fs::file_size(path) - 7);
  auto j = materialize_json(pkg, "2..6", tmp / "c");
  EXPECT_EQ(j["reused"], false);
  EXPECT_EQ(sha256_file(path), first["sha256"]);
  check_materialized(path, model, 2, 6, msha);

  // Grown: rebuilt.
  {
    auto bytes = test::read_file(path);
    bytes.push_back(0);
    test::write_file(path, bytes);
  }
  EXPECT_EQ(materialize_json(pkg, "2..6", tmp / "c")["reused"], false);
  EXPECT_EQ(sha256_file(path), first["sha256"]);

  // Missing sidecar (a crash between file and sidecar): rebuilt.
  fs::remove(sidecar);
  EXPECT_EQ(materialize_json(pkg, "2..6", tmp / "c")["reused"], false);
  EXPECT_TRUE(fs::exists(sidecar));

  // Garbage sidecar: rebuilt.
  test::write_file(sidecar, {'{', 'x'});
  EXPECT_EQ(materialize_json(pkg, "2..6", tmp / "c")["reused"], false);

  // Missing file: rebuilt.
  fs::remove(path);
  EXPECT_EQ(materialize_json(pkg, "2..6", tmp / "c")["reused"], false);
  EXPECT_EQ(sha256_file(path), first["sha256"]);

  // A flipped byte keeps the size: only --verify (byte comparison) notices.
  {
    const auto g = GgufFile::open(path);
    const auto off = g.tensors().back().file_offset;
    auto bytes = test::read_file(path);
    bytes[off] ^= 0x40;
    test::write_file(path, bytes);
  }
  EXPECT_EQ(materialize_json(pkg, "2..6", tmp / "c")["reused"], true);
  j = materialize_json(pkg, "2..6", tmp / "c", {"--verify"});
  EXPECT_EQ(j["reused"], false);
  EXPECT_EQ(sha256_file(path), first["sha256"]);
  check_materialized(path, model, 2, 6, msha);

  // A header that no longer parses (same size): rebuilt.
  {
    auto bytes = test::read_file(path);
    bytes[0] = 'X';
    test::write_file(path, bytes);
  }
  EXPECT_EQ(materialize_json(pkg, "2..6", tmp / "c")["reused"], false);
  EXPECT_EQ(sha256_file(path), first["sha256"]);
}

TEST(Materialize, OutWritesExactlyThatFileAndNeverIntoThePackage) {
  test::TempDir tmp;
  const auto pkg = package_of(data_path("llama-tiny-q8_0.gguf"));
  const auto before = dir_files(pkg);
  const auto out = tmp / "stage0.gguf";
  auto r = run_cli({"materialize", pkg.string(), "--layers", "0..3", "--out", out.string(), "--json"},
                   {"SKIPPY_CACHE_DIR=" + (tmp / "c").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["path"], fs::absolute(out).string());
  EXPECT_EQ(j["reused"], false);
  EXPECT_EQ(j["cached"], false);
  EXPECT_TRUE(j["sha256"].is_null());
  EXPECT_FALSE(fs::exists(tmp / "c")) << "--out does not touch the cache";
  // Again: written again (never reused), same bytes.
  const auto sha = sha256_file(out);
  r = run_cli({"materialize", pkg.string(), "--layers", "0..3", "--out", out.string(), "--json", "--sha256"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["reused"], false);
  EXPECT_EQ(nlohmann::json::parse(r.out)["sha256"], sha);
  EXPECT_EQ(sha256_file(out), sha);

  // Inside the package: refused, for --out and for the cache directory.
  r = run_cli({"materialize", pkg.string(), "--layers", "0..3", "--out", (pkg / "shared/stage.gguf").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("inside the package"), std::string::npos) << r.err;
  r = run_cli({"materialize", pkg.string(), "--layers", "0..3", "--cache-dir", (pkg / "cache").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("inside the package"), std::string::npos) << r.err;
  r = run_cli({"materialize", pkg.string(), "--layers", "0..3"}, {"SKIPPY_CACHE_DIR=" + pkg.string()});
  EXPECT_EQ(r.exit_code, 1);
  // Through a symlink to the package, too.
  fs::create_directory_symlink(pkg, tmp / "link");
  r = run_cli({"materialize", pkg.string(), "--layers", "0..3", "--out", (tmp / "link" / "x.gguf").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(dir_files(pkg), before);
  // --out naming a directory.
  r = run_cli({"materialize", pkg.string(), "--layers", "0..3", "--out", tmp.path().string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is a directory"), std::string::npos) << r.err;
}

TEST(Materialize, BadInvocationsAreUsageErrors) {
  test::TempDir tmp;
  const auto pkg = package_of(data_path("llama-tiny-q8_0.gguf"));
  const std::vector<std::string> env = {"SKIPPY_CACHE_DIR=" + (tmp / "c").string()};
  EXPECT_EQ(run_cli({"materialize", pkg.string()}, env).exit_code, 2);
  EXPECT_EQ(run_cli({"materialize", "--layers", "0..2"}, env).exit_code, 2);
  EXPECT_EQ(run_cli({"materialize", pkg.string(), "--layers", "2..1"}, env).exit_code, 2);
  EXPECT_EQ(run_cli({"materialize", pkg.string(), "--layers", "x"}, env).exit_code, 2);
  EXPECT_EQ(run_cli({"materialize", "--list", "--prune"}, env).exit_code, 2);
  EXPECT_EQ(run_cli({"materialize", "--list", "--layers", "0..2"}, env).exit_code, 2);
  // #30: an empty range is a usage error like 2..1.
  EXPECT_EQ(run_cli({"materialize", pkg.string(), "--layers", "2..2"}, env).exit_code, 2);
  // Invalid input: an out-of-range layer range, a missing package.
  EXPECT_EQ(run_cli({"materialize", pkg.string(), "--layers", "0..99"}, env).exit_code, 1);
  EXPECT_EQ(run_cli({"materialize", (tmp / "nope").string(), "--layers", "0..1"}, env).exit_code, 1);
  EXPECT_FALSE(fs::exists(tmp / "c" / "stages") && !fs::is_empty(tmp / "c" / "stages"));
  const auto help = run_cli({"materialize", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("derived cache"), std::string::npos);
  EXPECT_NE(help.out.find("--prune"), std::string::npos);
}

TEST(Materialize, ProjectorIsNotMerged) {
  test::TempDir tmp;
  const auto src = data_path("llama-tiny-q8_0.gguf");
  test::make_projector(tmp / "mmproj-model-f16.gguf");
  ASSERT_EQ(write_pkg(src, tmp / "p", {"--projector", (tmp / "mmproj-model-f16.gguf").string()}).exit_code, 0);
  const auto model = ModelSource::open(src);
  const auto j = materialize_json(tmp / "p", "0.." + std::to_string(model.layer_count()), tmp / "c");
  ASSERT_TRUE(j.contains("projector"));
  EXPECT_EQ(j["projector"], fs::canonical(tmp / "p" / "projectors/mmproj-model-f16.gguf").string());
  check_materialized(j["path"].get<std::string>(), model, 0, model.layer_count(),
                     open_local_package((tmp / "p").string()).manifest_sha256);
}

TEST(Materialize, RefusesAPackageThatBreaksAStageViewRule) {
  test::TempDir tmp;
  fs::copy(package_of(data_path("llama-tiny-q8_0.gguf")), tmp / "p", fs::copy_options::recursive);
  // layer-00001's fragment replaced by layer-00002's (declared size and hash
  // updated): its tensors then appear twice in 1..3, and its role keys lie.
  fs::copy_file(tmp / "p" / "layers/layer-00002.gguf", tmp / "p" / "layers/layer-00001.gguf",
                fs::copy_options::overwrite_existing);
  auto j = nlohmann::json::parse(test::read_text(tmp / "p" / "model-package.json"));
  j["layers"][1]["artifact_bytes"] = j["layers"][2]["artifact_bytes"];
  j["layers"][1]["sha256"] = j["layers"][2]["sha256"];
  j["layers"][1]["tensor_count"] = j["layers"][2]["tensor_count"];
  j["layers"][1]["tensor_bytes"] = j["layers"][2]["tensor_bytes"];
  const auto text = j.dump(2);
  test::write_file(tmp / "p" / "model-package.json", {text.begin(), text.end()});
  const auto r = run_cli({"materialize", (tmp / "p").string(), "--layers", "1..3", "--json"},
                         {"SKIPPY_CACHE_DIR=" + (tmp / "c").string()});
  test::expect_json_error(r, "invalid_input", "layers/layer-00001.gguf");
  // Nothing cached.
  EXPECT_TRUE(!fs::exists(tmp / "c" / "stages") || fs::is_empty(tmp / "c" / "stages"));
}

TEST(Materialize, VerificationWhenRequiredRefusesACorruptedPart) {
  test::TempDir tmp;
  fs::copy(package_of(data_path("llama-tiny-q8_0.gguf")), tmp / "p", fs::copy_options::recursive);
  const std::vector<std::string> cache = {"SKIPPY_CACHE_DIR=" + (tmp / "c").string()};
  // Built and cached while intact.
  EXPECT_EQ(materialize_json(tmp / "p", "3..5", tmp / "c")["reused"], false);
  // A flipped tensor byte in layer 4 (same size: consumer validation passes).
  const auto layer = tmp / "p" / "layers/layer-00004.gguf";
  {
    const auto g = GgufFile::open(layer);
    auto bytes = test::read_file(layer);
    bytes[g.tensors().front().file_offset + 3] ^= 0x10;
    test::write_file(layer, bytes);
  }
  for (const auto& extra : std::vector<std::vector<std::string>>{{"--verify"}, {}}) {
    auto env = cache;
    if (extra.empty()) env.push_back("SKIPPY_VERIFY_PACKAGE_SHA=1");
    for (const std::string layers : {"3..5", "4..6"}) {  // cached entry, and a new one
      std::vector<std::string> args = {"materialize", (tmp / "p").string(), "--layers", layers, "--json"};
      args.insert(args.end(), extra.begin(), extra.end());
      const auto r = run_cli(args, env);
      EXPECT_EQ(r.exit_code, 1) << layers << r.out;
      // A part whose bytes are not the manifest's is an integrity failure.
      test::expect_json_error(r, "integrity", "layers/layer-00004.gguf");
    }
  }
}

TEST(Materialize, ListAndPruneTheCache) {
  test::TempDir tmp;
  const auto cache = tmp / "c";
  const std::vector<std::string> env = {"SKIPPY_CACHE_DIR=" + cache.string()};
  const auto a = package_of(data_path("llama-tiny-q8_0.gguf"));
  const auto b = package_of(data_path("qwen3moe-tiny.gguf"));
  materialize_json(a, "0..2", cache);
  materialize_json(a, "2..6", cache);
  materialize_json(b, "0..4", cache);
  const auto stages = cache / "stages";
  // A dead run's leftover partial, and a file that is not ours.
  const auto a_sha = open_local_package(a.string()).manifest_sha256;
  const auto b_sha = open_local_package(b.string()).manifest_sha256;
  test::write_file(stages / ("." + stage_cache_key(b_sha, {1, 2}) + ".gguf.partial-dead01"), {'x', 'y'});
  test::write_file(stages / "notes.txt", {'k'});

  auto r = run_cli({"materialize", "--list", "--json"}, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["cache_dir"], (cache / "stages").string());
  ASSERT_EQ(j["entries"].size(), 4u);
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& e : j["entries"]) by_name[e["name"].get<std::string>()] = e;
  const auto& e02 = by_name.at(stage_cache_key(a_sha, {0, 2}));
  EXPECT_EQ(e02["layer_start"], 0);
  EXPECT_EQ(e02["layer_end"], 2);
  EXPECT_EQ(e02["model_id"], "org/tiny:Q8_0");
  EXPECT_EQ(e02["complete"], true);
  EXPECT_GE(e02["size"].get<uint64_t>(), fs::file_size(e02["path"].get<std::string>()));
  EXPECT_EQ(by_name.at(stage_cache_key(b_sha, {1, 2}))["complete"], false);
  // Human list: one line per entry.
  r = run_cli({"materialize", "--list"}, env);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find(stage_cache_key(b_sha, {0, 4})), std::string::npos) << r.out;

  // An entry being built (its lock held) is skipped.
  const auto lock_path = stages / (stage_cache_key(a_sha, {2, 6}) + ".lock");
  const int fd = ::open(lock_path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  r = run_cli({"materialize", "--prune", a.string(), "--json"}, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["removed"], nlohmann::json::array({stage_cache_key(a_sha, {0, 2})}));
  EXPECT_EQ(j["busy"], nlohmann::json::array({stage_cache_key(a_sha, {2, 6})}));
  EXPECT_GT(j["freed_bytes"].get<uint64_t>(), 0u);
  EXPECT_FALSE(fs::exists(stages / (stage_cache_key(a_sha, {0, 2}) + ".gguf")));
  EXPECT_TRUE(fs::exists(stages / (stage_cache_key(b_sha, {0, 4}) + ".gguf"))) << "only that package's entries";
  ::close(fd);

  // Prune everything: entries, leftovers; not other files.
  r = run_cli({"materialize", "--prune", "--json"}, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["removed"].size(), 3u);
  EXPECT_TRUE(j["busy"].empty());
  std::set<std::string> left;
  for (const auto& e : fs::directory_iterator(stages)) left.insert(e.path().filename().string());
  EXPECT_EQ(left, std::set<std::string>{"notes.txt"});
  r = run_cli({"materialize", "--list", "--json"}, env);
  EXPECT_TRUE(nlohmann::json::parse(r.out)["entries"].empty());
  // After pruning, materializing builds again.
  EXPECT_EQ(materialize_json(a, "0..2", cache)["reused"], false);
  // An empty or missing cache lists nothing.
  r = run_cli({"materialize", "--list", "--json"}, {"SKIPPY_CACHE_DIR=" + (tmp / "none").string()});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_TRUE(nlohmann::json::parse(r.out)["entries"].empty());
}

TEST(Materialize, PruneRacingMaterializersLeavesAValidEntry) {
  // A materializer waiting on a lock file that prune unlinks must not build
  // alongside a newcomer locking the fresh file: it re-locks the new one.
  test::TempDir tmp;
  const auto pkg = open_local_package(package_of(data_path("qwen3moe-tiny.gguf")).string());
  const auto sel = test::select_v1(pkg, {0, 2});
  MaterializeOptions o;
  o.cache_dir = tmp / "c";
  const auto first = test::materialize_v1(pkg, sel, o);
  const auto first_sha = sha256_file(first.path);
  for (int i = 0; i < 5; ++i) {
    std::thread pruner([&] { (void)prune_stage_cache(tmp / "c"); });
    std::vector<MaterializeResult> rs(2);
    std::thread m1([&] { rs[0] = test::materialize_v1(pkg, sel, o); });
    std::thread m2([&] { rs[1] = test::materialize_v1(pkg, sel, o); });
    pruner.join();
    m1.join();
    m2.join();
    EXPECT_EQ(rs[0].path, first.path);
    EXPECT_EQ(rs[1].path, first.path);
  }
  const auto last = test::materialize_v1(pkg, sel, o);
  EXPECT_TRUE(test::materialize_v1(pkg, sel, o).reused);
  EXPECT_EQ(sha256_file(last.path), first_sha);
  std::set<std::string> files;
  for (const auto& e : fs::directory_iterator(tmp / "c")) files.insert(e.path().filename().string());
  const auto stem = last.path.stem().string();
  EXPECT_EQ(files, (std::set<std::string>{stem + ".gguf", stem + ".json", stem + ".lock"}));
}

}  // namespace
}  // namespace skippy
