// Publishing through Xet storage against the local Hub and CAS stand-in
// (tests/hub/cas_standin.mjs, which parses every xorb and shard and rebuilds
// every file before it registers it): a package cut from a model the Hub
// holds uploads almost nothing (global dedupe against the source's xorbs),
// for both package schemas; a Hub without Xet gets LFS; an expired token is
// renewed once; a CAS that refuses leaves the branch as it was.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hub_standin.h"
#include "test_util.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::CliResult;
using test::HubStandin;
using test::PublishOptions;
using test::TempDir;

class XetPublish : public ::testing::Test {
 protected:
  // One 96 MiB synthetic model (random weights: nothing compresses), stored
  // Xet-backed on the stand-in as org/Big-GGUF.
  static void SetUpTestSuite() {
    hub_ = new HubStandin();
    hub_->configure({{"token", "hf_test"}, {"url_ttl_secs", 3600}});
    src_ = new TempDir();
    const auto made = test::run_program(SKIPPY_MAKE_MODEL_PATH,
                                        {"--size", "96MiB", "--layers", "6", (src_->path() / "Big-Q8_0.gguf").string()});
    ASSERT_EQ(made.exit_code, 0) << made.err;
    PublishOptions opts;
    opts.xet = true;
    hub_->publish("org/Big-GGUF", src_->path(), opts);
  }
  static void TearDownTestSuite() {
    delete hub_;
    delete src_;
  }
  void SetUp() override {
    hub_->clear_faults();
    hub_->clear_xet_stats();
  }

  std::vector<std::string> env() const {
    return {"HF_ENDPOINT=" + hub_->endpoint(), "HF_HUB_CACHE=" + (tmp_.path() / "hf").string(),
            "HF_HOME=" + (tmp_.path() / "hfhome").string(), "SKIPPY_CACHE_DIR=" + (tmp_.path() / "skippy").string(),
            "SKIPPY_HF_BACKOFF_MS=20", "HF_TOKEN=hf_test", "SOURCE_DATE_EPOCH=1700000000"};
  }
  CliResult push(const std::string& target, const std::vector<std::string>& extra = {},
                 const std::vector<std::string>& more_env = {}) const {
    std::vector<std::string> args = {"write-package", "org/Big-GGUF:Q8_0", "--out-dir",
                                     (tmp_.path() / ("out-" + std::to_string(runs_++))).string(), "--push", target,
                                     "--create", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto e = env();
    e.insert(e.end(), more_env.begin(), more_env.end());
    return test::run_cli(args, e);
  }
  // The branch head of `repo`, "" when it has none.
  std::string head(const std::string& repo) const {
    const auto r = HubStandin::http("GET", hub_->endpoint() + "/api/models/" + repo + "/revision/main",
                                    {"Authorization: Bearer hf_test"});
    if (r.status != 200) return "";
    return json::parse(r.body).value("sha", "");
  }

  static HubStandin* hub_;
  static TempDir* src_;
  TempDir tmp_;
  mutable int runs_ = 0;
};
HubStandin* XetPublish::hub_ = nullptr;
TempDir* XetPublish::src_ = nullptr;

// The package's bytes, its Xet report, and what reached the CAS.
void expect_near_free_upload(const CliResult& r, const test::XetStats& st, const std::string& label) {
  ASSERT_EQ(r.exit_code, 0) << label << ": " << r.err;
  const json pub = json::parse(r.out)["publish"];
  const json& x = pub["xet"];
  ASSERT_TRUE(x["used"].get<bool>()) << label << ": " << x.dump();
  const uint64_t bytes = pub["bytes"].get<uint64_t>();
  const uint64_t sent = st.xorb_upload_bytes + st.shard_upload_bytes;
  std::cout << label << ": package " << bytes << " B in " << pub["files"] << " files; chunked "
            << x["bytes_chunked"] << ", deduped on the Hub " << x["deduped_global"] << ", in the run "
            << x["deduped_in_run"] << ", new " << x["new_bytes"] << "; CAS received " << st.xorb_upload_bytes
            << " B of xorbs, " << st.shard_upload_bytes << " B of shards (" << 100.0 * static_cast<double>(sent) / static_cast<double>(bytes)
            << "%)\n";
  EXPECT_EQ(st.lfs_upload_bytes, 0u) << label;
  EXPECT_LE(sent, bytes / 50) << label << ": more than 2% of the package went up: " << x.dump();
  EXPECT_EQ(x["xorb_bytes_uploaded"].get<uint64_t>(), st.xorb_upload_bytes) << label;
  EXPECT_GE(x["deduped_global"].get<uint64_t>(), bytes * 9 / 10) << label;
  // The fragments' chunks came from the write pass: only new chunks were read back.
  EXPECT_LT(x["bytes_read"].get<uint64_t>(), bytes / 20) << label << ": " << x.dump();
  EXPECT_EQ(x["bytes_chunked"].get<uint64_t>(), x["deduped_global"].get<uint64_t>() + x["deduped_in_run"].get<uint64_t>() +
                                                    x["new_bytes"].get<uint64_t>());
  ASSERT_FALSE(st.shards.empty()) << label;
  for (const auto& s : st.shards) EXPECT_EQ(s.status, "registered") << label << ": " << s.error;
}

TEST_F(XetPublish, APackageOfAModelTheHubHoldsUploadsAtMostTwoPercentSchemaOne) {
  const auto r = push("hf://ns/pkg1");
  expect_near_free_upload(r, hub_->xet_stats(), "schema 1");
  EXPECT_FALSE(head("ns/pkg1").empty());
}

TEST_F(XetPublish, APackageOfAModelTheHubHoldsUploadsAtMostTwoPercentSchemaTwo) {
  const auto r = push("hf://ns/pkg2", {"--schema", "2"});
  expect_near_free_upload(r, hub_->xet_stats(), "schema 2");
  EXPECT_FALSE(head("ns/pkg2").empty());
}

TEST_F(XetPublish, AStreamedPushUploadsAtMostTwoPercentToo) {
  const auto r = push("hf://ns/pkg3", {"--stream"});
  expect_near_free_upload(r, hub_->xet_stats(), "--stream");
  EXPECT_FALSE(head("ns/pkg3").empty());
}

TEST_F(XetPublish, AHubWithoutXetGetsLfsAndSaysSo) {
  hub_->configure({{"xet_enabled", false}});
  const auto r = push("hf://ns/plain");
  hub_->configure({{"xet_enabled", true}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json x = json::parse(r.out)["publish"]["xet"];
  EXPECT_FALSE(x["used"].get<bool>());
  EXPECT_NE(x["note"].get<std::string>().find("no Xet storage"), std::string::npos) << x.dump();
  EXPECT_NE(r.err.find("uploaded through LFS"), std::string::npos) << r.err;
  const auto st = hub_->xet_stats();
  EXPECT_GT(st.lfs_upload_bytes, 0u);
  EXPECT_EQ(st.xorb_upload_bytes, 0u);
}

TEST_F(XetPublish, HfHubDisableXetKeepsToLfs) {
  const auto r = push("hf://ns/nolfs", {}, {"HF_HUB_DISABLE_XET=1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(json::parse(r.out)["publish"]["xet"]["used"].get<bool>());
  EXPECT_EQ(hub_->xet_stats().xorb_upload_bytes, 0u);
}

TEST_F(XetPublish, AnExpiredTokenIsRenewedOnceAndTwiceIsAClearError) {
  hub_->fault({{"listener", "cas"}, {"kind", "xet_expired_token"}, {"times", 1}});
  const auto ok = push("hf://ns/renewed");
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_FALSE(head("ns/renewed").empty());

  hub_->clear_faults();
  hub_->fault({{"listener", "cas"}, {"kind", "xet_expired_token"}, {"times", 1000}});
  const auto bad = push("hf://ns/expired");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("even after a fresh one"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("nothing was committed"), std::string::npos) << bad.err;
}

TEST_F(XetPublish, ACasThatRefusesTheShardOrAXorbLeavesTheBranchAsItWas) {
  // The repository exists with a first package.
  ASSERT_EQ(push("hf://ns/refused").exit_code, 0);
  const std::string before = head("ns/refused");
  hub_->fault({{"listener", "cas"}, {"kind", "xet_refuse_shard"}, {"message", "verification hash mismatch"}, {"times", 1000}});
  const auto r = push("hf://ns/refused", {"--schema", "2"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("nothing was committed"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("verification hash mismatch"), std::string::npos) << r.err;
  EXPECT_EQ(head("ns/refused"), before);

  // Bytes the CAS has never seen (a fixture, not the model above), so xorbs must go up.
  hub_->clear_faults();
  hub_->fault({{"listener", "cas"}, {"match", "/v1/xorbs/"}, {"kind", "status"}, {"status", 400}, {"times", 1000}});
  const auto x = test::run_cli({"write-package", test::data_path("llama-tiny-f16.gguf").string(), "--out-dir",
                                (tmp_.path() / "tiny").string(), "--model-id", "org/tiny:F16", "--source-revision",
                                "0123abc", "--source-file", "llama-tiny-f16.gguf", "--push", "hf://ns/refused"},
                               env());
  EXPECT_NE(x.exit_code, 0);
  EXPECT_NE(x.err.find("storing xorb"), std::string::npos) << x.err;
  EXPECT_NE(x.err.find(".gguf"), std::string::npos) << x.err;  // the file is named
  EXPECT_EQ(head("ns/refused"), before);
}

}  // namespace
}  // namespace skippy
