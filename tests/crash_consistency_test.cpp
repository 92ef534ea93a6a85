// Crash consistency through the I/O seam (tests/fault_io.h): write-package,
// fetch's blob writer, convert-package and materialize, each handed a
// FaultyIo in its options, "crashed" at every write, fsync and rename they
// make (that call and every later one fail, then whatever was not fsynced
// is dropped). Whatever the point, a reader finds either the old state or a
// complete new one, never a half-written file it would trust; and the same
// command run again (through the system's calls) finishes the job.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <utility>
#include <string>
#include <vector>

#include "fault_io.h"
#include "skippy/error.h"
#include "skippy/materialize.h"
#include "skippy/package.h"
#include "skippy/source.h"
#include "skippy/package_convert.h"
#include "skippy/package_writer.h"
#include "skippy/stage.h"
#include "util/sha256.h"
#include "source/blob_writer.h"
#include "test_util.h"

namespace skippy::test::crash_consistency_test {
namespace {

namespace fs = std::filesystem;

// Every regular file under `dir` a reader could open by name: not the
// writers' temporaries (hidden names) nor their in-progress marker.
std::map<std::string, std::string> visible_files(const fs::path& dir) {
  std::map<std::string, std::string> out;
  if (!fs::exists(dir)) return out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string rel = fs::relative(e.path(), dir).generic_string();
    if (!e.is_regular_file() || rel.starts_with(".") || rel.find("/.") != std::string::npos) continue;
    out[rel] = sha256_file(e.path());
  }
  return out;
}

WritePackageOptions write_options(const fs::path& out, int64_t created_at, IoEnv* env = nullptr) {
  WritePackageOptions o;
  o.io_env = env;
  o.source = data_path("llama-tiny-q8_0.gguf");
  o.out_dir = out;
  o.provenance.model_id = "org/tiny:Q8_0";
  o.provenance.revision = "0123abc";
  o.provenance.primary_file = "llama-tiny-q8_0.gguf";
  o.created_at_unix_secs = created_at;
  o.threads = 1;  // one order of calls, so "the Nth" names the same call every run
  return o;
}

// Each of `rel_paths` under `dir` was written through `io` (the IoEnv the
// operation was given), none past it.
void expect_written_through(const FaultyIo& io, const fs::path& dir, const std::vector<std::string>& rel_paths) {
  const auto through = io.paths();
  for (const auto& rel : rel_paths) {
    EXPECT_TRUE(through.contains(fs::weakly_canonical(dir / rel).string())) << rel << ": written past the run's IoEnv";
  }
}

std::vector<std::string> names_of(const std::map<std::string, std::string>& files) {
  std::vector<std::string> out;
  for (const auto& [rel, sha] : files) out.push_back(rel);
  return out;
}

// A reader trusts a package directory through its model-package.json: when
// there is one, every file must be exactly one complete package's.
void expect_old_or_new(const fs::path& dir, const std::map<std::string, std::string>& old_state,
                       const std::map<std::string, std::string>& new_state, const std::string& when) {
  const auto now = visible_files(dir);
  if (!now.contains("model-package.json")) return;  // nothing a reader trusts
  if (!old_state.empty() && now.at("model-package.json") == old_state.at("model-package.json")) {
    EXPECT_EQ(now, old_state) << when << ": the old manifest with files that are not the old package's";
  } else {
    EXPECT_EQ(now, new_state) << when << ": a manifest with files that are not its package's";
  }
}

TEST(CrashConsistency, WritePackageLeavesNoPackageOrACompleteOneAtEveryCall) {
  TempDir tmp;
  // The new package and the old one it replaces (another created_at: other bytes).
  (void)write_package(write_options(tmp / "new", 1790000000));
  (void)write_package(write_options(tmp / "old", 1780000000));
  const auto new_state = visible_files(tmp / "new");
  const auto old_state = visible_files(tmp / "old");
  ASSERT_NE(new_state.at("model-package.json"), old_state.at("model-package.json"));
  // The crash points: every fsync and rename (where durability is decided),
  // and writes at a stride (a crash between two syncs drops the same bytes).
  std::vector<std::pair<uint64_t, unsigned>> points;
  {
    FaultyIo io;
    (void)write_package(write_options(tmp / "counted", 1790000000, &io));
    expect_written_through(io, tmp / "counted", names_of(new_state));
    const uint64_t syncs = io.count(FaultyIo::kFsync | FaultyIo::kRename), writes = io.count(FaultyIo::kWrite);
    for (const uint64_t n : test::crash_points(syncs)) points.emplace_back(n, FaultyIo::kFsync | FaultyIo::kRename);
    for (const uint64_t n : test::crash_points(writes, std::max<uint64_t>(1, writes / 12))) points.emplace_back(n, FaultyIo::kWrite);
  }
  ASSERT_GT(points.size(), 10u);
  for (const bool over_old : {false, true}) {
    for (const auto& [n, ops] : points) {
      const std::string when = std::string(over_old ? "over a package" : "fresh") + ", crash at " +
                               (ops == FaultyIo::kWrite ? "write " : "fsync/rename ") + std::to_string(n);
      SCOPED_TRACE(when);
      const fs::path out = tmp / "out";
      fs::remove_all(out);
      if (over_old) fs::copy(tmp / "old", out, fs::copy_options::recursive);
      auto o = write_options(out, 1790000000);
      o.force = over_old;
      {
        FaultyIo io;
        io.crash_at(n, ops);
        o.io_env = &io;
        bool threw = false;
        try {
          (void)write_package(o);
        } catch (const Error&) {
          threw = true;
        }
        o.io_env = nullptr;
        EXPECT_TRUE(io.fired());
        io.drop_unsynced();
        // Only a call whose failure changes nothing may go unreported (the
        // last directory fsync, a best effort): then the package is whole.
        if (!threw) {
          EXPECT_EQ(visible_files(out), new_state) << when << ": no error, so a complete package";
        }
      }
      expect_old_or_new(out, over_old ? old_state : std::map<std::string, std::string>{}, new_state, when);
      // Run again, as a person would (with --force over a package it finds): it finishes.
      o.force = over_old || visible_files(out).contains("model-package.json");
      (void)write_package(o);
      EXPECT_EQ(visible_files(out), new_state) << when << ": the rerun";
    }
  }
}

TEST(CrashConsistency, AFailedFsyncOrRenameIsAnErrorThatLeavesNoManifest) {
  TempDir tmp;
  for (const auto op : {FaultyIo::kFsync, FaultyIo::kRename, FaultyIo::kWrite}) {
    for (const int err : {EIO, ENOSPC}) {
      const fs::path out = tmp / ("out-" + std::to_string(op) + "-" + std::to_string(err));
      FaultyIo io;
      io.fail_nth(2, op, err);
      try {
        (void)write_package(write_options(out, 1790000000, &io));
        ADD_FAILURE() << "a failed call went unnoticed";
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kIo) << e.what();
        EXPECT_NE(std::string(e.what()).find(out.string()), std::string::npos) << "names the file: " << e.what();
      }
      EXPECT_FALSE(fs::exists(out / "model-package.json"));
    }
  }
}

TEST(CrashConsistency, TheBlobWriterNeverNamesABlobItHasNotFinished) {
  TempDir tmp;
  std::vector<uint8_t> bytes(3u << 20);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>((i * 2654435761u) >> 13);
  const std::string sha = sha256_hex(std::span<const uint8_t>(bytes));
  const std::string commit = "0123456789abcdef0123456789abcdef01234567";
  detail::BlobSpec spec;
  spec.etag = sha;
  spec.size = bytes.size();
  spec.sha256 = sha;
  spec.what = "hf://org/blobs@" + commit + ": layers/big.gguf";
  auto receive = [&](const HfRepoCache& cache) {
    return detail::receive_blob(cache, commit, "layers/big.gguf", spec, {}, [&](detail::BlobWriter& w) {
      // In 256 KiB pieces, as a transfer brings them.
      while (!w.complete()) {
        const size_t n = std::min<size_t>(256u << 10, bytes.size() - w.have());
        w.append(std::span<const uint8_t>(bytes).subspan(w.have(), n));
      }
    });
  };
  uint64_t calls = 0;
  {
    FaultyIo io;
    const HfRepoCache counted(tmp / "counted", "org/blobs", &io);
    (void)receive(counted);
    expect_written_through(io, counted.blob_path(sha).parent_path(), {sha});
    calls = io.count();
  }
  ASSERT_GT(calls, 3u);
  for (const uint64_t n : test::crash_points(calls)) {
    SCOPED_TRACE("crash at call " + std::to_string(n));
    const fs::path root = tmp / ("hf-" + std::to_string(n));
    const HfRepoCache cache(root, "org/blobs");
    {
      FaultyIo io;
      io.crash_at(n);
      EXPECT_THROW((void)receive(HfRepoCache(root, "org/blobs", &io)), Error);
      io.drop_unsynced();
    }
    // A blob under its final name, or the snapshot link, holds exactly its bytes.
    if (fs::exists(cache.blob_path(sha))) {
      EXPECT_EQ(sha256_file(cache.blob_path(sha)), sha);
    }
    if (const auto f = cache.snapshot_file(commit, "layers/big.gguf")) {
      EXPECT_EQ(sha256_file(*f), sha);
    }
    // The next run completes it (resuming whatever was durable).
    const auto got = receive(cache);
    EXPECT_EQ(sha256_file(got.local), sha);
  }
}

TEST(CrashConsistency, ConvertPackageLeavesTheOldOutputOrTheNewPackage) {
  TempDir tmp;
  (void)write_package(write_options(tmp / "v1", 1790000000));
  auto options = [&](const fs::path& out, IoEnv* env = nullptr) {
    ConvertToV2Options o;
    o.io_env = env;
    o.package_dir = tmp / "v1";
    o.out_dir = out;
    o.source = data_path("llama-tiny-q8_0.gguf");
    o.force = true;
    o.threads = 1;
    return o;
  };
  (void)convert_package_to_v2(options(tmp / "v2"));
  const auto new_state = visible_files(tmp / "v2");
  uint64_t calls = 0;
  {
    FaultyIo io;
    (void)convert_package_to_v2(options(tmp / "counted", &io));
    // (The payload parts are hard links to the schema 1 fragments: not written.)
    expect_written_through(io, tmp / "counted", {"shared/metadata.gguf", "README.md", "model-package.json"});
    calls = io.count();
  }
  ASSERT_GT(calls, 3u);
  // An old output it replaces: a file a reader could be using.
  const std::map<std::string, std::string> old_state = {{"model-package.json", sha256_hex(std::string("{}"))}};
  for (const uint64_t n : test::crash_points(calls)) {
    const std::string when = "crash at call " + std::to_string(n);
    SCOPED_TRACE(when);
    const fs::path out = tmp / "out";
    fs::remove_all(out);
    fs::create_directories(out);
    write_file_atomic(out / "model-package.json", "{}");
    {
      FaultyIo io;
      io.crash_at(n);
      bool threw = false;
      try {
        (void)convert_package_to_v2(options(out, &io));
      } catch (const Error&) {
        threw = true;
      }
      io.drop_unsynced();
      if (!threw) {  // only the last directory fsync (a best effort) goes unreported
        EXPECT_EQ(visible_files(out), new_state) << when << ": no error, so the new package";
      }
    }
    const auto now = visible_files(out);
    EXPECT_TRUE(now == old_state || now == new_state) << when << ": neither the old output nor the new package ("
                                                      << now.size() << " files)";
    (void)convert_package_to_v2(options(out));
    EXPECT_EQ(visible_files(out), new_state) << when << ": the rerun";
  }
}

// materialize writes through the IoEnv its options give it, the stage's
// bytes included. Crashed at every fsync and rename and at writes along the
// way, into the stage cache: an entry a reader trusts (its sidecar is there)
// always holds the stage's exact bytes, and the next run gives them.
TEST(CrashConsistency, MaterializeNeverLeavesACacheEntryItTrustsHalfWritten) {
  TempDir tmp;
  (void)write_package(write_options(tmp / "pkg", 1790000000));
  const auto opened = open_local_package(tmp / "pkg");
  const LayerRange range{0, opened.identity().layer_count};
  const OpenedCatalog pkg = opened.catalog(CatalogNeed::stage(range));
  const StageSelection stage = select_stage(pkg.catalog, range);
  auto run = [&](const fs::path& cache, IoEnv* env, bool hash) {
    MaterializeOptions o;
    o.cache_dir = cache;
    o.io_env = env;
    o.hash = hash;
    return materialize_stage(pkg, stage, o);
  };
  const std::string want = sha256_file(run(tmp / "reference", nullptr, false).path);
  for (const bool hash : {false, true}) {  // streamed, or written and hashed by the GGUF writer
    std::vector<std::pair<uint64_t, unsigned>> points;
    {
      FaultyIo io;
      (void)run(tmp / ("counted-" + std::to_string(hash)), &io, hash);
      const uint64_t syncs = io.count(FaultyIo::kFsync | FaultyIo::kRename), writes = io.count(FaultyIo::kWrite);
      ASSERT_GT(writes, 0u) << "the stage's bytes go through the run's IoEnv";
      ASSERT_GE(syncs, 4u) << "the stage file's fsync and rename, the sidecar's";
      for (const uint64_t n : test::crash_points(syncs)) points.emplace_back(n, FaultyIo::kFsync | FaultyIo::kRename);
      for (const uint64_t n : test::crash_points(writes, std::max<uint64_t>(1, writes / 8))) points.emplace_back(n, FaultyIo::kWrite);
    }
    for (const auto& [n, ops] : points) {
      const std::string when = std::string(hash ? "hashed" : "streamed") + ", crash at " +
                               (ops == FaultyIo::kWrite ? "write " : "fsync/rename ") + std::to_string(n);
      SCOPED_TRACE(when);
      const fs::path cache = tmp / "cache";
      fs::remove_all(cache);
      {
        FaultyIo io;
        io.crash_at(n, ops);
        bool threw = false;
        try {
          (void)run(cache, &io, hash);
        } catch (const Error&) {
          threw = true;
        }
        EXPECT_TRUE(io.fired());
        io.drop_unsynced();
        // Only the last directory fsync (a best effort) may fail unreported.
        if (!threw) {
          EXPECT_EQ(list_stage_cache(cache).size(), 1u) << when << ": no error, so the entry";
        }
      }
      for (const auto& e : list_stage_cache(cache)) {
        if (e.complete) {
          EXPECT_EQ(sha256_file(e.path), want) << when << ": a complete entry with other bytes";
        }
      }
      const auto again = run(cache, nullptr, hash);
      EXPECT_EQ(sha256_file(again.path), want) << when << ": the next run (reused: " << again.reused << ")";
    }
  }
}

// materialize --out: whichever call fails, the error says so and nothing is
// left, neither a file under the output's name nor a temporary beside it.
TEST(CrashConsistency, AFailedMaterializeLeavesNoOutputFile) {
  TempDir tmp;
  (void)write_package(write_options(tmp / "pkg", 1790000000));
  const auto opened = open_local_package(tmp / "pkg");
  const LayerRange range{0, 1};
  const OpenedCatalog pkg = opened.catalog(CatalogNeed::stage(range));
  const StageSelection stage = select_stage(pkg.catalog, range);
  auto run = [&](const fs::path& out, IoEnv* env) {
    MaterializeOptions o;
    o.out = out;
    o.io_env = env;
    return materialize_stage(pkg, stage, o);
  };
  uint64_t calls = 0;
  {
    FaultyIo io;
    (void)run(tmp / "counted.gguf", &io);
    calls = io.count();
  }
  ASSERT_GT(calls, 1u);
  for (const uint64_t n : test::crash_points(calls)) {
    SCOPED_TRACE("fail call " + std::to_string(n));
    const fs::path dir = tmp / ("out-" + std::to_string(n));
    fs::create_directories(dir);
    FaultyIo io;
    io.fail_nth(n, FaultyIo::kAny, ENOSPC);
    try {
      (void)run(dir / "stage.gguf", &io);
      ADD_FAILURE() << "a failed call went unnoticed";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kIo) << e.what();
    }
    EXPECT_TRUE(fs::is_empty(dir)) << "left behind in " << dir;
  }
}

}  // namespace
}  // namespace skippy::test::crash_consistency_test
