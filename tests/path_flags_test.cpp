// Every example writes directories with a trailing slash
// ("--out-dir pkg-v2/"), and a user may type "./x/../pkg" or "pkg/.": each
// path flag of each command means the path the user meant, and a command
// that fails before it writes leaves nothing behind.
#include <gtest/gtest.h>

#include "test_util.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using test::run_cli;

std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(PathFlags, TrailingSlashAndDotComponentsWorkInEveryPathFlag) {
  test::TempDir tmp;
  const std::string src = test::data_path("llama-tiny-q8_0.gguf").string();
  const std::string t = tmp.path().string();
  // "missing/.." exists only lexically: the kernel alone would refuse it.
  auto r = test::write_pkg(src, t + "/missing/../pkg/.");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_cli({"convert-package", t + "/pkg/", "--to", "2", "--out-dir", t + "/pkg-v2/", "--source", src});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_cli({"convert-package", t + "/pkg-v2/.", "--to", "1", "--out-dir", t + "/other/v1/"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  fs::copy_file(src, tmp / "model.gguf");
  r = run_cli({"convert-package", t + "/pkg", "--to", "2", "--out-dir", t + "/missing/../pkg-v2b/.", "--source",
               t + "/missing/../model.gguf"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(entries(tmp.path()), (std::vector<std::string>{"model.gguf", "other", "pkg", "pkg-v2", "pkg-v2b"}));
  EXPECT_EQ(entries(tmp / "pkg-v2"), entries(tmp / "pkg-v2b"));
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"inspect", t + "/pkg-v2/."},
           {"verify", t + "/missing/../pkg/"},
           {"select", t + "/other/v1/", "--layers", "0..4"},
           {"plan", t + "/pkg/./", "--stages", "2"},
           {"validate-package", t + "/missing/../model.gguf", t + "/pkg-v2b/"},
           {"materialize", t + "/pkg/", "--layers", "0..2", "--out", t + "/missing/../stage.gguf"},
       }) {
    r = run_cli(args);
    EXPECT_EQ(r.exit_code, 0) << args[0] << ": " << r.err;
  }
  EXPECT_TRUE(fs::is_regular_file(tmp / "stage.gguf"));
}

TEST(PathFlags, AConversionThatFailsBeforeWritingLeavesNothingBehind) {
  test::TempDir tmp;
  const std::string src = test::data_path("llama-tiny-q8_0.gguf").string();
  ASSERT_EQ(test::write_pkg(src, tmp / "pkg").exit_code, 0);
  // A source that is not the package's model: refused at certification.
  auto r = run_cli({"convert-package", (tmp / "pkg").string(), "--to", "2", "--out-dir", (tmp / "pkg-v2/").string(),
                    "--source", test::data_path("llama-tiny-f16.gguf").string()});
  EXPECT_NE(r.exit_code, 0);
  r = run_cli({"convert-package", (tmp / "pkg").string(), "--to", "1", "--out-dir", (tmp / "v1/").string()});
  EXPECT_NE(r.exit_code, 0) << "already schema 1";
  EXPECT_EQ(entries(tmp.path()), (std::vector<std::string>{"pkg"}));
}

}  // namespace
}  // namespace skippy
