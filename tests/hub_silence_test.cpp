// A Hub that takes a request and never answers is not waited on
// in silence for the stall limit (60 s): as huggingface_hub does, a metadata
// request gives up after HF_HUB_ETAG_TIMEOUT (10 s) and a download's first
// byte after HF_HUB_DOWNLOAD_TIMEOUT (10 s), each with its retry line.
#include <gtest/gtest.h>

#include <chrono>

#include "hub_standin.h"
#include "test_util.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using test::run_cli;

class HubSilence : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(test::write_pkg(test::data_path("llama-tiny-q8_0.gguf"), tmp_ / "pkg").exit_code, 0);
    commit_ = hub_.publish("org/silent", tmp_ / "pkg");
  }
  std::vector<std::string> env(std::vector<std::string> extra) const {
    std::vector<std::string> e = {"HF_ENDPOINT=" + hub_.endpoint(), "HF_HUB_CACHE=" + (tmp_ / "hf").string(),
                                  "HF_HOME=" + (tmp_ / "hfhome").string(), "SKIPPY_CACHE_DIR=" + (tmp_ / "skippy").string(),
                                  "SKIPPY_HF_BACKOFF_MS=20", "HF_TOKEN=", "HF_HUB_OFFLINE="};
    e.insert(e.end(), extra.begin(), extra.end());
    return e;
  }
  // Runs fetch; returns the result and the seconds it took.
  std::pair<test::CliResult, double> fetch(std::vector<std::string> extra) const {
    const auto start = std::chrono::steady_clock::now();
    auto r = run_cli({"fetch", "hf://org/silent@" + commit_}, env(std::move(extra)));
    return {r, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
  }
  test::TempDir tmp_;
  test::HubStandin hub_;
  std::string commit_;
};

TEST_F(HubSilence, ASilentHubGetsALineAfterHuggingfaceHubsTenSeconds) {
  hub_.fault({{"listener", "hub"}, {"kind", "hang"}, {"times", -1}});
  const auto [r, secs] = fetch({"SKIPPY_HF_MAX_ATTEMPTS=1"});
  std::cout << "[ measured ] a silent Hub was given up on after " << secs << " s (stall limit 60 s)\n";
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("model-package.json: no answer within 10 s (the server took the request and said nothing; the "
                       "limit is HF_HUB_ETAG_TIMEOUT)"),
            std::string::npos)
      << r.err;
  EXPECT_GE(secs, 9.5);
  EXPECT_LT(secs, 15.0);
}

TEST_F(HubSilence, EtagAndDownloadTimeoutsAreHonoured) {
  hub_.fault({{"listener", "hub"}, {"kind", "hang"}, {"times", 1}});
  auto [r, secs] = fetch({"HF_HUB_ETAG_TIMEOUT=1", "SKIPPY_HF_MAX_ATTEMPTS=3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("retry: hf://org/silent@" + commit_ + ": model-package.json: no answer within 1 s"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("HF_HUB_ETAG_TIMEOUT) (attempt 1 of 3 failed;"), std::string::npos) << r.err;
  EXPECT_LT(secs, 8.0);
  std::cout << "[ measured ] HF_HUB_ETAG_TIMEOUT=1: fetched after " << secs << " s\n";

  fs::remove_all(tmp_ / "hf");
  hub_.clear_faults();
  hub_.fault({{"listener", "storage"}, {"kind", "hang"}, {"times", 1}});
  std::tie(r, secs) = fetch({"HF_HUB_DOWNLOAD_TIMEOUT=1.5", "SKIPPY_HF_MAX_ATTEMPTS=3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("no answer within 1.5 s (the server took the request and said nothing; the limit is "
                       "HF_HUB_DOWNLOAD_TIMEOUT)"),
            std::string::npos)
      << r.err;
  EXPECT_LT(secs, 8.0);

  fs::remove_all(tmp_ / "hf");
  r = run_cli({"fetch", "hf://org/silent@" + commit_}, env({"HF_HUB_ETAG_TIMEOUT=soon"}));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("HF_HUB_ETAG_TIMEOUT=soon: expected seconds"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace skippy
