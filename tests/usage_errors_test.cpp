// One format and one exit code for every usage error
// ("error: ...", exit 2), an empty layer range included, and the two
// arguments of validate-package given the wrong way round are named so;
// an error that names a file names it once.
#include <gtest/gtest.h>

#include <fstream>

#include "test_util.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using test::run_cli;

TEST(UsageErrors, EveryUsageErrorSaysErrorAndExitsTwo) {
  test::TempDir tmp;
  const auto pkg = tmp / "pkg";
  ASSERT_EQ(test::write_pkg(test::data_path("llama-tiny-q8_0.gguf"), pkg).exit_code, 0);
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  for (const auto& c : std::vector<Case>{
           {{"write-package", test::data_path("llama-tiny-q8_0.gguf").string()}, "error: --out-dir is required\n"},
           {{"plan", pkg.string(), "--stages", "0"}, "error: --stages: must be from 1 to 1000000, not 0\n"},
           {{"select", pkg.string(), "--layers", "8..4"}, "error: layer range 8..4 ends before it starts\n"},
           {{"select", pkg.string(), "--layers", "5..5"}, "error: layer range 5..5 is empty"},
           {{"verify", pkg.string(), "--layers", "0..0"}, "error: layer range 0..0 is empty"},
       }) {
    const auto r = run_cli(c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args[0] << ": " << r.err;
    EXPECT_EQ(r.err.rfind(c.says, 0), 0u) << r.err;
  }
}

TEST(UsageErrors, ValidatePackageWithItsArgumentsSwappedSaysSo) {
  test::TempDir tmp;
  const auto pkg = tmp / "model-package";
  const auto model = test::data_path("llama-tiny-q8_0.gguf");
  ASSERT_EQ(test::write_pkg(model, pkg).exit_code, 0);
  const auto r = run_cli({"validate-package", pkg.string(), model.string()});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("error: validate-package takes the model first, then the package: " + pkg.string() +
                       " is a package directory and " + model.string() +
                       " is not; did you mean: skippy-model-package validate-package " + model.string() + " " +
                       pkg.string() + "?"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("Not a directory"), std::string::npos) << r.err;
  EXPECT_EQ(run_cli({"validate-package", model.string(), pkg.string()}).exit_code, 0);
}

TEST(ErrorMessages, AFileIsNamedOnce) {
  test::TempDir tmp;
  const auto pkg = tmp / "pkg";
  ASSERT_EQ(test::write_pkg(test::data_path("llama-tiny-q8_0.gguf"), pkg).exit_code, 0);
  {
    std::fstream f(pkg / "shared" / "metadata.gguf", std::ios::in | std::ios::out | std::ios::binary);
    f.write("XXXX", 4);
  }
  const auto r = run_cli({"inspect", pkg.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "error: " + pkg.string() + ": shared/metadata.gguf: byte 0: not a GGUF file (bad magic)\n");
}

}  // namespace
}  // namespace skippy
