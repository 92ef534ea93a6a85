// Package schema 2 on the Hub: `publish` of a schema 2 package,
// a schema 1 package and its conversion published from one repository (the
// conversion on another branch uploads only the carrier and the root: LFS
// holds the fragments), `write-package --schema 2 --push`, and `materialize`,
// `plan` and the C API on hf:// schema 2 packages, all through the Hub
// stand-in and its request log.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "hub_standin.h"
#include "schema_v2_package.h"
#include "skippy/stage.h"
#include "skippy/stage_admission.h"
#include "skippy/gguf.h"
#include "util/sha256.h"
#include "test_util.h"

namespace skippy::v2pub_test {

namespace fs = std::filesystem;
using nlohmann::json;
using skippy::test::CliResult;
using skippy::test::HubStandin;
using skippy::test::TempDir;

constexpr const char* kEpoch = "SOURCE_DATE_EPOCH=1700000000";

inline fs::path llama() { return skippy::test::data_path("llama-tiny-q8_0.gguf"); }

// The verification cache does not record files changed in the last moments.
inline void let_files_settle() { std::this_thread::sleep_for(std::chrono::milliseconds(120)); }

inline json raw_log(const HubStandin& hub) {
  return json::parse(HubStandin::http("GET", hub.endpoint() + "/_admin/log").body);
}

// SHA-256 of every storage PUT the stand-in accepted (200).
inline std::set<std::string> put_oids(const json& raw) {
  std::set<std::string> out;
  for (const auto& e : raw) {
    if (e["listener"] != "storage" || e["method"] != "PUT" || e["status"] != 200) continue;
    const std::string p = e["path"];  // /upload/ns/name/<oid>[/part/N]
    size_t at = 0;
    for (int k = 0; k < 4; ++k) at = p.find('/', at) + 1;
    out.insert(p.substr(at, 64));
  }
  return out;
}

inline uint64_t storage_bytes_received(const json& raw) {
  uint64_t n = 0;
  for (const auto& e : raw) {
    if (e["listener"] == "storage") n += e["bytes_received"].get<uint64_t>();
  }
  return n;
}

// A branch's files as the Hub lists them, but the .gitattributes the Hub
// makes with a repository: path -> (LFS SHA-256 or "", git blob id).
struct HubFile {
  std::string lfs_sha256, blob_id;
};
inline std::map<std::string, HubFile> branch_files(const HubStandin& hub, const std::string& repo, const std::string& rev) {
  const auto r = HubStandin::http("GET", hub.endpoint() + "/api/models/" + repo + "/revision/" + rev + "?blobs=true");
  EXPECT_EQ(r.status, 200) << r.body;
  std::map<std::string, HubFile> out;
  const json j = json::parse(r.body);  // (kept: a range-for over a temporary's member dangles)
  for (const auto& s : j.at("siblings")) {
    if (s["rfilename"] == ".gitattributes") continue;  // the Hub's own, made with the repository
    HubFile f;
    if (s.contains("lfs") && s["lfs"].is_object()) f.lfs_sha256 = s["lfs"]["sha256"];
    if (s.contains("blobId")) f.blob_id = s["blobId"];
    out[s["rfilename"]] = f;
  }
  return out;
}

// Every tensor of `stage` holds exactly the source's bytes, type and dims; returns the names.
inline std::set<std::string> check_tensors_match_source(const fs::path& stage) {
  const auto g = skippy::GgufFile::open(stage);
  const auto src = skippy::GgufFile::open(llama());
  std::map<std::string, const skippy::GgufTensorInfo*> by_name;
  for (const auto& t : src.tensors()) by_name[std::string(t.name)] = &t;
  std::set<std::string> names;
  for (const auto& t : g.tensors()) {
    names.insert(std::string(t.name));
    const auto it = by_name.find(std::string(t.name));
    if (it == by_name.end()) {
      ADD_FAILURE() << stage << ": " << t.name << " is not a source tensor";
      continue;
    }
    EXPECT_EQ(t.type, it->second->type) << t.name;
    EXPECT_EQ(t.ne, it->second->ne) << t.name;
    EXPECT_TRUE(std::ranges::equal(g.tensor_data(t), src.tensor_data(*it->second))) << t.name;
  }
  return names;
}

// The repository paths whose bytes the stand-in sent (resolve GETs name the
// path; storage GETs the SHA-256, mapped back through `by_sha`).
inline std::multiset<std::string> served(const std::vector<skippy::test::HubRequest>& log,
                                         const std::map<std::string, std::string>& by_sha) {
  std::multiset<std::string> out;
  for (const auto& r : log) {
    if (r.method != "GET" || r.bytes_sent == 0 || (r.status != 200 && r.status != 206)) continue;
    if (r.listener == "storage") {
      const auto sha = r.path.substr(r.path.rfind('/') + 1);
      out.insert(by_sha.count(sha) ? by_sha.at(sha) : sha);
      continue;
    }
    const auto pos = r.path.find("/resolve/");
    if (pos == std::string::npos) continue;
    const auto rest = r.path.substr(pos + 9);
    out.insert(rest.substr(rest.find('/') + 1));
  }
  return out;
}

class V2PublishBase : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { hub_ = new HubStandin(); }
  static void TearDownTestSuite() {
    delete hub_;
    hub_ = nullptr;
  }
  void SetUp() override {
    hub_->clear_faults();
    hub_->configure({{"token", "hf_test"}, {"url_ttl_secs", 3600}, {"reject_unknown_tokens", false},
                     {"resolve_cache_redirect", false},
                     {"xet_enabled", false}});  // the LFS upload path (tests/xet_publish_test.cpp covers Xet)
    hub_->clear_log();
  }
  std::vector<std::string> env(std::vector<std::string> extra = {}) const {
    std::vector<std::string> e = {"HF_ENDPOINT=" + hub_->endpoint(),       "HF_HUB_CACHE=" + (tmp_ / "hf").string(),
                                  "HF_HOME=" + (tmp_ / "hfhome").string(), "SKIPPY_CACHE_DIR=" + (tmp_ / "skippy").string(),
                                  "SKIPPY_HF_BACKOFF_MS=20",               "HF_TOKEN=hf_test",
                                  kEpoch,                                  "HF_HUB_OFFLINE="};
    for (const auto& x : extra) {
      const auto name = x.substr(0, x.find('=') + 1);
      std::erase_if(e, [&](const std::string& y) { return y.starts_with(name); });
      e.push_back(x);
    }
    return e;
  }
  CliResult cli(const std::vector<std::string>& args, std::vector<std::string> extra = {}) const {
    return skippy::test::run_cli(args, env(std::move(extra)));
  }
  static HubStandin* hub_;
  TempDir tmp_;
};
HubStandin* V2PublishBase::hub_ = nullptr;

class V2Publish : public V2PublishBase {};

TEST_F(V2Publish, Schema1OnMainThenItsConversionOnABranchUploadsOnlyTheCarrierAndTheRoot) {
  const std::string repo = "org/both-schemas";
  const fs::path v1 = tmp_ / "v1", v2 = tmp_ / "v2";
  ASSERT_EQ(test::write_pkg(llama(), v1, {}, {kEpoch}).exit_code, 0);
  let_files_settle();
  const auto p1 = cli({"publish", v1.string(), "hf://" + repo, "--create", "--json"});
  ASSERT_EQ(p1.exit_code, 0) << p1.err;
  const auto j1 = json::parse(p1.out);
  ASSERT_EQ(j1["committed"], true);
  ASSERT_GT(j1["lfs_uploaded"].get<int>(), 1);

  const auto conv = cli({"convert-package", v1.string(), "--to", "2", "--out-dir", v2.string(), "--source",
                         llama().string(), "--json"});
  ASSERT_EQ(conv.exit_code, 0) << conv.err;
  let_files_settle();
  const auto pkg = test::local_catalog(v2);
  const auto& carrier = pkg.catalog.artifacts.at(pkg.catalog.carrier);

  hub_->clear_log();
  const auto p2 = cli({"publish", v2.string(), "hf://" + repo + "@v2", "--json"});
  ASSERT_EQ(p2.exit_code, 0) << p2.err;
  const auto j2 = json::parse(p2.out);
  EXPECT_EQ(j2["branch"], "v2");
  EXPECT_EQ(j2["committed"], true);
  EXPECT_EQ(j2["files"].get<size_t>(), pkg.catalog.artifacts.size() + 2) << "every artifact, the model card and the root";
  EXPECT_EQ(j2["lfs_uploaded"], 1) << "the carrier: the fragments are the same LFS objects";
  EXPECT_EQ(j2["lfs_already_on_hub"].get<size_t>(), j2["lfs_files"].get<size_t>() - 1);
  EXPECT_EQ(j2["bytes_uploaded"].get<uint64_t>(), carrier.bytes);
  const auto raw = raw_log(*hub_);
  EXPECT_EQ(put_oids(raw), (std::set<std::string>{carrier.sha256})) << raw.dump();
  EXPECT_EQ(storage_bytes_received(raw), carrier.bytes);

  // What v2 holds that main does not: the carrier, the model card and the
  // root, nothing else; the card and the root are its only regular (non-LFS) files.
  const auto main_files = branch_files(*hub_, repo, "main");
  const auto v2_files = branch_files(*hub_, repo, "v2");
  std::set<std::string> changed, regular;
  for (const auto& [path, f] : v2_files) {
    const auto m = main_files.find(path);
    if (m == main_files.end() || m->second.blob_id != f.blob_id) changed.insert(path);
    if (f.lfs_sha256.empty()) regular.insert(path);
  }
  EXPECT_EQ(changed, (std::set<std::string>{"README.md", "model-package.json", carrier.path}));
  EXPECT_EQ(regular, (std::set<std::string>{"README.md", "model-package.json"}));
  std::set<std::string> want_paths = {"README.md", "model-package.json"};
  for (const auto& a : pkg.catalog.artifacts) want_paths.insert(a.path);
  std::set<std::string> got_paths;
  for (const auto& [path, f] : v2_files) got_paths.insert(path);
  EXPECT_EQ(got_paths, want_paths) << "schema 1 files without a place in schema 2 are removed from the branch";
  std::set<std::string> stale;
  for (const auto& [path, f] : main_files) {
    if (!want_paths.count(path)) stale.insert(path);
  }
  std::set<std::string> deleted;
  for (const auto& d : j2["deleted"]) deleted.insert(d.get<std::string>());
  EXPECT_EQ(deleted, stale);
  for (const auto& d : j2["deleted"]) EXPECT_FALSE(want_paths.count(d.get<std::string>())) << d;

  // Both schemas read from the one repository: a stage of each, fetched
  // into the cache, materializes to the source's tensors.
  const std::string v2ref = "hf://" + repo + "@" + j2["commit"].get<std::string>();
  const auto f = cli({"fetch", v2ref, "--layers", "2..5", "--json"});
  ASSERT_EQ(f.exit_code, 0) << f.err;
  EXPECT_EQ(json::parse(f.out)["schema_version"], 2);
  EXPECT_EQ(json::parse(f.out)["package_id"], pkg.catalog.package_id);
  const auto m2 = cli({"materialize", v2ref, "--layers", "2..5", "--json"}, {"HF_HUB_OFFLINE=1"});
  ASSERT_EQ(m2.exit_code, 0) << m2.err;
  const auto m1 = cli({"materialize", "hf://" + repo + "@" + j1["commit"].get<std::string>(), "--layers", "2..5", "--json"});
  ASSERT_EQ(m1.exit_code, 0) << m1.err;
  const auto names2 = check_tensors_match_source(json::parse(m2.out)["path"].get<std::string>());
  const auto names1 = check_tensors_match_source(json::parse(m1.out)["path"].get<std::string>());
  EXPECT_EQ(names2, names1);
  EXPECT_TRUE(names2.count("blk.2.attn_q.weight") && names2.count("blk.4.ffn_down.weight") && !names2.count("blk.5.attn_q.weight"));

  // Publishing the conversion again: nothing sent, no commit.
  hub_->clear_log();
  const auto again = cli({"publish", v2.string(), "hf://" + repo + "@v2", "--json"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(json::parse(again.out)["committed"], false);
  EXPECT_EQ(json::parse(again.out)["lfs_uploaded"], 0);
  EXPECT_TRUE(put_oids(raw_log(*hub_)).empty());
}

TEST_F(V2Publish, AForeignSchema2PackageIsPublishedWholeAndTamperedCopiesAreRefusedBeforeAnyUpload) {
  const fs::path dir = tmp_ / "foreign";
  const auto written = test::write_schema_v2_package(llama(), dir);
  let_files_settle();
  const auto r = cli({"publish", dir.string(), "hf://org/foreign-v2", "--create", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  const auto files = branch_files(*hub_, "org/foreign-v2", j["commit"].get<std::string>());
  for (const auto& e : written.root["artifact_catalog"]["entries"]) {
    ASSERT_TRUE(files.count(e["path"])) << e["path"];
    EXPECT_EQ(files.at(e["path"]).lfs_sha256, e["sha256"]) << e["path"];
  }
  EXPECT_TRUE(files.count("model-package.json"));
  EXPECT_EQ(files.size(), written.root["artifact_catalog"]["entries"].size() + 1);

  // A flipped payload byte: refused, naming the artifact, nothing sent.
  const auto& where = written.tensors.at("blk.3.attn_k.weight");
  const fs::path part = dir / written.artifact_path.at(where.artifact_id);
  auto bytes = test::read_file(part);
  bytes.at(where.offset) ^= 0x21;
  fs::remove(part);
  test::write_file(part, bytes);
  hub_->clear_log();
  const auto bad = cli({"publish", dir.string(), "hf://org/foreign-v2@tampered", "--json"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("artifact " + where.artifact_id), std::string::npos) << bad.err;
  EXPECT_TRUE(hub_->log().empty()) << "refused before the Hub is asked anything";

  // An unknown root field: the strict reader refuses it, naming the field.
  const fs::path dir2 = tmp_ / "unknown-field";
  (void)test::write_schema_v2_package(llama(), dir2);
  auto root = json::parse(test::read_text(dir2 / "model-package.json"));
  root["surprise"] = 1;
  const std::string text = root.dump();
  test::write_file(dir2 / "model-package.json", std::vector<uint8_t>(text.begin(), text.end()));
  const auto bad2 = cli({"publish", dir2.string(), "hf://org/foreign-v2@unknown", "--json"});
  EXPECT_NE(bad2.exit_code, 0);
  EXPECT_NE(bad2.err.find("surprise"), std::string::npos) << bad2.err;
}

TEST_F(V2Publish, WritePackageSchema2PushPublishesThePackageItWrote) {
  const fs::path out = tmp_ / "pushed";
  const auto r = cli({"write-package", llama().string(), "--schema", "2", "--out-dir", out.string(), "--model-id",
                      "org/tiny:Q8_0", "--source-revision", "0123abc", "--source-file", "llama-tiny-q8_0.gguf", "--push",
                      "hf://org/v2-pushed", "--create", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["schema_version"], 2);
  ASSERT_EQ(j["publish"]["committed"], true) << r.out;
  const auto pkg = test::local_catalog(out);
  EXPECT_EQ(j["publish"]["files"].get<size_t>(), pkg.catalog.artifacts.size() + 1 + (fs::exists(out / "README.md") ? 1 : 0));
  const auto files = branch_files(*hub_, "org/v2-pushed", j["publish"]["commit"].get<std::string>());
  for (const auto& a : pkg.catalog.artifacts) {
    ASSERT_TRUE(files.count(a.path)) << a.path;
    EXPECT_EQ(files.at(a.path).lfs_sha256, a.sha256) << a.path;
  }
  const auto f = cli({"fetch", "hf://org/v2-pushed@" + j["publish"]["commit"].get<std::string>(), "--json"});
  ASSERT_EQ(f.exit_code, 0) << f.err;
  const auto jf = json::parse(f.out);
  EXPECT_EQ(jf["schema_version"], 2);
  EXPECT_EQ(jf["package_id"], j["package_id"]);
  EXPECT_EQ(jf["verified"], true);
}

// --layout reference with --push --max-disk: each part is hashed by reading
// it back once written, and only then announced (uploaded, deleted): the
// directory stays within the budget, the Hub holds complete parts whose
// digests are the catalog's, and the package is the one written locally.
TEST_F(V2Publish, AReferenceLayoutPushUnderMaxDiskKeepsTheBudgetAndUploadsCompleteHashedParts) {
  hub_->fault({{"listener", "storage"}, {"method", "PUT"}, {"kind", "slow"}, {"bytes_per_sec", 2 << 20}, {"times", -1}});
  const fs::path out = tmp_ / "pushed-ref";
  const uint64_t limit = 1600000;  // two ~760 KB layer parts fit
  test::DiskSampler sampler({out});
  const std::vector<std::string> write = {"write-package", llama().string(), "--schema", "2", "--layout", "reference",
                                          "--model-id", "org/tiny:Q8_0", "--source-revision", "0123abc",
                                          "--source-file", "llama-tiny-q8_0.gguf", "--json", "--out-dir"};
  auto args = write;
  args.insert(args.end(), {out.string(), "--push", "hf://org/v2-ref-pushed", "--create", "--max-disk",
                           std::to_string(limit)});
  const auto r = cli(args, {kEpoch});
  sampler.stop();
  hub_->clear_faults();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  ASSERT_EQ(j["publish"]["committed"], true) << r.out;
  EXPECT_GT(sampler.samples(), 20u);
  // shared/common.gguf (2900416 bytes) is open from the source's first
  // tensor (token_embd) to its last, so a layer part (764256) must go beside
  // it (the budget's "stuck" rule): the least this layout can hold.
  const uint64_t least = 2900416 + 764256;
  EXPECT_LE(sampler.peak(), std::max(limit, least) + 64 * 1024) << "sampled peak " << sampler.peak();
  EXPECT_LE(j["disk_peak"].get<uint64_t>(), std::max(limit, least));
  EXPECT_FALSE(fs::exists(out / "layers" / "layer-00000.gguf")) << "uploaded parts leave the disk";

  // The same package as write-package --layout reference alone: same package_id, same part digests on the Hub.
  auto alone_args = write;
  alone_args.push_back((tmp_ / "alone").string());
  const auto alone = cli(alone_args, {kEpoch});
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  EXPECT_EQ(json::parse(alone.out)["package_id"], j["package_id"]);
  EXPECT_EQ(json::parse(alone.out)["manifest_sha256"], j["manifest_sha256"]);
  const auto pkg = test::local_catalog(tmp_ / "alone");
  const auto files = branch_files(*hub_, "org/v2-ref-pushed", j["publish"]["commit"].get<std::string>());
  for (const auto& a : pkg.catalog.artifacts) {
    ASSERT_TRUE(files.count(a.path)) << a.path;
    EXPECT_EQ(files.at(a.path).lfs_sha256, a.sha256) << a.path;
    EXPECT_EQ(a.sha256, sha256_file(tmp_ / "alone" / a.path)) << a.path << ": the catalog's digest is the file's";
  }
  // Every uploaded object is a complete part: fetched back, byte for byte.
  const auto f = cli({"fetch", "hf://org/v2-ref-pushed@" + j["publish"]["commit"].get<std::string>(), "--json"});
  ASSERT_EQ(f.exit_code, 0) << f.err;
  const auto jf = json::parse(f.out);
  EXPECT_EQ(jf["verified"], true);
  EXPECT_EQ(jf["package_id"], j["package_id"]);
}

// A schema 2 package this project did not write, put on the stand-in as is.
class V2PublishHub : public V2PublishBase {
 protected:
  static constexpr const char* kRepo = "org/v2-consume";
  static void SetUpTestSuite() {
    V2PublishBase::SetUpTestSuite();
    dir_ = new TempDir();
    written_ = new test::SchemaV2Package(test::write_schema_v2_package(llama(), dir_->path() / "v2"));
    commit_ = new std::string(hub_->publish(kRepo, dir_->path() / "v2"));
  }
  static void TearDownTestSuite() {
    delete written_;
    delete commit_;
    delete dir_;
    V2PublishBase::TearDownTestSuite();
  }
  static std::string pinned() { return "hf://" + std::string(kRepo) + "@" + *commit_; }
  static std::map<std::string, std::string> by_sha() {
    std::map<std::string, std::string> m;
    for (const auto& e : written_->root["artifact_catalog"]["entries"]) m[e["sha256"]] = e["path"];
    return m;
  }
  static TempDir* dir_;
  static test::SchemaV2Package* written_;
  static std::string* commit_;
};
TempDir* V2PublishHub::dir_ = nullptr;
test::SchemaV2Package* V2PublishHub::written_ = nullptr;
std::string* V2PublishHub::commit_ = nullptr;

TEST_F(V2PublishHub, MaterializeBringsOnlyTheCarrierAndTheStagesPartsAndIsByteIdentical) {
  const auto r = cli({"materialize", pinned(), "--layers", "2..4", "--json"}, {"HF_TOKEN="});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  const auto local = test::local_catalog(dir_->path() / "v2");
  std::set<std::string> want = {"model-package.json"};
  for (const auto& p : select_stage(local.catalog, {2, 4}).parts) want.insert(p.rel_path);
  EXPECT_EQ(want, (std::set<std::string>{"model-package.json", "shared/metadata.gguf", "layers/layer-00002.gguf",
                                         "layers/layer-00003.gguf"}));
  const auto got = served(hub_->log(), by_sha());
  EXPECT_EQ(std::set<std::string>(got.begin(), got.end()), want);
  EXPECT_EQ(got.size(), want.size()) << "each file once";
  const auto names = check_tensors_match_source(j["path"].get<std::string>());
  std::set<std::string> stage_names;
  for (const auto& t : select_stage(local.catalog, {2, 4}).tensors) stage_names.insert(t.name);
  EXPECT_EQ(names, stage_names);
  // The same stage from the local directory: the same file, byte for byte.
  const auto l = cli({"materialize", (dir_->path() / "v2").string(), "--layers", "2..4", "--out",
                      (tmp_ / "local.gguf").string(), "--json"});
  ASSERT_EQ(l.exit_code, 0) << l.err;
  EXPECT_EQ(test::read_file(j["path"].get<std::string>()), test::read_file(tmp_ / "local.gguf"));
}

TEST_F(V2PublishHub, FetchByAnAdmissionDescriptorBringsExactlyItsArtifacts) {
  const auto local = test::local_catalog(dir_->path() / "v2");
  const auto stage = select_stage(local.catalog, {5, 7});
  const auto admission = stage_admission_of(local.catalog, stage);
  const auto file = tmp_ / "stage.json";
  const std::string text = stage_admission_json(admission);
  test::write_file(file, std::vector<uint8_t>(text.begin(), text.end()));
  const auto r = cli({"fetch", pinned(), "--admission", file.string(), "--json"}, {"HF_TOKEN="});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::set<std::string> want = {"model-package.json"};
  for (const size_t i : stage_admission_artifacts(admission, local.catalog)) want.insert(local.catalog.artifacts[i].path);
  EXPECT_EQ(want, (std::set<std::string>{"model-package.json", "shared/metadata.gguf", "layers/layer-00005.gguf",
                                         "layers/layer-00006.gguf"}));
  const auto got = served(hub_->log(), by_sha());
  EXPECT_EQ(std::set<std::string>(got.begin(), got.end()), want);
  // A descriptor for another package: refused before any artifact is brought.
  hub_->clear_log();
  auto other = admission;
  other.package_id = "sha256:" + std::string(64, 'c');
  const std::string other_text = stage_admission_json(other);
  test::write_file(tmp_ / "other.json", std::vector<uint8_t>(other_text.begin(), other_text.end()));
  const auto bad = cli({"fetch", pinned(), "--admission", (tmp_ / "other.json").string(), "--json"}, {"HF_TOKEN="});
  EXPECT_EQ(bad.exit_code, 1);
  test::expect_json_error(bad, "invalid_input", "does not match the package's");
  for (const auto& path : served(hub_->log(), by_sha())) {
    EXPECT_TRUE(path == "model-package.json" || path == "shared/metadata.gguf") << path;
  }
}

TEST_F(V2PublishHub, PlanOfAnHfSchema2PackageBringsOnlyTheRootAndTheCarrier) {
  const auto r = cli({"plan", pinned(), "--stages", "2", "--json"}, {"HF_TOKEN="});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  EXPECT_EQ(j["schema_version"], 2);
  EXPECT_EQ(j["package_id"], written_->root["package_id"].get<std::string>());
  const auto local = cli({"plan", (dir_->path() / "v2").string(), "--stages", "2", "--json"});
  ASSERT_EQ(local.exit_code, 0) << local.err;
  EXPECT_EQ(j["stages"], json::parse(local.out)["stages"]) << "the same plan as from the directory";
  ASSERT_EQ(j["stages"].size(), 2u);
  const auto got = served(hub_->log(), by_sha());
  EXPECT_EQ(std::set<std::string>(got.begin(), got.end()), (std::set<std::string>{"model-package.json", "shared/metadata.gguf"}));
}

TEST_F(V2PublishHub, TheCApiOpensAnHfSchema2Package) {
  const auto out = tmp_ / "stage.gguf";
  const auto r = test::run_program(SKIPPY_CAPI_TEST_PATH, {pinned(), "2", "5", out.string()}, env({"HF_TOKEN="}));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("\nschema 2 " + written_->root["package_id"].get<std::string>() + "\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\ncommit " + *commit_ + "\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nmaterialized " + out.string() + "\n"), std::string::npos) << r.out;
  const auto local = test::local_catalog(dir_->path() / "v2");
  std::set<std::string> stage_names;
  for (const auto& t : select_stage(local.catalog, {2, 5}).tensors) stage_names.insert(t.name);
  EXPECT_EQ(check_tensors_match_source(out), stage_names);
  const auto got = served(hub_->log(), by_sha());
  std::set<std::string> want = {"model-package.json"};
  for (const auto& p : select_stage(local.catalog, {2, 5}).parts) want.insert(p.rel_path);
  EXPECT_EQ(std::set<std::string>(got.begin(), got.end()), want);
}

}  // namespace skippy::v2pub_test
