// A Hugging Face cache snapshot directory named as a local package is read
// with the cache's rules, as through hf://: a link pointing at another
// file's blob, or a regular file put in place of a link, is refused before
// its bytes are used; the shared stage cache never holds a stage built from
// unverified bytes; and commands that write into a package directory refuse
// a snapshot instead of editing the shared cache.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "hub_standin.h"
#include "test_util.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::CliResult;
using test::run_cli;
using test::TempDir;

class CacheSnapshotHostile : public ::testing::Test {
 protected:
  std::vector<std::string> env() const {
    return {"HF_ENDPOINT=" + hub_.endpoint(), "HF_HUB_CACHE=" + (t_ / "hf").string(), "HF_HOME=" + (t_ / "hfhome").string(),
            "SKIPPY_CACHE_DIR=" + (t_ / "skippy").string(), "HF_TOKEN=hf_test", "HF_HUB_OFFLINE=",
            "SKIPPY_VERIFY_PACKAGE_SHA="};
  }
  CliResult cli(const std::vector<std::string>& args) const { return run_cli(args, env()); }

  // Writes a package (extra write-package flags), publishes it as `repo` and
  // fetches it whole into the cache; returns the snapshot directory.
  fs::path cached_package(const std::string& repo, const std::vector<std::string>& extra = {}) {
    const fs::path dir = t_ / repo.substr(repo.find('/') + 1);
    const auto w = test::write_pkg(test::data_path("llama-tiny-q8_0.gguf"), dir, extra);
    EXPECT_EQ(w.exit_code, 0) << w.err;
    const std::string commit = hub_.publish(repo, dir);
    const auto r = cli({"fetch", "hf://" + repo + "@" + commit, "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const std::string snap = json::parse(r.out)["snapshot_dir"].get<std::string>();
    EXPECT_TRUE(fs::is_directory(snap)) << r.out;
    return snap;
  }

  // The cache's stage entries (materialize's shared cache).
  size_t stage_entries() const {
    size_t n = 0;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(t_ / "skippy" / "stages", ec)) n += e.path().extension() == ".gguf";
    return n;
  }

  test::HubStandin hub_;
  TempDir t_;
};

TEST_F(CacheSnapshotHostile, ALinkToAnotherFilesBlobIsRefused) {
  const fs::path snap = cached_package("org/pkg");
  const fs::path link = snap / "layers" / "layer-00002.gguf";
  const fs::path other = fs::read_symlink(snap / "layers" / "layer-00003.gguf");
  ASSERT_EQ(fs::file_size(link), fs::file_size(snap / "layers" / "layer-00003.gguf"));
  fs::remove(link);
  fs::create_symlink(other, link);
  auto r = cli({"materialize", snap.string(), "--layers", "2..3", "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  test::expect_json_error(r, "integrity", "layers/layer-00002.gguf");
  EXPECT_EQ(stage_entries(), 0u);
  r = cli({"select", snap.string(), "--layers", "2..3", "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
}

TEST_F(CacheSnapshotHostile, ARegularFileInPlaceOfALinkIsVerified) {
  const fs::path snap = cached_package("org/pkg");
  const fs::path link = snap / "layers" / "layer-00002.gguf";
  auto bytes = test::read_file(link);  // the same fragment, one payload byte changed
  bytes[bytes.size() - 5] ^= 0x5a;
  fs::remove(link);
  test::write_file(link, bytes);
  const auto r = cli({"materialize", snap.string(), "--layers", "2..3", "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  test::expect_json_error(r, "integrity", "layers/layer-00002.gguf");
  EXPECT_EQ(stage_entries(), 0u);
}

TEST_F(CacheSnapshotHostile, NoStageIsCachedFromUnverifiedBytes) {
  // A plain local copy with a wrong layer, verification not required.
  const fs::path clean = t_ / "clean";
  ASSERT_EQ(test::write_pkg(test::data_path("llama-tiny-q8_0.gguf"), clean).exit_code, 0);
  const fs::path bad = t_ / "bad";
  fs::copy(clean, bad, fs::copy_options::recursive);
  auto bytes = test::read_file(bad / "layers" / "layer-00002.gguf");
  bytes[bytes.size() - 5] ^= 0x5a;
  test::write_file(bad / "layers" / "layer-00002.gguf", bytes);
  auto r = cli({"materialize", bad.string(), "--layers", "2..3", "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  test::expect_json_error(r, "integrity", "layer-00002.gguf");
  EXPECT_EQ(stage_entries(), 0u);
  // The clean copy builds its own entry; a second run reuses it.
  r = cli({"materialize", clean.string(), "--layers", "2..3", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(json::parse(r.out)["reused"].get<bool>());
  const std::string entry = json::parse(r.out)["path"];
  r = cli({"materialize", clean.string(), "--layers", "2..3", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(json::parse(r.out)["reused"].get<bool>());
  // The wrong copy does not get the clean entry's bytes passed off as its
  // own either way: it is refused before reuse when it must verify...
  r = cli({"materialize", bad.string(), "--layers", "2..3", "--verify", "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  // ...and an entry written by an older version, which did not say its
  // parts were verified, is rebuilt from verified parts, never reused.
  auto sidecar = json::parse(test::read_text(fs::path(entry).replace_extension(".json")));
  sidecar.erase("parts_verified");
  const std::string text = sidecar.dump(2);
  test::write_file(fs::path(entry).replace_extension(".json"), std::vector<uint8_t>(text.begin(), text.end()));
  r = cli({"materialize", bad.string(), "--layers", "2..3", "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
}

TEST_F(CacheSnapshotHostile, WritingCommandsRefuseASnapshot) {
  const fs::path snap = cached_package("org/pkg2", {"--schema", "2"});
  ASSERT_EQ(run_cli({"identity", "init-owner", "--dir", (t_ / "owner").string()}).exit_code, 0);
  const auto before = test::package_files(snap);
  std::map<std::string, fs::path> links;
  for (const auto& e : fs::recursive_directory_iterator(snap)) {
    if (fs::is_symlink(e.symlink_status())) links[e.path().string()] = fs::read_symlink(e.path());
  }
  const std::vector<std::vector<std::string>> writers = {
      {"restamp-package", snap.string(), "--native-abi-version", "0.1.41"},
      {"sign-package", snap.string(), "--owner", (t_ / "owner").string()},
      {"validate-package", test::data_path("llama-tiny-q8_0.gguf").string(), snap.string(), "--write-result"},
      {"convert-package", snap.string(), "--to", "1", "--out-dir", (snap / "v1").string()},
  };
  for (auto args : writers) {
    args.push_back("--json");
    const auto r = cli(args);
    EXPECT_EQ(r.exit_code, 2) << args[0] << ": " << r.out << r.err;
    test::expect_json_error(r, "usage", "snapshot in the Hugging Face cache");
    EXPECT_NE(r.out.find("cp -rL"), std::string::npos) << r.out;
  }
  EXPECT_EQ(test::package_files(snap), before);
  for (const auto& [path, target] : links) {
    EXPECT_TRUE(fs::is_symlink(path)) << path;
    EXPECT_EQ(fs::read_symlink(path), target) << path;
  }
  // Reading still works, through the cache's rules.
  const auto r = cli({"select", snap.string(), "--layers", "0..2", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

}  // namespace
}  // namespace skippy
