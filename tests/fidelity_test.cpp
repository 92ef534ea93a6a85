// Package fidelity (issue "no repeated tokenizer, validate every byte that
// matters"): fragments carry only what reading them needs, validate-package
// checks every fragment's metadata against the source, and write-package
// checks its inputs before the work and survives being killed at any moment.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "util/file.h"
#include "skippy/gguf.h"
#include "gguf/gguf_writer.h"
#include "skippy/manifest.h"
#include "skippy/model_source.h"
#include "skippy/package_layout.h"
#include "util/sha256.h"
#include "test_util.h"

extern char** environ;

namespace skippy {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::data_path;
using test::run_cli;
using test::TempDir;
using test::write_pkg;

uint64_t package_bytes(const fs::path& dir) {
  uint64_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) n += e.file_size();
  }
  return n;
}

uint64_t source_bytes(const fs::path& first) {
  const auto m = ModelSource::open(first);
  uint64_t n = 0;
  for (const auto& s : m.shards()) n += s.file_size();
  return n;
}

TEST(Fidelity, PackageSizeIsWithin1Point05OfTheSource) {
  TempDir tmp;
  for (const char* name : {"qwen3moe-tiny.gguf", "llama-tiny-f16.gguf", "llama-tiny-q8_0.gguf",
                           "llama-tiny-q4_0-00001-of-00003.gguf"}) {
    SCOPED_TRACE(name);
    const auto out = tmp / name;
    ASSERT_EQ(write_pkg(data_path(name), out).exit_code, 0);
    const double ratio = static_cast<double>(package_bytes(out)) / static_cast<double>(source_bytes(data_path(name)));
    EXPECT_LE(ratio, 1.05) << "everything in the package (fragments, manifest, README) against every source shard";
  }
}

TEST(Fidelity, PlanBalancesOnBytesThatAreReallyPerLayer) {
  // A layer fragment is its tensors plus a few hundred bytes of header, not
  // a copy of the tokenizer: the plan's per-stage bytes reflect that.
  TempDir tmp;
  const auto src = data_path("qwen3moe-tiny.gguf");
  ASSERT_EQ(write_pkg(src, tmp / "p").exit_code, 0);
  const auto model = ModelSource::open(src);
  const auto m = parse_manifest(test::read_text(tmp / "p" / "model-package.json"), "m");
  for (const auto& l : m.layers) {
    EXPECT_LT(l.artifact_bytes - l.tensor_bytes, 8192u) << l.path << ": header and padding only";
  }
}

// A KV as the edits below change it (owned bytes).
struct EditedKv {
  std::string key;
  GgufType type;
  std::vector<uint8_t> encoded;
};

// Rewrites a fragment with edited KVs (same tensors), then puts its new size
// and SHA-256 into the manifest, as a careless or hostile publisher would.
void rewrite_fragment(const fs::path& pkg, const std::string& rel,
                      const std::function<void(std::vector<EditedKv>&)>& edit) {
  const auto g = GgufFile::open(pkg / rel);
  std::vector<EditedKv> kvs;
  for (const auto& kv : g.kvs()) {
    kvs.push_back({std::string(kv.key), kv.value.type(), {kv.value.encoded().begin(), kv.value.encoded().end()}});
  }
  edit(kvs);
  GgufWriter w(g.alignment());
  for (auto& kv : kvs) w.add_kv(kv.key, kv.type, kv.encoded);
  for (const auto& t : g.tensors()) w.add_tensor_from(g, t);
  AtomicFile out(pkg / rel);
  const std::string sha = w.write(out);
  out.commit();
  auto j = json::parse(test::read_text(pkg / "model-package.json"));
  auto fix = [&](json& e) {
    if (e["path"] == rel) {
      e["sha256"] = sha;
      e["artifact_bytes"] = fs::file_size(pkg / rel);
    }
  };
  for (auto& [k, e] : j["shared"].items()) fix(e);
  for (auto& e : j["layers"]) fix(e);
  const auto text = j.dump(2);
  test::write_file(pkg / "model-package.json", {text.begin(), text.end()});
}

class ValidateKvs : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(write_pkg(src_, pkg()).exit_code, 0); }
  fs::path pkg() const { return tmp_ / "pkg"; }
  // validate-package fails, and one problem names `rel` and `needle`.
  void expect_problem(const std::string& rel, const std::string& needle) {
    const auto r = run_cli({"validate-package", src_.string(), pkg().string(), "--json"});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    const auto j = json::parse(r.out);
    EXPECT_FALSE(j["valid"].get<bool>());
    bool found = false;
    for (const auto& p : j["problems"]) {
      const auto s = p.get<std::string>();
      found = found || (s.starts_with(rel + ": ") && s.find(needle) != std::string::npos);
    }
    EXPECT_TRUE(found) << "no problem naming " << rel << " and " << needle << " in " << j["problems"].dump(2);
  }
  TempDir tmp_;
  fs::path src_ = data_path("llama-tiny-q8_0.gguf");
};

TEST_F(ValidateKvs, AChangedTokenizerTokenInTheMetadataIsFound) {
  rewrite_fragment(pkg(), "shared/metadata.gguf", [](auto& kvs) {
    for (auto& kv : kvs) {
      if (kv.key != "tokenizer.ggml.tokens") continue;
      const GgufValue v(kv.type, kv.encoded);
      auto tokens = *v.as_string_array();
      const std::string changed = "<evil>";
      tokens[100] = changed;
      kv.encoded = gguf_encode_string_array(tokens);
    }
  });
  expect_problem("shared/metadata.gguf", "KV 'tokenizer.ggml.tokens' is array of 32000 string, the source has");
}

TEST_F(ValidateKvs, AChangedHyperParameterInALayerIsFound) {
  rewrite_fragment(pkg(), "layers/layer-00003.gguf", [](auto& kvs) {
    for (auto& kv : kvs) {
      if (kv.key == "llama.attention.layer_norm_rms_epsilon") kv.encoded[0] ^= 1;
    }
  });
  expect_problem("layers/layer-00003.gguf", "KV 'llama.attention.layer_norm_rms_epsilon' is f32");
}

TEST_F(ValidateKvs, AMissingKeptKeyIsFound) {
  rewrite_fragment(pkg(), "shared/output.gguf", [](auto& kvs) {
    std::erase_if(kvs, [](const auto& kv) { return kv.key == "llama.block_count"; });
  });
  expect_problem("shared/output.gguf", "KV 'llama.block_count' of the source is missing");
}

TEST_F(ValidateKvs, AnExtraKeyIsFound) {
  const auto src = GgufFile::open(src_);
  const auto* tokens = src.find_kv("tokenizer.ggml.model");
  ASSERT_NE(tokens, nullptr);
  rewrite_fragment(pkg(), "layers/layer-00001.gguf", [&](auto& kvs) {
    kvs.push_back({"tokenizer.ggml.model", tokens->value.type(),
                   {tokens->value.encoded().begin(), tokens->value.encoded().end()}});
    kvs.push_back({"made.up.key", GgufType::kUint32, {1, 0, 0, 0}});
  });
  expect_problem("layers/layer-00001.gguf", "KV 'tokenizer.ggml.model' does not belong in a layer fragment");
  expect_problem("layers/layer-00001.gguf", "KV 'made.up.key' is not in the source");
}

TEST_F(ValidateKvs, AMissingOrWrongRoleKeyIsFound) {
  rewrite_fragment(pkg(), "layers/layer-00002.gguf", [](auto& kvs) {
    std::erase_if(kvs, [](const auto& kv) { return kv.key == kLayerEndKey; });
    for (auto& kv : kvs) {
      if (kv.key == kRoleKey) kv.encoded = gguf_encode_string("output");
    }
  });
  expect_problem("layers/layer-00002.gguf", "KV 'skippy.package.role' is \"output\", expected \"layer\"");
  expect_problem("layers/layer-00002.gguf", "KV 'skippy.package.layer_end' must be u32 3, it is missing");
}

TEST_F(ValidateKvs, ADeclaredMmprojThatIsNotAProjectorIsFound) {
  // Swap the projector for a language model, manifest updated to match.
  test::make_projector(tmp_ / "mmproj.gguf");
  ASSERT_EQ(write_pkg(src_, tmp_ / "vision", {"--projector", (tmp_ / "mmproj.gguf").string()}).exit_code, 0);
  const auto rel = std::string("projectors/mmproj.gguf");
  fs::copy_file(data_path("qwen3moe-tiny.gguf"), tmp_ / "vision" / rel, fs::copy_options::overwrite_existing);
  auto j = json::parse(test::read_text(tmp_ / "vision" / "model-package.json"));
  const auto g = GgufFile::open(tmp_ / "vision" / rel);
  j["projectors"][0]["sha256"] = sha256_file(tmp_ / "vision" / rel);
  j["projectors"][0]["artifact_bytes"] = g.file_size();
  j["projectors"][0]["tensor_count"] = g.tensors().size();
  j["projectors"][0]["tensor_bytes"] = g.tensor_bytes_total();
  const auto text = j.dump(2);
  test::write_file(tmp_ / "vision" / "model-package.json", {text.begin(), text.end()});
  const auto r = run_cli({"validate-package", src_.string(), (tmp_ / "vision").string(), "--json"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find(rel + ": declared as an mmproj projector but is not one"), std::string::npos) << r.out;
}

TEST(Fidelity, SourcePathIsTheFileNameInItsRepositoryNotALocalDirectory) {
  // The same model written from two folders gives the same manifest.
  TempDir tmp;
  for (const char* dir : {"a", "b/c"}) {
    fs::create_directories(tmp / dir);
    fs::copy_file(data_path("llama-tiny-q8_0.gguf"), tmp / dir / "model.gguf");
    ASSERT_EQ(run_cli({"write-package", (tmp / dir / "model.gguf").string(), "--out-dir", (tmp / dir / "pkg").string(),
                       "--model-id", "org/tiny:Q8_0", "--source-revision", "0123abc", "--source-file", "gguf/model.gguf"},
                      {"SOURCE_DATE_EPOCH=1700000000"})
                  .exit_code,
              0);
  }
  const auto a = test::read_text(tmp / "a" / "pkg" / "model-package.json");
  EXPECT_EQ(a, test::read_text(tmp / "b/c" / "pkg" / "model-package.json"));
  EXPECT_EQ(json::parse(a)["source_model"]["path"], "gguf/model.gguf");
  EXPECT_EQ(a.find(tmp.path().string()), std::string::npos) << "no local directory in the manifest";
  EXPECT_EQ(test::read_text(tmp / "a" / "pkg" / "README.md").find(tmp.path().string()), std::string::npos);
}

TEST(Fidelity, EveryFlagIsCheckedBeforeTheFirstByteIsWritten) {
  TempDir tmp;
  const auto src = data_path("llama-tiny-q8_0.gguf");
  struct Case {
    std::vector<std::string> flags;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {{"--model-id", "/home/me/model.gguf", "--source-revision", "r", "--source-file", "m.gguf"}, "--model-id"},
      {{"--model-id", "org/m:Q8_0", "--source-revision", "r", "--source-file", "../m.gguf"}, "unsafe path"},
      {{"--model-id", "org/m:Q8_0", "--source-revision", "r"}, "--source-file"},
      {{"--model-id", "org/m:Q8_0", "--source-revision", "r", "--source-file", "m.gguf", "--projector",
        src.string()},
       "not a projector GGUF"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].needle);
    const auto out = tmp / ("out" + std::to_string(i));
    std::vector<std::string> args = {"write-package", src.string(), "--out-dir", out.string()};
    args.insert(args.end(), cases[i].flags.begin(), cases[i].flags.end());
    const auto r = run_cli(args);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find(cases[i].needle), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out)) << "nothing was written for a refused run";
  }
}

TEST(Fidelity, TheReadmeSaysValidatedOnlyWhenWritePackageValidated) {
  TempDir tmp;
  const auto src = data_path("qwen3moe-tiny.gguf");
  ASSERT_EQ(write_pkg(src, tmp / "plain").exit_code, 0);
  const auto plain = test::read_text(tmp / "plain" / "README.md");
  EXPECT_NE(plain.find("Not validated by the writer"), std::string::npos) << plain;
  EXPECT_NE(plain.find("skippy-model-package validate-package"), std::string::npos);
  const auto w = write_pkg(src, tmp / "checked", {"--validate"});
  ASSERT_EQ(w.exit_code, 0) << w.err;
  EXPECT_TRUE(json::parse(w.out)["validated"].get<bool>());
  const auto checked = test::read_text(tmp / "checked" / "README.md");
  EXPECT_NE(checked.find("Validated against the source model when it was written"), std::string::npos) << checked;
  EXPECT_NE(checked.find("valid, 7 artifacts and 51 tensors checked"), std::string::npos) << checked;
  EXPECT_EQ(checked.find("Not validated"), std::string::npos);
  // The notes that only say nothing was declared stay out of the README.
  EXPECT_EQ(checked.find("no execution policy declared"), std::string::npos);
  const auto verbose = run_cli({"write-package", src.string(), "--out-dir", (tmp / "v").string(), "--model-id",
                                "org/m:Q8_0", "--source-revision", "r", "--source-file", "m.gguf", "--verbose"});
  EXPECT_NE(verbose.out.find("no execution policy declared"), std::string::npos) << verbose.out;
}

// Starts the CLI and SIGKILLs it after `delay`; returns once it is gone.
void run_and_kill(const std::vector<std::string>& args, std::chrono::microseconds delay) {
  std::vector<std::string> argv_s = {SKIPPY_CLI_PATH};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  std::this_thread::sleep_for(delay);
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
}

TEST(Fidelity, KilledAtAnyMomentARerunFinishesAndLeavesNoStagingFile) {
  TempDir tmp;
  const auto src = data_path("llama-tiny-q4_0-00001-of-00003.gguf");
  const std::vector<std::string> args = {"write-package", src.string(),      "--out-dir",       (tmp / "p").string(),
                                         "--model-id",    "org/m:Q4_0",      "--source-revision", "r",
                                         "--source-file", "m-00001-of-00003.gguf"};
  // How long one run takes here, to spread the kills over all of it.
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(run_cli(args).exit_code, 0);
  const auto full = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0);
  const auto reference = test::read_text(tmp / "p" / "model-package.json");
  fs::remove_all(tmp / "p");
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int64_t> when(0, full.count() + full.count() / 4);
  // Under a sanitizer a run is several times longer and the kills as many
  // moments of it: a third as many.
  const int kills = test::kSanitizedBuild ? 10 : 30;
  for (int i = 0; i < kills; ++i) {
    SCOPED_TRACE(i);
    run_and_kill(args, std::chrono::microseconds(when(rng)));
    const bool finished = fs::exists(tmp / "p" / "model-package.json") &&
                          !fs::exists(tmp / "p" / ".skippy-write-package-in-progress");
    if (!finished) {
      const auto rerun = run_cli(args);  // never --force
      ASSERT_EQ(rerun.exit_code, 0) << rerun.err;
    }
    for (const auto& e : fs::recursive_directory_iterator(tmp / "p")) {
      const auto name = e.path().filename().string();
      EXPECT_FALSE(is_temporary_name(name)) << "left behind: " << e.path();
      EXPECT_NE(name, ".skippy-write-package-in-progress") << "the marker of a finished run";
    }
    const auto m = json::parse(test::read_text(tmp / "p" / "model-package.json"));
    EXPECT_EQ(m["layer_count"], json::parse(reference)["layer_count"]);
    fs::remove_all(tmp / "p");
  }
}

TEST(Fidelity, InspectMentionsTheExpertsOfAnMoeModel) {
  const auto moe = run_cli({"inspect", data_path("qwen3moe-tiny.gguf").string()});
  ASSERT_EQ(moe.exit_code, 0);
  EXPECT_NE(moe.out.find("experts           8 per MoE layer, 2 used per token"), std::string::npos) << moe.out;
  const auto j = json::parse(run_cli({"inspect", data_path("qwen3moe-tiny.gguf").string(), "--json"}).out);
  EXPECT_EQ(j["experts"]["count"], 8);
  EXPECT_EQ(j["experts"]["used_per_token"], 2);
  const auto dense = json::parse(run_cli({"inspect", data_path("llama-tiny-q8_0.gguf").string(), "--json"}).out);
  EXPECT_TRUE(dense["experts"].is_null());
}

TEST(Fidelity, ATruncatedGgufSaysTruncatedFirst) {
  TempDir tmp;
  auto bytes = test::read_file(data_path("llama-tiny-q8_0.gguf"));
  bytes.resize(100000);  // inside the tokenizer arrays
  test::write_file(tmp / "cut.gguf", bytes);
  const auto r = run_cli({"inspect", (tmp / "cut.gguf").string()});
  EXPECT_EQ(r.exit_code, 1);
  const auto at = r.err.find("byte ");
  ASSERT_NE(at, std::string::npos) << r.err;
  EXPECT_NE(r.err.find(": truncated", at), std::string::npos) << r.err;
}

}  // namespace
}  // namespace skippy
