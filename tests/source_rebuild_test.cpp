// materialize --as-source: the source model's file(s) rebuilt byte for byte
// from a package written by the real CLI, every model fixture (the split
// one too), checked against the fixtures' own SHA-256; a damaged part, a
// package that does not record what a rebuild needs, and a record that
// does not describe the source each refused with nothing left behind.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hub_standin.h"
#include "reference_package.h"
#include "skippy/gguf.h"
#include "test_util.h"
#include "util/sha256.h"

namespace skippy::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The source's files: the fixture itself, or every shard of a split one.
std::vector<fs::path> source_files(const fs::path& first) {
  const auto split = parse_split_name(first);
  if (!split) return {first};
  std::vector<fs::path> files;
  for (uint32_t i = 1; i <= split->count; ++i) files.push_back(split_path(split->prefix, i, split->count));
  return files;
}

// Everything in `dir` (names), hidden files included.
std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

CliResult rebuild(const fs::path& pkg, const fs::path& out, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"materialize", pkg.string(), "--as-source", "--out", out.string(), "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  return run_cli(args);
}

// Each source file came back under its own name in `dir`, with its SHA-256.
void expect_rebuilt(const CliResult& r, const fs::path& fixture, const fs::path& dir) {
  ASSERT_EQ(r.exit_code, 0) << fixture << "\n" << r.err << r.out;
  const auto doc = json::parse(r.out);
  const auto files = source_files(fixture);
  ASSERT_EQ(doc["files"].size(), files.size()) << r.out;
  for (size_t i = 0; i < files.size(); ++i) {
    const fs::path rebuilt = dir / files[i].filename();
    const std::string want = sha256_file(files[i]);
    EXPECT_EQ(sha256_file(rebuilt), want) << rebuilt;
    EXPECT_EQ(read_file(rebuilt), read_file(files[i])) << rebuilt;
    EXPECT_EQ(doc["files"][i]["path"], rebuilt.string());
    EXPECT_EQ(doc["files"][i]["sha256"], want);
    EXPECT_EQ(doc["files"][i]["bytes"], fs::file_size(files[i]));
  }
  EXPECT_EQ(listing(dir).size(), files.size()) << "nothing but the source's files";
}

TEST(SourceRebuild, EveryFixtureComesBackByteForByteFromASchema1Package) {
  for (const auto& fixture : model_fixtures()) {
    SCOPED_TRACE(fixture.filename().string());
    TempDir t;
    const auto w = write_pkg(fixture, t / "pkg");
    ASSERT_EQ(w.exit_code, 0) << w.err;
    EXPECT_EQ(json::parse(w.out).dump().find("not recorded"), std::string::npos) << w.out;
    // An existing directory; a split source's three shards also make a missing one.
    if (!parse_split_name(fixture)) fs::create_directory(t / "restored");
    expect_rebuilt(rebuild(t / "pkg", t / "restored"), fixture, t / "restored");
  }
}

TEST(SourceRebuild, OneFileSourceGoesToTheFileOutNames) {
  TempDir t;
  const auto fixture = data_path("qwen3moe-tiny.gguf");  // alignment 128, every KV type
  ASSERT_EQ(write_pkg(fixture, t / "pkg").exit_code, 0);
  const auto r = run_cli({"materialize", (t / "pkg").string(), "--as-source", "--out", (t / "same.gguf").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, (t / "same.gguf").string() + "\n");
  EXPECT_EQ(sha256_file(t / "same.gguf"), sha256_file(fixture));
  EXPECT_NE(r.err.find("SHA-256 the package records"), std::string::npos) << r.err;
}

TEST(SourceRebuild, OneFileSourcesComeBackFromASchema2Package) {
  for (const auto& fixture : model_fixtures()) {
    if (parse_split_name(fixture)) continue;  // below: schema 2 does not carry shard boundaries
    SCOPED_TRACE(fixture.filename().string());
    TempDir t;
    const auto w = write_pkg(fixture, t / "pkg", {"--schema", "2"});
    ASSERT_EQ(w.exit_code, 0) << w.err;
    fs::create_directory(t / "out");  // an existing directory
    const auto r = rebuild(t / "pkg", t / "out");
    expect_rebuilt(r, fixture, t / "out");
    EXPECT_EQ(json::parse(r.out)["schema_version"], 2);
  }
}

// convert-package --to 2 writes the carrier's directory in the order the
// schema 1 package records, so the conversion gives the source back too; a
// package in the reference's layout lists its tensors part by part, and the
// rebuild's SHA-256 says so, leaving nothing.
TEST(SourceRebuild, AConversionKeepsTheSourceOrderAndTheReferenceLayoutDoesNot) {
  TempDir t;
  const auto fixture = data_path("llama-tiny-q8_0.gguf");
  ASSERT_EQ(write_pkg(fixture, t / "v1").exit_code, 0);
  const auto c = run_cli({"convert-package", (t / "v1").string(), "--to", "2", "--out-dir", (t / "v2").string(),
                          "--source", fixture.string()});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  fs::create_directory(t / "out");
  expect_rebuilt(rebuild(t / "v2", t / "out"), fixture, t / "out");

  ASSERT_EQ(write_pkg(fixture, t / "ref", {"--schema", "2", "--layout", "reference"}).exit_code, 0);
  const auto r = rebuild(t / "ref", t / "ref.gguf");
  expect_json_error(r, "integrity", "Every part is what the package declares, so the package does not record the "
                                    "source's exact layout (the source's tensor order is the carrier's directory order");
  EXPECT_FALSE(fs::exists(t / "ref.gguf"));
}

TEST(SourceRebuild, SchemaTwoOfASplitSourceSaysWhatIsMissing) {
  TempDir t;
  const auto fixture = data_path("llama-tiny-q4_0-00001-of-00003.gguf");
  ASSERT_EQ(write_pkg(fixture, t / "pkg", {"--schema", "2"}).exit_code, 0);
  const auto r = rebuild(t / "pkg", t / "restored");
  expect_json_error(r, "invalid_input", "does not record the shard boundaries and split.* keys of the source's 3 files");
  EXPECT_FALSE(fs::exists(t / "restored"));
}

TEST(SourceRebuild, ADamagedPartFailsAndLeavesNothing) {
  TempDir t;
  const auto fixture = data_path("llama-tiny-q8_0.gguf");
  ASSERT_EQ(write_pkg(fixture, t / "pkg").exit_code, 0);
  // One byte of layer 3's tensor data (its size, header and digest in the manifest unchanged).
  const fs::path layer = t / "pkg" / "layers" / "layer-00003.gguf";
  auto bytes = read_file(layer);
  bytes[GgufFile::open(layer).tensors().front().file_offset + 5] ^= 0x40;
  write_file(layer, bytes);

  fs::create_directory(t / "restored");
  fs::create_directory(t / "restored" / "new");
  const auto into_new = rebuild(t / "pkg", t / "restored" / "new");
  expect_json_error(into_new, "integrity", "the rebuilt llama-tiny-q8_0.gguf has SHA-256");
  EXPECT_NE(into_new.out.find("layers/layer-00003.gguf"), std::string::npos) << into_new.out;
  EXPECT_NE(into_new.out.find("nothing was written"), std::string::npos) << into_new.out;
  EXPECT_TRUE(listing(t / "restored" / "new").empty()) << "no temporary left";

  expect_json_error(rebuild(t / "pkg", t / "one.gguf"), "integrity", "nothing was written");
  EXPECT_EQ(listing(t.path()), (std::vector<std::string>{"pkg", "restored"}));
  // --verify finds it before a byte is written.
  expect_json_error(rebuild(t / "pkg", t / "one.gguf", {"--verify"}), "integrity", "layers/layer-00003.gguf");
  EXPECT_FALSE(fs::exists(t / "one.gguf"));
}

// A split source: the second shard is the damaged one, after the first was
// written; neither stays, nor the directory the run made for them.
TEST(SourceRebuild, ADamagedPartOfASplitSourceLeavesNoShard) {
  TempDir t;
  ASSERT_EQ(write_pkg(data_path("llama-tiny-q4_0-00001-of-00003.gguf"), t / "pkg").exit_code, 0);
  const fs::path layer = t / "pkg" / "layers" / "layer-00004.gguf";  // blk.4 is in the second shard
  auto bytes = read_file(layer);
  bytes[GgufFile::open(layer).tensors().back().file_offset] ^= 0x01;
  write_file(layer, bytes);
  const auto r = rebuild(t / "pkg", t / "restored");
  expect_json_error(r, "integrity", "the rebuilt llama-tiny-q4_0-00002-of-00003.gguf has SHA-256");
  EXPECT_NE(r.out.find("layers/layer-00004.gguf"), std::string::npos) << r.out;
  EXPECT_EQ(listing(t.path()), (std::vector<std::string>{"pkg"}));
}

TEST(SourceRebuild, APackageWithoutTheRecordSaysWhatIsMissing) {
  TempDir t;
  const auto fixture = data_path("llama-tiny-f16.gguf");
  // The reference writer records neither the source files' sizes nor their digests.
  write_reference_package(fixture, t / "ref");
  expect_json_error(rebuild(t / "ref", t / "out.gguf"), "invalid_input",
                    "does not record the size and SHA-256 of llama-tiny-f16.gguf");
  // A schema 1 package converted from schema 2 has no record of the tensor order.
  ASSERT_EQ(write_pkg(fixture, t / "v2", {"--schema", "2"}).exit_code, 0);
  const auto c = run_cli({"convert-package", (t / "v2").string(), "--to", "1", "--out-dir", (t / "v1").string()});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  expect_json_error(rebuild(t / "v1", t / "out.gguf"), "invalid_input",
                    "does not record the source's tensor order and shard boundaries (shared/metadata.gguf has no "
                    "skippy.package.source.tensors");
  EXPECT_EQ(listing(t.path()), (std::vector<std::string>{"ref", "v1", "v2"}));
}

// A GGUF v2 file: the layout a rebuild writes (v3) is not its own, so
// write-package says so and records why, and the rebuild repeats it.
TEST(SourceRebuild, ALayoutThePackageCannotRecordIsNamed) {
  TempDir t;
  auto bytes = read_file(data_path("llama-tiny-q8_0.gguf"));
  ASSERT_EQ(bytes[4], 3);
  bytes[4] = 2;
  write_file(t / "v2file.gguf", bytes);
  const auto w = write_pkg(t / "v2file.gguf", t / "pkg");
  ASSERT_EQ(w.exit_code, 0) << w.err;
  EXPECT_NE(w.out.find("v2file.gguf is GGUF version 2"), std::string::npos) << w.out;
  expect_json_error(rebuild(t / "pkg", t / "out.gguf"), "invalid_input",
                    "write-package did not record it, because v2file.gguf is GGUF version 2");
  EXPECT_FALSE(fs::exists(t / "out.gguf"));
}

// The record is part of what validate-package checks: two tensor names of
// one length swapped in it (the manifest updated to the new digest) is a
// problem there, and the rebuild, whose parts all match, says the package
// does not give the source's bytes.
TEST(SourceRebuild, ARecordThatDoesNotDescribeTheSourceIsCaught) {
  TempDir t;
  const auto fixture = data_path("llama-tiny-q8_0.gguf");
  ASSERT_EQ(write_pkg(fixture, t / "pkg").exit_code, 0);
  const fs::path meta = t / "pkg" / "shared" / "metadata.gguf";
  const std::string old_sha = sha256_file(meta);
  auto bytes = read_file(meta);
  const auto record = GgufFile::open(meta);
  const auto* kv = record.find_kv("skippy.package.source.tensors");
  ASSERT_NE(kv, nullptr);
  const std::string a = "blk.0.attn_q.weight", b = "blk.0.attn_k.weight";
  auto find = [&](const std::string& s) {
    return std::search(bytes.begin() + static_cast<std::ptrdiff_t>(kv->offset), bytes.end(), s.begin(), s.end());
  };
  const auto ia = find(a), ib = find(b);
  ASSERT_NE(ia, bytes.end());
  ASSERT_NE(ib, bytes.end());
  std::copy(b.begin(), b.end(), ia);
  std::copy(a.begin(), a.end(), ib);
  write_file(meta, bytes);
  std::string manifest = read_text(t / "pkg" / "model-package.json");
  const auto at = manifest.find(old_sha);
  ASSERT_NE(at, std::string::npos);
  manifest.replace(at, old_sha.size(), sha256_file(meta));
  write_file(t / "pkg" / "model-package.json", std::vector<uint8_t>(manifest.begin(), manifest.end()));

  const auto v = run_cli({"validate-package", fixture.string(), (t / "pkg").string(), "--json"});
  EXPECT_EQ(v.exit_code, 1) << v.out;
  EXPECT_NE(v.out.find("KV 'skippy.package.source.tensors' does not record the source's layout"), std::string::npos) << v.out;
  const auto r = rebuild(t / "pkg", t / "out.gguf");
  expect_json_error(r, "integrity", "Every part is what the package declares, so the package does not record the source's exact layout");
  EXPECT_FALSE(fs::exists(t / "out.gguf"));
}

// From hf://: every part comes through the Hugging Face cache, verified,
// and the split model's shards come back from it.
TEST(SourceRebuild, AnHfPackageBringsItsPartsAndGivesTheSourceBack) {
  HubStandin hub;
  TempDir t;
  const auto fixture = data_path("llama-tiny-q4_0-00001-of-00003.gguf");
  ASSERT_EQ(write_pkg(fixture, t / "pkg").exit_code, 0);
  const std::string commit = hub.publish("org/split-layers", t / "pkg");
  const std::vector<std::string> env = {"HF_ENDPOINT=" + hub.endpoint(), "HF_HUB_CACHE=" + (t / "hf").string(),
                                        "HF_HOME=" + (t / "hfhome").string(),
                                        "SKIPPY_CACHE_DIR=" + (t / "skippy").string(), "HF_TOKEN=", "HF_HUB_OFFLINE="};
  const auto r = run_cli({"materialize", "hf://org/split-layers@" + commit, "--as-source", "--out",
                          (t / "restored").string(), "--json"},
                         env);
  expect_rebuilt(r, fixture, t / "restored");
  EXPECT_EQ(json::parse(r.out)["package_id"], "sha256:" + sha256_file(t / "pkg" / "model-package.json"));
}

TEST(SourceRebuild, UsageErrors) {
  TempDir t;
  ASSERT_EQ(write_pkg(data_path("llama-tiny-q4_0-00001-of-00003.gguf"), t / "pkg").exit_code, 0);
  write_file(t / "one.gguf", {1});
  expect_json_error(rebuild(t / "pkg", t / "one.gguf"), "usage", "is a file, and the source is 3 files");
  expect_json_error(run_cli({"materialize", (t / "pkg").string(), "--as-source", "--json"}), "usage", "needs --out");
  expect_json_error(rebuild(t / "pkg", t / "d", {"--layers", "0..2"}), "usage", "--as-source takes no --layers");
  expect_json_error(rebuild(t / "pkg", t / "pkg" / "shared"), "invalid_input", "is inside the package");
  EXPECT_EQ(listing(t.path()), (std::vector<std::string>{"one.gguf", "pkg"}));
}

}  // namespace
}  // namespace skippy::test
