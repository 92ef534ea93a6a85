// A plan of an hf:// package costs kilobytes: the time plan and inspect's
// bytes per token read each absent fragment's GGUF header through one
// ranged request (kept in the skippy cache), never the fragment. Counted by
// the Hub stand-in on 127.0.0.1.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "hub_standin.h"
#include "test_util.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using test::run_cli;

class PlanRemoteHeaders : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto w = run_cli({"write-package", test::data_path("llama-tiny-f16.gguf").string(), "--out-dir",
                            (tmp_ / "pkg").string(), "--model-id", "org/tiny:F16", "--source-revision",
                            "0123456789abcdef0123456789abcdef01234567", "--source-file", "llama-tiny-f16.gguf"});
    ASSERT_EQ(w.exit_code, 0) << w.err;
    commit_ = hub_.publish("org/tiny-layers", tmp_ / "pkg");
    env_ = {"HF_ENDPOINT=" + hub_.endpoint(), "HF_HUB_CACHE=" + (tmp_ / "hf").string(),
            "SKIPPY_CACHE_DIR=" + (tmp_ / "skippy").string(), "HF_TOKEN="};
  }

  // Bytes storage sent in ranged GETs (the fragments' headers; the small
  // metadata file comes whole, without a range), and how many such requests;
  // and whether storage sent any file whole but the metadata.
  std::pair<uint64_t, size_t> fragment_traffic() {
    uint64_t bytes = 0;
    size_t requests = 0;
    for (const auto& r : hub_.log()) {
      if (r.listener != "storage" || r.method != "GET" || !r.range) continue;
      bytes += r.bytes_sent;
      ++requests;
    }
    return {bytes, requests};
  }
  size_t whole_files() {
    size_t n = 0;
    for (const auto& r : hub_.log()) n += r.listener == "storage" && r.method == "GET" && !r.range ? 1 : 0;
    return n;
  }

  std::string ref() const { return "hf://org/tiny-layers@" + commit_; }

  test::HubStandin hub_;
  test::TempDir tmp_;
  std::string commit_;
  std::vector<std::string> env_;
};

TEST_F(PlanRemoteHeaders, ATimePlanReadsHeadersNotFragments) {
  const std::vector<std::string> plan = {"plan", "", "--stages", "2", "--context", "512", "--bandwidth", "1GB/s,1GB/s",
                                         "--json"};
  auto local_args = plan;
  local_args[1] = (tmp_ / "pkg").string();
  const auto local = run_cli(local_args);
  ASSERT_EQ(local.exit_code, 0) << local.err;
  auto remote_args = plan;
  remote_args[1] = ref();
  hub_.clear_log();
  const auto remote = run_cli(remote_args, env_);
  ASSERT_EQ(remote.exit_code, 0) << remote.err;
  // The same plan as from the whole package on disk.
  auto l = nlohmann::json::parse(local.out), r = nlohmann::json::parse(remote.out);
  EXPECT_EQ(l["stages"], r["stages"]) << remote.out;
  EXPECT_EQ(l["time_per_token_ns"], r["time_per_token_ns"]) << remote.out;
  // Ten fragments of about 0.5 MiB: one ranged request each, of 64 KiB at most.
  const auto [bytes, requests] = fragment_traffic();
  std::cout << "[ measure ] plan of hf:// read " << bytes << " bytes of fragments in " << requests << " requests\n";
  EXPECT_EQ(requests, 10u);
  EXPECT_LE(bytes, 10u * (64u << 10));
  EXPECT_EQ(whole_files(), 1u) << "shared/metadata.gguf only";
  EXPECT_FALSE(fs::exists(tmp_ / "hf" / "models--org--tiny-layers" / "snapshots" / commit_ / "layers"))
      << "no fragment was brought into the cache";
  // Again: the headers come from the skippy cache, nothing from the Hub.
  hub_.clear_log();
  const auto again = run_cli(remote_args, env_);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(fragment_traffic().second, 0u);
}

TEST_F(PlanRemoteHeaders, InspectSaysWhatATokenReadsAsForTheSourceFile) {
  const auto gguf = run_cli({"inspect", test::data_path("llama-tiny-f16.gguf").string(), "--json"});
  ASSERT_EQ(gguf.exit_code, 0) << gguf.err;
  const auto want = nlohmann::json::parse(gguf.out)["active_bytes_per_token"];
  ASSERT_TRUE(want.is_number());
  for (const std::string& target : {(tmp_ / "pkg").string(), ref()}) {
    const auto j = run_cli({"inspect", target, "--json"}, env_);
    ASSERT_EQ(j.exit_code, 0) << j.err;
    EXPECT_EQ(nlohmann::json::parse(j.out)["active_bytes_per_token"], want) << target;
    const auto h = run_cli({"inspect", target}, env_);
    EXPECT_NE(h.out.find("read per token    "), std::string::npos) << h.out;
  }
  EXPECT_FALSE(fs::exists(tmp_ / "hf" / "models--org--tiny-layers" / "snapshots" / commit_ / "layers"));
}

TEST_F(PlanRemoteHeaders, AFragmentWhoseFirstBytesAreNotAGgufIsRefusedAtOnce) {
  // The Hub serves bytes that are not the package's: the etag check or the
  // header check refuses, and nothing is grown or brought.
  test::TempDir other;
  fs::copy(tmp_ / "pkg", other / "pkg", fs::copy_options::recursive);
  {
    std::vector<uint8_t> junk(fs::file_size(other / "pkg" / "layers" / "layer-00003.gguf"), 'x');
    test::write_file(other / "pkg" / "layers" / "layer-00003.gguf", junk);
  }
  const std::string bad = hub_.publish("org/tiny-junk", other / "pkg");
  const auto r = run_cli({"plan", "hf://org/tiny-junk@" + bad, "--stages", "2", "--context", "512", "--bandwidth",
                          "1GB/s,1GB/s"},
                         env_);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("layers/layer-00003.gguf"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace skippy
