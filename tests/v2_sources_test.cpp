// Package schema 2 through every source: open_package
// on local directories and hf:// (the Hugging Face cache, the Hub stand-in),
// `select`, `verify` (through the verification cache) and `fetch` on
// packages written by the test-side reference-layout writer
// (schema_v2_package.h), never by our own writer; tampered copies.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <thread>

#include "hub_standin.h"
#include "schema_v2_package.h"
#include "skippy/stage.h"
#include "skippy/error.h"
#include "skippy/package_signature.h"
#include "skippy/peer_identity.h"
#include "util/sha256.h"
#include "skippy/source.h"
#include "skippy/verify.h"
#include "test_util.h"

namespace v2src_test {

namespace fs = std::filesystem;
using nlohmann::json;
using skippy::test::CliResult;
using skippy::test::TempDir;

inline fs::path llama() { return skippy::test::data_path("llama-tiny-q8_0.gguf"); }

// Files changed in the last moments are not recorded by the verification
// cache (its racy-clean rule): a package written just now is aged first.
inline void let_files_settle() { std::this_thread::sleep_for(std::chrono::milliseconds(120)); }

// Flips one byte of a file in place (same size): at `from_end` bytes before its end.
inline void flip_byte(const fs::path& file, size_t from_end = 1) {
  auto bytes = skippy::test::read_file(file);
  bytes.at(bytes.size() - from_end) ^= 0x5a;
  fs::remove(file);  // a symlinked cache file: replace the link, keep the blob
  skippy::test::write_file(file, bytes);
}

// The paths the stage `a..b` of a local schema 2 package reads (the library's
// own selection, used to say what a fetch may bring).
inline std::set<std::string> stage_paths(const fs::path& dir, uint32_t a, uint32_t b) {
  const auto pkg = skippy::test::local_catalog(dir);
  std::set<std::string> out;
  for (const auto& p : skippy::select_stage(pkg.catalog, {a, b}).parts) out.insert(p.rel_path);
  return out;
}

inline std::set<std::string> all_paths(const skippy::test::SchemaV2Package& w) {
  std::set<std::string> out;
  for (const auto& [id, path] : w.artifact_path) out.insert(path);
  return out;
}

inline std::string id_of(const skippy::test::SchemaV2Package& w, const std::string& path) {
  for (const auto& [id, p] : w.artifact_path) {
    if (p == path) return id;
  }
  ADD_FAILURE() << "no artifact at " << path;
  return {};
}

inline std::set<std::string> strings(const json& a) {
  std::set<std::string> out;
  for (const auto& x : a) out.insert(x.get<std::string>());
  return out;
}

}  // namespace v2src_test

namespace skippy {
namespace {

using namespace v2src_test;

// ------------------------------------------------------------- the library

TEST(V2Sources, OpenPackageReadsBothSchemasThroughTheirReaders) {
  TempDir tmp;
  const auto written = test::write_schema_v2_package(llama(), tmp / "v2");
  ASSERT_EQ(test::write_pkg(llama(), tmp / "v1").exit_code, 0);
  Sources none;
  none.hf_cache = tmp / "hf";
  const auto v2 = open_package((tmp / "v2").string(), none);
  EXPECT_EQ(v2.schema_version(), 2u);
  EXPECT_EQ(v2.identity().package_id, written.root["package_id"].get<std::string>());
  EXPECT_EQ(v2.manifest_sha256, sha256_hex(test::read_text(tmp / "v2" / "model-package.json")));
  EXPECT_FALSE(v2.always_verify);
  EXPECT_EQ(v2.source, nullptr);
  EXPECT_FALSE(v2.commit.has_value());
  EXPECT_TRUE(v2.names_artifacts_by_id);

  const auto v1 = open_package((tmp / "v1").string(), none);
  EXPECT_EQ(v1.schema_version(), 1u);
  EXPECT_FALSE(v1.names_artifacts_by_id);
}

TEST(V2Sources, VerifyCatalogPartsUsesTheVerificationCacheAndNamesTheArtifact) {
  TempDir tmp;
  const auto written = test::write_schema_v2_package(llama(), tmp / "v2");
  let_files_settle();
  const auto pkg = test::local_catalog(tmp / "v2");
  const auto stage = select_stage(pkg.catalog, {0, 3});
  VerifyOptions o;
  o.cache_dir = tmp / "vc";
  const auto first = verify_parts(pkg, stage.parts, o);
  ASSERT_TRUE(first.verified) << (first.problems.empty() ? "" : first.problems.front());
  EXPECT_EQ(first.artifacts, stage.parts.size());
  EXPECT_EQ(first.cache_hits, 0u);
  uint64_t bytes = 0;
  for (const auto& p : stage.parts) bytes += p.bytes;
  EXPECT_EQ(first.hashed_bytes, bytes);
  // The records are the schema 1 cache's: a second run hashes nothing.
  const auto second = verify_parts(pkg, stage.parts, o);
  EXPECT_TRUE(second.verified);
  EXPECT_EQ(second.cache_hits, stage.parts.size());
  EXPECT_EQ(second.hashed_bytes, 0u);
  EXPECT_FALSE(fs::is_empty(tmp / "vc"));

  // A flipped byte (same size, after a record was made) is found and named.
  const std::string layer1 = "layers/layer-00001.gguf";
  v2src_test::flip_byte(tmp / "v2" / layer1);
  const auto bad = verify_parts(pkg, stage.parts, o);
  EXPECT_FALSE(bad.verified);
  ASSERT_EQ(bad.problems.size(), 1u);
  EXPECT_NE(bad.problems[0].find("artifact " + id_of(written, layer1) + " (" + layer1 + "): SHA-256 is "),
            std::string::npos)
      << bad.problems[0];
  EXPECT_NE(bad.problems[0].find(", the catalog says "), std::string::npos) << bad.problems[0];
  try {
    (void)verify_if_required(pkg, stage.parts, o);  // a local package verifies only when asked
  } catch (const Error& e) {
    ADD_FAILURE() << "verified without being asked: " << e.what();
  }
}

TEST(V2Sources, TrustedSignersCoverSchema2Roots) {
  TempDir tmp;
  (void)test::write_schema_v2_package(llama(), tmp / "v2");
  fs::copy(tmp / "v2", tmp / "unsigned", fs::copy_options::recursive);
  peer::init_owner(tmp / "owner");
  peer::init_owner(tmp / "other");
  (void)sign_package(tmp / "v2", tmp / "owner");
  Sources trusting;
  trusting.hf_cache = tmp / "hf";
  trusting.trusted_signers = {tmp / "owner" / "owner.crt"};
  const auto signed_pkg = open_package((tmp / "v2").string(), trusting);
  ASSERT_EQ(signed_pkg.schema_version(), 2u);
  ASSERT_TRUE(signed_pkg.signature.has_value());
  EXPECT_TRUE(signed_pkg.always_verify) << "the signature vouches for digests the bytes must then match";
  auto refused = [&](const fs::path& dir, const Sources& s, ErrorKind kind, const std::string& needle) {
    try {
      (void)open_package(dir.string(), s);
      ADD_FAILURE() << dir << " opened";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), kind) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  refused(tmp / "unsigned", trusting, ErrorKind::kUnauthorized, "unsigned package");
  Sources other = trusting;
  other.trusted_signers = {tmp / "other" / "owner.crt"};
  refused(tmp / "v2", other, ErrorKind::kUnauthorized, "not a trusted signer");
  // A root changed after signing (one more byte of whitespace: still a valid root).
  {
    auto text = test::read_text(tmp / "v2" / "model-package.json");
    text += "\n";
    test::write_file(tmp / "v2" / "model-package.json", std::vector<uint8_t>(text.begin(), text.end()));
  }
  refused(tmp / "v2", trusting, ErrorKind::kIntegrity, "model-package.json");
}

// ------------------------------------------------------------- the CLI, local

class V2SourcesCli : public ::testing::Test {
 protected:
  std::vector<std::string> env(std::vector<std::string> extra = {}) const {
    std::vector<std::string> e = {"SKIPPY_CACHE_DIR=" + (tmp_ / "skippy").string(), "HF_HUB_CACHE=" + (tmp_ / "hf").string(),
                                  "HF_HUB_OFFLINE=1", "SKIPPY_VERIFY_PACKAGE_SHA="};
    for (const auto& x : extra) {  // later settings replace earlier ones
      const auto name = x.substr(0, x.find('=') + 1);
      std::erase_if(e, [&](const std::string& y) { return y.starts_with(name); });
      e.push_back(x);
    }
    return e;
  }
  CliResult cli(const std::vector<std::string>& args, std::vector<std::string> extra = {}) const {
    return test::run_cli(args, env(std::move(extra)));
  }
  TempDir tmp_;
};

TEST_F(V2SourcesCli, VerifyJsonOfAStageThenEveryArtifactThroughTheCache) {
  const auto written = test::write_schema_v2_package(llama(), tmp_ / "v2");
  let_files_settle();
  const std::string dir = (tmp_ / "v2").string();
  const auto r = cli({"verify", dir, "--layers", "0..3", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["schema_version"], 2);
  EXPECT_EQ(j["package_id"], written.root["package_id"].get<std::string>());
  EXPECT_EQ(j["verified"], true);
  EXPECT_EQ(j["layer_start"], 0);
  EXPECT_EQ(j["layer_end"], 3);
  // The carrier only: opening the package hashed it and recorded it in the
  // verification cache a moment before (catalog_stage.cpp); the rest is hashed.
  EXPECT_EQ(j["cache_hits"], 1);
  EXPECT_GT(j["hashed_bytes"].get<uint64_t>(), 0u);
  std::set<std::string> paths;
  for (const auto& p : j["parts"]) {
    paths.insert(p["relative_path"].get<std::string>());
    EXPECT_EQ(p["artifact_id"], id_of(written, p["relative_path"].get<std::string>()));
    EXPECT_EQ(p["ok"], true);
  }
  EXPECT_EQ(paths, stage_paths(tmp_ / "v2", 0, 3));
  EXPECT_TRUE(paths.contains("shared/common.gguf")) << "the first stage reads the embeddings";
  EXPECT_FALSE(paths.contains("layers/layer-00003.gguf"));

  const auto again = json::parse(cli({"verify", dir, "--layers", "0..3", "--json"}).out);
  EXPECT_EQ(again["cache_hits"], again["artifacts"]);
  EXPECT_EQ(again["hashed_bytes"], 0);

  const auto all = cli({"verify", dir, "--json", "--no-cache"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  const auto ja = json::parse(all.out);
  EXPECT_EQ(ja["artifacts"], written.artifact_path.size());
  EXPECT_EQ(ja["cache_hits"], 0);
  std::set<std::string> every;
  for (const auto& p : ja["parts"]) every.insert(p["relative_path"].get<std::string>());
  EXPECT_EQ(every, all_paths(written));
  EXPECT_EQ(ja["parts"][0]["kind"], "carrier");
}

TEST_F(V2SourcesCli, TamperedCopiesAreRefusedNamingTheArtifact) {
  const auto written = test::write_schema_v2_package(llama(), tmp_ / "v2");
  const std::string dir = (tmp_ / "v2").string();
  ASSERT_EQ(cli({"verify", dir, "--json"}).exit_code, 0);  // records made: tampering must still be seen
  const std::string layer2 = "layers/layer-00002.gguf";
  const std::string id2 = id_of(written, layer2);

  // A flipped payload byte: verify lists it (exit 1), select refuses when asked to verify.
  flip_byte(tmp_ / "v2" / layer2, 7);
  auto r = cli({"verify", dir, "--layers", "2..4", "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  auto j = json::parse(r.out);
  EXPECT_EQ(j["verified"], false);
  ASSERT_EQ(j["problems"].size(), 1u);
  EXPECT_NE(j["problems"][0].get<std::string>().find("artifact " + id2 + " (" + layer2 + "): SHA-256 is"), std::string::npos)
      << j["problems"][0];
  EXPECT_NE(r.err.find("1 of 3 artifacts does not match the catalog"), std::string::npos) << r.err;
  test::expect_json_error(cli({"select", dir, "--layers", "2..4", "--json"}, {"SKIPPY_VERIFY_PACKAGE_SHA=1"}), "integrity",
                          "artifact " + id2 + " (" + layer2 + "): SHA-256");
  // Outside the stage it does not matter to the stage.
  EXPECT_EQ(cli({"verify", dir, "--layers", "4..8", "--json"}).exit_code, 0);

  // A wrong size: the file rule, naming the artifact, in verify's report and as select's refusal.
  {
    auto bytes = test::read_file(tmp_ / "v2" / layer2);
    bytes.push_back(0);
    test::write_file(tmp_ / "v2" / layer2, bytes);
  }
  r = cli({"verify", dir, "--layers", "2..4", "--json"});
  EXPECT_EQ(r.exit_code, 1);
  j = json::parse(r.out);
  ASSERT_EQ(j["problems"].size(), 1u);
  EXPECT_NE(j["problems"][0].get<std::string>().find("artifact " + id2 + " (" + layer2 + "): "), std::string::npos);
  EXPECT_NE(j["problems"][0].get<std::string>().find("the catalog says byte_size"), std::string::npos) << j["problems"][0];
  test::expect_json_error(cli({"select", dir, "--layers", "2..4", "--json"}), "invalid_input",
                          "artifact " + id2 + " (" + layer2 + "): ");

  // A tampered carrier: nothing is selected or verified from its locators.
  flip_byte(tmp_ / "v2" / "shared/metadata.gguf", 3);
  for (const auto& cmd : {"verify", "select"}) {
    test::expect_json_error(cli({cmd, dir, "--layers", "4..8", "--json"}), "integrity",
                            "artifact zz-carrier (shared/metadata.gguf): SHA-256");
  }
}

TEST_F(V2SourcesCli, SelectByTensorNames) {
  const auto written = test::write_schema_v2_package(llama(), tmp_ / "v2");
  const std::string dir = (tmp_ / "v2").string();
  const auto r = cli({"select", dir, "--tensors", "blk.5.attn_q.weight,token_embd.weight", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["selected_by"], "tensors");
  EXPECT_FALSE(j.contains("layer_start"));
  std::set<std::string> names;
  for (const auto& t : j["tensors"]) {
    names.insert(t["name"].get<std::string>());
    EXPECT_EQ(t["artifact_id"], written.tensors.at(t["name"].get<std::string>()).artifact_id);
    EXPECT_EQ(t["offset"], written.tensors.at(t["name"].get<std::string>()).offset);
  }
  EXPECT_EQ(names, (std::set<std::string>{"blk.5.attn_q.weight", "token_embd.weight"}));
  std::set<std::string> ids;
  for (const auto& p : j["parts"]) ids.insert(p["artifact_id"].get<std::string>());
  EXPECT_EQ(ids, (std::set<std::string>{"zz-carrier", written.tensors.at("blk.5.attn_q.weight").artifact_id,
                                        written.tensors.at("token_embd.weight").artifact_id}));
  // The same from a file; verify works on that set.
  test::write_file(tmp_ / "names.txt", [] {
    const std::string t = "# the stage's tensors\nblk.5.attn_q.weight\n\n  token_embd.weight  \n";
    return std::vector<uint8_t>(t.begin(), t.end());
  }());
  const auto f = cli({"select", dir, "--tensors-file", (tmp_ / "names.txt").string(), "--json"});
  ASSERT_EQ(f.exit_code, 0) << f.err;
  EXPECT_EQ(json::parse(f.out)["parts"], j["parts"]);
  const auto v = cli({"verify", dir, "--tensors-file", (tmp_ / "names.txt").string(), "--json"});
  ASSERT_EQ(v.exit_code, 0) << v.err;
  EXPECT_EQ(json::parse(v.out)["artifacts"], 3);

  test::expect_json_error(cli({"select", dir, "--tensors", "blk.5.attn_q.weight,nope.weight", "--json"}), "invalid_input",
                          "tensor 'nope.weight' is not in the package's catalog");
  EXPECT_EQ(cli({"select", dir, "--tensors", "token_embd.weight", "--layers", "0..1"}).exit_code, 2);
  EXPECT_EQ(cli({"select", dir}).exit_code, 2);
  ASSERT_EQ(test::write_pkg(llama(), tmp_ / "v1").exit_code, 0);
  const auto v1 = cli({"select", (tmp_ / "v1").string(), "--tensors", "token_embd.weight", "--json"});
  EXPECT_EQ(v1.exit_code, 2);
  EXPECT_NE(v1.err.find("schema 1"), std::string::npos) << v1.err;
}

// ------------------------------------------------------- hf:// (the Hub stand-in)

// One stand-in, one schema 2 package published on it for the suite; each
// test has its own empty Hugging Face cache and skippy cache.
class V2SourcesHub : public ::testing::Test {
 protected:
  static constexpr const char* kRepo = "org/v2-layers";
  static void SetUpTestSuite() {
    hub_ = new test::HubStandin();
    dir_ = new TempDir();
    written_ = new test::SchemaV2Package(test::write_schema_v2_package(llama(), dir_->path() / "v2"));
    commit_ = new std::string(hub_->publish(kRepo, dir_->path() / "v2"));
  }
  static void TearDownTestSuite() {
    delete hub_;
    delete written_;
    delete commit_;
    delete dir_;
  }
  void SetUp() override {
    hub_->clear_faults();
    hub_->configure({{"token", "hf_test"}, {"url_ttl_secs", 3600}, {"reject_unknown_tokens", false},
                     {"resolve_cache_redirect", false}});
    hub_->clear_log();
  }
  std::vector<std::string> env(std::vector<std::string> extra = {}) const {
    std::vector<std::string> e = {"HF_ENDPOINT=" + hub_->endpoint(), "HF_HUB_CACHE=" + (tmp_ / "hf").string(),
                                  "HF_HOME=" + (tmp_ / "hfhome").string(), "SKIPPY_CACHE_DIR=" + (tmp_ / "skippy").string(),
                                  "SKIPPY_HF_BACKOFF_MS=20", "HF_TOKEN=", "HF_HUB_OFFLINE="};
    for (const auto& x : extra) {
      const auto name = x.substr(0, x.find('=') + 1);
      std::erase_if(e, [&](const std::string& y) { return y.starts_with(name); });
      e.push_back(x);
    }
    return e;
  }
  CliResult cli(const std::vector<std::string>& args, std::vector<std::string> extra = {}) const {
    return test::run_cli(args, env(std::move(extra)));
  }
  static std::string pinned() { return "hf://" + std::string(kRepo) + "@" + *commit_; }
  fs::path snapshot() const {
    std::string name = "models--" + std::string(kRepo);
    name.replace(name.find('/'), 1, "--");
    return tmp_ / "hf" / name / "snapshots" / *commit_;
  }
  // The files the stand-in sent bytes of, by repository path (resolve GETs
  // name it; storage GETs name the SHA-256).
  static std::multiset<std::string> served() {
    std::map<std::string, std::string> by_sha;
    for (const auto& e : written_->root["artifact_catalog"]["entries"]) by_sha[e["sha256"]] = e["path"];
    std::multiset<std::string> out;
    for (const auto& r : hub_->log()) {
      if (r.method != "GET" || r.bytes_sent == 0 || (r.status != 200 && r.status != 206)) continue;
      if (r.listener == "storage") {
        const auto sha = r.path.substr(r.path.rfind('/') + 1);
        out.insert(by_sha.count(sha) ? by_sha[sha] : sha);
        continue;
      }
      const auto pos = r.path.find("/resolve/");
      if (pos == std::string::npos) continue;
      const auto rest = r.path.substr(pos + 9);
      out.insert(rest.substr(rest.find('/') + 1));
    }
    return out;
  }

  static test::HubStandin* hub_;
  static TempDir* dir_;
  static test::SchemaV2Package* written_;
  static std::string* commit_;
  TempDir tmp_;
};
test::HubStandin* V2SourcesHub::hub_ = nullptr;
TempDir* V2SourcesHub::dir_ = nullptr;
test::SchemaV2Package* V2SourcesHub::written_ = nullptr;
std::string* V2SourcesHub::commit_ = nullptr;

TEST_F(V2SourcesHub, FetchBringsTheRootTheCarrierAndOnlyTheStagesArtifacts) {
  const auto r = cli({"fetch", "hf://" + std::string(kRepo), "--layers", "2..4", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["schema_version"], 2);
  EXPECT_EQ(j["package_id"], written_->root["package_id"].get<std::string>());
  EXPECT_EQ(j["commit"], *commit_);
  EXPECT_EQ(j["verified"], true);
  EXPECT_EQ(j["source"], "hub");
  EXPECT_EQ(fs::path(j["snapshot_dir"].get<std::string>()), snapshot());
  // A branch moves: the warning names the commit to pin.
  ASSERT_EQ(j["warnings"].size(), 1u);
  EXPECT_NE(j["warnings"][0].get<std::string>().find(*commit_), std::string::npos);
  // ... and `revision` says it as schema 1's fetch does (#25).
  EXPECT_EQ(j["revision"]["revision_kind"], "branch");
  EXPECT_EQ(j["revision"]["moving"], true);
  EXPECT_EQ(j["revision"]["pin"], pinned());

  auto want = stage_paths(dir_->path() / "v2", 2, 4);
  EXPECT_EQ(want, (std::set<std::string>{"shared/metadata.gguf", "layers/layer-00002.gguf", "layers/layer-00003.gguf"}))
      << "llama-tiny has no layerless tensor a middle stage reads";
  EXPECT_EQ(strings(j["parts"]), want);
  want.insert("model-package.json");
  EXPECT_EQ(strings(j["downloaded"]), want);
  const auto got = served();
  EXPECT_EQ(std::set<std::string>(got.begin(), got.end()), want) << "nothing beyond the stage's artifacts";
  EXPECT_EQ(got.size(), want.size()) << "each file once";
  for (const auto& rel : want) {
    EXPECT_TRUE(fs::is_symlink(snapshot() / rel)) << rel;
    EXPECT_EQ(test::read_file(snapshot() / rel), test::read_file(dir_->path() / "v2" / rel)) << rel;
  }
  EXPECT_FALSE(fs::exists(snapshot() / "shared/common.gguf"));

  // Again: everything from the cache, verified through the records.
  hub_->clear_log();
  const auto again = cli({"fetch", pinned(), "--layers", "2..4", "--json"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  const auto ja = json::parse(again.out);
  EXPECT_EQ(ja["source"], "cache");
  EXPECT_EQ(ja["revision"]["moving"], false);
  EXPECT_EQ(ja["revision"]["revision_kind"], "commit");
  EXPECT_TRUE(ja["warnings"].empty());
  EXPECT_EQ(ja["downloaded"].size(), 0u);
  EXPECT_TRUE(served().empty());
  EXPECT_EQ(ja["verified"], true);
}

TEST_F(V2SourcesHub, FetchWithoutLayersBringsEveryArtifactAndTensorNamesBringTheirs) {
  const auto r = cli({"fetch", pinned(), "--tensors", "blk.6.ffn_up.weight", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string l6 = "layers/layer-00006.gguf";
  EXPECT_EQ(strings(json::parse(r.out)["downloaded"]),
            (std::set<std::string>{"model-package.json", "shared/metadata.gguf", l6}));
  hub_->clear_log();
  const auto all = cli({"fetch", pinned(), "--json"});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  const auto j = json::parse(all.out);
  EXPECT_EQ(strings(j["parts"]), all_paths(*written_));
  auto want = all_paths(*written_);
  want.erase("shared/metadata.gguf");
  want.erase(l6);
  EXPECT_EQ(strings(j["downloaded"]), want) << "what the cache held is not asked again";
  const auto got = served();
  EXPECT_EQ(std::set<std::string>(got.begin(), got.end()), want);
  EXPECT_EQ(j["sources"][l6], "cache");
}

TEST_F(V2SourcesHub, SelectAndVerifyAnHfPackageFromTheCacheOffline) {
  ASSERT_EQ(cli({"fetch", pinned(), "--layers", "0..4"}).exit_code, 0);
  hub_->clear_log();
  const auto s = cli({"select", pinned(), "--layers", "0..4", "--json"}, {"HF_HUB_OFFLINE=1"});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  const auto j = json::parse(s.out);
  EXPECT_EQ(j["schema_version"], 2);
  EXPECT_EQ(j["commit"], *commit_);
  EXPECT_EQ(j["verified"], true) << "hf:// packages verify on every resolution";
  EXPECT_EQ(j["revision"]["pin"], pinned()) << "select says what to pin, as for schema 1";
  EXPECT_EQ(j["revision"]["moving"], false);
  std::set<std::string> paths;
  for (const auto& p : j["parts"]) {
    paths.insert(p["relative_path"].get<std::string>());
    EXPECT_EQ(p["artifact_id"], id_of(*written_, p["relative_path"].get<std::string>()));
    EXPECT_EQ(fs::path(p["path"].get<std::string>()).parent_path().filename(), "blobs");
  }
  EXPECT_EQ(paths, stage_paths(dir_->path() / "v2", 0, 4));
  EXPECT_FALSE(j["tensors"].empty());

  const auto v = cli({"verify", pinned(), "--layers", "0..4", "--json"}, {"HF_HUB_OFFLINE=1"});
  ASSERT_EQ(v.exit_code, 0) << v.err;
  const auto jv = json::parse(v.out);
  EXPECT_EQ(jv["package_id"], written_->root["package_id"].get<std::string>());
  EXPECT_EQ(jv["cache_hits"], jv["artifacts"]) << "select recorded them";
  // A stage whose parts are not all in the cache: offline says so, naming them.
  const auto missing = cli({"select", pinned(), "--layers", "4..8", "--json"}, {"HF_HUB_OFFLINE=1"});
  test::expect_json_error(missing, "offline", "layers/layer-00004.gguf");
  EXPECT_TRUE(served().empty());

  // A damaged blob in the cache (same size): refused, with the file to remove.
  const fs::path blob = fs::canonical(snapshot() / "layers/layer-00001.gguf");
  flip_byte(blob, 11);
  const auto bad = cli({"select", pinned(), "--layers", "0..4", "--json"}, {"HF_HUB_OFFLINE=1"});
  test::expect_json_error(bad, "integrity", "artifact " + id_of(*written_, "layers/layer-00001.gguf") +
                                                " (layers/layer-00001.gguf): SHA-256 is");
  EXPECT_NE(bad.err.find("rm " + blob.string()), std::string::npos) << bad.err;
}

TEST_F(V2SourcesHub, InspectBringsOnlyTheRootAndTheCarrier) {
  const auto r = cli({"inspect", pinned(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["schema_version"], 2);
  EXPECT_EQ(j["package_id"], written_->root["package_id"].get<std::string>());
  EXPECT_EQ(j["commit"], *commit_);
  EXPECT_EQ(j["artifacts"].size(), written_->artifact_path.size());
  const auto got = served();
  EXPECT_EQ(std::set<std::string>(got.begin(), got.end()),
            (std::set<std::string>{"model-package.json", "shared/metadata.gguf"}));
}

TEST_F(V2SourcesHub, DamagedBytesOnTheHubAreNeverInstalled) {
  // A second repository whose files differ from what its root declares.
  TempDir bad;
  fs::copy(dir_->path() / "v2", bad / "v2", fs::copy_options::recursive);
  flip_byte(bad / "v2" / "layers/layer-00003.gguf", 5);
  const std::string commit = hub_->publish("org/v2-damaged", bad / "v2");
  const std::string ref = "hf://org/v2-damaged@" + commit;
  const auto r = cli({"fetch", ref, "--layers", "2..4", "--json"});
  test::expect_json_error(r, "integrity", "layers/layer-00003.gguf");
  std::string name = "models--org--v2-damaged";
  EXPECT_FALSE(fs::exists(tmp_ / "hf" / name / "snapshots" / commit / "layers/layer-00003.gguf"));

  // A damaged carrier: refused before any payload part is asked for.
  TempDir bad2;
  fs::copy(dir_->path() / "v2", bad2 / "v2", fs::copy_options::recursive);
  flip_byte(bad2 / "v2" / "shared/metadata.gguf", 2);
  const std::string commit2 = hub_->publish("org/v2-bad-carrier", bad2 / "v2");
  hub_->clear_log();
  const auto c = cli({"fetch", "hf://org/v2-bad-carrier@" + commit2, "--layers", "2..4", "--json"});
  test::expect_json_error(c, "integrity", "shared/metadata.gguf");
  for (const auto& rel : served()) EXPECT_FALSE(rel.starts_with("layers/")) << "a payload part was sent: " << rel;
}

}  // namespace
}  // namespace skippy
