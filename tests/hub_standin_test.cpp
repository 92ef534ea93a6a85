// The local Hub stand-in (tests/hub/hub_standin.mjs) must behave like
// huggingface.co and its CDN as far as our client and the official clients
// can tell; these tests pin that down with plain HTTP, independent hashes and
// the official JS client (@huggingface/hub).
#include "hub_standin.h"

#include <gtest/gtest.h>

#include <chrono>
#include <openssl/evp.h>

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "test_util.h"

namespace fs = std::filesystem;
using nlohmann::json;
using skippy::test::HubStandin;
using skippy::test::PublishOptions;
using skippy::test::TempDir;

namespace {

std::string digest_hex(const EVP_MD* md, const std::string& prefix, const std::string& data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_MD_CTX* c = EVP_MD_CTX_new();
  EVP_DigestInit_ex(c, md, nullptr);
  EVP_DigestUpdate(c, prefix.data(), prefix.size());
  EVP_DigestUpdate(c, data.data(), data.size());
  EVP_DigestFinal_ex(c, out, &n);
  EVP_MD_CTX_free(c);
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (unsigned i = 0; i < n; ++i) {
    s += hex[out[i] >> 4];
    s += hex[out[i] & 15];
  }
  return s;
}
std::string sha256(const std::string& data) { return digest_hex(EVP_sha256(), "", data); }
std::string git_blob_oid(const std::string& data) {
  return digest_hex(EVP_sha1(), "blob " + std::to_string(data.size()) + std::string(1, '\0'), data);
}

std::string pattern(size_t n, unsigned seed) {
  std::string s(n, '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (auto& ch : s) {
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    ch = static_cast<char>(x & 0xff);
  }
  return s;
}

void put(const fs::path& p, const std::string& data) {
  fs::create_directories(p.parent_path());
  skippy::test::write_file(p, std::vector<uint8_t>(data.begin(), data.end()));
}

std::string slurp(const fs::path& p) { return skippy::test::read_text(p); }

// A layer-package-shaped repo: a small JSON manifest and README (regular git
// files), a .gguf below a directory and a >= 1 MiB file (both LFS).
struct Repo {
  std::string manifest = R"({"schema":"skippy-layer-package/1","layers":2})" "\n";
  std::string readme = "# tiny\n";
  std::string gguf = pattern(5000, 1);
  std::string big = pattern((1 << 20) + 17, 2);
  void write(const fs::path& dir) const {
    put(dir / "model-package.json", manifest);
    put(dir / "README.md", readme);
    put(dir / "layers" / "blk-0.gguf", gguf);
    put(dir / "big.bin", big);
  }
};

class HubStandinTest : public ::testing::Test {
 protected:
  void SetUp() override {
    files.write(dir.path());
    commit = hub.publish("org/tiny", dir.path(), {.branch = "main", .tags = {"v1"}});
  }
  std::string resolve(const std::string& rev, const std::string& path, const std::string& repo = "org/tiny") const {
    return hub.endpoint() + "/" + repo + "/resolve/" + rev + "/" + path;
  }
  // The signed storage URL the Hub redirects an LFS file to.
  std::string location(const std::string& path) const {
    const auto r = HubStandin::http("HEAD", resolve("main", path));
    EXPECT_EQ(r.status, 302);
    return r.headers.count("location") ? r.headers.at("location") : std::string();
  }

  HubStandin hub;
  TempDir dir;
  Repo files;
  std::string commit;
};

TEST_F(HubStandinTest, LfsHeadIsARedirectWithLinkedHeaders) {
  ASSERT_EQ(commit.size(), 40u);
  for (const auto& [path, data] : {std::pair{std::string("layers/blk-0.gguf"), files.gguf}, {"big.bin", files.big}}) {
    const auto r = HubStandin::http("HEAD", resolve("main", path));
    EXPECT_EQ(r.status, 302) << path;
    ASSERT_TRUE(r.headers.count("location")) << path;
    EXPECT_EQ(r.headers.at("location").rfind(hub.storage() + "/", 0), 0u) << r.headers.at("location");
    EXPECT_NE(r.headers.at("location").find(sha256(data)), std::string::npos);
    EXPECT_EQ(r.headers.at("x-linked-etag"), "\"" + sha256(data) + "\"");
    EXPECT_EQ(r.headers.at("x-linked-size"), std::to_string(data.size()));
    EXPECT_EQ(r.headers.at("x-repo-commit"), commit);
    // The plain ETag is the git oid of the LFS pointer, not the content hash.
    ASSERT_TRUE(r.headers.count("etag"));
    EXPECT_NE(r.headers.at("etag"), r.headers.at("x-linked-etag"));
  }
  // A regular git file is served by the Hub itself, its ETag the git blob oid.
  const auto r = HubStandin::http("HEAD", resolve("main", "model-package.json"));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers.at("etag"), "\"" + git_blob_oid(files.manifest) + "\"");
  EXPECT_EQ(r.headers.at("content-length"), std::to_string(files.manifest.size()));
  EXPECT_EQ(r.headers.at("x-repo-commit"), commit);
  EXPECT_EQ(r.headers.count("x-linked-etag"), 0u);
  EXPECT_EQ(r.headers.count("location"), 0u);
}

TEST_F(HubStandinTest, FollowingTheLocationGetsTheBytes) {
  const auto redirect = HubStandin::http("GET", resolve(commit, "layers/blk-0.gguf"));
  ASSERT_EQ(redirect.status, 302);
  const auto r = HubStandin::http("GET", redirect.headers.at("location"));
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(r.headers.at("content-length"), std::to_string(files.gguf.size()));
  EXPECT_EQ(sha256(r.body), sha256(files.gguf));
  EXPECT_EQ(r.headers.count("x-repo-commit"), 0u);  // storage is not the Hub

  const auto big = HubStandin::http("GET", location("big.bin"));
  EXPECT_EQ(big.status, 200);
  EXPECT_EQ(sha256(big.body), sha256(files.big));

  const auto manifest = HubStandin::http("GET", resolve("main", "model-package.json"));
  EXPECT_EQ(manifest.status, 200);
  EXPECT_EQ(manifest.body, files.manifest);
}

TEST_F(HubStandinTest, StorageCapsEachConnectionExpiresUrlsAfterUseAndCanIgnoreRange) {
  // About 1 MiB at 2 MiB/s per connection: half a second, not less.
  hub.configure({{"storage_conn_bytes_per_sec", 2 << 20}});
  const std::string url = location("big.bin");
  const auto t0 = std::chrono::steady_clock::now();
  const auto capped = HubStandin::http("GET", url);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(capped.status, 200);
  EXPECT_EQ(capped.body, files.big);
  EXPECT_GE(secs, 0.4);
  hub.configure({{"storage_conn_bytes_per_sec", 0}});

  // Each signed URL answers url_max_uses requests; each resolve signs a new one.
  hub.configure({{"url_max_uses", 2}});
  const std::string once = location("big.bin");
  EXPECT_NE(once, url);
  EXPECT_EQ(HubStandin::http("GET", once, {"Range: bytes=0-9"}).status, 206);
  EXPECT_EQ(HubStandin::http("GET", once, {"Range: bytes=10-19"}).status, 206);
  const auto stale = HubStandin::http("GET", once, {"Range: bytes=20-29"});
  EXPECT_EQ(stale.status, 403);
  EXPECT_NE(stale.body.find("expired"), std::string::npos) << stale.body;
  EXPECT_EQ(HubStandin::http("GET", location("big.bin"), {"Range: bytes=20-29"}).status, 206);
  hub.configure({{"url_max_uses", 0}});

  hub.configure({{"storage_ignore_range", true}});
  const auto whole = HubStandin::http("GET", location("big.bin"), {"Range: bytes=0-9"});
  EXPECT_EQ(whole.status, 200);
  EXPECT_EQ(whole.body.size(), files.big.size());
  hub.configure({{"storage_ignore_range", false}});
}

TEST_F(HubStandinTest, StorageRejectsBadOrExpiredSignatures) {
  const std::string url = location("layers/blk-0.gguf");
  ASSERT_EQ(HubStandin::http("GET", url).status, 200);

  const auto sig_at = url.find("sig=");
  ASSERT_NE(sig_at, std::string::npos);
  std::string garbled = url;
  garbled[sig_at + 4] = garbled[sig_at + 4] == 'a' ? 'b' : 'a';
  EXPECT_EQ(HubStandin::http("GET", garbled).status, 403);
  EXPECT_EQ(HubStandin::http("GET", url.substr(0, sig_at)).status, 403);
  // Extending the expiry breaks the signature.
  const auto exp_at = url.find("expires=");
  ASSERT_NE(exp_at, std::string::npos);
  std::string later = url;
  later.insert(exp_at + 8, "9");
  EXPECT_EQ(HubStandin::http("GET", later).status, 403);
  // Another blob's path with this signature.
  std::string other = url;
  other.replace(other.find(sha256(files.gguf)), 64, sha256(files.big));
  EXPECT_EQ(HubStandin::http("GET", other).status, 403);

  hub.configure({{"url_ttl_secs", 0}});
  const auto expired = HubStandin::http("GET", location("layers/blk-0.gguf"));
  EXPECT_EQ(expired.status, 403);
  EXPECT_NE(expired.body.find("expired"), std::string::npos) << expired.body;
  hub.configure({{"url_ttl_secs", 60}});
  EXPECT_EQ(HubStandin::http("GET", location("layers/blk-0.gguf")).status, 200);
}

TEST_F(HubStandinTest, StorageRejectsAnAuthorizationHeader) {
  const std::string url = location("layers/blk-0.gguf");
  const auto r = HubStandin::http("GET", url, {"Authorization: Bearer hf_test"});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("InvalidArgument"), std::string::npos);
  EXPECT_EQ(HubStandin::http("HEAD", url, {"Authorization: Bearer hf_test"}).status, 400);
  EXPECT_EQ(HubStandin::http("GET", url).status, 200);
}

TEST_F(HubStandinTest, RangeRequests) {
  const std::string url = location("layers/blk-0.gguf");
  const auto n = files.gguf.size();

  auto r = HubStandin::http("GET", url, {"Range: bytes=10-19"});
  EXPECT_EQ(r.status, 206);
  EXPECT_EQ(r.headers.at("content-range"), "bytes 10-19/" + std::to_string(n));
  EXPECT_EQ(r.headers.at("content-length"), "10");
  EXPECT_EQ(r.body, files.gguf.substr(10, 10));

  r = HubStandin::http("GET", url, {"Range: bytes=4000-"});
  EXPECT_EQ(r.status, 206);
  EXPECT_EQ(r.headers.at("content-range"), "bytes 4000-" + std::to_string(n - 1) + "/" + std::to_string(n));
  EXPECT_EQ(r.body, files.gguf.substr(4000));

  r = HubStandin::http("GET", url, {"Range: bytes=4990-99999"});  // end clamps
  EXPECT_EQ(r.status, 206);
  EXPECT_EQ(r.body, files.gguf.substr(4990));

  r = HubStandin::http("GET", url, {"Range: bytes=" + std::to_string(n) + "-"});
  EXPECT_EQ(r.status, 416);
  EXPECT_EQ(r.headers.at("content-range"), "bytes */" + std::to_string(n));
  EXPECT_EQ(r.body, "");

  // Regular files on the Hub itself honour Range too.
  r = HubStandin::http("GET", resolve("main", "model-package.json"), {"Range: bytes=0-0"});
  EXPECT_EQ(r.status, 206);
  EXPECT_EQ(r.body, files.manifest.substr(0, 1));
  EXPECT_EQ(r.headers.at("content-range"), "bytes 0-0/" + std::to_string(files.manifest.size()));
  EXPECT_EQ(r.headers.at("x-repo-commit"), commit);
}

TEST_F(HubStandinTest, ErrorCodesAsOnTheHub) {
  auto expect_error = [&](const HubStandin::Response& r, long status, const std::string& code, bool head = false) {
    EXPECT_EQ(r.status, status) << code << " " << r.body;
    EXPECT_EQ(r.headers.count("x-error-code") ? r.headers.at("x-error-code") : "", code);
    EXPECT_TRUE(r.headers.count("x-error-message")) << code;
    if (head) {
      EXPECT_EQ(r.body, "");
    } else {
      EXPECT_TRUE(json::parse(r.body).contains("error")) << r.body;
    }
  };
  expect_error(HubStandin::http("GET", resolve("main", "README.md", "org/nope")), 401, "RepoNotFound");
  expect_error(HubStandin::http("HEAD", resolve("main", "README.md", "org/nope")), 401, "RepoNotFound", true);
  // Authenticated, the Hub admits the repo is simply not there.
  expect_error(HubStandin::http("GET", resolve("main", "README.md", "org/nope"), {"Authorization: Bearer hf_test"}),
               404, "RepoNotFound");
  expect_error(HubStandin::http("GET", hub.endpoint() + "/api/models/org/nope/revision/main"), 401, "RepoNotFound");

  TempDir gated_dir;
  files.write(gated_dir.path());
  hub.publish("org/gated", gated_dir.path(), {.gated = true});
  expect_error(HubStandin::http("GET", resolve("main", "README.md", "org/gated")), 401, "GatedRepo");
  expect_error(HubStandin::http("GET", resolve("main", "README.md", "org/gated"), {"Authorization: Bearer hf_wrong"}),
               403, "GatedRepo");
  expect_error(HubStandin::http("GET", hub.endpoint() + "/api/models/org/gated/tree/main"), 401, "GatedRepo");
  EXPECT_EQ(HubStandin::http("GET", resolve("main", "README.md", "org/gated"), {"Authorization: Bearer hf_test"}).status,
            200);
  EXPECT_EQ(
      HubStandin::http("HEAD", resolve("main", "big.bin", "org/gated"), {"Authorization: Bearer hf_test"}).status,
      302);
  hub.configure({{"token", "hf_other"}});
  expect_error(HubStandin::http("GET", resolve("main", "README.md", "org/gated"), {"Authorization: Bearer hf_test"}),
               403, "GatedRepo");

  expect_error(HubStandin::http("GET", resolve("no-such-branch", "README.md")), 404, "RevisionNotFound");
  expect_error(HubStandin::http("GET", resolve(std::string(40, 'a'), "README.md")), 404, "RevisionNotFound");
  const auto missing = HubStandin::http("HEAD", resolve("main", "nope.gguf"));
  expect_error(missing, 404, "EntryNotFound", true);
  EXPECT_EQ(missing.headers.at("x-repo-commit"), commit);  // huggingface_hub caches .no_exist/<commit>/
  expect_error(HubStandin::http("GET", resolve("main", "layers")), 404, "EntryNotFound");  // a directory

  // Optionally, a token the Hub does not know is refused everywhere.
  EXPECT_EQ(HubStandin::http("GET", resolve("main", "README.md"), {"Authorization: Bearer hf_bogus"}).status, 200);
  hub.configure({{"reject_unknown_tokens", true}});
  const auto bogus = HubStandin::http("GET", resolve("main", "README.md"), {"Authorization: Bearer hf_bogus"});
  EXPECT_EQ(bogus.status, 401);
  EXPECT_EQ(bogus.headers.at("x-error-message"), "Invalid credentials in Authorization header");
  EXPECT_EQ(HubStandin::http("GET", resolve("main", "README.md")).status, 200);
}

// huggingface.co answers regular files with a relative 307 to a commit-pinned
// /api/resolve-cache/ URL; the stand-in does so when asked.
TEST_F(HubStandinTest, ResolveCacheRedirectForRegularFiles) {
  hub.configure({{"resolve_cache_redirect", true}});
  const auto r = HubStandin::http("HEAD", resolve("main", "model-package.json"));
  EXPECT_EQ(r.status, 307);
  const std::string loc = r.headers.at("location");
  EXPECT_EQ(loc.rfind("/api/resolve-cache/models/org/tiny/" + commit + "/model-package.json?", 0), 0u) << loc;
  EXPECT_EQ(r.headers.at("x-repo-commit"), commit);
  EXPECT_EQ(r.headers.count("etag"), 0u);

  for (const std::string method : {"HEAD", "GET"}) {
    const auto f = HubStandin::http(method, hub.endpoint() + loc);
    EXPECT_EQ(f.status, 200) << method;
    EXPECT_EQ(f.headers.at("etag"), "\"" + git_blob_oid(files.manifest) + "\"");
    EXPECT_EQ(f.headers.at("x-repo-commit"), commit);
    EXPECT_EQ(f.headers.at("content-length"), std::to_string(files.manifest.size()));
    EXPECT_EQ(f.body, method == "GET" ? files.manifest : "");
  }
  EXPECT_EQ(HubStandin::http("HEAD", resolve("main", "big.bin")).status, 302);  // LFS unchanged

  // The official client follows it.
  const fs::path js = fs::path(SKIPPY_SOURCE_DIR) / "tests" / "js";
  if (!fs::exists(js / "node_modules/@huggingface/hub")) return;
  TempDir cache;
  const auto dl = skippy::test::run_program(
      "node", {(js / "hub_interop.mjs").string(), "download", "--endpoint", hub.endpoint(), "--cache-dir",
               cache.path().string(), "--repo", "org/tiny", "--revision", "main", "--files", "model-package.json"});
  ASSERT_EQ(dl.exit_code, 0) << dl.err;
  EXPECT_EQ(slurp(cache / "models--org--tiny" / "blobs" / git_blob_oid(files.manifest)), files.manifest);
}

TEST_F(HubStandinTest, BranchMovesWhileOldCommitsStillResolve) {
  TempDir dir2;
  Repo v2 = files;
  v2.manifest = R"({"schema":"skippy-layer-package/1","layers":3})" "\n";
  v2.write(dir2.path());
  const std::string commit2 = hub.publish("org/tiny", dir2.path());
  ASSERT_NE(commit2, commit);

  auto r = HubStandin::http("GET", resolve("main", "model-package.json"));
  EXPECT_EQ(r.headers.at("x-repo-commit"), commit2);
  EXPECT_EQ(r.body, v2.manifest);
  r = HubStandin::http("GET", resolve(commit, "model-package.json"));
  EXPECT_EQ(r.headers.at("x-repo-commit"), commit);
  EXPECT_EQ(r.body, files.manifest);
  r = HubStandin::http("GET", resolve("v1", "model-package.json"));  // the tag stays put
  EXPECT_EQ(r.headers.at("x-repo-commit"), commit);
  EXPECT_EQ(r.body, files.manifest);

  const auto info = json::parse(HubStandin::http("GET", hub.endpoint() + "/api/models/org/tiny/revision/main").body);
  EXPECT_EQ(info.at("sha"), commit2);
  // paths-info's lastCommit is the last commit that changed the path.
  const auto pi = HubStandin::http("POST", hub.endpoint() + "/api/models/org/tiny/paths-info/main",
                                   {"Content-Type: application/json"},
                                   R"({"paths":["model-package.json","big.bin"],"expand":true})");
  ASSERT_EQ(pi.status, 200);
  const auto entries = json::parse(pi.body);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].at("lastCommit").at("id"), commit2);
  EXPECT_EQ(entries[1].at("lastCommit").at("id"), commit);

  // A PR ref, URL-encoded as clients send it.
  const std::string pr = hub.publish("org/tiny", dir.path(), {.branch = "refs/pr/1"});
  r = HubStandin::http("HEAD", resolve("refs%2Fpr%2F1", "model-package.json"));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers.at("x-repo-commit"), pr);
  EXPECT_EQ(HubStandin::http("HEAD", resolve("main", "model-package.json")).headers.at("x-repo-commit"), commit2);
}

TEST_F(HubStandinTest, LogRecordsListenerRangeAndAuthorization) {
  const std::string url = location("layers/blk-0.gguf");
  hub.clear_log();
  HubStandin::http("HEAD", resolve("main", "layers/blk-0.gguf"), {"Authorization: Bearer hf_test"});
  HubStandin::http("GET", url, {"Range: bytes=100-199"});
  HubStandin::http("GET", resolve("main", "README.md"));
  hub.configure({{"url_ttl_secs", 30}});  // admin calls are not logged
  const auto log = hub.log();
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log[0].listener, "hub");
  EXPECT_EQ(log[0].method, "HEAD");
  EXPECT_EQ(log[0].path, "/org/tiny/resolve/main/layers/blk-0.gguf");
  EXPECT_EQ(log[0].authorization, "Bearer hf_test");
  EXPECT_EQ(log[0].range, std::nullopt);
  EXPECT_EQ(log[0].status, 302);
  EXPECT_EQ(log[0].bytes_sent, 0u);
  EXPECT_EQ(log[1].listener, "storage");
  EXPECT_EQ(log[1].method, "GET");
  EXPECT_EQ(log[1].path, "/repos/org/tiny/" + sha256(files.gguf));
  EXPECT_NE(log[1].query.find("sig="), std::string::npos);
  EXPECT_EQ(log[1].range, "bytes=100-199");
  EXPECT_EQ(log[1].authorization, std::nullopt);
  EXPECT_EQ(log[1].status, 206);
  EXPECT_EQ(log[1].bytes_sent, 100u);
  EXPECT_EQ(log[2].status, 200);
  EXPECT_EQ(log[2].bytes_sent, files.readme.size());
  hub.clear_log();
  EXPECT_TRUE(hub.log().empty());
}

TEST_F(HubStandinTest, StatusFaultFiresOnceThenClears) {
  hub.fault({{"match", "model-package.json"},
             {"listener", "hub"},
             {"kind", "status"},
             {"status", 429},
             {"headers", {{"Retry-After", "0"}}},
             {"times", 1}});
  auto r = HubStandin::http("GET", resolve("main", "model-package.json"));
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.headers.at("retry-after"), "0");
  EXPECT_EQ(HubStandin::http("GET", resolve("main", "README.md")).status, 200);  // no match
  r = HubStandin::http("GET", resolve("main", "model-package.json"));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, files.manifest);

  // On the storage listener, and twice.
  const std::string url = location("big.bin");
  hub.fault({{"match", sha256(files.big)}, {"listener", "storage"}, {"kind", "status"}, {"status", 503}, {"times", 2}});
  EXPECT_EQ(HubStandin::http("GET", url).status, 503);
  EXPECT_EQ(HubStandin::http("GET", url).status, 503);
  EXPECT_EQ(HubStandin::http("GET", url).status, 200);

  // A rule for the other listener does not fire here; clear_faults drops it.
  hub.fault({{"match", "big.bin"}, {"listener", "storage"}, {"kind", "status"}, {"status", 500}, {"times", -1}});
  EXPECT_EQ(HubStandin::http("HEAD", resolve("main", "big.bin")).status, 302);
  hub.fault({{"match", "big.bin"}, {"kind", "status"}, {"status", 500}, {"times", -1}});
  EXPECT_EQ(HubStandin::http("HEAD", resolve("main", "big.bin")).status, 500);
  EXPECT_EQ(HubStandin::http("HEAD", resolve("main", "big.bin")).status, 500);
  hub.clear_faults();
  EXPECT_EQ(HubStandin::http("HEAD", resolve("main", "big.bin")).status, 302);
}

TEST_F(HubStandinTest, CutFaultTruncatesTheBodyOnce) {
  const std::string url = location("big.bin");
  hub.fault({{"match", sha256(files.big)}, {"listener", "storage"}, {"kind", "cut"}, {"after_bytes", 100000}});
  hub.clear_log();
  auto r = HubStandin::http("GET", url);
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.error, "");  // curl: transfer closed with bytes remaining
  EXPECT_EQ(r.body, files.big.substr(0, 100000));
  const auto log = hub.log();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].bytes_sent, 100000u);

  r = HubStandin::http("GET", url);
  EXPECT_EQ(r.error, "");
  EXPECT_EQ(sha256(r.body), sha256(files.big));

  // On a small Hub-served file too (a cut at 0 sends the headers only).
  hub.fault({{"match", "README.md"}, {"kind", "cut"}, {"after_bytes", 0}});
  r = HubStandin::http("GET", resolve("main", "README.md"));
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.error, "");
  EXPECT_EQ(r.body, "");
  EXPECT_EQ(HubStandin::http("GET", resolve("main", "README.md")).body, files.readme);
}

TEST_F(HubStandinTest, CorruptFaultFlipsOneByteOnce) {
  const std::string url = location("layers/blk-0.gguf");
  hub.fault({{"match", sha256(files.gguf)}, {"listener", "storage"}, {"kind", "corrupt"}, {"offset", 4321}});
  auto r = HubStandin::http("GET", url);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.error, "");
  ASSERT_EQ(r.body.size(), files.gguf.size());
  size_t differing = 0;
  for (size_t i = 0; i < r.body.size(); ++i) differing += r.body[i] != files.gguf[i];
  EXPECT_EQ(differing, 1u);
  EXPECT_NE(r.body[4321], files.gguf[4321]);
  EXPECT_EQ(HubStandin::http("GET", url).body, files.gguf);

  // The offset counts from the start of the body actually sent (a 206 here).
  hub.fault({{"match", sha256(files.gguf)}, {"kind", "corrupt"}, {"offset", 0}});
  r = HubStandin::http("GET", url, {"Range: bytes=1000-1009"});
  EXPECT_EQ(r.status, 206);
  ASSERT_EQ(r.body.size(), 10u);
  EXPECT_NE(r.body[0], files.gguf[1000]);
  EXPECT_EQ(r.body.substr(1), files.gguf.substr(1001, 9));
}

TEST_F(HubStandinTest, ApiListsFilesAsTheHubDoes) {
  auto r = HubStandin::http("GET", hub.endpoint() + "/api/models/org/tiny/tree/main?recursive=true");
  ASSERT_EQ(r.status, 200);
  std::map<std::string, json> by_path;
  for (const auto& e : json::parse(r.body)) by_path[e.at("path")] = e;
  ASSERT_EQ(by_path.size(), 5u);  // 4 files + the layers directory
  EXPECT_EQ(by_path.at("layers").at("type"), "directory");
  const auto& gguf = by_path.at("layers/blk-0.gguf");
  EXPECT_EQ(gguf.at("type"), "file");
  EXPECT_EQ(gguf.at("size"), files.gguf.size());
  EXPECT_EQ(gguf.at("lfs").at("oid"), sha256(files.gguf));
  EXPECT_EQ(gguf.at("lfs").at("size"), files.gguf.size());
  EXPECT_GT(gguf.at("lfs").at("pointerSize").get<int>(), 100);
  EXPECT_EQ(by_path.at("README.md").at("oid"), git_blob_oid(files.readme));
  EXPECT_FALSE(by_path.at("README.md").contains("lfs"));

  r = HubStandin::http("GET", hub.endpoint() + "/api/models/org/tiny/tree/main/layers?recursive=false");
  ASSERT_EQ(r.status, 200);
  ASSERT_EQ(json::parse(r.body).size(), 1u);
  r = HubStandin::http("GET", hub.endpoint() + "/api/models/org/tiny/tree/main?recursive=false");
  EXPECT_EQ(json::parse(r.body).size(), 4u);  // layers/blk-0.gguf is not at the top

  r = HubStandin::http("GET", hub.endpoint() + "/api/models/org/tiny/revision/" + commit + "?blobs=true");
  ASSERT_EQ(r.status, 200);
  const auto info = json::parse(r.body);
  EXPECT_EQ(info.at("id"), "org/tiny");
  EXPECT_EQ(info.at("sha"), commit);
  ASSERT_EQ(info.at("siblings").size(), 4u);
  for (const auto& s : info.at("siblings")) {
    if (s.at("rfilename") == "big.bin") {
      EXPECT_EQ(s.at("lfs").at("sha256"), sha256(files.big));
    }
    EXPECT_TRUE(s.contains("size"));
  }
  // Without blobs=true the Hub lists names only.
  r = HubStandin::http("GET", hub.endpoint() + "/api/models/org/tiny/revision/v1");
  EXPECT_FALSE(json::parse(r.body).at("siblings").at(0).contains("size"));
}

// The official JS client downloads from the stand-in and lays out the cache;
// this pins down that layout (our C++ client must produce and accept it).
TEST_F(HubStandinTest, OfficialJsClientDownloadsASnapshot) {
  const fs::path js = fs::path(SKIPPY_SOURCE_DIR) / "tests" / "js";
  if (!fs::exists(js / "node_modules/@huggingface/hub")) {
    GTEST_SKIP() << "run scripts/install-deps.sh to install @huggingface/hub";
  }
  TempDir cache;
  const auto dl = skippy::test::run_program(
      "node", {(js / "hub_interop.mjs").string(), "download", "--endpoint", hub.endpoint(), "--cache-dir",
               cache.path().string(), "--repo", "org/tiny", "--revision", "main", "--files",
               "model-package.json,layers/blk-0.gguf,big.bin"});
  ASSERT_EQ(dl.exit_code, 0) << dl.err;
  const auto out = json::parse(dl.out);
  EXPECT_EQ(out.at("commit"), commit);

  const fs::path repo = cache.path() / "models--org--tiny";
  EXPECT_EQ(slurp(repo / "refs" / "main"), commit);  // no trailing newline
  struct Want {
    std::string path, etag, data;
  };
  const std::vector<Want> want = {{"model-package.json", git_blob_oid(files.manifest), files.manifest},
                                  {"layers/blk-0.gguf", sha256(files.gguf), files.gguf},
                                  {"big.bin", sha256(files.big), files.big}};
  ASSERT_EQ(out.at("paths").size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const auto& w = want[i];
    const fs::path link = repo / "snapshots" / commit / w.path;
    EXPECT_EQ(fs::path(out.at("paths")[i].get<std::string>()), link);
    ASSERT_TRUE(fs::is_symlink(link)) << link;
    const fs::path target = fs::read_symlink(link);
    EXPECT_TRUE(target.is_relative()) << target;
    EXPECT_EQ(fs::canonical(link), fs::canonical(repo / "blobs" / w.etag)) << w.path;
    EXPECT_EQ(slurp(repo / "blobs" / w.etag), w.data) << w.path;
  }
  EXPECT_FALSE(fs::exists(cache.path() / ".locks"));  // the JS client takes no locks

  // The LFS bytes came from storage, never with the token; the Hub only redirected.
  uint64_t storage_bytes = 0;
  for (const auto& r : hub.log()) {
    if (r.listener == "storage") storage_bytes += r.bytes_sent;
  }
  EXPECT_GE(storage_bytes, files.gguf.size() + files.big.size());

  // And finds them again with no network at all.
  const auto found = skippy::test::run_program(
      "node", {(js / "hub_interop.mjs").string(), "find-offline", "--cache-dir", cache.path().string(), "--repo",
               "org/tiny", "--revision", commit, "--files", "big.bin,model-package.json"});
  ASSERT_EQ(found.exit_code, 0) << found.err;
  const auto f = json::parse(found.out);
  EXPECT_EQ(f.at("sha256"), json({sha256(files.big), sha256(files.manifest)}));
  EXPECT_EQ(f.at("scan").at("revision").at("refs"), json({"main"}));

  const auto missing = skippy::test::run_program(
      "node", {(js / "hub_interop.mjs").string(), "find-offline", "--cache-dir", cache.path().string(), "--repo",
               "org/tiny", "--revision", commit, "--files", "README.md"});
  EXPECT_EQ(missing.exit_code, 1) << missing.err;
  EXPECT_EQ(json::parse(missing.out).at("missing"), json({"README.md"}));
}

// The upload side: @huggingface/hub's own createRepo() and uploadFiles()
// (preupload, LFS batch, basic and multipart PUTs to storage, NDJSON commit)
// succeed against the stand-in, and what they uploaded downloads back intact.
// Xet is off here, so the client takes the LFS path (xet_standin_test.cpp
// covers the Xet path).
TEST_F(HubStandinTest, OfficialJsClientCreatesARepoAndUploadsInOneCommit) {
  const fs::path js = fs::path(SKIPPY_SOURCE_DIR) / "tests" / "js";
  if (!fs::exists(js / "node_modules/@huggingface/hub")) {
    GTEST_SKIP() << "run scripts/install-deps.sh to install @huggingface/hub";
  }
  hub.configure({{"multipart_threshold", 1 << 20}, {"multipart_chunk_size", 300000},  // big.bin goes multipart
                 {"xet_enabled", false}});
  TempDir src;
  files.write(src.path());
  hub.clear_log();
  const auto node = [&](std::vector<std::string> args) {
    args.insert(args.begin(), (js / "hub_interop.mjs").string());
    return skippy::test::run_program("node", args);
  };
  const auto up = node({"upload", "--endpoint", hub.endpoint(), "--repo", "org/js-up", "--dir", src.path().string(),
                        "--token", "hf_test", "--create", "1", "--title", "js upload"});
  ASSERT_EQ(up.exit_code, 0) << up.err;
  const auto u = json::parse(up.out);
  EXPECT_EQ(u.at("created"), true);
  const std::string c1 = u.at("commit");
  std::set<std::string> seen;
  for (const auto& r : hub.log()) {
    if (r.listener == "storage") {
      EXPECT_FALSE(r.authorization) << "no token to storage";
      seen.insert(r.path.find("/part/") != std::string::npos ? "storage part" : "storage put");
    } else {
      seen.insert(r.method + " " + (r.path.find("/preupload/") != std::string::npos ? "preupload"
                                   : r.path.find("/lfs/objects/batch") != std::string::npos ? "batch"
                                   : r.path.find("/commit/") != std::string::npos ? "commit"
                                   : r.path));
    }
  }
  for (const char* want : {"POST /api/repos/create", "POST preupload", "POST batch", "storage put", "storage part",
                           "POST /api/complete_multipart", "POST commit"}) {
    EXPECT_TRUE(seen.count(want)) << want;
  }
  TempDir cache;
  const auto dl = node({"download", "--endpoint", hub.endpoint(), "--cache-dir", cache.path().string(), "--repo",
                        "org/js-up", "--revision", c1, "--token", "hf_test"});
  ASSERT_EQ(dl.exit_code, 0) << dl.err;
  const fs::path snap = cache.path() / "models--org--js-up" / "snapshots" / c1;
  EXPECT_EQ(slurp(snap / "big.bin"), files.big);
  EXPECT_EQ(slurp(snap / "layers/blk-0.gguf"), files.gguf);
  EXPECT_EQ(slurp(snap / "model-package.json"), files.manifest);
  EXPECT_TRUE(fs::exists(snap / ".gitattributes")) << "the Hub's first commit";

  // Again: the batch answers without actions, so no byte goes to storage.
  hub.clear_log();
  ASSERT_EQ(node({"upload", "--endpoint", hub.endpoint(), "--repo", "org/js-up", "--dir", src.path().string(), "--token",
                  "hf_test"}).exit_code, 0);
  for (const auto& r : hub.log()) EXPECT_NE(r.listener, "storage") << r.path;

  // A stale parentCommit is refused with the Hub's 412; a read token with 403.
  const auto stale = node({"upload", "--endpoint", hub.endpoint(), "--repo", "org/js-up", "--dir", src.path().string(),
                           "--token", "hf_test", "--parent-commit", c1});
  EXPECT_NE(stale.exit_code, 0);
  EXPECT_NE(stale.err.find("A commit has happened since"), std::string::npos) << stale.err;
  const auto ro = node({"upload", "--endpoint", hub.endpoint(), "--repo", "org/js-up", "--dir", src.path().string(),
                        "--token", "hf_read"});
  EXPECT_NE(ro.exit_code, 0);
  EXPECT_NE(ro.err.find("role \"read\""), std::string::npos) << ro.err;
}

}  // namespace
