// What people read every day: the top-level --help names both schemas the
// tool writes, select's columns line up, inspect shows when a package was
// signed as a UTC date, plan's budget errors give human sizes beside the
// bytes, and a count agrees with its noun ("1 stage", not "1 stages").
#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include "test_util.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using test::run_cli;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

class HumanOutput : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new test::TempDir;
    pkg_ = new fs::path(*tmp_ / "pkg");
    ASSERT_EQ(test::write_pkg(test::data_path("llama-tiny-q8_0.gguf"), *pkg_).exit_code, 0);
  }
  static void TearDownTestSuite() {
    delete pkg_;
    delete tmp_;
  }
  static test::TempDir* tmp_;
  static fs::path* pkg_;
};
test::TempDir* HumanOutput::tmp_ = nullptr;
fs::path* HumanOutput::pkg_ = nullptr;

TEST_F(HumanOutput, TopLevelHelpNamesBothSchemas) {
  const auto r = run_cli({"--help"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("schemas 1 and 2"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("schema 1)"), std::string::npos) << r.out;
}

TEST_F(HumanOutput, SelectColumnsAreAligned) {
  const auto r = run_cli({"select", pkg_->string(), "--layers", "4..8"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = lines_of(r.out);
  ASSERT_EQ(lines.size(), 8u) << r.out;  // the heading, then 7 parts (metadata, embeddings, 4 layers, output)
  EXPECT_NE(lines[0].find(": 7 parts, "), std::string::npos) << lines[0];
  size_t path_at = std::string::npos, end_at = std::string::npos;
  for (size_t i = 1; i < lines.size(); ++i) {
    const auto& l = lines[i];
    const size_t p = l.find(" shared/") != std::string::npos ? l.find(" shared/") : l.find(" layers/");
    ASSERT_NE(p, std::string::npos) << l;
    if (i == 1) {
      path_at = p;
      end_at = l.size();
    }
    EXPECT_EQ(p, path_at) << "every path starts in one column:\n" << r.out;
    EXPECT_EQ(l.size(), end_at) << "every size ends in one column:\n" << r.out;
    EXPECT_TRUE(l.ends_with(" B") || l.ends_with("iB")) << l;
  }
}

TEST_F(HumanOutput, InspectShowsTheSigningTimeAsAUtcDate) {
  test::TempDir tmp;
  const auto pkg = tmp / "pkg";
  fs::copy(*pkg_, pkg, fs::copy_options::recursive);
  ASSERT_EQ(run_cli({"identity", "init-owner", "--dir", (tmp / "owner").string()}).exit_code, 0);
  const auto s = run_cli({"sign-package", pkg.string(), "--owner", (tmp / "owner").string()});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  const auto r = run_cli({"inspect", pkg.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::regex date(R"(signed at (\d{4})-\d\d-\d\dT\d\d:\d\d:\d\dZ, certificate until)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, date)) << r.out;
  EXPECT_GE(std::stoi(m[1].str()), 2024) << r.out;
}

TEST_F(HumanOutput, PlanBudgetErrorsGiveHumanSizesBesideTheBytes) {
  auto r = run_cli({"plan", pkg_->string(), "--stages", "2", "--max-bytes", "3MB"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("2 stages need "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("add up to 6000000 bytes (5.72 MiB)"), std::string::npos) << r.err;
  EXPECT_TRUE(std::regex_search(r.err, std::regex(R"(short by \d+ bytes \(\d+\.\d\d KiB\))"))) << r.err;
  r = run_cli({"plan", pkg_->string(), "--stages", "2", "--max-bytes", "4MB"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("3.81 MiB"), std::string::npos) << "the budget column: " << r.out;
}

TEST_F(HumanOutput, CountsAgreeWithTheirNouns) {
  auto r = run_cli({"plan", pkg_->string(), "--stages", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("8 layers in 1 stage, balanced by bytes"), std::string::npos) << r.out;
  r = run_cli({"plan", pkg_->string(), "--stages", "1", "--context", "512", "--bandwidth", "1GB/s,2GB/s"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--bandwidth gives 2 values for 1 stage:"), std::string::npos) << r.err;
  r = run_cli({"plan", pkg_->string(), "--stages", "2", "--context", "512", "--bandwidth", "1GB/s"});
  EXPECT_NE(r.err.find("--bandwidth gives 1 value for 2 stages:"), std::string::npos) << r.err;
  r = run_cli({"verify", pkg_->string(), "--layers", "7..8", "--no-cache"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const auto& bad : {"(s)", " 1 stages", " 1 artifacts", " 1 parts", " 1 values"}) {
    EXPECT_EQ(r.out.find(bad), std::string::npos) << r.out;
  }
}

}  // namespace
}  // namespace skippy
