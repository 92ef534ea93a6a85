// Hostile packages on disk met by
// convert-package and validate-package (symlinks inside and out of the
// package, a killed conversion's staging), run through the real CLI on the
// real fixtures.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace skippy {
namespace hostile_local_test {

namespace fs = std::filesystem;
using test::TempDir;

fs::path tiny() { return test::data_path("llama-tiny-q8_0.gguf"); }

void write_v1(const fs::path& out) {
  const auto r = test::write_pkg(tiny(), out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

void write_v2(const fs::path& out) {
  const auto r = test::write_pkg(tiny(), out, {"--schema", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

test::CliResult cli(const std::vector<std::string>& args) { return test::run_cli(args); }

// Replaces pkg/rel by a symlink to `target` (the file's bytes moved there first).
void make_symlink(const fs::path& pkg, const std::string& rel, const fs::path& target, const fs::path& link_text) {
  fs::rename(pkg / rel, target);
  fs::create_symlink(link_text, pkg / rel);
}

// Nothing but `keep` in the directory (no staging leftover beside an output).
void expect_only(const fs::path& dir, const std::set<std::string>& keep) {
  for (const auto& e : fs::directory_iterator(dir)) {
    EXPECT_TRUE(keep.contains(e.path().filename().string())) << "left behind: " << e.path();
  }
}

// Item 3: a layer that is a symlink to a file inside the package (relative,
// then absolute) is converted as the regular file it resolves to; the
// output verifies on its own, also once the input is gone.
TEST(HostileLocal, ConvertLinksTheResolvedFileOfASymlinkedLayer) {
  for (const bool absolute : {false, true}) {
    SCOPED_TRACE(absolute ? "absolute symlink" : "relative symlink");
    TempDir dir;
    write_v1(dir / "v1");
    const fs::path real = dir / "v1/layers/real-00002.bin";
    make_symlink(dir / "v1", "layers/layer-00002.gguf", real, absolute ? real : fs::path("real-00002.bin"));
    auto r = cli({"verify", (dir / "v1").string()});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;  // inside the package: the consumers accept it
    r = cli({"convert-package", (dir / "v1").string(), "--to", "2", "--out-dir", (dir / "v2").string(), "--source",
             tiny().string(), "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(nlohmann::json::parse(r.out)["certified"], true);
    const fs::path out_layer = dir / "v2/layers/layer-00002.gguf";
    EXPECT_FALSE(fs::is_symlink(fs::symlink_status(out_layer))) << "the symlink itself was placed";
    EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(out_layer)));
    fs::remove_all(dir / "v1");  // the output owes nothing to its input
    r = cli({"verify", (dir / "v2").string()});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  }
}

// Item 4, schema 1: a layer that is a symlink out of the package is refused
// by convert-package --to 2 and validate-package as verify refuses it.
TEST(HostileLocal, SchemaOneSymlinkOutOfThePackageIsRefusedByConvertAndValidate) {
  TempDir dir;
  write_v1(dir / "v1");
  make_symlink(dir / "v1", "layers/layer-00001.gguf", dir / "outside.gguf", dir / "outside.gguf");
  auto r = cli({"verify", (dir / "v1").string(), "--json"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("outside the package"), std::string::npos) << r.out;
  r = cli({"convert-package", (dir / "v1").string(), "--to", "2", "--out-dir", (dir / "v2").string(), "--source",
           tiny().string(), "--json"});
  EXPECT_EQ(r.exit_code, 1);
  test::expect_json_error(r, "invalid_input", "layers/layer-00001.gguf: resolves to");
  EXPECT_NE(r.out.find("outside the package"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir / "v2"));
  expect_only(dir.path(), {"v1", "outside.gguf"});
  r = cli({"validate-package", tiny().string(), (dir / "v1").string(), "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["valid"], false);
  EXPECT_NE(doc["problems"].dump().find("layers/layer-00001.gguf: resolves to"), std::string::npos) << r.out;
  EXPECT_NE(doc["problems"].dump().find("outside the package"), std::string::npos) << r.out;
}

// Item 4, schema 2: the same for convert-package --to 1 and validate-package.
TEST(HostileLocal, SchemaTwoSymlinkOutOfThePackageIsRefusedByConvertAndValidate) {
  TempDir dir;
  write_v2(dir / "v2");
  make_symlink(dir / "v2", "layers/layer-00001.gguf", dir / "outside.gguf", dir / "outside.gguf");
  auto r = cli({"convert-package", (dir / "v2").string(), "--to", "1", "--out-dir", (dir / "v1").string(), "--json"});
  EXPECT_EQ(r.exit_code, 1);
  test::expect_json_error(r, "invalid_input", "(layers/layer-00001.gguf): resolves to");
  EXPECT_NE(r.out.find("outside the package"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir / "v1"));
  expect_only(dir.path(), {"v2", "outside.gguf"});
  r = cli({"validate-package", tiny().string(), (dir / "v2").string(), "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["valid"], false);
  EXPECT_NE(doc["problems"].dump().find("outside the package"), std::string::npos) << r.out;
}

// A package as the Hugging Face cache holds it (snapshots/REV/... symlinks
// into the repository's blobs/): validate-package, verify, select and
// convert-package accept the snapshot directory as the package, for both
// schemas, while a link out of the repository's cache folder is still
// refused.
void as_hf_snapshot(const fs::path& pkg, const fs::path& repo) {
  const fs::path snap = repo / "snapshots" / "0123456789abcdef0123456789abcdef01234567";
  fs::create_directories(repo / "blobs");
  size_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(pkg)) {
    if (!e.is_regular_file()) continue;
    const fs::path rel = fs::relative(e.path(), pkg);
    const fs::path blob = repo / "blobs" / ("blob-" + std::to_string(n++));
    fs::copy_file(e.path(), blob);
    fs::create_directories((snap / rel).parent_path());
    fs::create_symlink(fs::relative(blob, (snap / rel).parent_path()), snap / rel);
  }
}

TEST(HostileLocal, AHuggingFaceCacheSnapshotDirectoryIsAPackage) {
  for (const bool v2 : {false, true}) {
    SCOPED_TRACE(v2 ? "schema 2" : "schema 1");
    TempDir dir;
    if (v2) {
      write_v2(dir / "pkg");
    } else {
      write_v1(dir / "pkg");
    }
    const fs::path repo = dir / "hub" / "models--org--pkg";
    as_hf_snapshot(dir / "pkg", repo);
    const fs::path snap = repo / "snapshots" / "0123456789abcdef0123456789abcdef01234567";
    auto r = cli({"validate-package", tiny().string(), snap.string(), "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    r = cli({"verify", snap.string()});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    r = cli({"select", snap.string(), "--layers", "1..3", "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    std::vector<std::string> convert = {"convert-package", snap.string(), "--to", v2 ? "1" : "2", "--out-dir",
                                        (dir / "converted").string(), "--json"};
    if (!v2) convert.insert(convert.end(), {"--source", tiny().string()});
    r = cli(convert);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    // A link out of the repository's cache folder is still out of the package.
    const fs::path link = snap / "layers/layer-00001.gguf";
    fs::copy_file(fs::canonical(link), dir / "outside.gguf");
    fs::remove(link);
    fs::create_symlink(dir / "outside.gguf", link);
    r = cli({"verify", snap.string(), "--json"});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.out.find("outside the package"), std::string::npos) << r.out;
  }
}

// Item 5: what a killed conversion leaves (its staging directory beside the
// output) is removed by the next run, in both directions; a staging
// directory a live run holds is left alone.
TEST(HostileLocal, ConvertRemovesTheStagingOfAKilledRun) {
  TempDir dir;
  write_v2(dir / "v2");
  write_v1(dir / "a");
  auto leftover = [&](const std::string& out) {
    const fs::path p = dir / ("." + out + ".partial-0123456789ab");
    fs::create_directories(p / "layers");
    test::write_file(p / "layers/layer-00000.gguf", std::vector<uint8_t>(4096, 7));
    return p;
  };
  // A live run's staging: held under the lock a running conversion holds.
  const fs::path live = dir / ".v1.partial-00000000beef";
  fs::create_directories(live);
  const int fd = ::open(live.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  const fs::path dead1 = leftover("v1");
  const fs::path dead2 = leftover("b");
  auto r = cli({"convert-package", (dir / "v2").string(), "--to", "1", "--out-dir", (dir / "v1").string() + "/"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(dead1)) << "a killed --to 1 run's staging is still there";
  EXPECT_TRUE(fs::exists(live)) << "a live run's staging was removed";
  ::close(fd);
  r = cli({"convert-package", (dir / "a").string(), "--to", "2", "--out-dir", (dir / "b").string(), "--source",
           tiny().string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(dead2)) << "a killed --to 2 run's staging is still there";
  // The live one's run has ended (its lock is released): the next run removes it.
  r = cli({"convert-package", (dir / "v2").string(), "--to", "1", "--out-dir", (dir / "v1").string(), "--force"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_only(dir.path(), {"v2", "v1", "a", "b"});
}

}  // namespace hostile_local_test
}  // namespace skippy
