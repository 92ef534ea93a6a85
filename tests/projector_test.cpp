// A multimodal projector as llama.cpp writes one (general.architecture
// "clip", clip.vision.block_count, v.blk.N encoder tensors): inspect reads it
// as a projector, and a package carrying it works through every command a
// stage-0 node runs.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::run_cli;

TEST(Projector, InspectReadsARealFormatMmproj) {
  test::TempDir tmp;
  const auto mmproj = tmp / "mmproj-tiny-f16.gguf";
  const size_t tensors = test::make_projector(mmproj);
  auto r = run_cli({"inspect", mmproj.string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["architecture"], "clip");
  EXPECT_EQ(j["tensor_count"], tensors);
  EXPECT_EQ(j["layer_count"], 0) << "v.blk.N are encoder blocks, not decoder layers";
  EXPECT_TRUE(j["active_bytes_per_token"].is_null()) << j.dump(2);
  EXPECT_EQ(j["projector"]["vision_block_count"], 2) << j.dump(2);
  EXPECT_EQ(j["projector"]["projector_type"], "mlp");
  r = run_cli({"inspect", mmproj.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("vision encoder 2 blocks"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("read per token    nothing"), std::string::npos) << r.out;
  // A decoder is still a decoder.
  r = run_cli({"inspect", test::data_path("llama-tiny-q8_0.gguf").string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(json::parse(r.out)["projector"].is_null());
  EXPECT_GT(json::parse(r.out)["active_bytes_per_token"].get<uint64_t>(), 0u);
}

TEST(Projector, APackageWithARealFormatMmprojWorksForEveryCommand) {
  test::TempDir tmp;
  const auto src = test::data_path("llama-tiny-q8_0.gguf");
  const auto mmproj = tmp / "mmproj-tiny-f16.gguf";
  test::make_projector(mmproj);
  const auto pkg = tmp / "pkg";
  auto r = test::write_pkg(src, pkg, {"--projector", mmproj.string(), "--validate"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  r = run_cli({"validate-package", src.string(), pkg.string(), "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  r = run_cli({"inspect", pkg.string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(json::parse(r.out)["projectors"].size(), 1u);
  r = run_cli({"inspect", (pkg / "projectors" / "mmproj-tiny-f16.gguf").string(), "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  r = run_cli({"select", pkg.string(), "--layers", "0..4", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(json::parse(r.out)["parts"].back()["relative_path"], "projectors/mmproj-tiny-f16.gguf") << r.out;
  r = run_cli({"verify", pkg.string(), "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  r = run_cli({"materialize", pkg.string(), "--layers", "0..4", "--out", (tmp / "s0.gguf").string(), "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const std::vector<std::string>& plan :
       {std::vector<std::string>{"--stages", "2"},
        {"--context", "4096", "--budgets", "64MiB,64MiB"},
        {"--context", "4096", "--bandwidth", "100GB/s,200GB/s"}}) {
    std::vector<std::string> args = {"plan", pkg.string(), "--json"};
    args.insert(args.end(), plan.begin(), plan.end());
    r = run_cli(args);
    EXPECT_EQ(r.exit_code, 0) << plan[0] << ": " << r.out << r.err;
  }
  r = run_cli({"convert-package", pkg.string(), "--to", "2", "--out-dir", (tmp / "v2").string(), "--source", src.string(),
               "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  r = run_cli({"inspect", (tmp / "v2").string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(json::parse(r.out)["sidecars"].size(), 1u) << r.out;
  r = run_cli({"plan", (tmp / "v2").string(), "--context", "4096", "--bandwidth", "100GB/s,200GB/s", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

}  // namespace
}  // namespace skippy
