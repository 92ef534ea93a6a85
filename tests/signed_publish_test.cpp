// Signed packages and immutable refs on the Hub (#25): publish --sign and
// write-package --push --sign put model-package.json.sig and validation.json
// in the package's one commit; a consumer with --trust-signer accepts it
// through hf://; publish --tag tags the commit (the stand-in's tag API) and
// the tag resolves without the moving-ref note; every consumer refuses what
// its trusted signers do not vouch for, naming unauthorized or integrity;
// the sidecar travels through a real serve-artifacts peer. All on 127.0.0.1.
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "hub_standin.h"
#include "peer_test_util.h"
#include "skippy/error.h"
#include "skippy/hub.h"
#include "skippy/hub_publish.h"
#include "skippy/peer.h"
#include "skippy/peer_identity.h"
#include "skippy/peer_topology.h"
#include "util/sha256.h"
#include "expired_owner.h"
#include "test_util.h"

namespace skippy::test::signed_publish_test {

namespace fs = std::filesystem;
using nlohmann::json;

class SignedPublish : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    hub_ = new HubStandin();
    dir_ = new TempDir();
    ASSERT_EQ(write_pkg(data_path("llama-tiny-q8_0.gguf"), *dir_ / "pkg", {"--validate"}, {"SOURCE_DATE_EPOCH=1700000000"}).exit_code, 0);
    ASSERT_EQ(run_cli({"identity", "init-owner", "--dir", (*dir_ / "owner").string()}).exit_code, 0);
    ASSERT_EQ(run_cli({"identity", "init-owner", "--dir", (*dir_ / "other").string()}).exit_code, 0);
  }
  static void TearDownTestSuite() {
    delete hub_;
    delete dir_;
  }
  void SetUp() override {
    hub_->clear_faults();
    hub_->configure({{"token", "hf_test"}, {"url_ttl_secs", 3600}});
    hub_->clear_log();
  }
  static fs::path pkg() { return *dir_ / "pkg"; }
  static std::string owner() { return (*dir_ / "owner").string(); }
  static std::string anchor() { return (*dir_ / "owner" / "owner.crt").string(); }
  static std::string other_anchor() { return (*dir_ / "other" / "owner.crt").string(); }

  std::vector<std::string> env(const std::string& cache = "hf", std::vector<std::string> extra = {}) const {
    std::vector<std::string> e = {"HF_ENDPOINT=" + hub_->endpoint(), "HF_HUB_CACHE=" + (tmp_ / cache).string(),
                                  "HF_HOME=" + (tmp_ / "hfhome").string(), "SKIPPY_CACHE_DIR=" + (tmp_ / "skippy").string(),
                                  "SKIPPY_HF_BACKOFF_MS=20", "HF_TOKEN=hf_test", "HF_HUB_OFFLINE=",
                                  "SKIPPY_TRUSTED_SIGNERS=", "SKIPPY_TRUSTED_OWNERS="};
    for (const auto& x : extra) {
      const auto name = x.substr(0, x.find('=') + 1);
      std::erase_if(e, [&](const std::string& y) { return y.starts_with(name); });
      e.push_back(x);
    }
    return e;
  }
  CliResult cli(const std::vector<std::string>& args, const std::string& cache = "hf", std::vector<std::string> extra = {}) const {
    return run_cli(args, env(cache, std::move(extra)));
  }
  // path -> the id of the commit that last changed it, at `rev`.
  std::map<std::string, std::string> tree(const std::string& repo, const std::string& rev) const {
    const auto r = HubStandin::http("GET", hub_->endpoint() + "/api/models/" + repo + "/tree/" + rev + "?recursive=true&expand=true");
    EXPECT_EQ(r.status, 200) << r.body;
    std::map<std::string, std::string> out;
    for (const auto& e : json::parse(r.body)) {
      if (e["type"] == "file") out[e["path"]] = e["lastCommit"]["id"];
    }
    return out;
  }
  size_t commit_posts() const {
    size_t n = 0;
    for (const auto& r : hub_->log()) n += r.method == "POST" && r.path.find("/commit/") != std::string::npos;
    return n;
  }
  // A copy of the package with `edit` applied (a directory under the test's tmp).
  fs::path variant(const std::string& name, const std::function<void(const fs::path&)>& edit) const {
    const fs::path d = tmp_ / name;
    fs::copy(pkg(), d, fs::copy_options::recursive);
    edit(d);
    return d;
  }

  static HubStandin* hub_;
  static TempDir* dir_;
  TempDir tmp_;
};
HubStandin* SignedPublish::hub_ = nullptr;
TempDir* SignedPublish::dir_ = nullptr;

TEST_F(SignedPublish, PublishSignPutsTheSidecarAndValidationInTheOneCommitAndTagsIt) {
  const fs::path p = variant("p", [](const fs::path&) {});
  const auto r = cli({"publish", p.string(), "hf://org/signed", "--create", "--sign", owner(), "--tag", "src-0123abc", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  const std::string commit = j["commit"];
  EXPECT_EQ(j["ref"], "hf://org/signed@" + commit) << "publish prints the commit to pin";
  EXPECT_EQ(j["tag"], "src-0123abc");
  EXPECT_EQ(j["tag_ref"], "hf://org/signed@src-0123abc");
  EXPECT_EQ(j["tag_created"], true);
  EXPECT_EQ(j["validation_json"], true);
  const auto sidecar = json::parse(read_text(p / "model-package.json.sig"));
  EXPECT_EQ(j["signed_by"], sidecar["owner_id"]);
  EXPECT_EQ(j["files"], 15);  // 11 fragments, manifest, README, validation.json, sidecar
  EXPECT_EQ(commit_posts(), 1u) << "one commit";
  const auto files = tree("org/signed", commit);
  for (const std::string f : {"model-package.json", "model-package.json.sig", "validation.json"}) {
    ASSERT_TRUE(files.count(f)) << f;
    EXPECT_EQ(files.at(f), commit) << f << " came in the same commit as the manifest";
  }
  // The tag API: POST /api/models/org/signed/tag/<commit>, and the tag names the commit.
  bool tagged = false;
  for (const auto& e : hub_->log()) tagged = tagged || (e.method == "POST" && e.path == "/api/models/org/signed/tag/" + commit && e.status == 200);
  EXPECT_TRUE(tagged);
  const auto repos = json::parse(HubStandin::http("GET", hub_->endpoint() + "/_admin/repos").body);
  EXPECT_EQ(repos["org/signed"]["tags"]["src-0123abc"], commit);

  // A consumer trusting the owner accepts it through hf:// (a fresh cache),
  // with the sidecar and validation.json brought beside the manifest.
  const auto sel = cli({"select", "hf://org/signed@" + commit, "--layers", "0..2", "--json", "--trust-signer", anchor()}, "c1");
  ASSERT_EQ(sel.exit_code, 0) << sel.err;
  EXPECT_NE(sel.err.find("signed by trusted owner"), std::string::npos) << sel.err;
  const fs::path snap = peer::snapshot_dir(tmp_ / "c1", "org/signed", commit);
  EXPECT_TRUE(fs::exists(snap / "model-package.json.sig"));
  EXPECT_EQ(read_text(snap / "validation.json"), read_text(p / "validation.json"));
  // SKIPPY_TRUSTED_OWNERS, the issue's name, is the same list.
  EXPECT_EQ(cli({"verify", "hf://org/signed@" + commit, "--layers", "0..1", "--json"}, "c1",
                {"SKIPPY_TRUSTED_OWNERS=" + anchor()}).exit_code, 0);
  expect_json_error(cli({"verify", "hf://org/signed@" + commit, "--json"}, "c1", {"SKIPPY_TRUSTED_OWNERS=" + other_anchor()}),
                    "unauthorized", "who is not a trusted signer");
  // inspect shows signature and validation through hf:// without an anchor.
  const auto ins = cli({"inspect", "hf://org/signed@" + commit, "--json"}, "c2");
  ASSERT_EQ(ins.exit_code, 0) << ins.err;
  const auto ij = json::parse(ins.out);
  EXPECT_EQ(ij["signature"]["present"], true);
  EXPECT_EQ(ij["signature"]["owner_id"], sidecar["owner_id"]);
  EXPECT_EQ(ij["validation"]["matches_manifest"], true);
  EXPECT_EQ(ij["validation"]["covered_by_signature"], true);

  // Rerun: nothing to commit, the tag already names the head: fine.
  hub_->clear_log();
  const auto again = cli({"publish", p.string(), "hf://org/signed", "--tag", "src-0123abc"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.out, "hf://org/signed@" + commit + "\n") << "the text output is the commit to pin";
  EXPECT_NE(again.err.find("nothing to commit"), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("tag already there: hf://org/signed@src-0123abc -> " + commit), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("pin it as hf://org/signed@" + commit), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("signed by owner"), std::string::npos) << again.err;
}

TEST_F(SignedPublish, ATagResolvesWithoutTheMovingNoteAndABranchHasOne) {
  const auto r = cli({"publish", pkg().string(), "hf://org/refs", "--create", "--tag", "v1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string commit = json::parse(r.out)["commit"];
  auto select = [&](const std::string& rev, const std::string& cache) {
    const auto s = cli({"select", "hf://org/refs@" + rev, "--layers", "0..1", "--json"}, cache);
    EXPECT_EQ(s.exit_code, 0) << s.err;
    return std::make_pair(json::parse(s.out), s.err);
  };
  const auto [tag, tag_err] = select("v1", "t1");
  EXPECT_EQ(tag["revision"]["revision_kind"], "tag");
  EXPECT_EQ(tag["revision"]["moving"], false);
  EXPECT_EQ(tag["revision"]["pin"], "hf://org/refs@" + commit);
  EXPECT_TRUE(tag["warnings"].empty()) << tag["warnings"].dump();
  EXPECT_EQ(tag_err.find("Production configs should pin"), std::string::npos) << tag_err;
  // Again, the ref now in the cache: the Hub still says it is a tag.
  EXPECT_TRUE(select("v1", "t1").first["warnings"].empty());
  // inspect asks for a sidecar but never fails for want of one (offline here).
  const auto ins = cli({"inspect", "hf://org/refs@" + commit, "--json"}, "t1", {"HF_HUB_OFFLINE=1"});
  ASSERT_EQ(ins.exit_code, 0) << ins.err;
  EXPECT_EQ(json::parse(ins.out)["signature"]["present"], false);
  const auto [main, main_err] = select("main", "t2");
  EXPECT_EQ(main["revision"]["revision_kind"], "branch");
  EXPECT_EQ(main["revision"]["moving"], true);
  ASSERT_EQ(main["warnings"].size(), 1u);
  EXPECT_NE(main["warnings"][0].get<std::string>().find("Production configs should pin hf://org/refs@" + commit), std::string::npos);
  EXPECT_NE(main_err.find("Production configs should pin hf://org/refs@" + commit), std::string::npos) << main_err;
  const auto [pinned, pinned_err] = select(commit, "t3");
  EXPECT_EQ(pinned["revision"]["revision_kind"], "commit");
  EXPECT_TRUE(pinned["warnings"].empty());
  // fetch says the same, in text and in JSON.
  const auto f = cli({"fetch", "hf://org/refs", "--layers", "0..1", "--json"}, "t4");
  ASSERT_EQ(f.exit_code, 0) << f.err;
  EXPECT_EQ(json::parse(f.out)["revision"]["moving"], true);
  EXPECT_NE(f.err.find("Production configs should pin hf://org/refs@" + commit), std::string::npos) << f.err;
  const auto ft = cli({"fetch", "hf://org/refs@v1", "--layers", "0..1", "--json"}, "t5");
  ASSERT_EQ(ft.exit_code, 0) << ft.err;
  EXPECT_EQ(json::parse(ft.out)["revision"]["moving"], false);
  EXPECT_EQ(ft.err.find("should pin"), std::string::npos) << ft.err;
}

TEST_F(SignedPublish, AnExistingTagIsNeverMoved) {
  ASSERT_EQ(cli({"publish", pkg().string(), "hf://org/tags", "--create", "--tag", "v1"}).exit_code, 0);
  TempDir other;
  ASSERT_EQ(write_pkg(data_path("llama-tiny-f16.gguf"), other / "pkg").exit_code, 0);
  // The tag names the head: the new package would make a new commit the
  // tag cannot follow. Refused before the commit.
  hub_->clear_log();
  const auto r = cli({"publish", (other / "pkg").string(), "hf://org/tags", "--tag", "v1", "--json"});
  expect_json_error(r, "invalid_input", "the tag already exists on commit");
  EXPECT_EQ(commit_posts(), 0u);
  // A tag on an older commit: refused before anything is uploaded.
  ASSERT_EQ(cli({"publish", (other / "pkg").string(), "hf://org/tags2", "--create", "--tag", "old"}).exit_code, 0);
  ASSERT_EQ(cli({"publish", pkg().string(), "hf://org/tags2"}).exit_code, 0);
  hub_->clear_log();
  const auto early = cli({"publish", (other / "pkg").string(), "hf://org/tags2", "--tag", "old", "--json"});
  expect_json_error(early, "invalid_input", "refused before uploading anything");
  EXPECT_EQ(commit_posts(), 0u);
  for (const auto& e : hub_->log()) EXPECT_NE(e.listener, "storage") << e.path;
  // A bad name is a usage error before any request.
  expect_json_error(cli({"publish", pkg().string(), "hf://org/tags", "--tag", "refs/tags/x", "--json"}), "usage", "without refs/");

  // The library call: 409 on another commit is a clear refusal; on the same commit, fine.
  HubConfig hub;
  hub.endpoint = hub_->endpoint();
  hub.token = "hf_test";
  hub.backoff_ms = 20;
  const auto repos = json::parse(HubStandin::http("GET", hub_->endpoint() + "/_admin/repos").body);
  const std::string v1 = repos["org/tags"]["tags"]["v1"];
  EXPECT_FALSE(tag_hub_commit(hub, "org/tags", v1, "v1").created);
  const auto direct = HubStandin::http("POST", hub_->endpoint() + "/api/models/org/tags/tag/" + v1,
                                       {"Authorization: Bearer hf_test", "Content-Type: application/json"}, R"({"tag":"v1"})");
  EXPECT_EQ(direct.status, 409) << "the stand-in answers an existing tag with 409";
  const std::string c2 = hub_->publish("org/tags", other / "pkg");
  try {
    (void)tag_hub_commit(hub, "org/tags", c2, "v1");
    ADD_FAILURE() << "an existing tag was moved";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
    EXPECT_NE(std::string(e.what()).find("already exists on commit " + v1), std::string::npos) << e.what();
  }
  const auto t = tag_hub_commit(hub, "org/tags", c2, "v2", "second");
  EXPECT_TRUE(t.created);
  EXPECT_EQ(t.ref, "hf://org/tags@v2");
}

TEST_F(SignedPublish, PublishRefusesAStaleValidationOrABrokenSignature) {
  const fs::path stale = variant("stale", [](const fs::path& d) {
    auto m = json::parse(read_text(d / "model-package.json"));
    m["model_id"] = "org/changed:Q8_0";
    std::ofstream(d / "model-package.json", std::ios::trunc) << m.dump(2) << "\n";
  });
  expect_json_error(cli({"publish", stale.string(), "hf://org/stale", "--create", "--json"}), "invalid_input",
                    "validation.json: describes another manifest");
  const fs::path broken = variant("broken", [](const fs::path& d) {
    ASSERT_EQ(run_cli({"sign-package", d.string(), "--owner", owner()}).exit_code, 0);
    std::ofstream(d / "README.md", std::ios::app) << "\n";  // not signed: fine
    auto m = json::parse(read_text(d / "validation.json"));
    m["result"] = "valid";
    m["warnings"] = json::array({"edited"});
    std::ofstream(d / "validation.json", std::ios::trunc) << m.dump(2) << "\n";
  });
  expect_json_error(cli({"publish", broken.string(), "hf://org/broken", "--create", "--json"}), "integrity", "validation.json");
  EXPECT_EQ(commit_posts(), 0u);
}

TEST_F(SignedPublish, WritePackagePushSignCommitsTheSidecarToo) {
  const auto r = cli({"write-package", data_path("llama-tiny-q8_0.gguf").string(), "--out-dir", (tmp_ / "w").string(), "--model-id",
                      "org/tiny:Q8_0", "--source-revision", "0123abc", "--source-file", "llama-tiny-q8_0.gguf", "--validate",
                      "--sign", owner(), "--push", "hf://org/pushed-signed", "--create", "--tag", "t1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = json::parse(r.out);
  const std::string commit = j["publish"]["commit"];
  EXPECT_FALSE(j["publish"]["signed_by"].is_null());
  EXPECT_EQ(j["publish"]["validation_json"], true);
  EXPECT_EQ(j["publish"]["tag_ref"], "hf://org/pushed-signed@t1");
  const auto files = tree("org/pushed-signed", commit);
  EXPECT_EQ(files.at("model-package.json.sig"), commit);
  EXPECT_EQ(files.at("validation.json"), commit);
  EXPECT_EQ(commit_posts(), 1u);
  const auto f = cli({"fetch", "hf://org/pushed-signed@t1", "--json", "--trust-signer", anchor()}, "c");
  ASSERT_EQ(f.exit_code, 0) << f.err;
  EXPECT_EQ(json::parse(f.out)["signed_by"], j["publish"]["signed_by"]);
  const fs::path snap = peer::snapshot_dir(tmp_ / "c", "org/pushed-signed", commit);
  EXPECT_EQ(read_text(snap / "model-package.json.sig"), read_text(tmp_ / "w" / "model-package.json.sig")) << "fetch brings the sidecar";
  EXPECT_EQ(read_text(snap / "validation.json"), read_text(tmp_ / "w" / "validation.json"));
  // --tag needs --push; --sign needs an owner directory, checked before writing.
  expect_json_error(cli({"write-package", data_path("llama-tiny-q8_0.gguf").string(), "--out-dir", (tmp_ / "x").string(),
                         "--model-id", "org/tiny:Q8_0", "--source-revision", "0", "--source-file", "t.gguf", "--tag", "t", "--json"}),
                    "usage", "--tag goes with --push");
  expect_json_error(cli({"write-package", data_path("llama-tiny-q8_0.gguf").string(), "--out-dir", (tmp_ / "y").string(),
                         "--model-id", "org/tiny:Q8_0", "--source-revision", "0", "--source-file", "t.gguf", "--sign",
                         (tmp_ / "nobody").string(), "--json"}),
                    "not_found", "owner.key");
  EXPECT_FALSE(fs::exists(tmp_ / "y" / "model-package.json"));
}

// The command is a thin shell over the library's write_and_publish: the
// library run writes, signs and pushes the same package the command does.
TEST_F(SignedPublish, TheLibraryRunIsTheCommandsRun) {
  const std::vector<std::string> provenance = {"--model-id", "org/tiny:Q8_0", "--source-revision", "0123abc",
                                               "--source-file", "llama-tiny-q8_0.gguf"};
  std::vector<std::string> args = {"write-package", data_path("llama-tiny-q8_0.gguf").string(), "--out-dir",
                                   (tmp_ / "by-cli").string(), "--validate", "--sign", owner(), "--push",
                                   "hf://org/by-cli", "--create", "--json"};
  args.insert(args.end(), provenance.begin(), provenance.end());
  const auto r = cli(args, "hf", {"SOURCE_DATE_EPOCH=1700000000"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto by_cli = json::parse(r.out);

  ScopedEnv epoch("SOURCE_DATE_EPOCH", "1700000000");
  WriteAndPublishOptions o;
  o.write.out_dir = tmp_ / "by-library";
  o.write.validate = true;
  o.source = data_path("llama-tiny-q8_0.gguf").string();
  o.model_id = provenance[1];
  o.revision = provenance[3];
  o.source_file = provenance[5];
  o.push = parse_push_target("hf://org/by-library");
  o.publish.create = true;
  o.sign_owner = owner();
  o.hub.endpoint = hub_->endpoint();
  o.hub.token = "hf_test";
  bool started = false;
  o.on_write_start = [&] { started = true; };
  const auto run = write_and_publish(o);
  EXPECT_TRUE(started);
  ASSERT_TRUE(run.written && run.published && run.signature);
  EXPECT_EQ(run.written->manifest_sha256, by_cli["manifest_sha256"]);
  EXPECT_EQ(run.signature->owner_id, by_cli["signed_by"]);
  EXPECT_EQ(run.published->signed_by, by_cli["publish"]["signed_by"]);
  EXPECT_TRUE(run.published->validation_result);
  const auto files = tree("org/by-library", run.published->commit);
  for (const char* f : {"model-package.json", "model-package.json.sig", "validation.json", "README.md"}) {
    EXPECT_EQ(files.count(f), 1u) << f;
  }
  EXPECT_EQ(read_text(tmp_ / "by-library" / "model-package.json"), read_text(tmp_ / "by-cli" / "model-package.json"));
  // Checks that need no I/O come first: a --tag without a push is refused before a byte is written.
  WriteAndPublishOptions bad = o;
  bad.push.reset();
  bad.publish.tag = "t";
  bad.write.out_dir = tmp_ / "never";
  EXPECT_THROW(write_and_publish(bad), Error);
  EXPECT_FALSE(fs::exists(tmp_ / "never"));
}

// ------------------------------------------------- through a peer (#25)

// An owner directory whose certificate expired yesterday, and a sidecar it
// signed (as it would have while valid) with the OpenSSL CLI.
void write_expired_sidecar(const fs::path& owner_dir, const fs::path& pkg);


TEST_F(SignedPublish, TheSidecarTravelsThroughARealPeerAndServeArtifactsChecksTrust) {
  const fs::path signed_pkg = variant("peer-pkg", [](const fs::path& d) {
    ASSERT_EQ(run_cli({"sign-package", d.string(), "--owner", owner()}).exit_code, 0);
  });
  const std::string repo = "org/peer-signed";
  const std::string commit = hub_->publish(repo, signed_pkg);
  const std::string ref = "hf://" + repo + "@" + commit;
  const std::string w1 = peer::make_node(owner(), tmp_ / "w1");
  const std::string w0 = peer::make_node(owner(), tmp_ / "w0");
  (void)peer::make_node(owner(), tmp_ / "coord");
  const fs::path topology = tmp_ / "topology.json";
  peer::write_topology(topology, ref, sha256_file(signed_pkg / "model-package.json"), {{"s0", 0, w0, 0, 4}, {"s1", 1, w1, 4, 8}});
  auto serve = [&](const fs::path& coord_hf, const std::string& signer, const std::string& log) {
    return std::make_unique<peer::ServerProcess>(
        std::vector<std::string>{"--listen", "127.0.0.1:0", "--topology", topology.string(), "--identity",
                                 (tmp_ / "coord").string(), "--trust-signer", signer},
        std::vector<std::string>{"HF_HUB_CACHE=" + coord_hf.string(), "SKIPPY_CACHE_DIR=" + (tmp_ / ("vc-" + log)).string(),
                                 "MESH_LLM_ARTIFACT_TRANSFER=trusted", "HF_HUB_OFFLINE=1", "HF_ENDPOINT=http://127.0.0.1:9",
                                 "SKIPPY_TRUSTED_SIGNERS=", "SKIPPY_TRUSTED_OWNERS="},
        tmp_ / (log + ".log"));
  };
  // The coordinator's cache holds the signed package; it starts, trusting its signer.
  peer::place_in_hf_cache(signed_pkg, tmp_ / "coord-hf", repo, commit);
  auto server = serve(tmp_ / "coord-hf", anchor(), "good");
  // The worker: no Hub at all, so the sidecar and validation.json can only come from the peer.
  const auto f = cli({"fetch", ref, "--peer", server->endpoint(), "--topology", topology.string(), "--stage", "s1", "--identity",
                      (tmp_ / "w1").string(), "--trust-signer", anchor(), "--json", "--peer-connect-timeout", "10"},
                     "worker", {"HF_HUB_OFFLINE=1", "MESH_LLM_ARTIFACT_TRANSFER=trusted"});
  ASSERT_EQ(f.exit_code, 0) << f.err << "\n" << server->log();
  const auto j = json::parse(f.out);
  EXPECT_EQ(j["source"], "peer");
  EXPECT_EQ(j["signed_by"], json::parse(read_text(signed_pkg / "model-package.json.sig"))["owner_id"]);
  const fs::path snap = peer::snapshot_dir(tmp_ / "worker", repo, commit);
  EXPECT_EQ(read_text(snap / "model-package.json.sig"), read_text(signed_pkg / "model-package.json.sig"));
  EXPECT_EQ(read_text(snap / "validation.json"), read_text(signed_pkg / "validation.json"));
  EXPECT_TRUE(server->wait_for_log("signature sidecar")) << server->log();
  EXPECT_TRUE(server->wait_for_log("validation result")) << server->log();
  server.reset();

  // serve-artifacts does not start on what its trusted signers do not vouch for.
  auto refused = [&](const fs::path& pkg_dir, const std::string& signer, const std::string& name) {
    const fs::path hf = tmp_ / ("coord-" + name);
    if (!pkg_dir.empty()) peer::place_in_hf_cache(pkg_dir, hf, repo, commit);
    try {
      auto s = serve(hf, signer, name);
      ADD_FAILURE() << "serve-artifacts started on " << name;
      return std::string();
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
  };
  const std::string other = refused(signed_pkg, other_anchor(), "other");
  EXPECT_NE(other.find("error: " + ref + ": signed by owner"), std::string::npos) << other;
  EXPECT_NE(other.find("who is not a trusted signer"), std::string::npos) << other;
  const fs::path unsigned_pkg = variant("peer-unsigned", [](const fs::path& d) { fs::remove(d / "model-package.json.sig"); });
  const std::string unsig = refused(unsigned_pkg, anchor(), "unsigned");
  EXPECT_NE(unsig.find("unsigned package"), std::string::npos) << unsig;
  const fs::path tampered = variant("peer-tampered", [](const fs::path& d) {
    ASSERT_EQ(run_cli({"sign-package", d.string(), "--owner", owner()}).exit_code, 0);
    std::ofstream(d / "model-package.json", std::ios::app) << " ";
    auto sig = json::parse(read_text(d / "model-package.json.sig"));
    sig["manifest_sha256"] = sha256_file(d / "model-package.json");
    std::ofstream(d / "model-package.json.sig", std::ios::trunc) << sig.dump(2);
  });
  const std::string tamp = refused(tampered, anchor(), "tampered");
  EXPECT_NE(tamp.find("signature does not verify over the exact bytes"), std::string::npos) << tamp;
  const fs::path expired_pkg = variant("peer-expired", [&](const fs::path& d) { write_expired_sidecar(tmp_ / "expired-owner", d); });
  const std::string exp = refused(expired_pkg, (tmp_ / "expired-owner" / "owner.crt").string(), "expired");
  EXPECT_NE(exp.find("expired or not yet valid"), std::string::npos) << exp;
  // The kinds, from the library's server in this process (the CLI maps them to its JSON error).
  auto kind_of = [&](const std::string& name, const std::string& signer) {
    skippy::peer::ServerOptions o;
    o.topology = skippy::peer::load_topology(topology);
    o.mode = skippy::peer::TransferMode::kTrusted;
    o.hf_cache = tmp_ / ("coord-" + name);
    o.verification_cache_dir = tmp_ / ("vc-inproc-" + name);
    o.trusted_signers = {signer};
    o.log = [](std::string_view) {};
    try {
      skippy::peer::ArtifactServer s(skippy::peer::NodeIdentity::load(tmp_ / "coord"), std::move(o));
      return std::string("started");
    } catch (const Error& e) {
      return std::string(error_kind_name(e.kind()));
    }
  };
  EXPECT_EQ(kind_of("tampered", anchor()), "integrity");
  EXPECT_EQ(kind_of("expired", (tmp_ / "expired-owner" / "owner.crt").string()), "unauthorized");
  EXPECT_EQ(kind_of("other", other_anchor()), "unauthorized");
  EXPECT_EQ(kind_of("unsigned", anchor()), "unauthorized");
  EXPECT_EQ(kind_of("hf", anchor()), "started");
  const std::string absent = refused({}, anchor(), "absent");
  EXPECT_NE(absent.find("not in the Hugging Face cache"), std::string::npos) << absent;
}

// --------------------------------------------- every consumer refuses (#25)

struct Variant {
  std::string name, kind, needle;
};

TEST_F(SignedPublish, EveryConsumerRefusesWhatItsSignersDoNotVouchFor) {
  const fs::path expired = tmp_ / "expired";
  // The cases: unsigned, tampered (re-hashed, self-consistent), another owner, an expired owner certificate.
  std::map<std::string, fs::path> dirs;
  dirs["unsigned"] = variant("unsigned", [](const fs::path& d) { fs::remove(d / "model-package.json.sig"); });
  dirs["tampered"] = variant("tampered", [](const fs::path& d) {
    ASSERT_EQ(run_cli({"sign-package", d.string(), "--owner", owner()}).exit_code, 0);
    auto m = json::parse(read_text(d / "model-package.json"));
    m["model_id"] = "evil/model:Q8_0";
    const std::string text = m.dump(2) + "\n";
    std::ofstream(d / "model-package.json", std::ios::trunc) << text;
    // Re-hashed into the sidecar, validation.json dropped from it: self-consistent, but not signed so.
    auto sig = json::parse(read_text(d / "model-package.json.sig"));
    sig["manifest_sha256"] = sha256_hex(text);
    fs::remove(d / "validation.json");
    sig.erase("validation_sha256");
    sig.erase("validation_signature");
    std::ofstream(d / "model-package.json.sig", std::ios::trunc) << sig.dump(2);
  });
  dirs["other"] = variant("other", [](const fs::path& d) {
    ASSERT_EQ(run_cli({"sign-package", d.string(), "--owner", (*dir_ / "other").string()}).exit_code, 0);
  });
  dirs["expired"] = variant("expired-pkg", [&](const fs::path& d) { write_expired_sidecar(expired, d); });
  const std::vector<Variant> cases = {{"unsigned", "unauthorized", "unsigned package"},
                                      {"tampered", "integrity", "signature does not verify over the exact bytes"},
                                      {"other", "unauthorized", "who is not a trusted signer"},
                                      {"expired", "unauthorized", "expired or not yet valid"}};
  auto anchor_for = [&](const std::string& c) { return c == "expired" ? (expired / "owner.crt").string() : anchor(); };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string d = dirs[c.name].string();
    const std::string a = anchor_for(c.name);
    expect_json_error(cli({"select", d, "--layers", "0..2", "--json", "--trust-signer", a}), c.kind, c.needle);
    expect_json_error(cli({"verify", d, "--json", "--trust-signer", a}), c.kind, c.needle);
    expect_json_error(cli({"materialize", d, "--layers", "0..2", "--out", (tmp_ / (c.name + ".gguf")).string(), "--json",
                           "--trust-signer", a}),
                      c.kind, c.needle);
    EXPECT_FALSE(fs::exists(tmp_ / (c.name + ".gguf")));
    expect_json_error(cli({"plan", d, "--stages", "2", "--json", "--trust-signer", a}), c.kind, c.needle);
    // fetch, through hf:// (the stand-in holds the variant as its own repository).
    const std::string repo = "org/variant-" + c.name;
    const std::string commit = hub_->publish(repo, dirs[c.name]);
    expect_json_error(cli({"fetch", "hf://" + repo + "@" + commit, "--json", "--trust-signer", a}, "f-" + c.name), c.kind, c.needle);
    // Without an anchor every one of them is accepted (signatures optional).
    EXPECT_EQ(cli({"select", d, "--layers", "0..2", "--json"}).exit_code, 0);
  }
  // The package, signed by the anchor's owner, is accepted.
  const fs::path signed_dir = variant("good", [](const fs::path& d) {
    ASSERT_EQ(run_cli({"sign-package", d.string(), "--owner", owner()}).exit_code, 0);
  });
  EXPECT_EQ(cli({"plan", signed_dir.string(), "--stages", "2", "--json", "--trust-signer", anchor()}).exit_code, 0);
  EXPECT_EQ(cli({"materialize", signed_dir.string(), "--layers", "0..2", "--out", (tmp_ / "ok.gguf").string(), "--json",
                 "--trust-signer", anchor()}).exit_code, 0);
}

void write_expired_sidecar(const fs::path& owner_dir, const fs::path& pkg) {
  make_expired_owner(owner_dir);
  // The sidecar, as sign-package writes it, the signature from openssl pkeyutl.
  const auto sig = run_program("openssl", {"pkeyutl", "-sign", "-inkey", (owner_dir / "owner.key").string(), "-rawin", "-in",
                                           (pkg / "model-package.json").string(), "-out", (owner_dir / "sig.bin").string()});
  ASSERT_EQ(sig.exit_code, 0) << sig.err;
  const auto b64 = run_program("openssl", {"base64", "-A", "-in", (owner_dir / "sig.bin").string()});
  ASSERT_EQ(b64.exit_code, 0) << b64.err;
  fs::remove(pkg / "validation.json");
  const json doc = {{"schema_version", 1},
                    {"owner_certificate", read_text(owner_dir / "owner.crt")},
                    {"manifest_sha256", sha256_file(pkg / "model-package.json")},
                    {"signed_at_unix_secs", 1577880000},
                    {"signature", b64.out}};
  std::ofstream(pkg / "model-package.json.sig", std::ios::trunc) << doc.dump(2);
}

}  // namespace skippy::test::signed_publish_test
