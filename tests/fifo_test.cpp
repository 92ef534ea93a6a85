// A FIFO (or any non-regular file) in place of a manifest, a fragment or a
// source GGUF is refused at once, never blocked on: the open is
// non-blocking and the type is checked before anything reads.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include "test_util.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

// Runs the CLI under timeout(1): a hang is exit 124, not a stuck suite.
test::CliResult run_bounded(const std::vector<std::string>& args) {
  std::vector<std::string> a = {"10", SKIPPY_CLI_PATH};
  a.insert(a.end(), args.begin(), args.end());
  return test::run_program("timeout", a, {"SKIPPY_CACHE_DIR=/nonexistent-skippy-cache", "HF_HUB_OFFLINE=1"});
}

void make_fifo(const fs::path& p) {
  fs::remove(p);
  ASSERT_EQ(::mkfifo(p.c_str(), 0644), 0) << p;
}

void expect_refused(const test::CliResult& r, const std::string& what) {
  EXPECT_EQ(r.exit_code, 1) << what << " (124 = it blocked): " << r.err;
  EXPECT_NE(r.err.find("not a regular file"), std::string::npos) << what << ": " << r.err;
}

class Fifo : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(test::write_pkg(src_, tmp_ / "pkg").exit_code, 0); }
  TempDir tmp_;
  fs::path src_ = test::data_path("llama-tiny-q8_0.gguf");
  fs::path pkg() const { return tmp_ / "pkg"; }
};

TEST_F(Fifo, InPlaceOfTheManifestEveryConsumerCommandRefusesIt) {
  make_fifo(pkg() / "model-package.json");
  const std::string p = pkg().string();
  expect_refused(run_bounded({"inspect", p}), "inspect");
  expect_refused(run_bounded({"select", p, "--layers", "0..2"}), "select");
  expect_refused(run_bounded({"verify", p}), "verify");
  expect_refused(run_bounded({"materialize", p, "--layers", "0..2", "--out", (tmp_ / "s.gguf").string()}), "materialize");
  expect_refused(run_bounded({"plan", p, "--stages", "2"}), "plan");
  expect_refused(run_bounded({"validate-package", src_.string(), p}), "validate-package");
}

TEST_F(Fifo, InPlaceOfALayerTheStageCommandsRefuseIt) {
  make_fifo(pkg() / "layers" / "layer-00001.gguf");
  const std::string p = pkg().string();
  expect_refused(run_bounded({"select", p, "--layers", "0..2"}), "select");
  expect_refused(run_bounded({"materialize", p, "--layers", "0..2", "--out", (tmp_ / "s.gguf").string()}), "materialize");
  const auto v = run_bounded({"verify", p, "--layers", "0..2"});
  EXPECT_EQ(v.exit_code, 1) << v.err;
  const auto val = run_bounded({"validate-package", src_.string(), p});
  EXPECT_EQ(val.exit_code, 1) << "124 = it blocked: " << val.err;
  EXPECT_NE(val.err.find("layer-00001.gguf"), std::string::npos) << val.err;
}

TEST_F(Fifo, InPlaceOfTheSourceWritingAndInspectingRefuseIt) {
  const auto fifo = tmp_ / "model.gguf";
  make_fifo(fifo);
  expect_refused(run_bounded({"inspect", fifo.string()}), "inspect");
  expect_refused(run_bounded({"write-package", fifo.string(), "--out-dir", (tmp_ / "out").string(), "--model-id",
                              "org/m:Q8_0", "--source-revision", "abc", "--source-file", "model.gguf"}),
                 "write-package");
  expect_refused(run_bounded({"validate-package", fifo.string(), pkg().string()}), "validate-package");
  expect_refused(run_bounded({"write-package", src_.string(), "--out-dir", (tmp_ / "out2").string(), "--model-id",
                              "org/m:Q8_0", "--source-revision", "abc", "--source-file", "model.gguf", "--projector",
                              fifo.string()}),
                 "write-package --projector");
}

}  // namespace
}  // namespace skippy
