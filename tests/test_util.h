// Helpers shared by the tests: fixture paths, scratch directories under
// /tmp, running the real CLI.
#pragma once

#include <stdlib.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "skippy/stage.h"
#include "skippy/manifest_v2.h"
#include "skippy/materialize.h"
#include "skippy/stage_view.h"

namespace skippy {
class ModelSource;
struct PackageManifest;
}

namespace skippy::test {

// Built with ASan or TSan: a process's RSS is then mostly the sanitizer's
// own (memory bounds are the release build's to meet).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitizedBuild = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool kSanitizedBuild = true;
#else
inline constexpr bool kSanitizedBuild = false;
#endif
#else
inline constexpr bool kSanitizedBuild = false;
#endif

// The crash points 1..`count` a fault-injection loop tries: every one in the
// release build; under a sanitizer (several times slower per point, and
// checking memory and threads, which the neighbouring points exercise
// alike) every third, the first and the last always.
inline std::vector<uint64_t> crash_points(uint64_t count, uint64_t stride = 1) {
  const uint64_t step = stride * (kSanitizedBuild ? 3 : 1);
  std::vector<uint64_t> out;
  for (uint64_t n = 1; n <= count; n += step) out.push_back(n);
  if (count > 0 && out.back() != count) out.push_back(count);
  return out;
}

// A stage as a stage loader opens it: the catalog of the range's
// fragments (CatalogNeed::stage), then open_stage (parts brought, checked,
// each with its path).
StageSelection select_v1(const OpenedPackage& pkg, LayerRange range, const SelectOptions& options = {});
// materialize_stage on the catalog of the stage's fragments.
// The stage view of `range`: the reader's catalog of the stage's fragments
// (CatalogNeed::stage) and the stage (open_stage).
StageView view_v1(const OpenedPackage& pkg, LayerRange range);
MaterializeResult materialize_v1(const OpenedPackage& pkg, const StageSelection& stage, const MaterializeOptions& options = {});
// Every artifact of a schema 1 package, brought and checked (provide_parts).
std::vector<StagePart> all_parts_v1(const OpenedPackage& pkg);
// A local package's catalog with every artifact's tensors (CatalogNeed::all).
OpenedCatalog local_catalog(const std::filesystem::path& dir);
// An opened package's catalog: of the stage's fragments with a range
// (CatalogNeed::stage), else of every artifact.
OpenedCatalog catalog_of(const OpenedPackage& pkg, std::optional<LayerRange> range = std::nullopt);
// A schema 1 package's parsed manifest (fails the test for another schema).
const PackageManifest& manifest(const OpenedPackage& pkg);
// A schema 2 package's root as the strict parser reads it, from a place's
// directory or a package directory.
PackageRootV2 root_v2(const OpenedPlace& place);
PackageRootV2 root_v2(const std::filesystem::path& dir);

// The tensor names a stage a..b of `model` must hold (spec: "Layer
// Selection"; a tied output also pulls in the embeddings).
std::set<std::string> expected_stage_tensors(const ModelSource& model, uint32_t a, uint32_t b);

// tests/data/<name> (copies of ../shared/fixtures, so a clone tests fully).
std::filesystem::path data_path(const std::string& name);
// The fixtures that are complete models (not vocab-only), one path each
// (the first shard for the split model).
std::vector<std::filesystem::path> model_fixtures();

// A fresh directory under $TMPDIR (or /tmp), removed when destroyed.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// Every file of a package directory (relative path -> bytes), hidden files
// and directories left out.
std::map<std::string, std::vector<uint8_t>> package_files(const std::filesystem::path& dir);

// The bytes regular files under `dirs` hold on disk (a sparse file counts
// its blocks, not its apparent size); missing directories count zero.
uint64_t bytes_under(const std::vector<std::filesystem::path>& dirs);

// Samples bytes_under(dirs) every 2 ms on its own thread from construction
// until stop() (or destruction): the peak a --max-disk run reached.
class DiskSampler {
 public:
  explicit DiskSampler(std::vector<std::filesystem::path> dirs);
  ~DiskSampler();
  DiskSampler(const DiskSampler&) = delete;
  DiskSampler& operator=(const DiskSampler&) = delete;
  void stop();
  uint64_t peak() const { return peak_; }
  uint64_t samples() const { return samples_; }

 private:
  std::vector<std::filesystem::path> dirs_;
  std::atomic<bool> done_{false};
  std::atomic<uint64_t> peak_{0}, samples_{0};
  std::thread thread_;
};

// Writes a small multimodal projector GGUF as llama.cpp's converters do
// (general.architecture "clip", clip.vision.* keys with its own
// clip.vision.block_count, v.* encoder tensors with v.blk.N blocks, mm.*
// projection tensors) to `path`;
// `seed` varies the tensor bytes so two projectors differ. Returns its
// tensor count.
size_t make_projector(const std::filesystem::path& path, uint8_t seed = 1);

// A copy of the GGUF `src` at dir/<src's name> with extra zero-filled F32
// tensors (name, element count) written before its own: a fixture for a
// tensor that no real fixture has (position_embd, a second NextN layer, ...).
std::filesystem::path with_extra_tensors(const std::filesystem::path& src, const std::filesystem::path& dir,
                                         const std::vector<std::pair<std::string, int64_t>>& extra);

std::vector<uint8_t> read_file(const std::filesystem::path& p);
void write_file(const std::filesystem::path& p, const std::vector<uint8_t>& bytes);
// xet-core's create_random_data: splitmix64 words from `seed`, little-endian,
// cut to n bytes (the data its chunking test vectors are computed on).
std::vector<uint8_t> splitmix64_data(size_t n, uint64_t seed);
std::string read_text(const std::filesystem::path& p);
// The parsed model-package.json of a package directory.
PackageManifest load_manifest(const std::filesystem::path& package_dir);

struct CliResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};
// The CLI the tests run: build/bin/skippy-model-package, or SKIPPY_TEST_CLI.
std::string cli_path();
// Runs build/bin/skippy-model-package with `args` (no shell), capturing output.
CliResult run_cli(const std::vector<std::string>& args, const std::vector<std::string>& env = {});
// write-package SRC --out-dir OUT with fixed provenance (model id
// org/tiny:Q8_0, revision 0123abc, source file = SRC's name) and --json.
CliResult write_pkg(const std::filesystem::path& src, const std::filesystem::path& out,
                    const std::vector<std::string>& extra = {}, const std::vector<std::string>& env = {});
// A command run with --json that failed: stdout holds exactly one document
// {"error": {"kind": `kind`, "message": ...}} whose message contains
// `needle` and equals the "error: ..." line on stderr.
void expect_json_error(const CliResult& r, const std::string& kind, const std::string& needle);
// Runs any program (looked up on PATH) the same way.
CliResult run_program(const std::string& program, const std::vector<std::string>& args,
                      const std::vector<std::string>& env = {});

// This process's environment with `env`'s NAME=VALUE entries replacing (or
// adding) the variables of the same name: a child's environment.
std::vector<std::string> inherited_env_with(const std::vector<std::string>& env);

// Sets (or unsets, with nullopt) an environment variable for one scope, and
// puts back what it was. The process's environment: not while other threads read it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      ::setenv(name, value->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace skippy::test
