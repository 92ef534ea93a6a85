// Deduplication against the source itself (hub/xet_source_index.h): a
// package cut from a model the Hub stores Xet-backed references the source's
// own chunks, located by the source's reconstruction terms while the write
// reads the source, with the global dedupe index answering nothing; the index
// refuses a source whose chunks disagree with its terms. Against the local Hub
// and CAS stand-in (tests/hub/cas_standin.mjs), which rebuilds every
// registered file from its terms and checks its SHA-256 and verification
// entries.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "hub/xet_source_index.h"
#include "hub_standin.h"
#include "test_util.h"
#include "xet/file_hasher.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::CliResult;
using test::HubStandin;
using test::PublishOptions;
using test::TempDir;

class XetSourceDedupe : public ::testing::Test {
 protected:
  // One 96 MiB synthetic model (random weights), stored Xet-backed as org/Src-GGUF.
  static void SetUpTestSuite() {
    hub_ = new HubStandin();
    hub_->configure({{"token", "hf_test"}, {"url_ttl_secs", 3600}});
    src_ = new TempDir();
    const auto made = test::run_program(SKIPPY_MAKE_MODEL_PATH,
                                        {"--size", "96MiB", "--layers", "6", (src_->path() / "Src-Q8_0.gguf").string()});
    ASSERT_EQ(made.exit_code, 0) << made.err;
    PublishOptions opts;
    opts.xet = true;
    hub_->publish("org/Src-GGUF", src_->path(), opts);
  }
  static void TearDownTestSuite() {
    delete hub_;
    delete src_;
  }
  void SetUp() override {
    hub_->clear_faults();
    hub_->configure({{"xet_global_dedupe", false}});  // only way (c) can find the source's chunks
    hub_->clear_xet_stats();
  }
  void TearDown() override { hub_->configure({{"xet_global_dedupe", true}}); }

  std::vector<std::string> env() const {
    return {"HF_ENDPOINT=" + hub_->endpoint(), "HF_HUB_CACHE=" + (tmp_.path() / "hf").string(),
            "HF_HOME=" + (tmp_.path() / "hfhome").string(), "SKIPPY_CACHE_DIR=" + (tmp_.path() / "skippy").string(),
            "SKIPPY_HF_BACKOFF_MS=20", "HF_TOKEN=hf_test", "SOURCE_DATE_EPOCH=1700000000"};
  }
  fs::path out(const std::string& name) const { return tmp_.path() / ("out-" + name); }
  CliResult push(const std::string& name, const std::vector<std::string>& extra = {}) const {
    std::vector<std::string> args = {"write-package", "org/Src-GGUF:Q8_0", "--out-dir", out(name).string(),
                                     "--push", "hf://ns/" + name, "--create", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    return test::run_cli(args, env());
  }

  // The package as the Hub serves it (fetched through Xet into a cache of its
  // own) is the package written locally, byte for byte.
  void expect_fetch_equals_local(const std::string& name) const {
    auto e = env();
    e[1] = "HF_HUB_CACHE=" + (tmp_.path() / ("fetched-" + name)).string();
    const auto r = test::run_cli({"fetch", "hf://ns/" + name, "--json"}, e);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const fs::path repo = tmp_.path() / ("fetched-" + name) / ("models--ns--" + name) / "snapshots";
    ASSERT_TRUE(fs::is_directory(repo)) << repo;
    const fs::path snap = fs::directory_iterator(repo)->path();
    const auto local = test::package_files(out(name));
    const auto fetched = test::package_files(snap);
    size_t ggufs = 0;
    for (const auto& [rel, bytes] : local) {
      if (!rel.ends_with(".gguf")) continue;  // every part of the package; README.md is not one
      ++ggufs;
      ASSERT_TRUE(fetched.count(rel)) << rel << " was not fetched";
      EXPECT_TRUE(fetched.at(rel) == bytes) << rel << " differs from the local write";
    }
    EXPECT_GE(ggufs, 8u);
  }

  static HubStandin* hub_;
  static TempDir* src_;
  TempDir tmp_;
};
HubStandin* XetSourceDedupe::hub_ = nullptr;
TempDir* XetSourceDedupe::src_ = nullptr;

void expect_source_dedupe(const CliResult& r, const test::XetStats& st, const std::string& label) {
  ASSERT_EQ(r.exit_code, 0) << label << ": " << r.err;
  const json pub = json::parse(r.out)["publish"];
  const json& x = pub["xet"];
  ASSERT_TRUE(x["used"].get<bool>()) << label << ": " << x.dump();
  const uint64_t bytes = pub["bytes"].get<uint64_t>();
  const uint64_t sent = st.xorb_upload_bytes + st.shard_upload_bytes;
  std::cout << label << ": package " << bytes << " B in " << pub["files"] << " files; chunked " << x["bytes_chunked"]
            << ", deduped against the source " << x["deduped_source"] << ", on the Hub " << x["deduped_global"]
            << ", in the run " << x["deduped_in_run"] << ", new " << x["new_bytes"] << ", read back " << x["bytes_read"]
            << "; " << x["dedupe_queries"]
            << " global queries; CAS received " << st.xorb_upload_bytes << " B of xorbs, " << st.shard_upload_bytes
            << " B of shards (" << 100.0 * static_cast<double>(sent) / static_cast<double>(bytes) << "%)\n";
  EXPECT_EQ(st.lfs_upload_bytes, 0u) << label;
  EXPECT_LE(sent, bytes / 50) << label << ": more than 2% of the package went up: " << x.dump();
  EXPECT_EQ(x["deduped_global"].get<uint64_t>(), 0u) << label << ": the global index was told to answer nothing";
  EXPECT_GE(x["deduped_source"].get<uint64_t>(), bytes * 9 / 10) << label << ": " << r.err;
  EXPECT_EQ(x["bytes_chunked"].get<uint64_t>(), x["deduped_global"].get<uint64_t>() + x["deduped_in_run"].get<uint64_t>() +
                                                    x["deduped_source"].get<uint64_t>() + x["new_bytes"].get<uint64_t>());
  // Each fragment's chunks were cut in the write pass: the upload read back
  // only new chunks (lone ones alone, runs in reads that double), not the package.
  const uint64_t read = x["bytes_read"].get<uint64_t>();
  EXPECT_LE(read, 4 * x["new_bytes"].get<uint64_t>() + (uint64_t{128} << 10) * x["files"].size()) << label;
  EXPECT_LT(read, bytes / 20) << label << ": " << x.dump();
  uint64_t per_file = 0;
  for (const auto& f : x["files"]) per_file += f["deduped_source"].get<uint64_t>();
  EXPECT_EQ(per_file, x["deduped_source"].get<uint64_t>()) << label;
  // The global index is asked only where the source did not cover a chunk:
  // each file's own first chunk, a few more, and the hints.
  EXPECT_LE(x["dedupe_queries"].get<uint64_t>(), 3 * x["files"].size() + 2) << label;
  EXPECT_FALSE(x["note"].is_string()) << label << ": " << x["note"];
  ASSERT_FALSE(st.shards.empty()) << label;
  for (const auto& s : st.shards) EXPECT_EQ(s.status, "registered") << label << ": " << s.error;
}

TEST_F(XetSourceDedupe, SchemaOneReferencesTheSourcesChunksWithoutTheGlobalIndex) {
  const auto r = push("src1");
  expect_source_dedupe(r, hub_->xet_stats(), "schema 1, way (c)");
  expect_fetch_equals_local("src1");
}

TEST_F(XetSourceDedupe, SchemaTwoReferencesTheSourcesChunksWithoutTheGlobalIndex) {
  const auto r = push("src2", {"--schema", "2"});
  expect_source_dedupe(r, hub_->xet_stats(), "schema 2, way (c)");
  expect_fetch_equals_local("src2");
}

TEST_F(XetSourceDedupe, AStreamedSourceIsChunkedAsItArrives) {
  const auto r = push("src3", {"--stream"});
  expect_source_dedupe(r, hub_->xet_stats(), "--stream, way (c)");
  expect_fetch_equals_local("src3");
}

TEST_F(XetSourceDedupe, TheHumanSummarySaysWhatTheSourceDeduped) {
  const auto r = test::run_cli({"write-package", "org/Src-GGUF:Q8_0", "--out-dir", out("human").string(), "--push",
                                "hf://ns/human", "--create"},
                               env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The total line ("xet: ... chunked, ..., N MiB deduped against the source, ...") with N of the package's size.
  const size_t total = r.err.find("\nxet: ");
  ASSERT_NE(total, std::string::npos) << r.err;
  const std::string line = r.err.substr(total + 1, r.err.find('\n', total + 1) - total - 1);
  const size_t at = line.find(" deduped against the source");
  ASSERT_NE(at, std::string::npos) << line;
  EXPECT_NE(line.substr(0, at).rfind("MiB"), std::string::npos) << line;
  EXPECT_GE(std::stod(line.substr(line.rfind(", ", at) + 2)), 80.0) << line;
}

// ------------------------------------------------------------ the index alone

struct Source {
  std::vector<uint8_t> bytes;
  std::vector<xet::ChunkInfo> chunks;
};
Source random_source(size_t n, uint32_t seed) {
  Source s;
  s.bytes.resize(n);
  std::mt19937_64 rng(seed);
  for (auto& b : s.bytes) b = static_cast<uint8_t>(rng());
  s.chunks = xet::hash_bytes(s.bytes, false).chunks;
  return s;
}
// Terms of `per` chunks each, in xorbs named by their first chunk's hash.
std::vector<detail::XetTerm> terms_of(const Source& s, size_t per) {
  std::vector<detail::XetTerm> out;
  for (size_t i = 0; i < s.chunks.size(); i += per) {
    detail::XetTerm t;
    t.xorb = s.chunks[i].hash.to_hex();
    t.chunk_start = 3;  // later chunks of their xorbs
    for (size_t k = i; k < std::min(s.chunks.size(), i + per); ++k) t.unpacked += s.chunks[k].length;
    t.chunk_end = static_cast<uint32_t>(t.chunk_start + std::min(per, s.chunks.size() - i));
    out.push_back(t);
  }
  return out;
}
void feed(detail::XetSourceIndex& idx, const Source& s, size_t piece) {
  for (size_t at = 0; at < s.bytes.size(); at += piece) {
    idx.observe(0, at, std::span<const uint8_t>(s.bytes).subspan(at, std::min(piece, s.bytes.size() - at)));
  }
}

TEST(XetSourceIndex, LocatesEachChunkByItsPlaceInTheTerms) {
  const Source s = random_source(3 << 20, 7);
  ASSERT_GT(s.chunks.size(), 20u);
  detail::XetSourceIndex idx({{"model.gguf", s.bytes.size(), std::nullopt}}, {terms_of(s, 8)}, "test");
  feed(idx, s, 100'000);
  EXPECT_TRUE(idx.complete());
  for (size_t k = 0; k < s.chunks.size(); ++k) {
    detail::XetSourceIndex::Hit h;
    ASSERT_TRUE(idx.find(s.chunks[k].hash, h)) << k;
    EXPECT_EQ(h.xorb, s.chunks[k - k % 8].hash) << k;
    EXPECT_EQ(h.index, 3 + k % 8) << k;
    EXPECT_EQ(h.term, k / 8) << k;
    EXPECT_TRUE(idx.verified(h.file, h.term));
  }
  EXPECT_TRUE(idx.notes().empty());
}

TEST(XetSourceIndex, AChunkIsFoundBeforeItsTermIsVerified) {
  const Source s = random_source(2 << 20, 8);
  detail::XetSourceIndex idx({{"model.gguf", s.bytes.size(), std::nullopt}}, {terms_of(s, 1000)}, "test");
  idx.observe(0, 0, std::span<const uint8_t>(s.bytes).first(1 << 20));
  detail::XetSourceIndex::Hit h;
  ASSERT_TRUE(idx.find(s.chunks[0].hash, h));
  EXPECT_FALSE(idx.verified(h.file, h.term)) << "the term is not read to its end yet";
  EXPECT_FALSE(idx.complete());
  idx.observe(0, 1 << 20, std::span<const uint8_t>(s.bytes).subspan(1 << 20));
  EXPECT_TRUE(idx.verified(h.file, h.term));
}

TEST(XetSourceIndex, ARetiredIndexStopsChunkingAndFindsNothing) {
  const Source s = random_source(2 << 20, 10);
  detail::XetSourceIndex idx({{"model.gguf", s.bytes.size(), std::nullopt}}, {terms_of(s, 8)}, "test");
  EXPECT_EQ(idx.xorbs().size(), (s.chunks.size() + 7) / 8);
  idx.observe(0, 0, std::span<const uint8_t>(s.bytes).first(1 << 20));
  detail::XetSourceIndex::Hit h;
  ASSERT_TRUE(idx.find(s.chunks[0].hash, h));
  idx.retire();  // a global answer listed every source xorb
  EXPECT_FALSE(idx.find(s.chunks[0].hash, h));
  idx.observe(0, 1 << 20, std::span<const uint8_t>(s.bytes).subspan(1 << 20));
  EXPECT_FALSE(idx.find(s.chunks.back().hash, h));
  EXPECT_TRUE(idx.notes().empty()) << "retiring is not a failure";
}

TEST(XetSourceIndex, TermsThatDisagreeWithTheChunksDropTheFile) {
  const Source s = random_source(3 << 20, 9);
  // A term one byte longer than its chunks, one chunk short, and terms that
  // stop before the file does: each drops the file, and nothing it had is found.
  auto longer = terms_of(s, 8);
  longer[1].unpacked += 1;
  auto fewer = terms_of(s, 8);
  fewer[1].chunk_end -= 1;
  auto shorter = terms_of(s, 8);
  shorter.pop_back();
  for (const auto& [label, terms] : {std::pair{"longer", longer}, std::pair{"fewer", fewer}, std::pair{"shorter", shorter}}) {
    detail::XetSourceIndex idx({{"model.gguf", s.bytes.size(), std::nullopt}}, {terms}, "test");
    feed(idx, s, 65'536);
    detail::XetSourceIndex::Hit h;
    EXPECT_FALSE(idx.find(s.chunks[0].hash, h)) << label;
    EXPECT_FALSE(idx.verified(0, 0)) << label;
    EXPECT_FALSE(idx.refusal(0).empty()) << label;
    ASSERT_EQ(idx.notes().size(), 1u) << label;
    EXPECT_NE(idx.notes()[0].find("not deduplicated against the source"), std::string::npos) << idx.notes()[0];
    EXPECT_TRUE(idx.complete()) << label;
  }
  // Bytes out of order are never walked.
  detail::XetSourceIndex idx({{"model.gguf", s.bytes.size(), std::nullopt}}, {terms_of(s, 8)}, "test");
  idx.observe(0, 4096, std::span<const uint8_t>(s.bytes).subspan(4096, 4096));
  EXPECT_FALSE(idx.refusal(0).empty());
}

}  // namespace
}  // namespace skippy
