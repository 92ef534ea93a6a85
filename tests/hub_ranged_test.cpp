// Downloads at the speed of the pipe: large files as byte ranges
// over several pooled connections, against the local Hub stand-in with its
// storage capped per connection; exact resume from the range record; a
// signed URL that expires mid-file; a server that ignores Range; wrong bytes
// in one range; eight processes fetching one big file into one cache.
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "hub_standin.h"
#include "util/file.h"
#include "skippy/hub.h"
#include "util/sha256.h"
#include "skippy/source.h"
#include "source/blob_writer.h"
#include "test_util.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::HubRequest;
using test::HubStandin;
using test::TempDir;

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kBigSize = 32 * kMiB;  // 8 ranges of 4 MiB over 8 connections

// Deterministic, incompressible bytes, written in 1 MiB pieces (never the
// whole file in memory).
void write_pattern(const fs::path& p, uint64_t size, uint32_t seed) {
  fs::create_directories(p.parent_path());
  Fd fd(::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  ASSERT_TRUE(fd);
  std::vector<uint8_t> buf(kMiB);
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (uint64_t off = 0; off < size; off += buf.size()) {
    for (size_t i = 0; i < buf.size(); i += 8) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      std::memcpy(buf.data() + i, &x, 8);
    }
    const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), size - off));
    ASSERT_EQ(::write(fd.get(), buf.data(), n), static_cast<ssize_t>(n));
  }
}

struct Published {
  std::string path, sha256, oid;
  uint64_t size = 0;
  bool lfs = false;
  std::string blob() const { return lfs ? sha256 : oid; }  // the blob's name in the cache
};

class HubRanged : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    hub_ = new HubStandin();
    dir_ = new TempDir();
    files_ = new std::vector<Published>();
    write_pattern(dir_->path() / "repo" / "big.bin", kBigSize, 1);
    // Small files, both sides of the stand-in's 1 MiB LFS threshold.
    for (int i = 0; i < 24; ++i) {
      const uint64_t size = (i % 3 == 2) ? kMiB + 4096 * i : 16384 + 8192 * static_cast<uint64_t>(i);
      char name[32];
      std::snprintf(name, sizeof name, "small/f-%02d.bin", i);
      write_pattern(dir_->path() / "repo" / name, size, 100 + i);
    }
    const auto pub = hub_->publish_json("org/big", dir_->path() / "repo");
    commit_ = new std::string(pub["commit"].get<std::string>());
    for (const auto& f : pub["files"]) files_->push_back({f["path"], f["sha256"], f["oid"], f["size"], f["lfs"]});
  }
  static void TearDownTestSuite() {
    delete hub_;
    delete dir_;
    delete commit_;
    delete files_;
  }
  void SetUp() override {
    hub_->clear_faults();
    hub_->configure({{"url_ttl_secs", 3600},
                     {"storage_conn_bytes_per_sec", 0},
                     {"url_max_uses", 0},
                     {"storage_ignore_range", false}});
    hub_->clear_log();
  }

  static const Published& file(const std::string& path) {
    for (const auto& f : *files_) {
      if (f.path == path) return f;
    }
    throw std::runtime_error("no published file " + path);
  }
  static RemoteFile want(const std::string& path) {
    const auto& f = file(path);
    return {f.path, f.sha256, f.size, "the manifest"};
  }
  HubConfig config(unsigned connections = 8, unsigned attempts = 5) const {
    HubConfig c;
    c.endpoint = hub_->endpoint();
    c.backoff_ms = 20;
    c.max_attempts = attempts;
    c.connections = connections;
    return c;
  }
  HfRepoCache cache() const { return HfRepoCache(tmp_ / "hf", "org/big"); }
  std::vector<RemoteOutcome> fetch(const std::vector<RemoteFile>& want, const HubConfig& c,
                                   std::vector<std::string>* notes = nullptr) const {
    auto remote = make_hub_remote(c);
    auto out = remote->fetch(cache(), *commit_, want, {});
    if (notes) *notes = remote->take_notes();
    return out;
  }
  // Storage GETs of the blob `sha`, in the order the stand-in logged them.
  static std::vector<HubRequest> storage_gets(const std::vector<HubRequest>& log, const std::string& sha) {
    std::vector<HubRequest> out;
    for (const auto& q : log) {
      if (q.listener == "storage" && q.method == "GET" && q.path.ends_with(sha)) out.push_back(q);
    }
    return out;
  }
  static uint64_t bytes_served(const std::vector<HubRequest>& gets) {
    uint64_t n = 0;
    for (const auto& q : gets) n += q.bytes_sent;
    return n;
  }
  // "bytes=A-B" -> [A, B + 1).
  static std::pair<uint64_t, uint64_t> range_of(const HubRequest& q) {
    EXPECT_TRUE(q.range) << q.path;
    if (!q.range) return {0, 0};
    const auto& r = *q.range;
    const auto dash = r.find('-');
    return {std::stoull(r.substr(6, dash - 6)), std::stoull(r.substr(dash + 1)) + 1};
  }
  void expect_installed(const Published& f) const {
    const auto c = cache();
    ASSERT_TRUE(fs::is_regular_file(c.blob_path(f.blob()))) << f.path;
    EXPECT_EQ(sha256_file(c.blob_path(f.blob())), f.sha256);
    EXPECT_FALSE(fs::exists(c.incomplete_path(f.blob())));
    EXPECT_FALSE(fs::exists(detail::range_record_path(c, f.blob())));
    EXPECT_TRUE(fs::is_regular_file(c.snapshot_dir(*commit_) / f.path));
  }

  static HubStandin* hub_;
  static TempDir* dir_;
  static std::string* commit_;
  static std::vector<Published>* files_;
  TempDir tmp_;
};
HubStandin* HubRanged::hub_ = nullptr;
TempDir* HubRanged::dir_ = nullptr;
std::string* HubRanged::commit_ = nullptr;
std::vector<Published>* HubRanged::files_ = nullptr;

TEST_F(HubRanged, ALargeFileComesAtSeveralTimesOneCappedConnection) {
  // One connection gets 4 MiB/s: 8 s for the file. Eight at once: about 1 s.
  const uint64_t cap = 4 * kMiB;
  hub_->configure({{"storage_conn_bytes_per_sec", cap}});
  const auto& big = file("big.bin");
  const auto t0 = std::chrono::steady_clock::now();
  const auto out = fetch({want("big.bin")}, config(8));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(out[0].delivered) << (out[0].error ? out[0].error->what() : "");
  EXPECT_TRUE(out[0].verified);
  const double one_connection = static_cast<double>(kBigSize) / static_cast<double>(cap);
  EXPECT_LT(secs, one_connection / 3) << "at least 3x one capped connection (ideal 8x): " << secs << " s vs "
                                      << one_connection << " s";
  expect_installed(big);
  // Every byte once, in ranges that tile the file.
  const auto gets = storage_gets(hub_->log(), big.sha256);
  EXPECT_GE(gets.size(), 8u);
  EXPECT_EQ(bytes_served(gets), kBigSize);
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& q : gets) {
    EXPECT_EQ(q.status, 206);
    ranges.push_back(range_of(q));
  }
  std::sort(ranges.begin(), ranges.end());
  uint64_t at = 0;
  for (const auto& [a, b] : ranges) {
    EXPECT_EQ(a, at);
    at = b;
  }
  EXPECT_EQ(at, kBigSize);
}

TEST_F(HubRanged, ManySmallFilesBesideABigOneAreEachFetchedOnce) {
  std::vector<RemoteFile> all;
  for (const auto& f : *files_) all.push_back(want(f.path));
  const auto out = fetch(all, config(8));
  for (size_t i = 0; i < out.size(); ++i) {
    ASSERT_TRUE(out[i].delivered) << all[i].path << ": " << (out[i].error ? out[i].error->what() : "");
    expect_installed(file(all[i].path));
  }
  const auto log = hub_->log();
  std::map<std::string, int> gets;  // by file path or blob sha
  for (const auto& q : log) {
    if (q.method != "GET" || q.bytes_sent == 0) continue;
    if (q.listener == "storage") ++gets[q.path.substr(q.path.rfind('/') + 1)];
    else if (q.path.find("/resolve/") != std::string::npos) ++gets[q.path.substr(q.path.find("small/"))];
  }
  for (const auto& f : *files_) {
    if (f.path == "big.bin") continue;
    const bool lfs = f.size >= kMiB;
    EXPECT_EQ(gets[lfs ? f.sha256 : f.path], 1) << f.path;
  }
  EXPECT_EQ(bytes_served(storage_gets(log, file("big.bin").sha256)), kBigSize);
}

TEST_F(HubRanged, OneConnectionIsOneStream) {
  const auto& big = file("big.bin");
  const auto out = fetch({want("big.bin")}, config(1));
  ASSERT_TRUE(out[0].delivered) << (out[0].error ? out[0].error->what() : "");
  expect_installed(big);
  const auto gets = storage_gets(hub_->log(), big.sha256);
  ASSERT_EQ(gets.size(), 1u);
  EXPECT_FALSE(gets[0].range);
  EXPECT_EQ(gets[0].status, 200);
}

TEST_F(HubRanged, ACutMidRangeResumesWithoutFetchingARecordedByteAgain) {
  const auto& big = file("big.bin");
  const auto c = cache();
  // Every response stops after 1 MiB; two attempts per range, then the run gives up.
  hub_->fault({{"match", big.sha256}, {"listener", "storage"}, {"kind", "cut"}, {"after_bytes", kMiB}, {"times", -1}});
  const auto cut = fetch({want("big.bin")}, config(8, 2));
  ASSERT_FALSE(cut[0].delivered);
  ASSERT_TRUE(cut[0].error);
  EXPECT_EQ(cut[0].error->kind(), ErrorKind::kTransport);
  EXPECT_NE(std::string(cut[0].error->what()).find("big.bin"), std::string::npos) << cut[0].error->what();
  EXPECT_NE(std::string(cut[0].error->what()).find("the next run resumes"), std::string::npos) << cut[0].error->what();
  EXPECT_FALSE(fs::exists(c.blob_path(big.sha256)));
  const uint64_t served1 = bytes_served(storage_gets(hub_->log(), big.sha256));
  // The record lists what arrived (bytes still in flight when the run gave
  // up were served but never received).
  detail::ByteRanges recorded;
  const auto text = read_small_file(detail::range_record_path(c, big.sha256), detail::kMaxRecordBytes);
  ASSERT_FALSE(detail::parse_range_record(text, big.sha256, big.size, recorded)) << text;
  EXPECT_GE(recorded.total(), kMiB) << "at least one whole cut response";
  EXPECT_LE(recorded.total(), served1);
  EXPECT_LT(served1, kBigSize);
  // Bytes nobody recorded are never trusted: fill the holes with garbage.
  {
    Fd fd(::open(c.incomplete_path(big.sha256).c_str(), O_WRONLY | O_CLOEXEC));
    ASSERT_TRUE(fd);
    const std::vector<uint8_t> junk(8192, 0xEE);
    for (const auto& [a, b] : recorded.missing(big.size)) {
      ASSERT_EQ(::pwrite(fd.get(), junk.data(), std::min<uint64_t>(junk.size(), b - a), static_cast<off_t>(a)),
                static_cast<ssize_t>(std::min<uint64_t>(junk.size(), b - a)));
    }
  }

  hub_->clear_faults();
  hub_->clear_log();
  const auto resumed = fetch({want("big.bin")}, config(8));
  ASSERT_TRUE(resumed[0].delivered) << (resumed[0].error ? resumed[0].error->what() : "");
  expect_installed(big);
  const auto gets = storage_gets(hub_->log(), big.sha256);
  EXPECT_EQ(bytes_served(gets), kBigSize - recorded.total()) << "only what the record lacked";
  for (const auto& q : gets) {
    const auto [a, b] = range_of(q);
    for (const auto& [ra, rb] : recorded.ranges()) {
      EXPECT_TRUE(b <= ra || a >= rb) << "asked again for recorded bytes: " << *q.range;
    }
  }
}

TEST_F(HubRanged, ARangeRecordThatCannotBeReadMeansStartingOverWithANote) {
  const auto& big = file("big.bin");
  const auto c = cache();
  c.create_dirs();
  test::write_file(c.incomplete_path(big.sha256), std::vector<uint8_t>(3 * kMiB, 0x11));
  const std::string damaged = "skippy-range-record 1\netag " + big.sha256 + "\nsize " + std::to_string(big.size) +
                              "\n0 3145728\nsha256 " + std::string(64, '0') + "\n";
  test::write_file(detail::range_record_path(c, big.sha256), std::vector<uint8_t>(damaged.begin(), damaged.end()));
  std::vector<std::string> notes;
  const auto out = fetch({want("big.bin")}, config(8), &notes);
  ASSERT_TRUE(out[0].delivered) << (out[0].error ? out[0].error->what() : "");
  expect_installed(big);
  EXPECT_EQ(bytes_served(storage_gets(hub_->log(), big.sha256)), kBigSize) << "nothing of the old file was trusted";
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("big.bin"), std::string::npos) << notes[0];
  EXPECT_NE(notes[0].find("checksum"), std::string::npos) << notes[0];
  EXPECT_NE(notes[0].find("from the start"), std::string::npos) << notes[0];
}

TEST_F(HubRanged, AServerThatIgnoresRangeGetsOneStream) {
  const auto& big = file("big.bin");
  hub_->configure({{"storage_ignore_range", true}});
  const auto out = fetch({want("big.bin")}, config(8));
  ASSERT_TRUE(out[0].delivered) << (out[0].error ? out[0].error->what() : "");
  expect_installed(big);
  const auto gets = storage_gets(hub_->log(), big.sha256);
  int whole = 0;
  for (const auto& q : gets) {
    EXPECT_EQ(q.status, 200);
    if (!q.range) {
      ++whole;
      EXPECT_EQ(q.bytes_sent, kBigSize);
    }
  }
  EXPECT_EQ(whole, 1) << "one stream without Range after the first 200";
}

TEST_F(HubRanged, AnUrlThatExpiresMidFileIsRefreshedForTheMissingRanges) {
  const auto& big = file("big.bin");
  // Each signed URL answers 3 requests; the file takes 8.
  hub_->configure({{"url_max_uses", 3}});
  const auto out = fetch({want("big.bin")}, config(8));
  ASSERT_TRUE(out[0].delivered) << (out[0].error ? out[0].error->what() : "");
  expect_installed(big);
  const auto log = hub_->log();
  int heads = 0, refused = 0;
  for (const auto& q : log) {
    heads += q.listener == "hub" && q.method == "HEAD" && q.path.ends_with("big.bin");
    refused += q.listener == "storage" && q.status == 403;
  }
  EXPECT_GE(heads, 3) << "the first HEAD, then one per expired URL";
  EXPECT_GE(refused, 1);
  const auto gets = storage_gets(log, big.sha256);
  uint64_t ok_bytes = 0;
  for (const auto& q : gets) ok_bytes += q.status == 206 ? q.bytes_sent : 0;
  EXPECT_EQ(ok_bytes, kBigSize) << "no byte fetched twice";

  // A URL that is expired whenever it is asked: a clear error, no endless refreshing.
  hub_->configure({{"url_max_uses", 0}, {"url_ttl_secs", 0}});
  TempDir other;
  auto remote = make_hub_remote(config(8));
  const auto r = remote->fetch(HfRepoCache(other / "hf", "org/big"), *commit_, {want("big.bin")}, {});
  ASSERT_FALSE(r[0].delivered);
  const std::string msg = r[0].error->what();
  EXPECT_EQ(r[0].error->kind(), ErrorKind::kUnauthorized);
  EXPECT_NE(msg.find("big.bin"), std::string::npos) << msg;
  EXPECT_NE(msg.find("storage host"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expired"), std::string::npos) << msg;
}

TEST_F(HubRanged, WrongBytesInOneRangeAreAClearErrorAndNothingIsNamed) {
  const auto& big = file("big.bin");
  const auto c = cache();
  hub_->fault({{"match", big.sha256}, {"listener", "storage"}, {"kind", "corrupt"}, {"offset", 1000}, {"times", 1}});
  const auto out = fetch({want("big.bin")}, config(8));
  ASSERT_FALSE(out[0].delivered);
  ASSERT_TRUE(out[0].error);
  EXPECT_EQ(out[0].error->kind(), ErrorKind::kIntegrity);
  const std::string msg = out[0].error->what();
  EXPECT_NE(msg.find("big.bin"), std::string::npos) << msg;
  EXPECT_NE(msg.find("the manifest says " + big.sha256), std::string::npos) << msg;
  EXPECT_NE(msg.find("nothing was placed in the cache"), std::string::npos) << msg;
  EXPECT_FALSE(fs::exists(c.blob_path(big.sha256)));
  EXPECT_FALSE(fs::exists(c.incomplete_path(big.sha256)));
  EXPECT_FALSE(fs::exists(detail::range_record_path(c, big.sha256)));
  EXPECT_FALSE(fs::exists(fs::symlink_status(c.snapshot_dir(*commit_) / "big.bin")));
}

TEST_F(HubRanged, EightProcessesFetchingOneBigFileShareOneDownload) {
  // A layer package whose layer 0 is a big file (its bytes are opaque to
  // fetch: it checks them against the manifest's size and SHA-256).
  TempDir pkg_dir;
  const fs::path pkg = pkg_dir / "pkg";
  const auto w = test::write_pkg(test::data_path("llama-tiny-q8_0.gguf"), pkg);
  ASSERT_EQ(w.exit_code, 0) << w.err;
  std::filesystem::remove(pkg / "layers" / "layer-00000.gguf");
  ASSERT_NO_FATAL_FAILURE(write_pattern(pkg / "layers" / "layer-00000.gguf", kBigSize, 7));
  const std::string layer_sha = sha256_file(pkg / "layers" / "layer-00000.gguf");
  auto manifest = json::parse(test::read_text(pkg / "model-package.json"));
  for (auto& l : manifest["layers"]) {
    if (l["path"] == "layers/layer-00000.gguf") {
      l["sha256"] = layer_sha;
      l["artifact_bytes"] = kBigSize;
    }
  }
  const std::string text = manifest.dump(2) + "\n";
  test::write_file(pkg / "model-package.json", std::vector<uint8_t>(text.begin(), text.end()));
  const std::string commit = hub_->publish("org/big-layers", pkg);
  hub_->clear_log();
  // Capped so the eight overlap: one process alone needs about half a second.
  hub_->configure({{"storage_conn_bytes_per_sec", 8 * kMiB}});

  const std::vector<std::string> env = {"HF_ENDPOINT=" + hub_->endpoint(), "HF_HUB_CACHE=" + (tmp_ / "hf").string(),
                                        "HF_HOME=" + (tmp_ / "hfhome").string(),
                                        "SKIPPY_CACHE_DIR=" + (tmp_ / "skippy").string(), "SKIPPY_HF_BACKOFF_MS=20",
                                        "HF_TOKEN=", "HF_HUB_OFFLINE="};
  std::vector<std::future<test::CliResult>> runs;
  for (int i = 0; i < 8; ++i) {
    runs.push_back(std::async(std::launch::async, [&] {
      return test::run_cli({"fetch", "hf://org/big-layers@" + commit, "--layers", "0..1", "--connections", "8", "--json"},
                           env);
    }));
  }
  int downloaded_by = 0;
  for (auto& r : runs) {
    const auto res = r.get();
    ASSERT_EQ(res.exit_code, 0) << res.err;
    const auto j = json::parse(res.out);
    EXPECT_EQ(j["verified"], true);
    for (const auto& d : j["downloaded"]) downloaded_by += d == "layers/layer-00000.gguf";
  }
  EXPECT_EQ(downloaded_by, 1) << "one process downloaded it; the others waited on its blob lock";
  const auto gets = storage_gets(hub_->log(), layer_sha);
  EXPECT_GE(gets.size(), 2u) << "in ranges";
  EXPECT_EQ(bytes_served(gets), kBigSize) << "each range of the blob fetched once";
  std::set<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& q : gets) EXPECT_TRUE(ranges.insert(range_of(q)).second) << *q.range;
  const HfRepoCache c(tmp_ / "hf", "org/big-layers");
  EXPECT_EQ(sha256_file(c.blob_path(layer_sha)), layer_sha);
  EXPECT_FALSE(fs::exists(c.incomplete_path(layer_sha)));
  EXPECT_FALSE(fs::exists(detail::range_record_path(c, layer_sha)));
}

// ------------------------------------------------------------ range records

TEST(RangeRecord, RoundTripsAndRefusesAnythingDamaged) {
  const std::string etag(64, 'a');
  detail::ByteRanges done;
  done.add(0, 100);
  done.add(300, 400);
  done.add(100, 150);  // merges with the first
  ASSERT_EQ(done.ranges().size(), 2u);
  EXPECT_EQ(done.prefix(), 150u);
  EXPECT_EQ(done.total(), 250u);
  EXPECT_EQ(done.missing(500), (std::vector<detail::ByteRanges::Range>{{150, 300}, {400, 500}}));
  const std::string text = detail::format_range_record(etag, 500, done);
  detail::ByteRanges back;
  ASSERT_FALSE(detail::parse_range_record(text, etag, 500, back));
  EXPECT_EQ(back.ranges(), done.ranges());

  // Rewrites the body and recomputes the checksum, so only the content is wrong.
  auto signed_body = [](const std::string& body) { return body + "sha256 " + sha256_hex(body) + "\n"; };
  const std::string head = "skippy-range-record 1\netag " + etag + "\nsize 500\n";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"", "truncated"},
      {text.substr(0, text.size() - 10), "truncated"},
      {text.substr(0, text.size() - 1) + "0\n", "no checksum"},
      {std::string(text).replace(head.size(), 1, "1"), "checksum"},
      {signed_body(head + "0 600\n"), "outside the file"},
      {signed_body(head + "10 10\n"), "outside the file"},
      {signed_body(head + "0 100\n50 200\n"), "overlapping"},
      {signed_body(head + "200 300\n0 100\n"), "out of order"},
      {signed_body(head + "0 99999999999999999999999\n"), "unreadable"},
      {signed_body(head + "-1 5\n"), "unreadable"},
      {signed_body(head + "1 2 3\n"), "unreadable"},
      {signed_body("skippy-range-record 1\netag " + std::string(64, 'b') + "\nsize 500\n"), "another blob"},
      {signed_body("skippy-range-record 1\netag " + etag + "\nsize 501\n"), "501 bytes"},
      {signed_body("skippy-range-record 2\netag " + etag + "\nsize 500\n"), "version"},
  };
  for (const auto& [t, why] : bad) {
    const auto problem = detail::parse_range_record(t, etag, 500, back);
    ASSERT_TRUE(problem) << t;
    EXPECT_NE(problem->find(why), std::string::npos) << *problem << " for\n" << t;
  }
  std::string many = "skippy-range-record 1\netag " + etag + "\nsize 1073741824\n";
  for (uint64_t i = 0; i <= detail::kMaxRecordRanges; ++i) many += std::to_string(2 * i) + " " + std::to_string(2 * i + 1) + "\n";
  const auto too_many = detail::parse_range_record(signed_body(many), etag, uint64_t{1} << 30, back);
  ASSERT_TRUE(too_many);
  EXPECT_NE(too_many->find("more than"), std::string::npos) << *too_many;
}

}  // namespace
}  // namespace skippy
