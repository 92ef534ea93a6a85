// A Xet publish that failed after its xorbs were stored resumes without
// sending them again (hub/xet_journal.h): the rerun builds the same xorbs,
// finds them in the journal, and the CAS confirms it holds them; a xorb the
// CAS has lost is sent again and a damaged journal is ignored, neither ever
// failing the publish. And an empty file goes through Xet end to end (a file
// of no chunks: the zero file hash, no terms). Against the local Hub and CAS
// stand-in (tests/hub/cas_standin.mjs).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hub_standin.h"
#include "skippy/hub_publish.h"
#include "test_util.h"
#include "util/sha256.h"
#include "xet/file_hasher.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::CliResult;
using test::HubStandin;
using test::TempDir;

class XetResume : public ::testing::Test {
 protected:
  void SetUp() override { hub_.configure({{"token", "hf_test"}, {"url_ttl_secs", 3600}}); }

  std::vector<std::string> env() const {
    return {"HF_ENDPOINT=" + hub_.endpoint(), "HF_HUB_CACHE=" + (tmp_.path() / "hf").string(),
            "HF_HOME=" + (tmp_.path() / "hfhome").string(), "SKIPPY_CACHE_DIR=" + cache().string(),
            "SKIPPY_HF_BACKOFF_MS=20", "HF_TOKEN=hf_test", "SOURCE_DATE_EPOCH=1700000000"};
  }
  fs::path cache() const { return tmp_.path() / "skippy"; }
  HubConfig hub_config() const {
    HubConfig cfg;
    cfg.endpoint = hub_.endpoint();
    cfg.token = "hf_test";
    cfg.backoff_ms = 1;
    return cfg;
  }
  // The tiny f16 fixture (bytes the CAS has never seen) written and pushed to ns/NAME.
  CliResult push(const std::string& name) const {
    return test::run_cli({"write-package", test::data_path("llama-tiny-f16.gguf").string(), "--out-dir",
                          (tmp_.path() / ("out-" + std::to_string(runs_++))).string(), "--model-id", "org/tiny:F16",
                          "--source-revision", "0123abc", "--source-file", "llama-tiny-f16.gguf", "--push",
                          "hf://ns/" + name, "--create", "--json"},
                         env());
  }
  std::vector<fs::path> journals() const {
    std::vector<fs::path> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(cache() / "xet-journal", ec)) out.push_back(e.path());
    return out;
  }
  std::string head(const std::string& repo) const {
    const auto r = HubStandin::http("GET", hub_.endpoint() + "/api/models/" + repo + "/revision/main",
                                    {"Authorization: Bearer hf_test"});
    return r.status == 200 ? json::parse(r.body).value("sha", "") : "";
  }
  // A first run whose shard the CAS refuses: its xorbs are stored, nothing is committed.
  uint64_t failed_first_run(const std::string& name) {
    hub_.fault({{"listener", "cas"}, {"kind", "xet_refuse_shard"}, {"message", "shard store unavailable"}, {"times", 1000}});
    hub_.clear_xet_stats();
    const auto r = push(name);
    hub_.clear_faults();
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("nothing was committed"), std::string::npos) << r.err;
    EXPECT_EQ(head("ns/" + name).size(), 40u) << "only the repository's first commit";
    const uint64_t sent = hub_.xet_stats().xorb_upload_bytes;
    EXPECT_GT(sent, 100'000u);
    EXPECT_EQ(journals().size(), 1u) << "the acknowledged xorbs are journaled";
    hub_.clear_xet_stats();
    return sent;
  }

  HubStandin hub_;
  TempDir tmp_;
  mutable int runs_ = 0;
};

TEST_F(XetResume, ARerunAfterARefusedShardSendsNoXorbAgain) {
  const uint64_t first = failed_first_run("resume");
  const std::string before = head("ns/resume");
  const auto r = push("resume");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto st = hub_.xet_stats();
  const json x = json::parse(r.out)["publish"]["xet"];
  std::cout << "first run sent " << first << " B of xorbs; the rerun sent " << st.xorb_upload_bytes << " B, resumed "
            << x["xorbs_resumed"] << " xorbs (" << x["xorb_bytes_resumed"] << " B)\n";
  EXPECT_LE(st.xorb_upload_bytes, first / 20) << x.dump();
  EXPECT_GT(x["xorbs_resumed"].get<uint64_t>(), 0u);
  EXPECT_GE(x["xorb_bytes_resumed"].get<uint64_t>(), first * 9 / 10);
  ASSERT_FALSE(st.shards.empty());
  for (const auto& s : st.shards) EXPECT_EQ(s.status, "registered") << s.error;
  EXPECT_NE(head("ns/resume"), before) << "committed";
  EXPECT_TRUE(journals().empty()) << "the files are registered: the journal is done";
}

TEST_F(XetResume, AJournaledXorbTheCasNoLongerHoldsIsSentAgain) {
  const uint64_t first = failed_first_run("lost");
  hub_.forget_xet_store();  // the CAS lost every xorb (say, collected as unreferenced)
  const auto r = push("lost");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto st = hub_.xet_stats();
  const json x = json::parse(r.out)["publish"]["xet"];
  EXPECT_EQ(x["xorbs_resumed"].get<uint64_t>(), 0u);
  EXPECT_GE(st.xorb_upload_bytes, first * 9 / 10);
  for (const auto& s : st.shards) EXPECT_EQ(s.status, "registered") << s.error;
}

TEST_F(XetResume, ADamagedJournalIsIgnoredWithANote) {
  const uint64_t first = failed_first_run("damaged");
  for (const auto& j : journals()) {
    std::ofstream(j, std::ios::trunc) << "skippy xet journal 1\nnot a key\n";
  }
  const auto r = push("damaged");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json x = json::parse(r.out)["publish"]["xet"];
  ASSERT_TRUE(x["note"].is_string()) << x.dump();
  EXPECT_NE(x["note"].get<std::string>().find("journal"), std::string::npos) << x["note"];
  EXPECT_NE(x["note"].get<std::string>().find("ignored"), std::string::npos) << x["note"];
  EXPECT_GE(hub_.xet_stats().xorb_upload_bytes, first * 9 / 10);
  EXPECT_TRUE(journals().empty());
}

TEST_F(XetResume, ACommitThatFailsAfterTheShardLeavesNothingToResend) {
  ASSERT_EQ(push("afterreg").exit_code, 0);  // the repository exists
  hub_.fault({{"listener", "hub"}, {"match", "/commit/"}, {"kind", "status"}, {"status", 400}, {"times", 1000}});
  hub_.clear_xet_stats();
  auto e = env();
  const auto failed = test::run_cli({"write-package", test::data_path("llama-tiny-q8_0.gguf").string(), "--out-dir",
                                     (tmp_.path() / "q8-a").string(), "--model-id", "org/tiny:Q8_0", "--source-revision",
                                     "0123abc", "--source-file", "llama-tiny-q8_0.gguf", "--push", "hf://ns/afterreg", "--json"},
                                    e);
  hub_.clear_faults();
  EXPECT_NE(failed.exit_code, 0);
  EXPECT_GT(hub_.xet_stats().xorb_upload_bytes, 0u);
  hub_.clear_xet_stats();
  const auto r = test::run_cli({"write-package", test::data_path("llama-tiny-q8_0.gguf").string(), "--out-dir",
                                (tmp_.path() / "q8-b").string(), "--model-id", "org/tiny:Q8_0", "--source-revision",
                                "0123abc", "--source-file", "llama-tiny-q8_0.gguf", "--push", "hf://ns/afterreg", "--json"},
                               e);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(hub_.xet_stats().xorb_upload_bytes, 0u) << "the registered files are the Hub's LFS objects already";
}

// ------------------------------------------------------------ shard routes

// The same stand-in and fixture; shards go up through POST /v2/shards.
class XetShards : public XetResume {};

TEST_F(XetShards, ShardsGoThroughV2AndARetryableErrorFrameIsRetried) {
  hub_.fault({{"listener", "cas"}, {"kind", "xet_refuse_shard"}, {"message", "busy, try again"}, {"retryable", true},
              {"times", 1}});
  const auto r = push("v2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto st = hub_.xet_stats();
  ASSERT_EQ(st.shards.size(), 2u) << "the refused attempt, then the same shard again";
  EXPECT_EQ(st.shards[0].status, "refused");
  EXPECT_EQ(st.shards[1].status, "registered") << st.shards[1].error;
  for (const auto& s : st.shards) EXPECT_EQ(s.route, "v2");
  EXPECT_NE(r.err.find("busy, try again"), std::string::npos) << "the retry is reported: " << r.err;
}

TEST_F(XetShards, ACasWithoutV2GetsV1) {
  hub_.fault({{"listener", "cas"}, {"match", "/v2/shards"}, {"kind", "status"}, {"status", 404}, {"times", 1000}});
  const auto r = push("v1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto st = hub_.xet_stats();
  ASSERT_EQ(st.shards.size(), 1u);
  EXPECT_EQ(st.shards[0].route, "v1");
  EXPECT_EQ(st.shards[0].status, "registered") << st.shards[0].error;
}

TEST_F(XetShards, ARefusalInTheV2StreamNamesTheCasReason) {
  hub_.fault({{"listener", "cas"}, {"kind", "xet_refuse_shard"}, {"message", "term 3 verification mismatch"}, {"times", 1000}});
  const auto r = push("refused");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("term 3 verification mismatch"), std::string::npos) << r.err;
  const auto st = hub_.xet_stats();
  ASSERT_EQ(st.shards.size(), 1u) << "a refusal that is not retryable is not retried";
  EXPECT_EQ(st.shards[0].route, "v2");
}

// ---------------------------------------------------------- an empty file

TEST_F(XetResume, AnEmptyFileGoesThroughXet) {
  const fs::path dir = tmp_.path() / "files";
  fs::create_directories(dir);
  std::ofstream(dir / "empty.gguf").close();
  {
    std::ofstream f(dir / "data.gguf", std::ios::binary);
    for (uint32_t i = 0; i < 300'000; ++i) f.put(static_cast<char>((i * 7919u) >> 3));
  }
  const HubConfig cfg = hub_config();
  PublishSettings settings;
  settings.create = true;
  HubPublisher pub(cfg, parse_push_target("hf://ns/empty"), settings);
  pub.begin();
  for (const char* rel : {"empty.gguf", "data.gguf"}) pub.add(rel, dir / rel, fs::file_size(dir / rel), sha256_file(dir / rel));
  const auto res = pub.commit("an empty file");
  ASSERT_TRUE(res.committed);
  EXPECT_TRUE(res.xet.used) << res.xet.note;
  EXPECT_EQ(res.xet.files.size(), 2u);
  const std::string empty_sha = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
  bool registered = false;
  for (const auto& s : hub_.xet_stats().shards) {
    EXPECT_EQ(s.status, "registered") << s.error;
    for (const auto& sha : s.file_sha256) registered = registered || sha == empty_sha;
  }
  EXPECT_TRUE(registered) << "the CAS registered the empty file (rebuilt from no terms, SHA-256 checked)";
  // The Hub serves it as a Xet-backed file of no bytes: file id all zeros, and an empty body.
  const std::string url = hub_.endpoint() + "/ns/empty/resolve/main/empty.gguf";
  const auto headr = HubStandin::http("HEAD", url, {"Authorization: Bearer hf_test"});
  ASSERT_LT(headr.status, 400);
  EXPECT_EQ(headr.headers.count("x-xet-hash") ? headr.headers.at("x-xet-hash") : "", std::string(64, '0'));
  EXPECT_EQ(headr.headers.count("x-linked-size") ? headr.headers.at("x-linked-size") : "", "0");
}

// ------------------------------------------- chunks cut by the file's writer

// write-package --push hands each fragment's chunks (cut in the write pass)
// to the publisher: the upload reads only new chunks' bytes, each checked
// against its hash, and a file that changed since is an error naming it.
TEST_F(XetResume, WithItsWritersChunksAnUploadReadsOnlyNewChunks) {
  const fs::path dir = tmp_.path() / "files";
  fs::create_directories(dir);
  const uint64_t size = 3u << 20;
  auto chunks_of = [](const std::vector<uint8_t>& bytes) {
    auto list = std::make_shared<std::vector<ContentChunk>>();
    for (const auto& c : xet::hash_bytes(bytes, false).chunks) list->push_back({c.hash.bytes, c.length});
    return list;
  };
  const HubConfig cfg = hub_config();
  PublishSettings settings;
  settings.create = true;
  auto publish = [&](const std::string& repo, const fs::path& file, const std::string& sha,
                     std::shared_ptr<const std::vector<ContentChunk>> chunks) {
    HubPublisher pub(cfg, parse_push_target("hf://" + repo), settings);
    pub.begin();
    pub.add("data.gguf", file, size, sha, {}, std::move(chunks));
    return pub.commit("chunks from the writer");
  };

  const auto data = test::splitmix64_data(size, 42);
  test::write_file(dir / "data.gguf", data);
  const auto chunks = chunks_of(data);
  ASSERT_GT(chunks->size(), 20u);
  const std::string sha = sha256_hex(std::span<const uint8_t>(data));
  // Every chunk new: the file is read once, in reads that grow (a chunk at a
  // read's end is read again at the next one's start).
  auto res = publish("ns/chunks", dir / "data.gguf", sha, chunks);
  ASSERT_TRUE(res.committed);
  ASSERT_TRUE(res.xet.used) << res.xet.note;
  EXPECT_EQ(res.xet.new_bytes, size);
  EXPECT_GE(res.xet.bytes_read, size);
  EXPECT_LE(res.xet.bytes_read, size + size / 8);
  for (const auto& s : hub_.xet_stats().shards) EXPECT_EQ(s.status, "registered") << s.error;
  // The same bytes again: the CAS holds every chunk, so nothing is read.
  res = publish("ns/chunks-again", dir / "data.gguf", sha, chunks);
  ASSERT_TRUE(res.committed);
  EXPECT_EQ(res.xet.new_bytes, 0u);
  EXPECT_EQ(res.xet.bytes_read, 0u);
  // Without the writer's chunks, the file is read (and hashed) whole.
  res = publish("ns/chunks-whole", dir / "data.gguf", sha, nullptr);
  ASSERT_TRUE(res.committed);
  EXPECT_EQ(res.xet.bytes_read, size);

  // New bytes changed after their writer cut them: an error naming the file
  // and the byte, and nothing committed.
  auto other = test::splitmix64_data(size, 43);
  const auto other_chunks = chunks_of(other);
  const std::string other_sha = sha256_hex(std::span<const uint8_t>(other));
  other[size / 2] ^= 0x5a;
  test::write_file(dir / "other.gguf", other);
  try {
    publish("ns/changed", dir / "other.gguf", other_sha, other_chunks);
    ADD_FAILURE() << "a changed file was published";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("data.gguf"), std::string::npos) << m;
    EXPECT_NE(m.find("changed after it was written"), std::string::npos) << m;
    EXPECT_NE(m.find("nothing was committed"), std::string::npos) << m;
  }
  const auto got = HubStandin::http("HEAD", hub_.endpoint() + "/ns/changed/resolve/main/data.gguf",
                                    {"Authorization: Bearer hf_test"});
  EXPECT_EQ(got.status, 404) << "the repository (created by begin) holds no data.gguf";
  // A chunk list that does not cover the file is refused too.
  auto short_list = std::make_shared<std::vector<ContentChunk>>(chunks->begin(), chunks->end() - 1);
  EXPECT_THROW(publish("ns/short", dir / "data.gguf", sha, short_list), Error);
}

}  // namespace
}  // namespace skippy
