// Real llama.cpp runtimes load what this project writes (ctest label
// `real-runtime`). Every package here comes from the CLI
// (write-package, select --json, materialize), written under a scratch
// directory from the fixtures in tests/data/.
//
// - node-llama-cpp (npm, prebuilt CPU llama.cpp): a full-range
//   materialization generates exactly the source's greedy tokens.
// - The reference stage runtime (../shared/refrt: mesh-llm's patched
//   llama.cpp, the loader serving nodes use): the whole-model load of our
//   parts list generates the unsplit file's tokens, and a 2-stage split (each
//   stage from its own `select` parts) those of the unsplit file run with
//   DRV_NO_EXTRA_BUFTS=1 (the kernels stage slices use). glm4moe: whole-model
//   only, the stage runtime refuses to slice it.
// - Both again for a package written as schema 2 (write-package --schema 2)
//   and converted to schema 1 (convert-package --to 1), as a node on an older
//   runtime would serve a schema 2 package.
//
// - Package schema 2 (packages written by tests/schema_v2_package.h, the
//   test-side writer of the reference's layout, not by this project's
//   writer): a full-range materialization by our CLI generates the source's
//   tokens in node-llama-cpp, and a 2-stage split materialized per stage (one
//   GGUF each) generates the unsplit tokens in the reference stage runtime.
//   The same two checks for the schema 2 packages this project makes: a
//   schema 1 package converted with convert-package --to 2 --source SRC
//   (certified), and one written directly by write-package --schema 2 (also
//   with --layout reference: parts in the reference writer's name order).
// - Through Xet: a package published Xet-backed on the local Hub stand-in
//   (tests/hub), each stage's parts fetched from it through the
//   reconstruction API (xorb ranges, not the resolve path), split in two in
//   the reference stage runtime: the unsplit tokens again, for both schemas.
//
// Tokens are compared within one runtime, never with a table made on another
// build or CPU (a near-tie can flip). A runtime that is missing is a skip that
// says why, or a failure when SKIPPY_REQUIRE_REAL_RUNTIMES=1 (CI sets it).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "hub_standin.h"
#include "schema_v2_package.h"
#include "test_util.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using test::CliResult;
using test::data_path;
using test::run_cli;
using test::run_program;
using test::HubStandin;
using test::PublishOptions;
using test::TempDir;

constexpr int kTokens = 24;
constexpr const char* kPrompt = "Hello world";

struct Fixture {
  const char* name;    // test name suffix
  const char* source;  // file in tests/data (the first shard of a split model)
};

// Every complete model fixture (test::model_fixtures()).
const Fixture kFixtures[] = {
    {"llama_tiny_f16", "llama-tiny-f16.gguf"},
    {"llama_tiny_q8_0", "llama-tiny-q8_0.gguf"},
    {"llama_tiny_q4_0_split", "llama-tiny-q4_0-00001-of-00003.gguf"},
    {"qwen3moe_tiny", "qwen3moe-tiny.gguf"},
    {"glm4moe_mtp_tiny", "glm4moe-mtp-tiny.gguf"},
};
// The ones the reference stage runtime slices (glm4moe is not in its list).
const Fixture kSliceable[] = {kFixtures[0], kFixtures[1], kFixtures[2], kFixtures[3]};

std::string fixture_name(const ::testing::TestParamInfo<Fixture>& i) { return i.param.name; }
// How gtest shows the parameter in messages.
void PrintTo(const Fixture& f, std::ostream* os) { *os << f.source; }

// A runtime that is not here: skipped with the reason, unless CI demands it.
bool required() {
  const char* v = std::getenv("SKIPPY_REQUIRE_REAL_RUNTIMES");
  return v && std::string(v) == "1";
}
#define SKIP_OR_FAIL(why)                                                                  \
  do {                                                                                     \
    if (required()) FAIL() << (why) << " (and SKIPPY_REQUIRE_REAL_RUNTIMES=1)";            \
    GTEST_SKIP() << (why);                                                                 \
  } while (0)

bool is_executable(const fs::path& p) { return ::access(p.c_str(), X_OK) == 0 && fs::is_regular_file(p); }

// $SKIPPY_REFRT_DIR, else shared/refrt beside the source tree.
fs::path refrt_dir() {
  if (const char* d = std::getenv("SKIPPY_REFRT_DIR"); d && *d) return d;
  return fs::path(SKIPPY_SOURCE_DIR) / ".." / "shared" / "refrt";
}
fs::path refrt_bin() { return refrt_dir() / "bin" / "skippy-ref-stage"; }

fs::path node_project() { return fs::path(SKIPPY_SOURCE_DIR) / "tests" / "real_runtime"; }

// One generation: the prompt ids and the greedy ids.
struct Run {
  std::vector<long> prompt;
  std::vector<long> gen;
};

std::vector<long> ids(const std::string& rest) {
  std::istringstream in(rest);
  std::vector<long> v;
  for (long x; in >> x;) v.push_back(x);
  return v;
}

// "PROMPT ..." / "GEN ..." pairs in order (other lines ignored).
std::vector<Run> parse_runs(const std::string& out) {
  std::vector<Run> runs;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("PROMPT ")) {
      runs.push_back({ids(line.substr(7)), {}});
    } else if (line.starts_with("GEN ") && !runs.empty()) {
      runs.back().gen = ids(line.substr(4));
    }
  }
  return runs;
}

std::string describe(const CliResult& r) {
  return "exit " + std::to_string(r.exit_code) + "\n--- stdout\n" + r.out + "\n--- stderr (tail)\n" +
         (r.err.size() > 4000 ? r.err.substr(r.err.size() - 4000) : r.err);
}

// The environment every command gets: scratch caches, nothing from the
// network, nothing downloaded by node-llama-cpp.
std::vector<std::string> env_for(const TempDir& t) {
  return {"SKIPPY_CACHE_DIR=" + (t / "cache").string(), "HF_HOME=" + (t / "hf").string(), "HF_HUB_OFFLINE=1",
          "NODE_LLAMA_CPP_SKIP_DOWNLOAD=true"};
}

// A package written by the CLI from a fixture, and its layer count.
struct Package {
  fs::path dir;
  uint32_t layers = 0;
};

// from_schema2: written as a schema 2 package (write-package --schema 2),
// then converted to schema 1 (convert-package --to 1): the fragments an
// older runtime serves from a schema 2 package.
Package write_package(const TempDir& t, const Fixture& f, bool from_schema2 = false) {
  Package p{t / "package", 0};
  const auto src = data_path(f.source);
  const fs::path written = from_schema2 ? t / "package-v2" : p.dir;
  std::vector<std::string> args = {"write-package", src.string(), "--out-dir", written.string(), "--model-id",
                                   std::string("org/") + f.name, "--source-revision", "0123abc", "--source-file",
                                   src.filename().string(), "--json"};
  if (from_schema2) args.insert(args.end(), {"--schema", "2"});
  const auto w = run_cli(args, env_for(t));
  EXPECT_EQ(w.exit_code, 0) << describe(w);
  if (from_schema2) {
    const auto c = run_cli({"convert-package", written.string(), "--to", "1", "--out-dir", p.dir.string(), "--json"},
                           env_for(t));
    EXPECT_EQ(c.exit_code, 0) << describe(c);
  }
  const auto i = run_cli({"inspect", p.dir.string(), "--json"}, env_for(t));
  EXPECT_EQ(i.exit_code, 0) << describe(i);
  if (i.exit_code == 0) p.layers = nlohmann::json::parse(i.out).at("layer_count").get<uint32_t>();
  EXPECT_GT(p.layers, 1u);
  return p;
}

// The parts a stage a..b loads, in select's order, as paths a runtime opens.
std::vector<std::string> parts(const TempDir& t, const Package& p, uint32_t a, uint32_t b) {
  const auto r = run_cli({"select", p.dir.string(), "--layers", std::to_string(a) + ".." + std::to_string(b), "--json"},
                         env_for(t));
  EXPECT_EQ(r.exit_code, 0) << describe(r);
  std::vector<std::string> out;
  if (r.exit_code != 0) return out;
  const auto doc = nlohmann::json::parse(r.out);
  for (const auto& part : doc.at("parts")) {
    fs::path path = part.at("path").get<std::string>();
    if (path.is_relative()) path = p.dir / path;
    EXPECT_TRUE(fs::is_regular_file(path)) << path;
    out.push_back(path.string());
  }
  EXPECT_FALSE(out.empty());
  return out;
}

// Runs one reference-runtime command that generates once.
Run refrt(const TempDir& t, std::vector<std::string> args, bool no_extra_bufts = false) {
  args.insert(args.begin() + 1, {std::to_string(kTokens), kPrompt});
  auto env = env_for(t);
  if (no_extra_bufts) env.push_back("DRV_NO_EXTRA_BUFTS=1");
  const auto r = run_program(refrt_bin().string(), args, env);
  const auto runs = parse_runs(r.out);
  EXPECT_EQ(r.exit_code, 0) << args[0] << ": " << describe(r);
  EXPECT_EQ(runs.size(), 1u) << args[0] << ": " << describe(r);
  if (runs.size() != 1) return {};
  // A run that generated nothing would compare equal to another such run.
  EXPECT_FALSE(runs[0].prompt.empty()) << describe(r);
  EXPECT_EQ(runs[0].gen.size(), size_t(kTokens)) << describe(r);
  return runs[0];
}

void expect_same_tokens(const Run& expected, const Run& actual, const std::string& what) {
  EXPECT_EQ(actual.prompt, expected.prompt) << what << ": prompt ids";
  EXPECT_EQ(actual.gen, expected.gen) << what << ": generated ids";
}

// ---------------------------------------------------------------- node-llama-cpp

class NodeLlamaCpp : public ::testing::TestWithParam<Fixture> {};

void node_full_materialization(bool from_schema2);

TEST_P(NodeLlamaCpp, FullMaterializationGeneratesTheSourceTokens) { node_full_materialization(false); }
// A schema 2 package converted to schema 1 (convert-package --to 1).
TEST_P(NodeLlamaCpp, FullMaterializationOfAConvertedSchema2PackageGeneratesTheSourceTokens) {
  node_full_materialization(true);
}

// Skips (or fails, in CI) when node-llama-cpp is not installed.
bool node_llama_cpp_missing() {
  const auto module = node_project() / "node_modules" / "node-llama-cpp" / "package.json";
  const auto binary = node_project() / "node_modules" / "@node-llama-cpp" / "linux-x64" / "package.json";
  return !fs::exists(module) || !fs::exists(binary);
}
#define SKIP_WITHOUT_NODE_LLAMA_CPP()                                                        \
  do {                                                                                       \
    if (node_llama_cpp_missing()) {                                                          \
      SKIP_OR_FAIL("node-llama-cpp is not installed in " + node_project().string() +         \
                   " (bash scripts/install-deps.sh installs it from npm)");                  \
    }                                                                                        \
  } while (0)

fs::path materialize_out(const TempDir& t, const Package& p, uint32_t a, uint32_t b, const std::string& name);

// The check every node-llama-cpp test makes: a full-range materialization of
// PKG by our CLI generates the source's greedy tokens (both models in one
// node process: the same runtime, one start-up).
void expect_full_materialization_generates_source_tokens(const TempDir& t, const Fixture& f, const Package& pkg,
                                                         const std::string& what) {
  const auto full = materialize_out(t, pkg, 0, pkg.layers, "full.gguf");
  ASSERT_FALSE(::testing::Test::HasFailure());
  const auto r = run_program("node",
                             {(node_project() / "node_generate.mjs").string(), std::to_string(kTokens), kPrompt,
                              data_path(f.source).string(), full.string()},
                             env_for(t));
  ASSERT_EQ(r.exit_code, 0) << describe(r);
  const auto runs = parse_runs(r.out);
  ASSERT_EQ(runs.size(), 2u) << describe(r);
  for (const auto& run : runs) {
    EXPECT_FALSE(run.prompt.empty()) << describe(r);
    EXPECT_EQ(run.gen.size(), size_t(kTokens)) << describe(r);
  }
  expect_same_tokens(runs[0], runs[1], what + " materialize 0.." + std::to_string(pkg.layers) + " vs the source");
}

void node_full_materialization(bool from_schema2) {
  SKIP_WITHOUT_NODE_LLAMA_CPP();
  const TempDir t;
  const auto& f = ::testing::TestWithParam<Fixture>::GetParam();
  const auto pkg = write_package(t, f, from_schema2);
  ASSERT_FALSE(::testing::Test::HasFailure());
  expect_full_materialization_generates_source_tokens(t, f, pkg, from_schema2 ? "schema 2 -> 1" : "schema 1");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, NodeLlamaCpp, ::testing::ValuesIn(kFixtures), fixture_name);

// ------------------------------------------------------ reference stage runtime

class RefStage : public ::testing::TestWithParam<Fixture> {
 protected:
  void SetUp() override {
    if (!is_executable(refrt_bin())) {
      SKIP_OR_FAIL("the reference stage runtime is not at " + refrt_bin().string() +
                   " (it comes with shared/ beside the clone; or set SKIPPY_REFRT_DIR)");
    }
  }
};

TEST_P(RefStage, WholeModelFromPartsGeneratesTheSourceTokens) {
  const TempDir t;
  const auto& f = GetParam();
  const auto pkg = write_package(t, f);
  ASSERT_FALSE(HasFailure());
  const auto all = parts(t, pkg, 0, pkg.layers);
  ASSERT_FALSE(HasFailure());

  const auto unsplit = refrt(t, {"file", data_path(f.source).string()});
  ASSERT_FALSE(HasFailure());
  // The plain llama API on the parts list, and the stage runtime's open of
  // the same parts as one stage covering every layer.
  for (const std::string mode : {"parts", "sfull"}) {
    std::vector<std::string> args = {mode};
    args.insert(args.end(), all.begin(), all.end());
    expect_same_tokens(unsplit, refrt(t, args), mode + " 0.." + std::to_string(pkg.layers) + " vs file");
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, RefStage, ::testing::ValuesIn(kFixtures), fixture_name);

class RefStageSplit : public RefStage {};

void two_stages(const Fixture& f, bool from_schema2);

TEST_P(RefStageSplit, TwoStagesGenerateTheUnsplitTokens) { two_stages(GetParam(), false); }
// A schema 2 package converted to schema 1 (convert-package --to 1), split in two.
TEST_P(RefStageSplit, TwoStagesOfAConvertedSchema2PackageGenerateTheUnsplitTokens) { two_stages(GetParam(), true); }

void two_stages(const Fixture& f, bool from_schema2) {
  const TempDir t;
  const auto pkg = write_package(t, f, from_schema2);
  ASSERT_FALSE(::testing::Test::HasFailure());
  const uint32_t split = pkg.layers / 2;
  const auto s0 = parts(t, pkg, 0, split);
  const auto s1 = parts(t, pkg, split, pkg.layers);
  ASSERT_FALSE(::testing::Test::HasFailure());

  const auto unsplit = refrt(t, {"file", data_path(f.source).string()}, /*no_extra_bufts=*/true);
  ASSERT_FALSE(::testing::Test::HasFailure());
  std::vector<std::string> args = {"stages", std::to_string(split), std::to_string(pkg.layers)};
  args.insert(args.end(), s0.begin(), s0.end());
  args.push_back("::");
  args.insert(args.end(), s1.begin(), s1.end());
  expect_same_tokens(unsplit, refrt(t, args),
                     "stages 0.." + std::to_string(split) + " + " + std::to_string(split) + ".." +
                         std::to_string(pkg.layers) + " vs file with DRV_NO_EXTRA_BUFTS=1");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, RefStageSplit, ::testing::ValuesIn(kSliceable), fixture_name);

// ------------------------------------------------------------ package schema 2

// A schema 2 package of the fixture and its layer count (from our inspect):
enum class V2Origin {
  kTestWriter,      // tests/schema_v2_package.h: the reference's layout, not our writer
  kConvertedFrom1,  // write-package (schema 1), then convert-package --to 2 --source SRC
  kWritten,         // write-package --schema 2
  kWrittenReference,  // write-package --schema 2 --layout reference (parts in name order, no trailing padding)
};

std::string describe(V2Origin o) {
  switch (o) {
    case V2Origin::kTestWriter: return "schema 2 (test-side writer)";
    case V2Origin::kConvertedFrom1: return "schema 1 -> 2 (convert-package --to 2)";
    case V2Origin::kWritten: return "schema 2 (write-package --schema 2)";
    case V2Origin::kWrittenReference: return "schema 2 (write-package --schema 2 --layout reference)";
  }
  return "?";
}

Package write_schema_v2(const TempDir& t, const Fixture& f, V2Origin origin = V2Origin::kTestWriter) {
  Package p{t / "package-v2", 0};
  const auto src = data_path(f.source);
  if (origin == V2Origin::kTestWriter) {
    test::SchemaV2Options o;
    o.model_id = std::string("org/") + f.name;
    (void)test::write_schema_v2_package(src, p.dir, o);
  } else if (origin == V2Origin::kWritten || origin == V2Origin::kWrittenReference) {
    std::vector<std::string> args = {"write-package", src.string(), "--schema", "2", "--out-dir", p.dir.string(),
                                     "--model-id", std::string("org/") + f.name, "--source-revision", "0123abc",
                                     "--source-file", src.filename().string(), "--json"};
    if (origin == V2Origin::kWrittenReference) args.insert(args.end(), {"--layout", "reference"});
    const auto w = run_cli(args, env_for(t));
    EXPECT_EQ(w.exit_code, 0) << describe(w);
  } else {
    const auto v1 = write_package(t, f);  // at t/package
    const auto c = run_cli({"convert-package", v1.dir.string(), "--to", "2", "--out-dir", p.dir.string(), "--source",
                            src.string(), "--json"},
                           env_for(t));
    EXPECT_EQ(c.exit_code, 0) << describe(c);
    // Certified against the source: every source tensor exactly once.
    if (c.exit_code == 0) {
      EXPECT_EQ(nlohmann::json::parse(c.out).at("certified"), true) << c.out;
    }
  }
  const auto i = run_cli({"inspect", p.dir.string(), "--json"}, env_for(t));
  EXPECT_EQ(i.exit_code, 0) << describe(i);
  if (i.exit_code == 0) {
    const auto doc = nlohmann::json::parse(i.out);
    EXPECT_EQ(doc.at("schema_version"), 2);
    p.layers = doc.at("layer_count").get<uint32_t>();
  }
  EXPECT_GT(p.layers, 1u);
  return p;
}

// materialize PKG --layers a..b --out FILE through the CLI.
fs::path materialize_out(const TempDir& t, const Package& p, uint32_t a, uint32_t b, const std::string& name) {
  const auto out = t / name;
  const auto m = run_cli({"materialize", p.dir.string(), "--layers", std::to_string(a) + ".." + std::to_string(b),
                          "--out", out.string(), "--json"},
                         env_for(t));
  EXPECT_EQ(m.exit_code, 0) << describe(m);
  EXPECT_TRUE(fs::is_regular_file(out)) << out;
  return out;
}

class NodeLlamaCppV2 : public ::testing::TestWithParam<Fixture> {
 protected:
  void full_materialization(V2Origin origin) {
    SKIP_WITHOUT_NODE_LLAMA_CPP();
    const TempDir t;
    const auto& f = GetParam();
    const auto pkg = write_schema_v2(t, f, origin);
    ASSERT_FALSE(HasFailure());
    expect_full_materialization_generates_source_tokens(t, f, pkg, describe(origin));
  }
};

TEST_P(NodeLlamaCppV2, FullMaterializationOfASchema2PackageGeneratesTheSourceTokens) {
  full_materialization(V2Origin::kTestWriter);
}
TEST_P(NodeLlamaCppV2, FullMaterializationOfAConvertedSchema1PackageGeneratesTheSourceTokens) {
  full_materialization(V2Origin::kConvertedFrom1);
}
TEST_P(NodeLlamaCppV2, FullMaterializationOfAWrittenSchema2PackageGeneratesTheSourceTokens) {
  full_materialization(V2Origin::kWritten);
}
TEST_P(NodeLlamaCppV2, FullMaterializationOfAReferenceLayoutPackageGeneratesTheSourceTokens) {
  full_materialization(V2Origin::kWrittenReference);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, NodeLlamaCppV2, ::testing::ValuesIn(kFixtures), fixture_name);

class RefStageSplitV2 : public RefStage {
 protected:
  // A 2-stage split, each stage materialized into one GGUF by our CLI, run
  // by the reference stage runtime vs the unsplit file with its kernels.
  void two_materialized_stages(V2Origin origin) {
    const TempDir t;
    const auto& f = GetParam();
    const auto pkg = write_schema_v2(t, f, origin);
    ASSERT_FALSE(HasFailure());
    const uint32_t split = pkg.layers / 2;
    const auto s0 = materialize_out(t, pkg, 0, split, "stage0.gguf");
    const auto s1 = materialize_out(t, pkg, split, pkg.layers, "stage1.gguf");
    ASSERT_FALSE(HasFailure());

    const auto unsplit = refrt(t, {"file", data_path(f.source).string()}, /*no_extra_bufts=*/true);
    ASSERT_FALSE(HasFailure());
    expect_same_tokens(unsplit,
                       refrt(t, {"stages", std::to_string(split), std::to_string(pkg.layers), s0.string(), "::",
                                 s1.string()}),
                       describe(origin) + " stages 0.." + std::to_string(split) + " + " + std::to_string(split) +
                           ".." + std::to_string(pkg.layers) +
                           " (one materialized GGUF each) vs file with DRV_NO_EXTRA_BUFTS=1");
  }
};

TEST_P(RefStageSplitV2, TwoMaterializedStagesOfASchema2PackageGenerateTheUnsplitTokens) {
  two_materialized_stages(V2Origin::kTestWriter);
}
TEST_P(RefStageSplitV2, TwoMaterializedStagesOfAConvertedSchema1PackageGenerateTheUnsplitTokens) {
  two_materialized_stages(V2Origin::kConvertedFrom1);
}
TEST_P(RefStageSplitV2, TwoMaterializedStagesOfAWrittenSchema2PackageGenerateTheUnsplitTokens) {
  two_materialized_stages(V2Origin::kWritten);
}
TEST_P(RefStageSplitV2, TwoMaterializedStagesOfAReferenceLayoutPackageGenerateTheUnsplitTokens) {
  two_materialized_stages(V2Origin::kWrittenReference);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, RefStageSplitV2, ::testing::ValuesIn(kSliceable), fixture_name);

// ------------------------------------------------------------ through Xet

// A package on the Hub stand-in, stored Xet-backed; each stage fetches its
// own files through the reconstruction API into its own Hugging Face cache,
// and the two stages run split in the reference runtime.
class RefStageSplitXet : public RefStage {
 protected:
  void two_stages_through_xet(bool schema2) {
    const TempDir t;
    const auto& f = GetParam();
    HubStandin hub;
    hub.configure({{"token", "hf_test"}});
    // The package written by our CLI (schema 1, or schema 2 directly).
    const auto src = data_path(f.source);
    const fs::path dir = t / "package";
    std::vector<std::string> w = {"write-package", src.string(), "--out-dir", dir.string(), "--model-id",
                                  std::string("org/") + f.name, "--source-revision", "0123abc", "--source-file",
                                  src.filename().string(), "--json"};
    if (schema2) w.insert(w.end(), {"--schema", "2"});
    const auto wr = run_cli(w, env_for(t));
    ASSERT_EQ(wr.exit_code, 0) << describe(wr);
    PublishOptions xet;
    xet.xet = true;
    const std::string ref = "hf://org/pkg@" + hub.publish("org/pkg", dir, xet);
    const auto layers = nlohmann::json::parse(run_cli({"inspect", dir.string(), "--json"}, env_for(t)).out)
                            .at("layer_count")
                            .get<uint32_t>();
    const uint32_t split = layers / 2;
    hub.clear_log();
    const auto s0 = stage_parts(t, hub, ref, "stage0", 0, split, schema2);
    const auto s1 = stage_parts(t, hub, ref, "stage1", split, layers, schema2);
    ASSERT_FALSE(HasFailure());
    size_t xorb_gets = 0, resolve_gets = 0;
    for (const auto& e : hub.log()) {
      if (e.listener != "storage" || e.method != "GET") continue;
      if (e.path.starts_with("/xorbs/")) ++xorb_gets;
      if (e.path.starts_with("/repos/")) ++resolve_gets;
    }
    EXPECT_GT(xorb_gets, 0u) << "the parts did not come through Xet";
    EXPECT_EQ(resolve_gets, 0u) << "a part came by the resolve path";

    const auto unsplit = refrt(t, {"file", src.string()}, /*no_extra_bufts=*/true);
    ASSERT_FALSE(HasFailure());
    std::vector<std::string> args = {"stages", std::to_string(split), std::to_string(layers)};
    args.insert(args.end(), s0.begin(), s0.end());
    args.push_back("::");
    args.insert(args.end(), s1.begin(), s1.end());
    expect_same_tokens(unsplit, refrt(t, args),
                       std::string(schema2 ? "schema 2" : "schema 1") + " through Xet, stages 0.." +
                           std::to_string(split) + " + " + std::to_string(split) + ".." + std::to_string(layers) +
                           " vs file with DRV_NO_EXTRA_BUFTS=1");
  }

  // A stage's files, fetched with its own cache: schema 1's parts as select
  // lists them (what the stage runtime loads), schema 2's stage materialized
  // into one GGUF (as RefStageSplitV2 runs them).
  std::vector<std::string> stage_parts(const TempDir& t, const HubStandin& hub, const std::string& ref,
                                       const std::string& node, uint32_t a, uint32_t b, bool schema2) {
    const std::vector<std::string> env = {"HF_ENDPOINT=" + hub.endpoint(), "HF_HUB_CACHE=" + (t / node / "hf").string(),
                                          "HF_HOME=" + (t / node / "hfhome").string(),
                                          "SKIPPY_CACHE_DIR=" + (t / node / "cache").string(), "HF_TOKEN=hf_test",
                                          "HF_HUB_OFFLINE=", "HF_HUB_DISABLE_XET="};
    const std::string range = std::to_string(a) + ".." + std::to_string(b);
    if (schema2) {
      const auto out = t / (node + ".gguf");
      const auto r = run_cli({"materialize", ref, "--layers", range, "--out", out.string(), "--json"}, env);
      EXPECT_EQ(r.exit_code, 0) << describe(r);
      return {out.string()};
    }
    const auto r = run_cli({"select", ref, "--layers", range, "--json"}, env);
    EXPECT_EQ(r.exit_code, 0) << describe(r);
    std::vector<std::string> out;
    if (r.exit_code != 0) return out;
    const auto doc = nlohmann::json::parse(r.out);  // (a temporary's member would not outlive the loop's start)
    for (const auto& part : doc.at("parts")) {
      const fs::path path = part.at("path").get<std::string>();
      EXPECT_TRUE(path.is_absolute() && fs::is_regular_file(path)) << path;
      out.push_back(path.string());
    }
    EXPECT_FALSE(out.empty());
    return out;
  }
};

TEST_P(RefStageSplitXet, TwoStagesFetchedThroughXetGenerateTheUnsplitTokens) { two_stages_through_xet(false); }
TEST_P(RefStageSplitXet, TwoStagesOfASchema2PackageFetchedThroughXetGenerateTheUnsplitTokens) {
  two_stages_through_xet(true);
}

// The transport does not depend on the architecture: a quantized split source
// and a MoE model (the largest tensors) are enough.
const Fixture kThroughXet[] = {kFixtures[2], kFixtures[3]};
INSTANTIATE_TEST_SUITE_P(Fixtures, RefStageSplitXet, ::testing::ValuesIn(kThroughXet), fixture_name);

}  // namespace
}  // namespace skippy
