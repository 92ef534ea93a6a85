// The reference implementation's dialect (docs/REFERENCE-PACKAGES.md):
// packages written the way mesh-llm's own writer writes them (the packages
// already on the Hub) are read by every consumer command, and what we write
// declares an ABI its 0.1 runtime accepts. Every fixture goes through
// tests/reference_package.h's generator, which follows the doc and nothing
// of ours but the GGUF writer.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "reference_package.h"
#include "skippy/abi.h"
#include "skippy/error.h"
#include "util/file.h"
#include "skippy/gguf.h"
#include "gguf/gguf_writer.h"
#include "skippy/manifest.h"
#include "skippy/materialize.h"
#include "skippy/model_source.h"
#include "skippy/package_layout.h"
#include "skippy/package_validator.h"
#include "util/sha256.h"
#include "skippy/stage.h"
#include "skippy/stage_view.h"
#include "test_util.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::run_cli;

struct RefPackage {
  fs::path src;
  fs::path dir;
  uint64_t repeated = 0;  // extra copies written
};

// One reference-style package per fixture and option set, written once per run.
const RefPackage& ref_package(const fs::path& src, bool activation_width = true, bool uppercase = false) {
  static const test::TempDir root;
  static std::map<std::string, RefPackage> made;
  const std::string key = src.stem().string() + (activation_width ? "" : "-noaw") + (uppercase ? "-upper" : "");
  if (const auto it = made.find(key); it != made.end()) return it->second;
  RefPackage p{src, root / key, 0};
  test::ReferencePackageOptions o;
  o.activation_width = activation_width;
  o.uppercase_digests = uppercase;
  p.repeated = test::write_reference_package(src, p.dir, o);
  return made.emplace(key, p).first->second;
}

std::string fixture_name(const fs::path& p) { return p.filename().string(); }

// None of llama.cpp's tiny fixtures has a global "extra" tensor; real models
// do (llama 3's rope_freqs.weight). This is llama-tiny-q8_0 plus one, its
// 16 bytes borrowed from the file's start (no loader runs it: it feeds the
// package tools only).
fs::path model_with_an_extra() {
  static const test::TempDir dir;
  static const fs::path path = [] {
    const auto src = GgufFile::open(test::data_path("llama-tiny-q8_0.gguf"));
    GgufWriter w(src.alignment());
    for (const auto& kv : src.kvs()) w.add_kv(std::string(kv.key), kv.value);
    for (const auto& t : src.tensors()) {
      w.add_tensor_from(src, t);
      if (t.name == "token_embd.weight") {
        // Right after the embeddings, as llama.cpp's converter orders it.
        w.add_tensor("rope_freqs.weight", 0 /* F32 */, {4}, src.file(), 0);
      }
    }
    const fs::path out = dir / "llama-tiny-rope-freqs.gguf";
    AtomicFile f(out);
    (void)w.write(f);
    f.commit();
    return out;
  }();
  return path;
}

// Every model fixture, and the one with an extra.
std::vector<fs::path> fixtures() {
  auto all = test::model_fixtures();
  all.push_back(model_with_an_extra());
  return all;
}

json cli_json(const std::vector<std::string>& args) {
  const auto r = run_cli(args);
  EXPECT_EQ(r.exit_code, 0) << args[0] << ": " << r.err << r.out;
  if (r.exit_code != 0) return json::object();
  return json::parse(r.out);
}

// `verify` of every artifact succeeds, each part checked.
void expect_verified(const fs::path& dir) {
  const auto ver = cli_json({"verify", dir.string(), "--json"});
  ASSERT_TRUE(ver.contains("parts")) << ver.dump();
  EXPECT_FALSE(ver["parts"].empty());
  for (const auto& part : ver["parts"]) EXPECT_EQ(part["ok"], true) << part.dump();
}

// The generator itself follows the doc (so the tests below test something).
TEST(ReferenceDialect, TheGeneratorWritesTheDocumentedDialect) {
  const auto& p = ref_package(test::data_path("llama-tiny-q8_0.gguf"));
  const auto m = json::parse(test::read_text(p.dir / "model-package.json"));
  EXPECT_EQ(m["skippy_abi_version"], "0.1.39");
  EXPECT_TRUE(m["source_model"]["files"][0]["size_bytes"].is_null());
  EXPECT_TRUE(m["source_model"]["files"][0]["sha256"].is_null());
  EXPECT_FALSE(fs::exists(p.dir / "README.md"));
  EXPECT_TRUE(fs::exists(p.dir / "layers/layer-000.gguf"));
  const auto l0 = GgufFile::open(p.dir / "layers/layer-000.gguf");
  EXPECT_EQ(l0.alignment(), 32u);
  EXPECT_NE(l0.find_kv("skippy.slice.stage_index"), nullptr);
  EXPECT_NE(l0.find_kv("tokenizer.ggml.tokens"), nullptr);  // every KV in every fragment
  EXPECT_EQ(l0.find_kv("skippy.package.role"), nullptr);
}

// select, verify, plan and inspect read every fixture's reference package.
TEST(ReferenceDialect, ConsumerCommandsReadEveryFixture) {
  for (const auto& src : fixtures()) {
    SCOPED_TRACE(fixture_name(src));
    const auto& p = ref_package(src);
    const auto model = ModelSource::open(src);
    const uint32_t n = model.layer_count();
    const std::string range = "0.." + std::to_string(n);

    const auto sel = cli_json({"select", p.dir.string(), "--layers", range, "--json"});
    ASSERT_TRUE(sel.contains("parts"));
    EXPECT_EQ(sel["parts"].size(), n + 3u);  // metadata, embeddings, layers, output

    expect_verified(p.dir);

    const auto plan = cli_json({"plan", p.dir.string(), "--stages", "2", "--json"});
    ASSERT_TRUE(plan.contains("stages"));
    EXPECT_EQ(plan["stages"].size(), 2u);

    const auto ins = cli_json({"inspect", p.dir.string(), "--json"});
    EXPECT_EQ(ins.value("layer_count", 0u), n) << ins.dump();
    ASSERT_TRUE(ins.contains("abi")) << ins.dump();
    EXPECT_EQ(ins["abi"]["declared"], "0.1.39");
    EXPECT_EQ(ins["abi"]["compatible"], true);
  }
}

// Either hex case in the manifest's digests.
TEST(ReferenceDialect, UppercaseDigestsAreAccepted) {
  const auto& p = ref_package(test::data_path("qwen3moe-tiny.gguf"), true, true);
  const auto m = json::parse(test::read_text(p.dir / "model-package.json"));
  const std::string sha = m["layers"][0]["sha256"];
  ASSERT_NE(sha, [&] { std::string s = sha; std::ranges::transform(s, s.begin(), ::tolower); return s; }());
  expect_verified(p.dir);
}

// A missing activation_width falls back to the reference runtime's rule
// (the element count of the first layer's attn_norm.weight), and says so.
TEST(ReferenceDialect, MissingActivationWidthFallsBackAndSaysSo) {
  for (const auto& src : fixtures()) {
    SCOPED_TRACE(fixture_name(src));
    const auto& p = ref_package(src, /*activation_width=*/false);
    const auto model = ModelSource::open(src);
    const auto* norm = model.find_tensor("blk.0.attn_norm.weight");
    ASSERT_NE(norm, nullptr);
    const uint64_t width = norm->info->ne[0];

    const auto r = run_cli({"plan", p.dir.string(), "--stages", "2", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto plan = json::parse(r.out);
    EXPECT_EQ(plan.value("activation_width", uint64_t{0}), width) << plan.dump();
    EXPECT_NE(plan["notes"].dump().find("attn_norm.weight"), std::string::npos) << plan.dump();
    const auto ij = cli_json({"inspect", p.dir.string(), "--json"});
    EXPECT_EQ(ij.value("activation_width", uint64_t{0}), width);
    EXPECT_EQ(ij["activation_width_declared"], false);

    const auto ins = run_cli({"inspect", p.dir.string()});
    ASSERT_EQ(ins.exit_code, 0) << ins.err;
    EXPECT_NE((ins.out + ins.err).find("attn_norm"), std::string::npos) << ins.out << ins.err;
  }
}

// A full-range materialization holds every source tensor exactly once,
// byte-identical, and the source's KVs (general.alignment aside: the
// reference forces 32), none of either dialect's fragment keys.
TEST(ReferenceDialect, FullRangeMaterializationIsTheSourceModel) {
  for (const auto& src : fixtures()) {
    SCOPED_TRACE(fixture_name(src));
    const auto& p = ref_package(src);
    const auto model = ModelSource::open(src);
    const auto pkg = open_local_package(p.dir);
    const auto cat = test::catalog_of(pkg, LayerRange{0, model.layer_count()});
    const auto sel = open_stage(cat, {0, model.layer_count()});
    const auto view = StageView::open(cat.catalog, sel);
    EXPECT_EQ(view.merged_duplicates(), p.repeated);
    test::TempDir out;
    MaterializeOptions o;
    o.out = out / "stage.gguf";
    const auto r = test::materialize_v1(pkg, sel, o);
    const auto g = GgufFile::open(r.path);
    std::set<std::string> names;
    for (const auto& t : g.tensors()) {
      EXPECT_TRUE(names.insert(std::string(t.name)).second) << "twice: " << t.name;
      const auto* s = model.find_tensor(t.name);
      ASSERT_NE(s, nullptr) << t.name;
      EXPECT_EQ(t.type, s->info->type) << t.name;
      EXPECT_EQ(t.ne, s->info->ne) << t.name;
      EXPECT_TRUE(std::ranges::equal(g.tensor_data(t), model.shards()[s->shard].tensor_data(*s->info))) << t.name;
    }
    EXPECT_EQ(names.size(), model.tensors().size());
    for (const auto& kv : model.primary().kvs()) {
      if (kv.key.starts_with("split.") || kv.key == "general.alignment") continue;
      const auto* m = g.find_kv(kv.key);
      ASSERT_NE(m, nullptr) << kv.key;
      EXPECT_TRUE(std::ranges::equal(m->value.encoded(), kv.value.encoded())) << kv.key;
    }
    for (const auto& kv : g.kvs()) EXPECT_FALSE(is_fragment_key(kv.key)) << kv.key;
  }
}

// Every valid two-stage split materializes too (each stage gets the extras once).
TEST(ReferenceDialect, EveryStageOfATwoStageSplitMaterializes) {
  for (const auto& src : fixtures()) {
    SCOPED_TRACE(fixture_name(src));
    const auto& p = ref_package(src);
    const auto model = ModelSource::open(src);
    const auto pkg = open_local_package(p.dir);
    const uint32_t n = model.layer_count(), mid = n / 2;
    for (const LayerRange r : {LayerRange{0, mid}, LayerRange{mid, n}}) {
      test::TempDir out;
      MaterializeOptions o;
      o.out = out / "stage.gguf";
      const auto res = test::materialize_v1(pkg, test::select_v1(pkg, r), o);
      const auto g = GgufFile::open(res.path);
      std::set<std::string> names;
      for (const auto& t : g.tensors()) EXPECT_TRUE(names.insert(std::string(t.name)).second) << t.name;
      EXPECT_EQ(names, test::expected_stage_tensors(model, r.start, r.end));
    }
  }
}

// Repeated extras whose copies differ are corruption, naming both fragments.
TEST(ReferenceDialect, DifferingCopiesOfAnExtraAreRefusedNamingBoth) {
  // A fixture with a global extra: find one whose package repeats something.
  const RefPackage* p = &ref_package(model_with_an_extra());
  ASSERT_GT(p->repeated, 0u);
  test::TempDir tmp;
  const auto dir = tmp / "p";
  fs::copy(p->dir, dir, fs::copy_options::recursive);
  // Flip one byte of the extra's copy in layer-000 and re-record its digest.
  const auto l0 = GgufFile::open(dir / "layers/layer-000.gguf");
  const GgufTensorInfo* extra = nullptr;
  for (const auto& t : l0.tensors()) {
    if (!t.name.starts_with("blk.")) { extra = &t; break; }
  }
  ASSERT_NE(extra, nullptr);
  const std::string extra_name(extra->name);
  const uint64_t at = l0.data_offset() + extra->offset;
  auto bytes = test::read_file(dir / "layers/layer-000.gguf");
  bytes[at] ^= 0x01;
  test::write_file(dir / "layers/layer-000.gguf", bytes);
  auto m = json::parse(test::read_text(dir / "model-package.json"));
  m["layers"][0]["sha256"] = sha256_file(dir / "layers/layer-000.gguf");
  std::ofstream(dir / "model-package.json") << m.dump(2) << "\n";
  const auto pkg = open_local_package(dir);
  try {
    (void)test::view_v1(pkg, {0, 1});
    ADD_FAILURE() << "differing copies were accepted";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(extra_name), std::string::npos) << what;
    EXPECT_NE(what.find("layers/layer-000.gguf"), std::string::npos) << what;
    EXPECT_NE(what.find("shared/"), std::string::npos) << what;
  }
}

// validate-package: the repetition and the unrecorded source sizes are
// warnings (deviations from the spec), not problems.
TEST(ReferenceDialect, ValidatePackageWarnsButPasses) {
  for (const auto& src : fixtures()) {
    SCOPED_TRACE(fixture_name(src));
    const auto& p = ref_package(src);
    const auto r = run_cli({"validate-package", src.string(), p.dir.string(), "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    const auto j = json::parse(r.out);
    EXPECT_EQ(j.value("valid", false), true) << j.dump();
    ASSERT_TRUE(j.contains("warnings"));
    const std::string w = j["warnings"].dump();
    EXPECT_NE(w.find("size_bytes"), std::string::npos) << w;  // not recorded: computed and reported
    if (p.repeated > 0) {
      EXPECT_NE(w.find("exactly one"), std::string::npos) << w;
    }
  }
}

// What we write declares the runtime ABI, which a 0.1 runtime accepts.
TEST(ReferenceDialect, OurPackagesDeclareAnAbiA01RuntimeAccepts) {
  test::TempDir tmp;
  const auto out = tmp / "p";
  ASSERT_EQ(test::write_pkg(test::data_path("llama-tiny-q8_0.gguf"), out).exit_code, 0);
  const auto m = json::parse(test::read_text(out / "model-package.json"));
  const auto declared = parse_abi_version(m["skippy_abi_version"].get<std::string>());
  ASSERT_TRUE(declared);
  EXPECT_TRUE(abi_compatible(*declared, AbiVersion{0, 1, 0}));
  EXPECT_EQ(*declared, kSkippyRuntimeAbi);
  EXPECT_FALSE(abi_compatible(AbiVersion{1, 0, 0}, AbiVersion{0, 1, 0}));
}

}  // namespace
}  // namespace skippy
