// write-package --validate when the fragments leave the disk as they are
// uploaded (--max-disk) or the source is never stored (--stream): each
// fragment is read back and checked on its own before it is announced, so a
// fragment damaged on disk between its write and its upload stops the run
// there, and a valid run leaves the validation.json validate-package gives.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>

#include "skippy/error.h"
#include "skippy/gguf.h"
#include "skippy/package_validator.h"
#include "util/file.h"
#include "skippy/package_writer.h"
#include "test_util.h"
#include "util/sha256.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSplitShards[] = {"llama-tiny-q4_0-00001-of-00003.gguf", "llama-tiny-q4_0-00002-of-00003.gguf",
                                        "llama-tiny-q4_0-00003-of-00003.gguf"};

// Flips one byte inside the first tensor of `path` (tensor data, not padding).
void damage_first_tensor(const fs::path& path) {
  uint64_t at = 0;
  {
    const auto g = GgufFile::open(path);
    ASSERT_FALSE(g.tensors().empty());
    at = g.tensors().front().file_offset + g.tensors().front().bytes / 2;
  }
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  uint8_t b = 0;
  ASSERT_EQ(::pread(fd, &b, 1, static_cast<off_t>(at)), 1);
  b ^= 0x5a;
  ASSERT_EQ(::pwrite(fd, &b, 1, static_cast<off_t>(at)), 1);
  ::fsync(fd);
  ::close(fd);
}

// The split fixture as write-package's options, streamed (its bytes through
// stream_read, as write-package --stream gets them) or read in place, with
// fragments announced to a receiver that deletes them under a budget.
struct AsWritten {
  test::TempDir tmp;
  WritePackageOptions o;
  std::mutex mu;
  std::vector<std::string> announced;
  explicit AsWritten(bool streamed) {
    o.source = test::data_path(kSplitShards[0]);
    o.out_dir = tmp.path() / "pkg";
    o.provenance.model_id = "org/tiny-split-GGUF:Q4_0";
    o.provenance.revision = std::string(40, 'a');
    o.provenance.primary_file = kSplitShards[0];
    for (const char* s : kSplitShards) o.provenance.expected_sha256.push_back(sha256_file(test::data_path(s)));
    o.created_at_unix_secs = 1700000000;
    o.validate = true;
    o.disk_budget = std::make_shared<DiskBudget>(64u << 20);
    o.on_artifact = [this](const WrittenArtifact& w) {
      std::lock_guard g(mu);
      announced.push_back(w.rel_path);
      fs::remove(w.path);  // as --push --max-disk does once the Hub holds it
      o.disk_budget->release(w.size);
    };
    if (streamed) {
      o.stream_read = [](size_t shard, uint64_t offset, std::span<uint8_t> into) {
        const auto f = MappedFile::open(test::data_path(kSplitShards[shard]));
        f->pread_exact(offset, into);
      };
    }
  }
};

class ValidateAsWritten : public ::testing::TestWithParam<bool> {};

TEST_P(ValidateAsWritten, AFragmentDamagedOnDiskBeforeItsUploadStopsTheRunThere) {
  AsWritten w(GetParam());
  const std::string victim = "layers/layer-00002.gguf";  // cut across shards in this fixture
  w.o.after_write_before_check = [&](const WrittenArtifact& a) {
    if (a.rel_path == victim) damage_first_tensor(a.path);
  };
  try {
    (void)write_package(w.o);
    FAIL() << "a damaged fragment passed";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIntegrity) << e.what();
    const std::string msg = e.what();
    EXPECT_NE(msg.find(victim + ", found before its upload"), std::string::npos) << msg;
    EXPECT_NE(msg.find("differs from the source"), std::string::npos) << msg;
    EXPECT_NE(msg.find("SHA-256 is"), std::string::npos) << "the artifact digest is checked too: " << msg;
  }
  for (const auto& a : w.announced) EXPECT_NE(a, victim) << "the damaged fragment was announced (uploaded)";
  EXPECT_FALSE(fs::exists(w.o.out_dir / "model-package.json"));
  EXPECT_FALSE(fs::exists(w.o.out_dir / std::string(kValidationFileName)));
}

TEST_P(ValidateAsWritten, AValidRunLeavesTheValidationJsonValidatePackageGives) {
  AsWritten w(GetParam());
  const auto r = write_package(w.o);
  EXPECT_TRUE(r.validated);
  EXPECT_EQ(w.announced.size(), r.artifact_count);
  EXPECT_FALSE(fs::exists(w.o.out_dir / "layers" / "layer-00000.gguf")) << "every fragment left as announced";
  const auto mine = nlohmann::json::parse(test::read_text(w.o.out_dir / std::string(kValidationFileName)));
  EXPECT_EQ(mine["result"], "valid");
  EXPECT_EQ(mine["manifest_sha256"], r.manifest_sha256);

  // The same package written whole, judged by validate-package against the files.
  WritePackageOptions plain = w.o;
  plain.out_dir = w.tmp.path() / "plain";
  plain.validate = false;
  plain.disk_budget = nullptr;
  plain.on_artifact = nullptr;
  plain.stream_read = nullptr;
  const auto pr = write_package(plain);
  ASSERT_EQ(pr.manifest_sha256, r.manifest_sha256);
  const auto report = validate_package(test::data_path(kSplitShards[0]), plain.out_dir);
  ASSERT_TRUE(report.valid);
  write_validation_result(plain.out_dir, report, pr.manifest_sha256, "write-package --validate",
                          mine["validated_at_unix_secs"].get<int64_t>());
  const auto theirs = nlohmann::json::parse(test::read_text(plain.out_dir / std::string(kValidationFileName)));
  EXPECT_EQ(mine, theirs);
  EXPECT_GT(mine["tensors_checked"].get<uint64_t>(), 0u);
  EXPECT_EQ(mine["source_files"].size(), 3u);
}

INSTANTIATE_TEST_SUITE_P(StreamedOrCached, ValidateAsWritten, ::testing::Bool(),
                         [](const auto& p) { return p.param ? "Streamed" : "CachedUnderMaxDisk"; });

// Schema 2: each part certified as it is written (certify_catalog's checks).
class ValidateAsWrittenSchema2 : public ::testing::TestWithParam<bool> {};

TEST_P(ValidateAsWrittenSchema2, ADamagedPartStopsTheRunBeforeItsUploadAndAValidRunIsValidated) {
  {
    AsWritten w(GetParam());
    w.o.schema = 2;
    std::string victim;
    w.o.after_write_before_check = [&](const WrittenArtifact& a) {
      if (victim.empty() && a.rel_path.starts_with("layers/")) {
        victim = a.rel_path;
        damage_first_tensor(a.path);
      }
    };
    try {
      (void)write_package(w.o);
      ADD_FAILURE() << "a damaged part passed";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kIntegrity) << e.what();
      EXPECT_NE(std::string(e.what()).find("found in " + victim + ", before its upload"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("differs from the source"), std::string::npos) << e.what();
    }
    for (const auto& a : w.announced) EXPECT_NE(a, victim) << "the damaged part was announced (uploaded)";
    EXPECT_FALSE(fs::exists(w.o.out_dir / "model-package.json"));
  }
  AsWritten w(GetParam());
  w.o.schema = 2;
  const auto r = write_package(w.o);
  EXPECT_TRUE(r.validated);
  EXPECT_EQ(w.announced.size(), r.artifact_count);
  EXPECT_NE(test::read_text(w.o.out_dir / "README.md").find("alidat"), std::string::npos);
  WritePackageOptions plain = w.o;
  plain.out_dir = w.tmp.path() / "plain";
  plain.disk_budget = nullptr;
  plain.on_artifact = nullptr;
  plain.stream_read = nullptr;
  const auto pr = write_package(plain);  // validated from the files, as before
  EXPECT_TRUE(pr.validated);
  EXPECT_EQ(pr.manifest_sha256, r.manifest_sha256);
  EXPECT_EQ(test::read_text(plain.out_dir / "README.md"), test::read_text(w.o.out_dir / "README.md"));
}

INSTANTIATE_TEST_SUITE_P(StreamedOrCached, ValidateAsWrittenSchema2, ::testing::Bool(),
                         [](const auto& p) { return p.param ? "Streamed" : "CachedUnderMaxDisk"; });

}  // namespace
}  // namespace skippy
