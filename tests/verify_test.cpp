// verify: SHA-256 of a stage's parts, and the verification cache, through
// the real CLI and the library, on a package written from the bundled model.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "format/verification_cache.h"
#include "util/env.h"
#include "skippy/error.h"
#include "util/sha256.h"
#include "skippy/stage.h"
#include "skippy/verify.h"
#include "test_util.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::data_path;
using test::run_cli;

using test::ScopedEnv;

using test::write_pkg;

struct Timespecs {
  struct timespec atime, mtime;
};
Timespecs times_of(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
  return {st.st_atim, st.st_mtim};
}
void set_times(const fs::path& p, const Timespecs& t) {
  const struct timespec ts[2] = {t.atime, t.mtime};
  ASSERT_EQ(::utimensat(AT_FDCWD, p.c_str(), ts, 0), 0) << p;
}
uint64_t inode_of(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
  return static_cast<uint64_t>(st.st_ino);
}

// A package from llama-tiny-q8_0 (8 layers) and a cache directory, both in a
// scratch directory; SKIPPY_CACHE_DIR points at the cache for the CLI
// (inherited) and the library.
class VerifyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto w = write_pkg(data_path("llama-tiny-q8_0.gguf"), pkg_dir_, extra_write_args());
    ASSERT_EQ(w.exit_code, 0) << w.err;
    // Files changed in the last moments are not recorded (racy-clean rule).
    std::this_thread::sleep_for(std::chrono::milliseconds(120));
    pkg_ = open_local_package(pkg_dir_.string());
    for (const auto& p : test::all_parts_v1(pkg_)) {
      total_bytes_ += p.bytes;
      sizes_[p.rel_path] = p.bytes;
    }
    artifacts_ = test::all_parts_v1(pkg_).size();
  }
  virtual std::vector<std::string> extra_write_args() { return {}; }

  json verify(std::vector<std::string> extra = {}, int expect_exit = 0) {
    std::vector<std::string> args = {"verify", pkg_dir_.string(), "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    const auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, expect_exit) << r.out << r.err;
    last_err_ = r.err;
    return json::parse(r.out);
  }
  static std::vector<std::string> rehashed(const json& j) {
    std::vector<std::string> out;
    for (const auto& p : j["parts"]) {
      if (!p["cache_hit"].get<bool>()) out.push_back(p["relative_path"].get<std::string>());
    }
    return out;
  }
  fs::path layer(uint32_t l) const { return pkg_dir_ / test::manifest(pkg_).layers.at(l).path; }
  std::string layer_rel(uint32_t l) const { return test::manifest(pkg_).layers.at(l).path; }

  test::TempDir tmp_;
  fs::path pkg_dir_ = tmp_ / "pkg";
  fs::path cache_root_ = tmp_ / "cache";
  ScopedEnv cache_env_{"SKIPPY_CACHE_DIR", cache_root_.string()};
  OpenedPackage pkg_;
  uint64_t total_bytes_ = 0;
  size_t artifacts_ = 0;
  std::map<std::string, uint64_t> sizes_;
  std::string last_err_;
};

TEST_F(VerifyTest, FirstVerifyHashesEveryArtifactSecondHashesNothing) {
  const auto a = verify();
  EXPECT_TRUE(a["verified"].get<bool>());
  EXPECT_EQ(a["artifacts"], artifacts_);
  EXPECT_EQ(a["artifacts"], test::manifest(pkg_).layers.size() + 3);
  EXPECT_EQ(a["hashed_bytes"], total_bytes_);
  EXPECT_EQ(a["cache_hits"], 0);
  EXPECT_TRUE(a["problems"].empty());

  const auto b = verify();
  EXPECT_TRUE(b["verified"].get<bool>());
  EXPECT_EQ(b["artifacts"], artifacts_);
  EXPECT_EQ(b["cache_hits"], artifacts_);
  EXPECT_EQ(b["hashed_bytes"], 0);
  EXPECT_TRUE(rehashed(b).empty());
  // The records sit in $SKIPPY_CACHE_DIR/verified, one per artifact.
  size_t records = 0;
  for (const auto& e : fs::directory_iterator(cache_root_ / "verified")) records += e.is_regular_file();
  EXPECT_EQ(records, artifacts_);
}

TEST_F(VerifyTest, HumanOutputNamesCountsAndExitsZero) {
  const auto r = run_cli({"verify", pkg_dir_.string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("verified: " + std::to_string(artifacts_) + " artifacts"), std::string::npos) << r.out;
}

TEST_F(VerifyTest, ChangedMtimeRehashesOnlyThatFile) {
  verify();
  auto t = times_of(layer(3));
  t.mtime.tv_sec -= 100;  // an older mtime: content untouched
  set_times(layer(3), t);
  const auto j = verify();
  EXPECT_TRUE(j["verified"].get<bool>());
  EXPECT_EQ(rehashed(j), std::vector<std::string>{layer_rel(3)});
  EXPECT_EQ(j["hashed_bytes"], sizes_[layer_rel(3)]);
  EXPECT_EQ(j["cache_hits"], artifacts_ - 1);
}

TEST_F(VerifyTest, InPlaceCorruptionWithRestoredMtimeStillMissesOnCtime) {
  verify();
  const auto before = times_of(layer(2));
  const auto ino = inode_of(layer(2));
  {
    const int fd = ::open(layer(2).c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    uint8_t b = 0;
    const off_t at = static_cast<off_t>(sizes_[layer_rel(2)] - 1);
    ASSERT_EQ(::pread(fd, &b, 1, at), 1);
    b = static_cast<uint8_t>(b ^ 0x5a);
    ASSERT_EQ(::pwrite(fd, &b, 1, at), 1);
    ::close(fd);
  }
  set_times(layer(2), before);  // same size, same inode, same mtime: only ctime tells
  ASSERT_EQ(inode_of(layer(2)), ino);
  ASSERT_EQ(fs::file_size(layer(2)), sizes_[layer_rel(2)]);
  const auto j = verify({}, 1);
  EXPECT_FALSE(j["verified"].get<bool>());
  EXPECT_EQ(rehashed(j), std::vector<std::string>{layer_rel(2)});
  EXPECT_EQ(j["hashed_bytes"], sizes_[layer_rel(2)]);
  ASSERT_EQ(j["problems"].size(), 1u);
  const auto problem = j["problems"][0].get<std::string>();
  EXPECT_EQ(problem.rfind(layer_rel(2) + ": SHA-256 is ", 0), 0u) << problem;
  EXPECT_NE(problem.find("manifest says " + test::manifest(pkg_).layers[2].sha256), std::string::npos) << problem;
  EXPECT_NE(last_err_.find(layer_rel(2) + ": SHA-256 is "), std::string::npos) << last_err_;
  // A failed hash leaves no record: it fails again.
  EXPECT_FALSE(verify({}, 1)["verified"].get<bool>());
}

TEST_F(VerifyTest, FileReplacedByACopyMissesOnInode) {
  verify();
  const auto t = times_of(layer(5));
  const auto old_ino = inode_of(layer(5));
  fs::copy_file(layer(5), tmp_ / "copy.gguf");
  fs::rename(tmp_ / "copy.gguf", layer(5));
  set_times(layer(5), t);
  ASSERT_NE(inode_of(layer(5)), old_ino);
  const auto j = verify();
  EXPECT_TRUE(j["verified"].get<bool>());
  EXPECT_EQ(rehashed(j), std::vector<std::string>{layer_rel(5)});
  EXPECT_EQ(j["hashed_bytes"], sizes_[layer_rel(5)]);
}

TEST_F(VerifyTest, LayerRangeVerifiesMetadataAndThoseLayersOnly) {
  const auto j = verify({"--layers", "2..4"});
  EXPECT_TRUE(j["verified"].get<bool>());
  EXPECT_EQ(j["artifacts"], 3);
  EXPECT_EQ(j["layer_start"], 2);
  EXPECT_EQ(j["layer_end"], 4);
  std::vector<std::string> paths;
  for (const auto& p : j["parts"]) paths.push_back(p["relative_path"]);
  EXPECT_EQ(paths, (std::vector<std::string>{test::manifest(pkg_).shared.metadata.path, layer_rel(2), layer_rel(3)}));
  EXPECT_EQ(j["parts"][0]["role"], "metadata");
  EXPECT_TRUE(j["parts"][0]["layer_index"].is_null());
  EXPECT_EQ(j["parts"][2]["role"], "layer");
  EXPECT_EQ(j["parts"][2]["layer_index"], 3);
  EXPECT_EQ(j["hashed_bytes"], sizes_[test::manifest(pkg_).shared.metadata.path] + sizes_[layer_rel(2)] + sizes_[layer_rel(3)]);
  // Those three are now cached; the full verify hashes only the rest.
  const auto all = verify();
  EXPECT_EQ(all["cache_hits"], 3);
  EXPECT_EQ(all["hashed_bytes"], total_bytes_ - j["hashed_bytes"].get<uint64_t>());
}

TEST_F(VerifyTest, BadLayerRangeIsAUsageOrInputError) {
  EXPECT_EQ(run_cli({"verify", pkg_dir_.string(), "--layers", "4..2"}).exit_code, 2);
  EXPECT_EQ(run_cli({"verify", pkg_dir_.string(), "--layers", "0..99"}).exit_code, 1);
  EXPECT_EQ(run_cli({"verify", (tmp_ / "nope").string()}).exit_code, 1);
}

TEST_F(VerifyTest, CacheRecordsHoldNoPaths) {
  verify();
  verify({"--layers", "0..8"});
  size_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(cache_root_)) {
    if (!e.is_regular_file()) continue;
    ++n;
    const auto name = e.path().filename().string();
    EXPECT_TRUE(is_sha256_hex(name)) << name;
    const auto text = test::read_text(e.path());
    for (const std::string& needle : {pkg_dir_.filename().string(), pkg_dir_.string(), tmp_.path().string(),
                                     std::string("layers/"), std::string("shared/"), std::string(".gguf")}) {
      EXPECT_EQ(text.find(needle), std::string::npos) << name << " holds \"" << needle << "\": " << text;
    }
    const auto rec = json::parse(text);
    EXPECT_TRUE(is_sha256_hex(rec["sha256"].get<std::string>()));
    EXPECT_TRUE(rec["size"].is_number_unsigned());
  }
  EXPECT_EQ(n, artifacts_);
}

TEST_F(VerifyTest, NoCacheHashesEverythingAndWritesNothing) {
  verify();
  const auto j = verify({"--no-cache"});
  EXPECT_TRUE(j["verified"].get<bool>());
  EXPECT_EQ(j["cache_hits"], 0);
  EXPECT_EQ(j["hashed_bytes"], total_bytes_);
  fs::remove_all(cache_root_);
  verify({"--no-cache"});
  EXPECT_FALSE(fs::exists(cache_root_));
}

TEST_F(VerifyTest, UnwritableCacheDirStillVerifiesWithANote) {
  test::write_file(cache_root_, {'x'});  // a file where the cache directory should be
  for (int i = 0; i < 2; ++i) {
    const auto j = verify();
    EXPECT_TRUE(j["verified"].get<bool>());
    EXPECT_EQ(j["cache_hits"], 0);
    EXPECT_EQ(j["hashed_bytes"], total_bytes_);
    ASSERT_EQ(j["notes"].size(), 1u) << j.dump();
    EXPECT_NE(j["notes"][0].get<std::string>().find("without caching"), std::string::npos);
  }
  // Human mode: the note on stderr, success on stdout.
  const auto r = run_cli({"verify", pkg_dir_.string()});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.err.find("note: verification cache"), std::string::npos) << r.err;
}

TEST_F(VerifyTest, ForgedRecordForOtherDigestIsAMiss) {
  verify();
  // Overwrite every record with one vouching for a different digest.
  for (const auto& e : fs::directory_iterator(cache_root_ / "verified")) {
    auto rec = json::parse(test::read_text(e.path()));
    rec["sha256"] = std::string(64, '0');
    const auto s = rec.dump();
    test::write_file(e.path(), {s.begin(), s.end()});
  }
  const auto j = verify();
  EXPECT_EQ(j["cache_hits"], 0);
  EXPECT_EQ(j["hashed_bytes"], total_bytes_);
}

TEST_F(VerifyTest, LibraryReportsProgressAndIsThreadCountIndependent) {
  const auto parts = test::all_parts_v1(pkg_);
  for (unsigned threads : {1u, 2u, 5u}) {
    VerifyOptions o;
    o.threads = threads;
    o.use_cache = false;
    std::atomic<uint64_t> last{0}, total{0};
    o.on_progress = [&](uint64_t d, uint64_t t) {
      uint64_t prev = last.load();
      while (d > prev && !last.compare_exchange_weak(prev, d)) {
      }
      total = t;
    };
    const auto r = verify_parts(pkg_, parts, o);
    EXPECT_TRUE(r.verified);
    EXPECT_EQ(r.hashed_bytes, total_bytes_);
    EXPECT_EQ(last.load(), total_bytes_);
    EXPECT_EQ(total.load(), total_bytes_);
  }
}

TEST_F(VerifyTest, LibraryReportsFilesChangedAfterSelectionAsProblems) {
  const auto parts = test::all_parts_v1(pkg_);
  fs::resize_file(layer(1), sizes_[layer_rel(1)] - 10);
  fs::remove(layer(4));
  VerifyOptions o;
  o.cache_dir = tmp_ / "other-cache";
  const auto r = verify_parts(pkg_, parts, o);
  EXPECT_FALSE(r.verified);
  ASSERT_EQ(r.problems.size(), 2u);
  EXPECT_EQ(r.problems[0].rfind(layer_rel(1) + ": " + std::to_string(sizes_[layer_rel(1)] - 10) + " bytes", 0), 0u)
      << r.problems[0];
  EXPECT_EQ(r.problems[1], layer_rel(4) + ": missing");
  EXPECT_EQ(r.artifacts, artifacts_);
}

TEST_F(VerifyTest, DuplicatePartsAreVerifiedOnce) {
  auto parts = test::all_parts_v1(pkg_);
  parts.push_back(parts.front());
  VerifyOptions o;
  o.use_cache = false;
  const auto r = verify_parts(pkg_, parts, o);
  EXPECT_EQ(r.artifacts, artifacts_);
  EXPECT_EQ(r.hashed_bytes, total_bytes_);
}

TEST_F(VerifyTest, VerifyIfRequiredFollowsTheEnvironmentAndThrowsOnMismatch) {
  const auto parts = test::select_v1(pkg_, {0, 2}).parts;
  {
    ScopedEnv off("SKIPPY_VERIFY_PACKAGE_SHA", std::nullopt);
    EXPECT_FALSE(verify_if_required(pkg_, parts).has_value());
  }
  ScopedEnv on("SKIPPY_VERIFY_PACKAGE_SHA", "1");
  const auto r = verify_if_required(pkg_, parts);
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r->verified);
  EXPECT_EQ(r->artifacts, parts.size());
  // Same size, different bytes.
  auto bytes = test::read_file(layer(1));
  bytes[bytes.size() / 2] ^= 1;
  test::write_file(layer(1), bytes);
  try {
    verify_if_required(pkg_, parts);
    FAIL() << "expected a refusal";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIntegrity);
    EXPECT_NE(std::string(e.what()).find(layer_rel(1) + ": SHA-256 is "), std::string::npos) << e.what();
  }
}

class VerifyProjectorTest : public VerifyTest {
 protected:
  std::vector<std::string> extra_write_args() override {
    // Any valid GGUF serves as a stand-in projector.
    test::make_projector(tmp_ / "mmproj-model-f16.gguf");
    return {"--projector", (tmp_ / "mmproj-model-f16.gguf").string()};
  }
};

TEST_F(VerifyProjectorTest, StageThatUsesTheProjectorVerifiesIt) {
  const auto first = verify({"--layers", "0..2"});
  EXPECT_TRUE(first["verified"].get<bool>());
  EXPECT_EQ(first["artifacts"], 5);  // metadata, embeddings, 2 layers, projector
  EXPECT_EQ(first["parts"].back()["relative_path"], "projectors/mmproj-model-f16.gguf");
  const auto middle = verify({"--layers", "2..4"});
  EXPECT_EQ(middle["artifacts"], 3);  // no projector for a middle stage
  const auto all = verify();
  EXPECT_EQ(all["artifacts"], test::manifest(pkg_).layers.size() + 4);
  // A corrupted projector fails the stage that uses it.
  const auto proj = pkg_dir_ / "projectors/mmproj-model-f16.gguf";
  auto bytes = test::read_file(proj);
  bytes[100] ^= 1;
  test::write_file(proj, bytes);
  const auto bad = verify({"--layers", "0..2"}, 1);
  ASSERT_EQ(bad["problems"].size(), 1u);
  EXPECT_EQ(bad["problems"][0].get<std::string>().rfind("projectors/mmproj-model-f16.gguf: SHA-256 is ", 0), 0u);
  EXPECT_TRUE(verify({"--layers", "2..4"})["verified"].get<bool>());
}

TEST(VerifyRequired, HfAlwaysLocalOnlyWithTheVariable) {
  OpenedPackage local;
  OpenedPackage hf;
  hf.always_verify = true;
  {
    ScopedEnv e("SKIPPY_VERIFY_PACKAGE_SHA", std::nullopt);
    EXPECT_FALSE(verify_required(local));
    EXPECT_TRUE(verify_required(hf));
  }
  for (const char* off : {"", "0"}) {
    ScopedEnv e("SKIPPY_VERIFY_PACKAGE_SHA", off);
    EXPECT_FALSE(verify_required(local)) << '"' << off << '"';
    EXPECT_TRUE(verify_required(hf));
  }
  for (const char* on : {"1", "yes", "true"}) {
    ScopedEnv e("SKIPPY_VERIFY_PACKAGE_SHA", on);
    EXPECT_TRUE(verify_required(local)) << on;
  }
}

TEST(VerifyCacheDir, SkippyThenXdgThenHome) {
  ScopedEnv s("SKIPPY_CACHE_DIR", "/x/skippy-cache");
  ScopedEnv x("XDG_CACHE_HOME", "/x/xdg");
  ScopedEnv h("HOME", "/x/home");
  EXPECT_EQ(env::skippy_cache_dir(), fs::path("/x/skippy-cache"));
  EXPECT_EQ(default_verification_cache_dir(), fs::path("/x/skippy-cache/verified"));
  ::unsetenv("SKIPPY_CACHE_DIR");
  EXPECT_EQ(default_verification_cache_dir(), fs::path("/x/xdg/skippy/verified"));
  ::setenv("XDG_CACHE_HOME", "relative", 1);  // ignored, as the XDG spec says
  EXPECT_EQ(default_verification_cache_dir(), fs::path("/x/home/.cache/skippy/verified"));
  ::unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(default_verification_cache_dir(), fs::path("/x/home/.cache/skippy/verified"));
}

TEST(VerifyCacheKey, EveryIdentityFieldChangesTheKey) {
  detail::FileIdentity id{1, 2, 3, 4, 5};
  const std::string m(64, 'a'), d(64, 'b');
  const auto base = detail::verification_key(m, "layers/x.gguf", d, 3, id);
  EXPECT_TRUE(is_sha256_hex(base));
  // Declared digests compare case-insensitively.
  EXPECT_EQ(detail::verification_key(m, "layers/x.gguf", std::string(64, 'B'), 3, id), base);
  EXPECT_NE(detail::verification_key(std::string(64, 'c'), "layers/x.gguf", d, 3, id), base);
  EXPECT_NE(detail::verification_key(m, "layers/y.gguf", d, 3, id), base);
  EXPECT_NE(detail::verification_key(m, "layers/x.gguf", std::string(64, 'c'), 3, id), base);
  EXPECT_NE(detail::verification_key(m, "layers/x.gguf", d, 4, id), base);
  for (int f = 0; f < 5; ++f) {
    auto other = id;
    switch (f) {
      case 0: other.dev++; break;
      case 1: other.ino++; break;
      case 2: other.size++; break;
      case 3: other.mtime_ns++; break;
      default: other.ctime_ns++; break;
    }
    EXPECT_NE(detail::verification_key(m, "layers/x.gguf", d, 3, other), base) << f;
  }
}

}  // namespace
}  // namespace skippy
