// A hostile Hub: the real CLI (publish, fetch) against the local stand-in
// configured as servers that break naive clients do: storage on the Hub's own
// origin that refuses any request carrying Authorization (as S3 refuses a
// presigned URL that also has one), refusals whose reason is only in the
// body, failures that are retried, and storage throttled to 1000 B/s.
// Everything on 127.0.0.1, every wait bounded.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "hub/http.h"
#include "hub/lfs_upload.h"
#include "hub/retry.h"
#include "skippy/error.h"
#include "skippy/hub.h"
#include "skippy/peer_identity.h"
#include "hub_standin.h"
#include "test_util.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::CliResult;
using test::HubStandin;
using test::run_cli;
using test::TempDir;

constexpr const char* kEpoch = "SOURCE_DATE_EPOCH=1700000000";

// The stderr lines that start with "retry: ".
std::vector<std::string> retry_lines(const std::string& err) {
  std::vector<std::string> out;
  std::istringstream in(err);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("retry: ")) out.push_back(line);
  }
  return out;
}

// One retry line of `what` for being too slow, and it is attempt 1 of 2.
bool names_a_slow_retry(const std::string& err, const std::string& what) {
  size_t n = 0;
  for (const auto& l : retry_lines(err)) {
    n += l.find(what) != std::string::npos && l.find(", below the minimum of ") != std::string::npos &&
         l.find("(attempt 1 of 2 failed; trying again in ") != std::string::npos;
  }
  return n == 1;
}

std::string all_lines(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

class HubHostile : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    hub_ = new HubStandin();
    pkg_dir_ = new TempDir();
    const auto r = test::write_pkg(test::data_path("llama-tiny-q8_0.gguf"), pkg(), {}, {kEpoch});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    manifest_ = new json(json::parse(test::read_text(pkg() / "model-package.json")));
    const auto port = hub_->endpoint().substr(hub_->endpoint().rfind(':') + 1);
    hub_port_ = std::stoi(port);
  }
  static void TearDownTestSuite() {
    delete hub_;
    delete pkg_dir_;
    delete manifest_;
  }
  void SetUp() override {
    hub_->clear_faults();
    hub_->configure({{"token", "hf_test"}, {"read_token", "hf_read"}, {"url_ttl_secs", 3600},
                     {"multipart_threshold", 16 << 20}, {"multipart_chunk_size", 8 << 20},
                     {"storage_same_origin", false},
                     {"xet_enabled", false}});  // the LFS path (tests/xet_publish_test.cpp covers Xet)
    hub_->clear_log();
  }
  void TearDown() override {
    hub_->clear_faults();
    hub_->configure({{"storage_same_origin", false}, {"verify_path", nullptr}});
  }
  static fs::path pkg() { return pkg_dir_->path() / "pkg"; }
  static std::string embeddings_oid() { return (*manifest_)["shared"]["embeddings"]["sha256"]; }

  std::vector<std::string> env(std::vector<std::string> extra = {}) const {
    std::vector<std::string> e = {"HF_ENDPOINT=" + hub_->endpoint(),
                                  "HF_HUB_CACHE=" + (tmp_ / "hf").string(),
                                  "HF_HOME=" + (tmp_ / "hfhome").string(),
                                  "SKIPPY_CACHE_DIR=" + (tmp_ / "skippy").string(),
                                  "SKIPPY_HF_BACKOFF_MS=20",
                                  "HF_TOKEN=hf_test",
                                  kEpoch,
                                  "HF_HUB_OFFLINE="};
    for (const auto& x : extra) {
      const auto name = x.substr(0, x.find('=') + 1);
      std::erase_if(e, [&](const std::string& y) { return y.starts_with(name); });
      e.push_back(x);
    }
    return e;
  }
  CliResult cli(std::vector<std::string> args, std::vector<std::string> extra_env = {}) const {
    return run_cli(args, env(std::move(extra_env)));
  }
  static json raw_log() { return json::parse(HubStandin::http("GET", hub_->endpoint() + "/_admin/log").body); }
  // The SHA-256 of every storage PUT (accepted ones only, or all).
  static std::set<std::string> put_oids(const json& raw, bool accepted_only) {
    std::set<std::string> out;
    for (const auto& e : raw) {
      if (e["listener"] != "storage" || e["method"] != "PUT") continue;
      if (accepted_only && e["status"] != 200) continue;
      const std::string p = e["path"];  // /upload/ns/name/<oid>[/part/N]
      size_t at = 0;
      for (int k = 0; k < 4; ++k) at = p.find('/', at) + 1;
      out.insert(p.substr(at, 64));
    }
    return out;
  }

  static HubStandin* hub_;
  static TempDir* pkg_dir_;
  static json* manifest_;
  static int hub_port_;
  TempDir tmp_;
};
HubStandin* HubHostile::hub_ = nullptr;
TempDir* HubHostile::pkg_dir_ = nullptr;
json* HubHostile::manifest_ = nullptr;
int HubHostile::hub_port_ = 0;

// ------------------------------------------------ storage on the Hub's origin

TEST_F(HubHostile, PublishToStorageOnTheHubsOriginSendsItNoToken) {
  hub_->configure({{"storage_same_origin", true}});
  for (const bool multipart : {false, true}) {
    SCOPED_TRACE(multipart ? "multipart" : "basic");
    if (multipart) hub_->configure({{"multipart_threshold", 30000}, {"multipart_chunk_size", 15000}});  // layers are ~40 KB
    hub_->clear_log();
    const std::string repo = multipart ? "org/same-origin-multipart" : "org/same-origin-basic";
    const auto r = cli({"publish", pkg().string(), "hf://" + repo, "--create", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    const auto j = json::parse(r.out);
    EXPECT_EQ(j["committed"], true);
    EXPECT_EQ(j["lfs_uploaded"], 11);
    size_t storage_puts = 0, completions = 0, verifies = 0;
    for (const auto& e : raw_log()) {
      const std::string p = e["path"];
      if (e["listener"] == "storage") {
        EXPECT_EQ(e["port"], hub_port_) << "storage is served on the Hub's own origin: " << e.dump();
        EXPECT_TRUE(e["authorization"].is_null()) << "no token to storage, even on the Hub's origin: " << e.dump();
        EXPECT_NE(e["status"], 400) << e.dump();
        if (e["method"] == "PUT" && e["status"] == 200) ++storage_puts;
      }
      if (p == "/api/complete_multipart") {
        ++completions;
        EXPECT_TRUE(e["authorization"].is_null()) << "the signed completion URL gets no token (as both official clients)";
      }
      if (p.ends_with("/info/lfs/objects/verify")) {
        ++verifies;
        EXPECT_EQ(e["authorization"], "Bearer hf_test") << "verify is a Hub API endpoint: the token goes there";
      }
      if (p.starts_with("/api/models/") || p.ends_with("/objects/batch")) {
        EXPECT_EQ(e["authorization"], "Bearer hf_test") << e.dump();
      }
    }
    EXPECT_GE(storage_puts, 11u);
    EXPECT_EQ(verifies, 11u);
    if (multipart) {
      EXPECT_GE(completions, 10u) << "the layers above the threshold went multipart";
    }
    // And the package downloads from that storage, again without the token there.
    hub_->clear_log();
    const auto f = cli({"fetch", "hf://" + repo + "@" + j["commit"].get<std::string>(), "--json"});
    ASSERT_EQ(f.exit_code, 0) << f.out << f.err;
    size_t storage_gets = 0;
    for (const auto& e : raw_log()) {
      if (e["listener"] != "storage") continue;
      ++storage_gets;
      EXPECT_TRUE(e["authorization"].is_null()) << e.dump();
      EXPECT_EQ(e["port"], hub_port_);
    }
    EXPECT_GE(storage_gets, 11u);
  }
}

TEST_F(HubHostile, AStorageRefusalSurfacesTheServersMessage) {
  // S3's XML error: its <Code> and <Message> are the reason.
  hub_->fault({{"listener", "storage"}, {"method", "PUT"}, {"kind", "status"}, {"status", 400}, {"times", -1},
               {"headers", {{"Content-Type", "application/xml"}}},
               {"body", "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>InvalidArgument</Code><Message>Only one "
                        "auth mechanism allowed</Message><RequestId>ABC</RequestId></Error>"}});
  auto r = cli({"publish", pkg().string(), "hf://org/refused-xml", "--create", "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  test::expect_json_error(r, "transport", "answered HTTP 400: InvalidArgument: Only one auth mechanism allowed");
  EXPECT_EQ(r.out.find("RequestId"), std::string::npos) << r.out;
  // A plain-text refusal: its first line.
  hub_->clear_faults();
  hub_->fault({{"listener", "storage"}, {"method", "PUT"}, {"kind", "status"}, {"status", 403}, {"times", -1},
               {"headers", {{"Content-Type", "text/plain"}}},
               {"body", "\n  bucket quota exceeded for org/refused-text  \nsecond line of detail\n"}});
  r = cli({"publish", pkg().string(), "hf://org/refused-text", "--create", "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  test::expect_json_error(r, "unauthorized", "answered HTTP 403: bucket quota exceeded for org/refused-text");
  EXPECT_EQ(r.out.find("second line"), std::string::npos) << r.out;
  for (const auto& e : raw_log()) {
    EXPECT_EQ(std::string(e["path"]).find("/commit/"), std::string::npos) << "no commit after refused uploads";
  }
}

TEST(HubHttp, ServerReasonAndTheHubsApiUrls) {
  detail::HttpResponse r;
  r.body = "<Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>";
  EXPECT_EQ(detail::server_reason(r), "AccessDenied: Request has expired");
  r.body = "{\"error\":\"Invalid rev id\"}";
  EXPECT_EQ(detail::server_reason(r), "Invalid rev id");
  r.body = "\r\n\tfirst line\r\nsecond\n";
  EXPECT_EQ(detail::server_reason(r), "first line");
  r.body = "<html><body>Bad Gateway</body></html>";
  EXPECT_EQ(detail::server_reason(r), "");
  r.headers["x-error-message"] = "Repository not found";
  EXPECT_EQ(detail::server_reason(r), "Repository not found");

  const std::string hub = "http://127.0.0.1:8080";
  EXPECT_TRUE(detail::is_hub_api_url(hub, hub + "/api/models/a/b/commit/main"));
  EXPECT_TRUE(detail::is_hub_api_url(hub, hub + "/a/b.git/info/lfs/objects/verify"));
  EXPECT_TRUE(detail::is_hub_api_url(hub, hub + "/a/b/resolve/main/x.gguf"));
  EXPECT_FALSE(detail::is_hub_api_url(hub, hub + "/upload/a/b/0123?sig=1")) << "storage on the Hub's origin";
  EXPECT_FALSE(detail::is_hub_api_url(hub, hub + "/repos/a/b/0123?sig=1"));
  EXPECT_FALSE(detail::is_hub_api_url(hub, "http://127.0.0.1:80801/api/whoami-v2")) << "another port";
  EXPECT_FALSE(detail::is_hub_api_url(hub, "http://127.0.0.1:9/api/whoami-v2"));
  EXPECT_FALSE(detail::is_hub_api_url(hub, hub + "/api/../upload/a/b/0123"));
  // Decided on the normalized path. ".." spelled with escapes
  // leads to storage on the Hub's origin; an encoded '/' or a malformed
  // escape cannot be told for sure: no token.
  for (const char* bad : {"/org/x.git/info/lfs/%2e%2e/%2e%2e/storage/verify", "/org/x.git/info/lfs/%2E%2E/%2e%2E/upload/a",
                          "/api/%2e%2e/upload/a/b/0123", "/api/.%2e/repos/a", "/api/%2E./repos/a", "/api/./whoami-v2",
                          "/a/b/resolve%2fmain/x", "/api%2Fwhoami-v2", "/api/x%zz", "/api/x%2", "/api/x%00y",
                          "/a/b/resolve/main/..%5c..%5cupload"}) {
    EXPECT_FALSE(detail::is_hub_api_url(hub, hub + bad)) << bad;
  }
  EXPECT_TRUE(detail::is_hub_api_url(hub, hub + "/a/b/resolve/main/dir%20x/y.gguf")) << "a plain escape is fine";
  EXPECT_TRUE(detail::is_hub_api_url(hub, hub + "/%61pi/whoami-v2")) << "decoded: /api/whoami-v2";
  EXPECT_TRUE(detail::is_hub_api_url(hub + "/mirror", hub + "/mirror/api/whoami-v2"));
  EXPECT_FALSE(detail::is_hub_api_url(hub + "/mirror", hub + "/api/whoami-v2"));
}

TEST_F(HubHostile, AVerifyUrlWithAnEscapedDotDotOnTheHubsOriginGetsNoToken) {
  // The batch answer's verify href is on the Hub's origin but,
  // once the server decodes "%2e%2e", leads out of the LFS API (to storage
  // on the same origin): no token goes there.
  hub_->configure({{"verify_path", "/{repo}.git/info/lfs/%2e%2e/%2e%2e/storage/verify"}});
  const auto r = cli({"publish", pkg().string(), "hf://org/verify-escape", "--create", "--json"});
  size_t verifies = 0;
  for (const auto& e : raw_log()) {
    if (e["method"] != "POST" || std::string(e["path"]).find("storage/verify") == std::string::npos) continue;
    ++verifies;
    EXPECT_TRUE(e["authorization"].is_null()) << "the token went to " << e["path"] << ": " << e.dump();
  }
  EXPECT_GT(verifies, 0u) << r.out << r.err;
}

TEST(HubHttp, LfsActionHeadersAreSentAsGivenOrRefused) {
  EXPECT_TRUE(detail::lfs_action_headers(json{{"href", "http://s/x"}}, "w").empty());
  EXPECT_EQ(detail::lfs_action_headers(json{{"href", "http://s/x"}, {"header", {{"X-Amz-Acl", "private"}}}}, "w"),
            std::vector<std::string>{"X-Amz-Acl: private"});
  for (const json& bad : {json{{"X-A", "v\r\nAuthorization: Bearer x"}}, json{{"Bad Name", "v"}}, json{{"X-N", 1}}}) {
    try {
      (void)detail::lfs_action_headers(json{{"href", "http://s/x"}, {"header", bad}}, "uploading a.gguf");
      ADD_FAILURE() << bad.dump() << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
      EXPECT_NE(std::string(e.what()).find("uploading a.gguf: the action"), std::string::npos) << e.what();
    }
  }
}

TEST(HubHttp, EveryRetryGoesThroughTheReporter) {
  std::vector<RetryNotice> seen;
  set_retry_reporter([&](const RetryNotice& n) { seen.push_back(n); });
  detail::HttpRequest req;
  req.url = "http://127.0.0.1:9/api/whoami-v2";  // a closed port: refused at once
  req.connect_timeout_secs = 5;
  EXPECT_THROW((void)detail::perform_with_retries(req, {3, 1}, "checking", "hint"), Error);
  set_retry_reporter(print_retry_line);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].what, "checking");
  EXPECT_EQ(seen[0].attempt, 1u);
  EXPECT_EQ(seen[1].attempt, 2u);
  EXPECT_EQ(seen[1].attempts, 3u);
  EXPECT_EQ(seen[1].delay_ms, 2u) << "doubling from 1 ms";
  EXPECT_EQ(retry_line(seen[1]), "retry: checking: " + seen[1].reason + " (attempt 2 of 3 failed; trying again in 0.00 s)");
}

// ------------------------------------------------------------ retry lines

TEST_F(HubHostile, PublishPrintsOneLinePerRetry) {
  hub_->fault({{"listener", "hub"}, {"match", "/api/whoami-v2"}, {"kind", "status"}, {"status", 503}, {"times", 2},
               {"body", "{\"error\":\"maintenance\"}"}});
  hub_->fault({{"listener", "storage"}, {"method", "PUT"}, {"match", embeddings_oid()}, {"kind", "status"},
               {"status", 500}, {"times", 1}});
  const auto r = cli({"publish", pkg().string(), "hf://org/retry-lines", "--create", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto lines = retry_lines(r.err);
  ASSERT_EQ(lines.size(), 3u) << r.err;
  size_t whoami = 0, upload = 0;
  for (const auto& l : lines) {
    if (l.find("checking the token (whoami): HTTP 503: maintenance (attempt ") != std::string::npos) {
      EXPECT_NE(l.find(" of 5 failed; trying again in "), std::string::npos) << l;
      ++whoami;
    }
    if (l.find("uploading shared/embeddings.gguf: HTTP 500") != std::string::npos) {
      EXPECT_NE(l.find("(attempt 1 of 5 failed; trying again in 0.02 s)"), std::string::npos) << l;
      ++upload;
    }
  }
  EXPECT_EQ(whoami, 2u) << all_lines(lines);
  EXPECT_EQ(upload, 1u) << all_lines(lines);
  EXPECT_NE(r.err.find("(attempt 2 of 5 failed;"), std::string::npos) << r.err;
}

TEST_F(HubHostile, FetchPrintsOneLinePerRetry) {
  const std::string commit = hub_->publish("org/fetch-retry", pkg());
  hub_->fault({{"listener", "hub"}, {"method", "HEAD"}, {"match", "model-package.json"}, {"kind", "status"},
               {"status", 502}, {"times", 1}});
  hub_->fault({{"listener", "storage"}, {"method", "GET"}, {"match", embeddings_oid()}, {"kind", "status"},
               {"status", 503}, {"times", 2}, {"headers", {{"Retry-After", "0"}}}});
  const auto r = cli({"fetch", "hf://org/fetch-retry@" + commit});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto lines = retry_lines(r.err);
  ASSERT_EQ(lines.size(), 3u) << r.err;
  EXPECT_NE(all_lines(lines).find("model-package.json: HTTP 502"), std::string::npos) << all_lines(lines);
  size_t storage = 0;
  for (const auto& l : lines) storage += l.find("shared/embeddings.gguf: HTTP 503") != std::string::npos;
  EXPECT_EQ(storage, 2u) << all_lines(lines);
}

TEST_F(HubHostile, FetchWithNoHubAnsweringSaysSoOnEveryRetry) {
  // A closed port stands for "no network": every attempt fails at once, and
  // each one is a line before the next wait, not silence.
  const auto start = std::chrono::steady_clock::now();
  const auto r = cli({"fetch", "hf://org/nowhere@main", "--json"}, {"HF_ENDPOINT=http://127.0.0.1:9", "HF_TOKEN="});
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 1);
  test::expect_json_error(r, "transport", "after 5 attempts");
  const auto lines = retry_lines(r.err);
  ASSERT_EQ(lines.size(), 4u) << r.err;
  for (unsigned i = 0; i < 4; ++i) {
    EXPECT_NE(lines[i].find("(attempt " + std::to_string(i + 1) + " of 5 failed; trying again in "), std::string::npos)
        << lines[i];
    EXPECT_NE(lines[i].find("127.0.0.1"), std::string::npos) << "the line says what failed: " << lines[i];
  }
  EXPECT_LT(secs, 20.0);
}

TEST_F(HubHostile, ABlackholeHubIsGivenUpOnWithALinePerRetry) {
  // The Hub takes every request and never answers: each attempt ends at the
  // stall limit (1 s here, 60 s by default) with a line, not in silence.
  const std::string commit = hub_->publish("org/blackhole", pkg());
  hub_->fault({{"listener", "hub"}, {"kind", "hang"}, {"times", -1}});
  const std::vector<std::string> stall = {"SKIPPY_HF_STALL_SECS=1", "SKIPPY_HF_MAX_ATTEMPTS=3"};
  for (const bool publish : {true, false}) {
    SCOPED_TRACE(publish ? "publish" : "fetch");
    const auto start = std::chrono::steady_clock::now();
    const auto r = publish ? cli({"publish", pkg().string(), "hf://org/blackhole", "--json"}, stall)
                           : cli({"fetch", "hf://org/blackhole@" + commit, "--json"}, stall);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cout << "[ measured ] " << (publish ? "publish" : "fetch") << " gave up on the blackhole after " << secs << " s\n";
    EXPECT_EQ(r.exit_code, 1);
    test::expect_json_error(r, "transport", "after 3 attempts");
    const auto lines = retry_lines(r.err);
    ASSERT_EQ(lines.size(), 2u) << r.err;
    for (unsigned i = 0; i < 2; ++i) {
      EXPECT_NE(lines[i].find(publish ? "checking the token (whoami): nothing moved for 1 s (the server took the request "
                                        "and never answered"
                                      : "model-package.json: nothing moved for 1 s"),
                std::string::npos)
          << lines[i];
      EXPECT_NE(lines[i].find("(attempt " + std::to_string(i + 1) + " of 3 failed;"), std::string::npos) << lines[i];
    }
    EXPECT_LT(secs, 20.0);
  }
}

TEST_F(HubHostile, RetryLinesAreWrittenOnATerminalToo) {
  // stderr on a pseudo-terminal (util-linux script): the same lines.
  const auto r = test::run_program(
      "script", {"-qec", std::string(SKIPPY_CLI_PATH) + " fetch hf://org/nowhere@main 2>&1", "/dev/null"},
      env({"HF_ENDPOINT=http://127.0.0.1:9", "HF_TOKEN=", "SKIPPY_HF_MAX_ATTEMPTS=3"}));
  if (r.exit_code == 127) GTEST_SKIP() << "no script(1)";
  const std::regex line(R"(retry: [^\n]*\(attempt [12] of 3 failed; trying again in [0-9.]+ s\))");
  const auto n = std::distance(std::sregex_iterator(r.out.begin(), r.out.end(), line), std::sregex_iterator());
  EXPECT_EQ(n, 2) << r.out << r.err;
}

// ------------------------------------------------------- throttled storage

TEST_F(HubHostile, AThrottledUploadIsGivenUpOnAndTheRerunSendsOnlyWhatIsMissing) {
  // Storage takes the embeddings (2.9 MB) at 1000 B/s; the floor is 8000
  // B/s over 2 s, two attempts.
  hub_->fault({{"listener", "storage"}, {"method", "PUT"}, {"match", embeddings_oid()}, {"kind", "slow"},
               {"bytes_per_sec", 1000}, {"times", -1}});
  const std::vector<std::string> slow_env = {"SKIPPY_HF_MIN_RATE_SECS=2", "SKIPPY_HF_MAX_ATTEMPTS=2"};
  const auto start = std::chrono::steady_clock::now();
  const auto r = cli({"publish", pkg().string(), "hf://org/throttled", "--create", "--min-rate", "8000", "--json"}, slow_env);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "[ measured ] the throttled upload was given up on after " << secs << " s (2 attempts of a 2 s window)\n";
  RecordProperty("give_up_seconds", std::to_string(secs));
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  test::expect_json_error(r, "transport", "uploading shared/embeddings.gguf: the upload moved at ");
  EXPECT_NE(r.out.find("below the minimum of 7.8 KiB/s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("after 2 attempts"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("nothing was committed"), std::string::npos) << r.out;
  EXPECT_TRUE(names_a_slow_retry(r.err, "uploading shared/embeddings.gguf: the upload moved at ")) << r.err;
  EXPECT_GT(secs, 3.5) << "two 2 s windows";
  EXPECT_LT(secs, 15.0);
  const auto first = put_oids(raw_log(), true);
  EXPECT_FALSE(first.count(embeddings_oid()));
  EXPECT_EQ(first.size(), 10u) << "every other LFS object reached storage";

  hub_->clear_faults();
  hub_->clear_log();
  const auto again = cli({"publish", pkg().string(), "hf://org/throttled", "--json"}, slow_env);
  ASSERT_EQ(again.exit_code, 0) << again.out << again.err;
  const auto j = json::parse(again.out);
  EXPECT_EQ(j["committed"], true);
  EXPECT_EQ(j["lfs_uploaded"], 1);
  EXPECT_EQ(j["lfs_already_on_hub"], 10);
  EXPECT_EQ(put_oids(raw_log(), false), std::set<std::string>{embeddings_oid()}) << "only what was missing is sent";
}

TEST_F(HubHostile, AThrottledDownloadIsGivenUpOnAndTheRerunResumes) {
  const std::string commit = hub_->publish("org/throttled-fetch", pkg());
  hub_->fault({{"listener", "storage"}, {"method", "GET"}, {"match", embeddings_oid()}, {"kind", "slow"},
               {"bytes_per_sec", 1000}, {"times", -1}});
  const std::vector<std::string> slow_env = {"SKIPPY_HF_MIN_RATE=8000", "SKIPPY_HF_MIN_RATE_SECS=2",
                                             "SKIPPY_HF_MAX_ATTEMPTS=2", "HF_TOKEN="};
  const auto start = std::chrono::steady_clock::now();
  const auto r = cli({"fetch", "hf://org/throttled-fetch@" + commit, "--json"}, slow_env);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "[ measured ] the throttled download was given up on after " << secs << " s\n";
  RecordProperty("give_up_seconds", std::to_string(secs));
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("shared/embeddings.gguf"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the download moved at "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("below the minimum of 7.8 KiB/s"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the next run resumes"), std::string::npos) << r.out;
  EXPECT_TRUE(names_a_slow_retry(r.err, "shared/embeddings.gguf: the download moved at ")) << r.err;
  EXPECT_LT(secs, 15.0);

  hub_->clear_faults();
  hub_->clear_log();
  const auto again = cli({"fetch", "hf://org/throttled-fetch@" + commit, "--json"}, slow_env);
  ASSERT_EQ(again.exit_code, 0) << again.out << again.err;
  bool resumed = false;
  for (const auto& e : raw_log()) {
    if (e["listener"] != "storage" || std::string(e["path"]).find(embeddings_oid()) == std::string::npos) continue;
    const std::string range = e["range"].is_string() ? e["range"].get<std::string>() : "";
    resumed = resumed || (range.starts_with("bytes=") && range != "bytes=0-" && e["status"] == 206);
  }
  EXPECT_TRUE(resumed) << "the rerun asks only for the bytes it lacks: " << raw_log().dump();
}

// ------------------------------------------------ capped control files

// The Hub lies about model-package.json (or the sidecar): it advertises
// `size` bytes (HEAD: `head_size`) and streams spaces. Returns the CLI's
// result of `fetch hf://<repo>@<commit> --json` (extra args after).
struct HubLie {
  std::string match;
  uint64_t size = 0, head_size = 0;
};

class HubCaps : public HubHostile {
 protected:
  CliResult fetch_lied_to(const std::string& repo, const HubLie& lie, std::vector<std::string> extra = {}) {
    const std::string commit = hub_->publish(repo, pkg());
    hub_->fault({{"listener", "hub"},
                 {"match", lie.match},
                 {"kind", "endless"},
                 {"times", -1},
                 {"size", lie.size},
                 {"head_size", lie.head_size ? lie.head_size : lie.size},
                 {"max_bytes", 32 << 20},
                 {"headers", {{"X-Repo-Commit", commit}, {"ETag", "\"" + std::string(64, 'e') + "\""}}}});
    std::vector<std::string> args = {"fetch", "hf://" + repo + "@" + commit, "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    return cli(args);
  }
  // Body bytes the stand-in sent for paths ending in `suffix`.
  uint64_t bytes_sent_for(const std::string& suffix) const {
    uint64_t n = 0;
    for (const auto& r : hub_->log()) {
      if (r.path.ends_with(suffix)) n += r.bytes_sent;
    }
    return n;
  }
  // Every file under the repository's cache directory (blobs, .incomplete, snapshots).
  std::vector<std::string> cached_files(const std::string& repo) const {
    std::vector<std::string> out;
    const fs::path dir = tmp_ / "hf" / ("models--" + repo.substr(0, repo.find('/')) + "--" + repo.substr(repo.find('/') + 1));
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (!it->is_directory() && it->path().parent_path().filename() != "refs" &&
          it->path().parent_path().filename() != ".locks" && it->path().extension() != ".lock") {
        out.push_back(fs::relative(it->path(), dir).string());
      }
    }
    return out;
  }
};

TEST_F(HubCaps, AnOversizedManifestIsRefusedFromItsAdvertisedSizeBeforeTheFirstByte) {
  // 200 MiB, and 2^40 with an endless body: before #29 both were written
  // to the cache in full (or until killed), then refused.
  for (const uint64_t size : {uint64_t{200} << 20, uint64_t{1} << 40}) {
    const std::string repo = "org/cap-manifest-" + std::to_string(size);
    hub_->clear_log();
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = fetch_lied_to(repo, {"model-package.json", size, 0});
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    hub_->clear_faults();
    test::expect_json_error(r, "invalid_input", "model-package.json: the Hub advertises " + std::to_string(size) +
                                                    " bytes, over the 16777216-byte cap for this file");
    const uint64_t fetched = bytes_sent_for("model-package.json");
    std::cout << "[ measure ] a model-package.json advertised at " << size << " bytes: " << fetched
              << " bytes fetched before it was refused, in " << secs << " s\n";
    EXPECT_EQ(fetched, 0u);
    EXPECT_TRUE(cached_files(repo).empty()) << cached_files(repo).front();
  }
}

TEST_F(HubCaps, ABodyRunningPastTheAdvertisedSizeIsCutOffAndNothingIsKept) {
  // HEAD says 1000 bytes; the GET says 2^40 and streams on.
  const std::string repo = "org/cap-body";
  const auto r = fetch_lied_to(repo, {"model-package.json", uint64_t{1} << 40, 1000});
  test::expect_json_error(r, "integrity", "more than the 1000 bytes declared arrived");
  EXPECT_LT(bytes_sent_for("model-package.json"), uint64_t{16} << 20);
  EXPECT_TRUE(cached_files(repo).empty()) << cached_files(repo).front();
}

TEST_F(HubCaps, AnOversizedSignatureSidecarIsRefusedBeforeTheFirstByte) {
  // The sidecar's cap is 256 KiB; the Hub advertises 300 KiB.
  peer::init_owner(tmp_ / "owner");
  const std::string repo = "org/cap-sidecar";
  const auto r = fetch_lied_to(repo, {"model-package.json.sig", 300 << 10, 0},
                               {"--trust-signer", (tmp_ / "owner" / "owner.crt").string()});
  test::expect_json_error(r, "invalid_input", "model-package.json.sig: the Hub advertises 307200 bytes, over the "
                                              "262144-byte cap for this file");
  EXPECT_EQ(bytes_sent_for("model-package.json.sig"), 0u);
  for (const auto& f : cached_files(repo)) EXPECT_EQ(f.find(".sig"), std::string::npos) << f;
  for (const auto& f : cached_files(repo)) EXPECT_EQ(f.find(".incomplete"), std::string::npos) << f;
}

}  // namespace
}  // namespace skippy
