// A refused Hub request reads the same everywhere (downloads, the write
// API, tags): its HTTP status gives the error kind, and the message keeps
// the Hub's request id (X-Request-Id) as huggingface_hub does, so a failure
// can be found in the Hub's logs. Against the local Hub stand-in.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "hub/hub_status.h"
#include "hub_standin.h"
#include "test_util.h"

namespace skippy::test::hub_status_test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class HubStatus : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    hub_ = new HubStandin();
    dir_ = new TempDir();
    ASSERT_EQ(write_pkg(data_path("llama-tiny-q8_0.gguf"), pkg()).exit_code, 0);
    hub_->publish("org/status-layers", pkg());
  }
  static void TearDownTestSuite() {
    delete hub_;
    delete dir_;
  }
  void SetUp() override {
    hub_->clear_faults();
    hub_->configure({{"token", "hf_test"}, {"url_ttl_secs", 3600}, {"reject_unknown_tokens", false}});
  }
  static fs::path pkg() { return dir_->path() / "pkg"; }
  CliResult cli(const std::vector<std::string>& args, const std::string& token = "") const {
    return run_cli(args, {"HF_ENDPOINT=" + hub_->endpoint(), "HF_HUB_CACHE=" + (tmp_ / "hf").string(),
                          "HF_HOME=" + (tmp_ / "home").string(), "SKIPPY_CACHE_DIR=" + (tmp_ / "skippy").string(),
                          "SKIPPY_HF_BACKOFF_MS=1", "HF_TOKEN=" + token, "HF_HUB_OFFLINE="});
  }
  // The next request whose path holds `match` is answered `status` with the request id `id`.
  static void refuse(const std::string& match, int status, const std::string& id, const std::string& method = "") {
    json rule = {{"match", match}, {"listener", "hub"}, {"kind", "status"}, {"status", status},
                 {"times", -1}, {"headers", {{"X-Request-Id", id}}}};
    if (!method.empty()) rule["method"] = method;
    hub_->fault(rule);
  }
  static std::string message(const CliResult& r) { return json::parse(r.out)["error"]["message"].get<std::string>(); }

  static HubStandin* hub_;
  static TempDir* dir_;
  TempDir tmp_;
};
HubStandin* HubStatus::hub_ = nullptr;
TempDir* HubStatus::dir_ = nullptr;

TEST(HubStatusRule, EachStatusMeansOneKind) {
  using detail::hub_status_kind;
  EXPECT_EQ(hub_status_kind(401), ErrorKind::kUnauthorized);
  EXPECT_EQ(hub_status_kind(403), ErrorKind::kUnauthorized);
  EXPECT_EQ(hub_status_kind(404), ErrorKind::kNotFound);
  EXPECT_EQ(hub_status_kind(429), ErrorKind::kTransport);
  EXPECT_EQ(hub_status_kind(500), ErrorKind::kTransport);
  EXPECT_EQ(hub_status_kind(503), ErrorKind::kTransport);
  EXPECT_EQ(hub_status_kind(400), ErrorKind::kInvalidInput);
  EXPECT_EQ(hub_status_kind(409), ErrorKind::kInvalidInput);
  detail::HttpResponse r;
  EXPECT_EQ(detail::request_id_note(r), "") << "no id, no note";
  r.headers["x-amzn-trace-id"] = "Root=1-trace";
  EXPECT_EQ(detail::request_id_note(r), " (Request ID: Root=1-trace)");
  r.headers["x-request-id"] = std::string("abc\n\x01") + "def";
  EXPECT_EQ(detail::request_id_note(r), " (Request ID: abc??def)") << "X-Request-Id first, one printable line";
}

TEST_F(HubStatus, ADownloadKeepsTheRequestIdAndTheKind) {
  refuse("model-package.json", 403, "Root=1-download-403");
  const auto denied = cli({"fetch", "hf://org/status-layers", "--layers", "0..1", "--json"});
  expect_json_error(denied, "unauthorized", "access denied (HTTP 403)");
  EXPECT_NE(message(denied).find("(Request ID: Root=1-download-403)"), std::string::npos) << denied.out;

  hub_->clear_faults();
  refuse("model-package.json", 418, "Root=1-download-418");
  const auto odd = cli({"fetch", "hf://org/status-layers", "--layers", "0..1", "--json"});
  expect_json_error(odd, "invalid_input", "HTTP 418");
  EXPECT_NE(message(odd).find("(Request ID: Root=1-download-418)"), std::string::npos) << odd.out;

  // The Hub's own refusals carry its id too (the stand-in, like the Hub, sends one on every answer).
  hub_->clear_faults();
  const auto missing = cli({"fetch", "hf://org/no-such-repo", "--layers", "0..1", "--json"});
  expect_json_error(missing, "not_found", "repository not found");
  EXPECT_NE(message(missing).find("(Request ID: Root=1-"), std::string::npos) << missing.out;
}

TEST_F(HubStatus, TheWriteApiKeepsTheRequestIdAndTheKind) {
  refuse("/preupload/", 403, "Root=1-write-403", "POST");
  const auto r = cli({"publish", pkg().string(), "hf://org/status-write", "--create", "--json"}, "hf_test");
  expect_json_error(r, "unauthorized", "access denied (HTTP 403)");
  EXPECT_NE(message(r).find("(Request ID: Root=1-write-403)"), std::string::npos) << r.out;
  hub_->clear_faults();
  refuse("/preupload/", 404, "Root=1-write-404", "POST");
  const auto gone = cli({"publish", pkg().string(), "hf://org/status-write", "--create", "--json"}, "hf_test");
  expect_json_error(gone, "not_found", "not found (HTTP 404)");
  EXPECT_NE(message(gone).find("(Request ID: Root=1-write-404)"), std::string::npos) << gone.out;
}

TEST_F(HubStatus, TaggingKeepsTheRequestIdAndTheKind) {
  refuse("/tag/", 403, "Root=1-tag-403", "POST");
  const auto r = cli({"publish", pkg().string(), "hf://org/status-tag", "--create", "--tag", "v1", "--json"}, "hf_test");
  expect_json_error(r, "unauthorized", "tagging needs write access");
  EXPECT_NE(message(r).find("(Request ID: Root=1-tag-403)"), std::string::npos) << r.out;
  hub_->clear_faults();
  refuse("/tag/", 400, "Root=1-tag-400", "POST");
  const auto bad = cli({"publish", pkg().string(), "hf://org/status-tag", "--tag", "v2", "--json"}, "hf_test");
  expect_json_error(bad, "invalid_input", "HTTP 400");
  EXPECT_NE(message(bad).find("(Request ID: Root=1-tag-400)"), std::string::npos) << bad.out;
}

}  // namespace
}  // namespace skippy::test::hub_status_test
