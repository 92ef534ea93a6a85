// The Hub stand-in's Xet side (tests/hub/cas_standin.mjs): the official JS
// client must be able to upload, dedupe and download through it
// (tests/js/xet_interop.mjs), and what our C++ client will rely on is pinned
// down here with plain HTTP: the Hub's Xet headers and token routes, a
// reconstruction rebuilt by hand from signed xorb ranges, the dedupe answer,
// the Xet switch, the admin counters and every injected lie.
#include <gtest/gtest.h>

#include <openssl/evp.h>

#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "hub_standin.h"
#include "test_util.h"

namespace fs = std::filesystem;
using nlohmann::json;
using skippy::test::HubStandin;
using skippy::test::PublishOptions;
using skippy::test::TempDir;

namespace xet_standin {

const fs::path kJs = fs::path(SKIPPY_SOURCE_DIR) / "tests" / "js";
constexpr size_t kMiB = 1 << 20;

bool npm_tools_installed() { return fs::exists(kJs / "node_modules/@huggingface/hub/src/vendor/xet-chunk"); }

std::string sha256_hex(const std::string& data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), out, &n, EVP_sha256(), nullptr);
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (unsigned i = 0; i < n; ++i) {
    s += hex[out[i] >> 4];
    s += hex[out[i] & 15];
  }
  return s;
}

// A hash's raw bytes from its string form (each 8-byte word printed as a
// little-endian u64).
std::string raw_hash(const std::string& hex) {
  std::string out;
  for (size_t w = 0; w < 4; ++w) {
    for (size_t b = 8; b-- > 0;) out += static_cast<char>(std::stoi(hex.substr(16 * w + 2 * b, 2), nullptr, 16));
  }
  return out;
}

std::string random_bytes(size_t n, uint64_t seed) {
  std::string s(n, '\0');
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (auto& c : s) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    c = static_cast<char>(x >> 56);
  }
  return s;
}

void write(const fs::path& p, const std::string& data) {
  fs::create_directories(p.parent_path());
  skippy::test::write_file(p, std::vector<uint8_t>(data.begin(), data.end()));
}

json get_json(const std::string& url, const std::vector<std::string>& headers = {}) {
  const auto r = HubStandin::http("GET", url, headers);
  if (r.status != 200) throw std::runtime_error("GET " + url + ": HTTP " + std::to_string(r.status) + " " + r.body);
  return json::parse(r.body);
}

// A model published Xet-backed with uncompressed chunks, so a reconstruction
// can be followed here by hand: a chunk is its 8-byte header and its bytes.
class XetStandinTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!npm_tools_installed()) GTEST_SKIP() << "tests/js/node_modules is not installed (npm ci in tests/js)";
    model = random_bytes(3 * kMiB + 12345, 7);
    write(dir / "model.gguf", model);
    write(dir / "config.json", "{}\n");
    PublishOptions opts;
    opts.xet = true;
    opts.xet_compression = "none";
    const auto pub = hub.publish_json("org/src", dir.path(), opts);
    commit = pub.at("commit").get<std::string>();
    for (const auto& f : pub.at("files")) {
      if (f.at("path") == "model.gguf") file_id = f.at("xetHash").get<std::string>();
    }
  }

  std::string resolve(const std::string& path) const { return hub.endpoint() + "/org/src/resolve/main/" + path; }
  std::string read_token() const {
    return get_json(hub.endpoint() + "/api/models/org/src/xet-read-token/main").at("accessToken").get<std::string>();
  }
  std::string bearer() const { return "Authorization: Bearer " + read_token(); }

  // The bytes a v2 reconstruction describes, fetched and unpacked here.
  std::string follow(const json& rec) const {
    std::map<std::pair<std::string, int>, std::string> chunks;
    for (const auto& [xorb, entries] : rec.at("xorbs").items()) {
      for (const auto& e : entries) {
        for (const auto& r : e.at("ranges")) {
          const auto b = r.at("bytes");
          const auto got = HubStandin::http("GET", e.at("url").get<std::string>(),
                                            {"Range: bytes=" + std::to_string(b.at("start").get<uint64_t>()) + "-" +
                                             std::to_string(b.at("end").get<uint64_t>())});
          if (got.status != 206) throw std::runtime_error("xorb range: HTTP " + std::to_string(got.status) + " " + got.body);
          size_t p = 0;
          for (int c = r.at("chunks").at("start").get<int>(); c < r.at("chunks").at("end").get<int>(); ++c) {
            const auto* h = reinterpret_cast<const unsigned char*>(got.body.data() + p);
            const size_t len = h[1] | (h[2] << 8) | (h[3] << 16);
            EXPECT_EQ(h[4], 0) << "published with compression none";
            chunks[{xorb, c}] = got.body.substr(p + 8, len);
            p += 8 + len;
          }
          EXPECT_EQ(p, got.body.size());
        }
      }
    }
    std::string out;
    for (const auto& t : rec.at("terms")) {
      std::string term;
      for (int c = t.at("range").at("start").get<int>(); c < t.at("range").at("end").get<int>(); ++c) {
        term += chunks.at({t.at("hash").get<std::string>(), c});
      }
      EXPECT_EQ(term.size(), t.at("unpacked_length").get<size_t>());
      out += term;
    }
    return out.substr(rec.at("offset_into_first_range").get<size_t>());
  }

  HubStandin hub;
  TempDir dir;
  std::string model, commit, file_id;
};

// The proof that the stand-in speaks Xet as the official client does: see
// the steps at the top of tests/js/xet_interop.mjs.
TEST(XetStandin, OfficialJsClientUploadsDedupesAndDownloadsThroughIt) {
  if (!npm_tools_installed()) GTEST_SKIP() << "tests/js/node_modules is not installed (npm ci in tests/js)";
  HubStandin hub;
  TempDir work;
  const auto r = skippy::test::run_program(
      "timeout", {"240", "node", (kJs / "xet_interop.mjs").string(), "--endpoint", hub.endpoint(), "--workdir",
                  (work / "files").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err.substr(r.err.size() > 4000 ? r.err.size() - 4000 : 0);
  const auto out = json::parse(r.out);
  EXPECT_GE(out.at("checks").size(), 50u);
  const auto& fig = out.at("figures");
  EXPECT_LT(fig.at("upload_b_xorb_bytes").get<uint64_t>(), fig.at("upload_b_bytes").get<uint64_t>() / 10);
  std::cerr << "xet_interop figures: " << fig.dump() << "\n";

  // Its last step went through LFS with Xet off; the counters say so.
  const auto st = hub.xet_stats();
  EXPECT_GE(st.lfs_upload_bytes, 2 * kMiB);
  EXPECT_TRUE(st.xorbs.empty());
  uint64_t cas_in = 0;
  for (const auto& e : hub.log()) {
    if (e.listener == "cas") cas_in += e.bytes_received;
  }
  EXPECT_GT(cas_in, 0u) << "the last Xet upload (after the log was last cleared) went to the CAS listener";
}

TEST_F(XetStandinTest, ResolveAnnouncesXetAndTheBridgeStillServes) {
  ASSERT_EQ(file_id.size(), 64u);
  const auto head = HubStandin::http("HEAD", resolve("model.gguf"));
  EXPECT_EQ(head.status, 302);
  EXPECT_EQ(head.headers.at("x-xet-hash"), file_id);
  const std::string route = "/api/models/org/src/xet-read-token/" + commit;
  EXPECT_EQ(head.headers.at("x-xet-refresh-route"), route);
  EXPECT_EQ(head.headers.at("link"), "<" + hub.endpoint() + route + ">; rel=\"xet-auth\", <" + hub.cas() +
                                         "/v1/reconstructions/" + file_id + ">; rel=\"xet-reconstruction-info\"");
  EXPECT_EQ(head.headers.at("x-linked-size"), std::to_string(model.size()));

  const auto info = HubStandin::http("GET", resolve("model.gguf"),
                                     {"Accept: application/vnd.xet-fileinfo+json, */*", "Range: bytes=0-0"});
  EXPECT_EQ(info.status, 200);
  EXPECT_EQ(info.headers.at("content-type"), "application/vnd.xet-fileinfo+json");
  EXPECT_EQ(info.headers.at("x-xet-hash"), file_id);
  EXPECT_EQ(json::parse(info.body).at("size").get<size_t>(), model.size());

  // The classic path (the bridge): the redirect serves the bytes, Range included.
  const auto ranged = HubStandin::http("GET", head.headers.at("location"), {"Range: bytes=1000000-1000099"});
  EXPECT_EQ(ranged.status, 206);
  EXPECT_TRUE(ranged.body == model.substr(1000000, 100));

  const auto tree = get_json(hub.endpoint() + "/api/models/org/src/tree/main");
  for (const auto& e : tree) {
    if (e.at("path") == "model.gguf") {
      EXPECT_EQ(e.at("xetHash"), file_id);
    } else {
      EXPECT_FALSE(e.contains("xetHash")) << e.at("path");
    }
  }
  EXPECT_EQ(HubStandin::http("HEAD", resolve("config.json")).headers.count("x-xet-hash"), 0u);
}

TEST_F(XetStandinTest, TokenRoutesCheckTheHubToken) {
  const std::string base = hub.endpoint() + "/api/models/org/src/";
  const auto t = get_json(base + "xet-read-token/main");
  EXPECT_EQ(t.at("casUrl"), hub.cas());
  EXPECT_EQ(t.at("accessToken").get<std::string>().rfind("xet_", 0), 0u);
  EXPECT_GT(t.at("exp").get<int64_t>(), 0);
  EXPECT_EQ(HubStandin::http("GET", base + "xet-read-token/no-such-branch").status, 404);
  EXPECT_EQ(HubStandin::http("GET", base + "xet-write-token/main").status, 401);
  EXPECT_EQ(HubStandin::http("GET", base + "xet-write-token/main", {"Authorization: Bearer hf_read"}).status, 403);
  const auto w = HubStandin::http("GET", base + "xet-write-token/main", {"Authorization: Bearer hf_test"});
  ASSERT_EQ(w.status, 200);
  EXPECT_EQ(w.headers.at("x-xet-access-token"), json::parse(w.body).at("accessToken"));
  // A read token may not upload.
  const auto up = HubStandin::http("POST", hub.cas() + "/v1/xorbs/default/" + std::string(64, 'a'), {bearer()}, "x");
  EXPECT_EQ(up.status, 403);
  EXPECT_EQ(HubStandin::http("GET", hub.cas() + "/v2/reconstructions/" + file_id).status, 401);
  EXPECT_EQ(HubStandin::http("GET", hub.cas() + "/v2/reconstructions/" + file_id, {"Authorization: Bearer nope"}).status, 401);
}

TEST_F(XetStandinTest, ReconstructionsFollowedByHandGiveTheFile) {
  const auto auth = bearer();
  const auto whole = get_json(hub.cas() + "/v2/reconstructions/" + file_id, {auth});
  EXPECT_EQ(whole.at("offset_into_first_range"), 0);
  EXPECT_EQ(sha256_hex(follow(whole)), sha256_hex(model));

  for (const auto& [a, b] : std::vector<std::pair<size_t, size_t>>{{0, 0}, {100000, 700000}, {3 * kMiB, model.size() - 1}}) {
    const auto rec = get_json(hub.cas() + "/v2/reconstructions/" + file_id,
                              {auth, "Range: bytes=" + std::to_string(a) + "-" + std::to_string(b)});
    const std::string got = follow(rec);
    ASSERT_GE(got.size(), b - a + 1) << a;
    EXPECT_EQ(sha256_hex(got.substr(0, b - a + 1)), sha256_hex(model.substr(a, b - a + 1))) << a;
  }
  const auto open_end = get_json(hub.cas() + "/v2/reconstructions/" + file_id, {auth, "Range: bytes=3000000-"});
  EXPECT_EQ(sha256_hex(follow(open_end).substr(0, model.size() - 3000000)), sha256_hex(model.substr(3000000)));
  EXPECT_EQ(HubStandin::http("GET", hub.cas() + "/v2/reconstructions/" + file_id,
                             {auth, "Range: bytes=" + std::to_string(model.size()) + "-"})
                .status,
            416);
  EXPECT_EQ(HubStandin::http("GET", hub.cas() + "/v2/reconstructions/" + std::string(64, '0'), {auth}).status, 404);
  EXPECT_EQ(HubStandin::http("GET", hub.cas() + "/v2/reconstructions/xyz", {auth}).status, 400);

  // v1: the same terms, one URL per range with its url_range.
  const auto v1 = get_json(hub.cas() + "/v1/reconstructions/" + file_id, {auth});
  EXPECT_EQ(v1.at("terms"), whole.at("terms"));
  for (const auto& [xorb, infos] : v1.at("fetch_info").items()) {
    ASSERT_EQ(infos.size(), whole.at("xorbs").at(xorb).at(0).at("ranges").size());
    EXPECT_EQ(infos.at(0).at("url_range"), whole.at("xorbs").at(xorb).at(0).at("ranges").at(0).at("bytes"));
    EXPECT_EQ(infos.at(0).at("range"), whole.at("xorbs").at(xorb).at(0).at("ranges").at(0).at("chunks"));
  }
  const auto head = HubStandin::http("HEAD", hub.cas() + "/v1/files/" + file_id, {auth});
  EXPECT_EQ(head.status, 200);
  EXPECT_EQ(head.headers.at("content-length"), std::to_string(model.size()));

  const auto st = hub.xet_stats();
  ASSERT_FALSE(st.reconstructions.empty());
  EXPECT_EQ(st.reconstructions.front().file, file_id);
  EXPECT_GT(st.xorb_download_bytes, model.size());
}

TEST_F(XetStandinTest, XorbUrlsAreSignedForTheirRangesAndExpire) {
  const auto rec = get_json(hub.cas() + "/v2/reconstructions/" + file_id, {bearer()});
  const auto& entry = rec.at("xorbs").begin().value().at(0);
  const std::string url = entry.at("url");
  const auto end = entry.at("ranges").at(0).at("bytes").at("end").get<uint64_t>();
  EXPECT_EQ(HubStandin::http("GET", url).status, 403) << "no Range";
  EXPECT_EQ(HubStandin::http("GET", url, {"Range: bytes=0-" + std::to_string(end + 1)}).status, 403) << "outside";
  EXPECT_EQ(HubStandin::http("GET", url, {"Range: bytes=0-9", "Authorization: Bearer x"}).status, 400);
  std::string forged = url;
  forged[forged.size() - 1] = forged.back() == '0' ? '1' : '0';
  EXPECT_EQ(HubStandin::http("GET", forged, {"Range: bytes=0-9"}).status, 403);

  // Two ranges inside the signed one: multipart/byteranges, unless refused.
  const auto two = HubStandin::http("GET", url, {"Range: bytes=0-9,100-119"});
  EXPECT_EQ(two.status, 206);
  EXPECT_EQ(two.headers.at("content-type").rfind("multipart/byteranges; boundary=", 0), 0u);
  EXPECT_NE(two.body.find("Content-Range: bytes 100-119/"), std::string::npos);
  hub.fault({{"kind", "xet_refuse_multirange"}, {"match", "/xorbs/"}});
  EXPECT_EQ(HubStandin::http("GET", url, {"Range: bytes=0-9,100-119"}).status, 403);
  EXPECT_EQ(HubStandin::http("GET", url, {"Range: bytes=0-9"}).status, 206) << "one range still served";

  // A URL good for one request (config url_max_uses): the second is refused as expired.
  hub.configure({{"url_max_uses", 1}});
  const auto once = get_json(hub.cas() + "/v2/reconstructions/" + file_id, {bearer()});
  const std::string once_url = once.at("xorbs").begin().value().at(0).at("url");
  EXPECT_EQ(HubStandin::http("GET", once_url, {"Range: bytes=0-9"}).status, 206);
  EXPECT_EQ(HubStandin::http("GET", once_url, {"Range: bytes=0-9"}).status, 403);
  hub.configure({{"url_max_uses", 0}, {"xet_url_ttl_secs", 0}});
  const auto stale = get_json(hub.cas() + "/v2/reconstructions/" + file_id, {bearer()});
  const auto r = HubStandin::http("GET", stale.at("xorbs").begin().value().at(0).at("url").get<std::string>(), {"Range: bytes=0-9"});
  EXPECT_EQ(r.status, 403);
  EXPECT_NE(r.body.find("expired"), std::string::npos);
}

TEST_F(XetStandinTest, StorageLiesOnRequest) {
  const auto rec = get_json(hub.cas() + "/v2/reconstructions/" + file_id, {bearer()});
  const std::string url = rec.at("xorbs").begin().value().at(0).at("url");
  const auto good = HubStandin::http("GET", url, {"Range: bytes=0-99999"});
  ASSERT_EQ(good.status, 206);

  hub.fault({{"kind", "xet_wrong_bytes"}, {"listener", "storage"}});
  const auto wrong = HubStandin::http("GET", url, {"Range: bytes=0-99999"});
  ASSERT_EQ(wrong.body.size(), good.body.size());
  EXPECT_NE(wrong.body[8], good.body[8]) << "the first byte after the chunk header";
  EXPECT_TRUE(wrong.body.substr(9) == good.body.substr(9));

  hub.fault({{"kind", "xet_short_read"}, {"drop_bytes", 5000}});
  const auto shrt = HubStandin::http("GET", url, {"Range: bytes=0-99999"});
  EXPECT_EQ(shrt.status, 206);
  EXPECT_TRUE(shrt.body == good.body.substr(0, 95000)) << shrt.body.size();
  EXPECT_EQ(shrt.headers.at("content-range").rfind("bytes 0-94999/", 0), 0u);

  // The existing faults apply to the storage listener's xorb path too.
  hub.fault({{"kind", "cut"}, {"listener", "storage"}, {"match", "/xorbs/"}, {"after_bytes", 1000}});
  const auto cut = HubStandin::http("GET", url, {"Range: bytes=0-99999"});
  EXPECT_FALSE(cut.error.empty());
  EXPECT_TRUE(cut.body == good.body.substr(0, 1000)) << cut.body.size();
}

TEST_F(XetStandinTest, CasLiesOnRequest) {
  const std::string url = hub.cas() + "/v2/reconstructions/" + file_id;
  const auto auth = bearer();
  const auto truth = get_json(url, {auth});
  const auto& t0 = truth.at("terms").at(0);
  const auto lie = [&](const std::string& mode) {
    hub.fault({{"kind", "xet_bad_terms"}, {"mode", mode}, {"listener", "cas"}});
    return get_json(url, {auth});
  };
  EXPECT_EQ(lie("unpacked_length").at("terms").at(0).at("unpacked_length"), t0.at("unpacked_length").get<int>() + 1);
  EXPECT_EQ(lie("chunk_range").at("terms").at(0).at("range").at("end"), t0.at("range").at("end").get<int>() + 1);
  const auto unknown = lie("unknown_xorb");
  EXPECT_NE(unknown.at("terms").at(0).at("hash"), t0.at("hash"));
  EXPECT_FALSE(unknown.at("xorbs").contains(unknown.at("terms").at(0).at("hash").get<std::string>()));
  EXPECT_FALSE(lie("missing_fetch").at("xorbs").contains(t0.at("hash").get<std::string>()));
  EXPECT_GT(lie("offset").at("offset_into_first_range").get<int>(), t0.at("unpacked_length").get<int>());
  EXPECT_EQ(get_json(url, {auth}).at("terms"), truth.at("terms")) << "each lie is taken once";

  hub.fault({{"kind", "xet_expired_token"}, {"listener", "cas"}});
  const auto expired = HubStandin::http("GET", url, {auth});
  EXPECT_EQ(expired.status, 401);
  EXPECT_NE(expired.body.find("expired"), std::string::npos);
  EXPECT_EQ(HubStandin::http("GET", url, {auth}).status, 200);
  hub.expire_xet_tokens();
  EXPECT_EQ(HubStandin::http("GET", url, {auth}).status, 401);
  EXPECT_EQ(HubStandin::http("GET", url, {bearer()}).status, 200) << "a fresh token works";

  // A refused shard: v1 answers 400, v2 a 200 stream ending in an error event.
  const std::string write = "Authorization: Bearer " +
      get_json(hub.endpoint() + "/api/models/org/src/xet-write-token/main", {"Authorization: Bearer hf_test"}).at("accessToken").get<std::string>();
  hub.fault({{"kind", "xet_refuse_shard"}, {"message", "not today"}, {"times", 2}});
  const auto v1 = HubStandin::http("POST", hub.cas() + "/v1/shards", {write}, "whatever");
  EXPECT_EQ(v1.status, 400);
  EXPECT_NE(v1.body.find("not today"), std::string::npos);
  const auto v2 = HubStandin::http("POST", hub.cas() + "/v2/shards", {write}, "whatever");
  EXPECT_EQ(v2.status, 200);
  EXPECT_EQ(v2.headers.at("content-type"), "application/x-ndjson");
  const auto last = json::parse(v2.body.substr(v2.body.rfind('\n', v2.body.size() - 2) + 1));
  EXPECT_EQ(last.at("type"), "error");
  EXPECT_EQ(last.at("message"), "not today");
  // Without the fault, garbage is refused for what it is.
  const auto bad = HubStandin::http("POST", hub.cas() + "/v2/shards", {write}, std::string(100, 'x'));
  EXPECT_NE(bad.body.find("the header tag is not the MDB shard tag"), std::string::npos);
  const auto st = hub.xet_stats();
  ASSERT_EQ(st.shards.size(), 3u);
  EXPECT_EQ(st.shards[0].route, "v1");
  EXPECT_EQ(st.shards[2].status, "refused");
  EXPECT_EQ(st.shard_upload_bytes, 8u + 8 + 100);
}

TEST_F(XetStandinTest, DedupeQueriesAnswerAShardKeyedWithAFreshKey) {
  const auto store = hub.xet_store(true);
  ASSERT_EQ(store.at("files").size(), 1u);
  const auto& term = store.at("files").at(0).at("terms").at(0);
  json xorb;
  for (const auto& x : store.at("xorbs")) {
    if (x.at("hash") == term.at("xorb")) xorb = x;
  }
  const std::string first = xorb.at("chunk_list").at(term.at("start").get<int>()).at("hash");
  const auto auth = bearer();
  for (const std::string prefix : {"default", "default-merkledb"}) {
    const auto r = HubStandin::http("GET", hub.cas() + "/v1/chunks/" + prefix + "/" + first, {auth});
    ASSERT_EQ(r.status, 200) << prefix;
    EXPECT_EQ(r.headers.at("content-type"), "application/octet-stream");
    const std::string& s = r.body;
    EXPECT_EQ(s.substr(0, 14), "HFRepoMetaData");
    EXPECT_EQ(static_cast<unsigned char>(s[40]), 200u) << "a footer";
    EXPECT_EQ(s.substr(48, 32), std::string(32, '\xff')) << "no file info";
    const size_t n = xorb.at("chunks").get<size_t>();
    ASSERT_EQ(s.size(), 48u + 48 + 48 + n * 48 + 48 + 200);
    const std::string key = s.substr(s.size() - 200 + 72, 32);
    EXPECT_NE(key, std::string(32, '\0'));
    EXPECT_EQ(s.substr(96, 32), raw_hash(xorb.at("hash"))) << "the xorb holding the chunk";
    const uint32_t count = static_cast<unsigned char>(s[96 + 36]) | (static_cast<unsigned char>(s[96 + 37]) << 8);
    EXPECT_EQ(count, n);
    // Chunk hashes are keyed: the first entry is not the raw hash of chunk 0.
    EXPECT_NE(s.substr(144, 32), raw_hash(xorb.at("chunk_list").at(0).at("hash")));
    const auto u8 = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(s[i])); };
    EXPECT_EQ(u8(180) | (u8(181) << 8) | (u8(182) << 16), xorb.at("chunk_list").at(0).at("size").get<uint32_t>());
  }
  EXPECT_EQ(HubStandin::http("GET", hub.cas() + "/v1/chunks/default/" + std::string(64, '1'), {auth}).status, 404);
  EXPECT_EQ(HubStandin::http("GET", hub.cas() + "/v1/chunks/other/" + first, {auth}).status, 400);
  const auto st = hub.xet_stats();
  ASSERT_EQ(st.dedupe_queries.size(), 3u);
  EXPECT_TRUE(st.dedupe_queries[0].found);
  EXPECT_FALSE(st.dedupe_queries[2].found);
  EXPECT_GT(st.dedupe_answer_bytes, 0u);
}

TEST_F(XetStandinTest, TheXetSwitchMakesARepoPlainLfs) {
  const std::string batch = hub.endpoint() + "/org/src.git/info/lfs/objects/batch";
  const json req = {{"operation", "upload"}, {"transfers", {"basic", "multipart", "xet"}},
                    {"objects", {{{"oid", std::string(64, 'c')}, {"size", 10}}}}, {"ref", {{"name", "main"}}}};
  const std::vector<std::string> hdrs = {"Authorization: Bearer hf_test", "Content-Type: application/vnd.git-lfs+json"};
  auto r = json::parse(HubStandin::http("POST", batch, hdrs, req.dump()).body);
  EXPECT_EQ(r.at("transfer"), "xet");
  const auto& up = r.at("objects").at(0).at("actions").at("upload");
  EXPECT_EQ(up.at("href"), hub.endpoint() + "/api/models/org/src/xet-write-token/main");
  EXPECT_EQ(up.at("header").at("X-Xet-Cas-Url"), hub.cas());
  EXPECT_EQ(up.at("header").at("X-Xet-Access-Token").get<std::string>().rfind("xet_", 0), 0u);
  EXPECT_FALSE(up.at("header").at("X-Xet-Session-Id").get<std::string>().empty());

  hub.set_repo_xet("org/src", false);
  r = json::parse(HubStandin::http("POST", batch, hdrs, req.dump()).body);
  EXPECT_EQ(r.at("transfer"), "basic");
  EXPECT_EQ(HubStandin::http("HEAD", resolve("model.gguf")).headers.count("x-xet-hash"), 0u);
  EXPECT_EQ(HubStandin::http("GET", hub.endpoint() + "/api/models/org/src/xet-read-token/main").status, 404);
  for (const auto& e : get_json(hub.endpoint() + "/api/models/org/src/tree/main")) {
    EXPECT_FALSE(e.contains("xetHash"));
  }
  const auto bridge = HubStandin::http("GET", HubStandin::http("HEAD", resolve("model.gguf")).headers.at("location"));
  EXPECT_EQ(sha256_hex(bridge.body), sha256_hex(model));

  hub.set_repo_xet("org/src", std::nullopt);
  hub.configure({{"xet_enabled", false}});
  EXPECT_EQ(json::parse(HubStandin::http("POST", batch, hdrs, req.dump()).body).at("transfer"), "basic");
  hub.configure({{"xet_enabled", true}});
  EXPECT_EQ(HubStandin::http("HEAD", resolve("model.gguf")).headers.at("x-xet-hash"), file_id);
}

}  // namespace xet_standin
