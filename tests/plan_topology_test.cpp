// plan --topology-out FILE --nodes ...: the split topology of the plan just
// made, in the format serve-artifacts and fetch --peer read (the README's
// tour runs a split with it), from every plan mode; and examples/topology.json
// is that of the tour's package.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "skippy/peer_topology.h"
#include "util/sha256.h"
#include "test_util.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using test::run_cli;

const std::string kCommit = "0123456789abcdef0123456789abcdef01234567";
const std::string kRef = "hf://org/tiny-layers@" + kCommit;

class PlanTopology : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(test::write_pkg(test::data_path("llama-tiny-q8_0.gguf"), pkg_).exit_code, 0);
    ASSERT_EQ(run_cli({"identity", "init-owner", "--dir", (tmp_ / "owner").string()}).exit_code, 0);
    for (const auto* n : {"n0", "n1", "n2"}) {
      ASSERT_EQ(run_cli({"identity", "issue-node", "--owner", (tmp_ / "owner").string(), "--out", (tmp_ / n).string()})
                    .exit_code,
                0);
      const auto show = run_cli({"identity", "show", "--dir", (tmp_ / n).string(), "--json"});
      ids_.push_back(nlohmann::json::parse(show.out)["node_id"].get<std::string>());
    }
  }
  std::string nodes(std::initializer_list<int> which) const {
    std::string out;
    for (int i : which) out += (out.empty() ? "" : ",") + (tmp_ / ("n" + std::to_string(i))).string();
    return out;
  }
  test::TempDir tmp_;
  fs::path pkg_ = tmp_ / "pkg";
  std::vector<std::string> ids_;
};

// The topology holds the plan's ranges, on the nodes given, for this manifest.
void expect_topology_of_plan(const fs::path& file, const nlohmann::json& plan, const std::vector<std::string>& node_ids,
                             const std::string& manifest_sha256) {
  const auto t = peer::load_topology(file);
  EXPECT_EQ(t.package_ref, kRef);
  EXPECT_EQ(t.manifest_sha256, manifest_sha256);
  EXPECT_EQ(plan["topology"]["path"], file.string());
  ASSERT_EQ(t.stages.size(), plan["stages"].size()) << plan.dump(2);
  ASSERT_EQ(t.stages.size(), node_ids.size());
  for (size_t i = 0; i < t.stages.size(); ++i) {
    EXPECT_EQ(t.stages[i].stage_id, "s" + std::to_string(i));
    EXPECT_EQ(t.stages[i].stage_index, i);
    EXPECT_EQ(t.stages[i].node_id, node_ids[i]);
    EXPECT_EQ(t.stages[i].layers.start, plan["stages"][i]["layer_start"].get<uint32_t>());
    EXPECT_EQ(t.stages[i].layers.end, plan["stages"][i]["layer_end"].get<uint32_t>());
  }
}

TEST_F(PlanTopology, EveryPlanModeWritesItsRangesOnTheNodesGiven) {
  const std::string sha = sha256_file(pkg_ / "model-package.json");
  struct Case {
    std::vector<std::string> mode;
    std::string nodes;
    std::vector<std::string> expected;
  };
  for (const auto& c : std::vector<Case>{
           {{"--stages", "2"}, nodes({0, 1}), {ids_[0], ids_[1]}},
           {{"--budgets", "4MB,4MB,4MB"}, nodes({2, 0, 1}), {ids_[2], ids_[0], ids_[1]}},
           {{"--context", "512", "--stages", "2"}, nodes({1, 0}), {ids_[1], ids_[0]}},
           // auto: the plan keeps the fast node only; --nodes lists every node offered.
           {{"--context", "512", "--stages", "auto", "--bandwidth", "1GB/s,100GB/s,1GB/s"}, nodes({0, 1, 2}), {ids_[1]}},
       }) {
    const auto out = tmp_ / "topology.json";
    fs::remove(out);
    std::vector<std::string> args = {"plan", pkg_.string(), "--topology-out", out.string(), "--nodes", c.nodes,
                                     "--package-ref", kRef, "--json"};
    args.insert(args.end(), c.mode.begin(), c.mode.end());
    const auto r = run_cli(args);
    ASSERT_EQ(r.exit_code, 0) << c.mode[0] << ": " << r.err;
    expect_topology_of_plan(out, nlohmann::json::parse(r.out), c.expected, sha);
  }
  // Human output names the file it wrote.
  const auto r = run_cli({"plan", pkg_.string(), "--stages", "2", "--topology-out", (tmp_ / "t2.json").string(),
                          "--nodes", ids_[0] + "," + ids_[1], "--package-ref", kRef});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("topology: wrote " + (tmp_ / "t2.json").string() + " (2 stages of " + kRef + ")"),
            std::string::npos)
      << r.out;
}

TEST_F(PlanTopology, WhatCannotMakeATopologyIsAUsageErrorAndWritesNothing) {
  const auto out = tmp_ / "topology.json";
  struct Case {
    std::vector<std::string> extra;
    std::string says;
  };
  for (const auto& c : std::vector<Case>{
           {{"--nodes", nodes({0, 1})}, "is a local directory: give --package-ref hf://ns/repo@COMMIT"},
           {{"--nodes", nodes({0}), "--package-ref", kRef}, "--nodes gives 1 node for 2 stages"},
           {{"--nodes", (tmp_ / "owner").string() + "," + nodes({1}), "--package-ref", kRef}, "is an owner's directory"},
           {{"--nodes", "abc," + nodes({1}), "--package-ref", kRef}, "\"abc\" is neither a node id"},
           {{"--nodes", nodes({0, 1}), "--package-ref", "hf://org/tiny-layers@main"}, "is not hf://ns/repo@COMMIT"},
       }) {
    std::vector<std::string> args = {"plan", pkg_.string(), "--stages", "2", "--topology-out", out.string()};
    args.insert(args.end(), c.extra.begin(), c.extra.end());
    const auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out)) << c.says;
  }
  const auto r = run_cli({"plan", pkg_.string(), "--stages", "2", "--package-ref", kRef});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--package-ref requires --topology-out"), std::string::npos) << r.err;
}

// Without a topology to authorise, --nodes names the plan's nodes: any name,
// printed in every plan mode (the stage table or a nodes line) and in JSON.
TEST_F(PlanTopology, NodeNamesNeedNoIdentityToPlan) {
  auto r = run_cli({"plan", pkg_.string(), "--stages", "2", "--nodes", "alpha,beta"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("nodes: stage 0 on alpha, stage 1 on beta"), std::string::npos) << r.out;
  r = run_cli({"plan", pkg_.string(), "--stages", "2", "--nodes", "alpha,beta", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["stages"][0]["node_name"], "alpha");
  EXPECT_EQ(j["stages"][1]["node_name"], "beta");
  EXPECT_FALSE(j.contains("topology"));
  r = run_cli({"plan", pkg_.string(), "--context", "1024", "--bandwidth", "100GB/s,200GB/s", "--stages", "auto",
               "--nodes", "alpha,beta"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find(" beta "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("node 0"), std::string::npos) << r.out;
  r = run_cli({"plan", pkg_.string(), "--stages", "2", "--nodes", "alpha"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--nodes gives 1 node for 2 stages"), std::string::npos) << r.err;
}

// A package in the Hugging Face cache pins itself: its repository and the
// snapshot's commit are the reference the nodes fetch it by.
TEST_F(PlanTopology, ACacheSnapshotIsItsOwnPinnedReference) {
  const fs::path repo = tmp_ / "hub" / "models--org--tiny-layers";
  fs::create_directories(repo / "blobs");
  const fs::path snap = repo / "snapshots" / kCommit;
  fs::create_directories(snap.parent_path());
  fs::copy(pkg_, snap, fs::copy_options::recursive);
  const auto out = tmp_ / "topology.json";
  const auto r = run_cli({"plan", snap.string(), "--stages", "2", "--topology-out", out.string(), "--nodes", nodes({0, 1}),
                          "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(peer::load_topology(out).package_ref, kRef);
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["stages"][0]["node_name"], "n0");
  EXPECT_EQ(j["stages"][1]["node_name"], "n1");
}

// examples/topology.json is the topology of the tour's package (written
// reproducibly), as plan writes it: its manifest digest and its ranges are
// that package's (scripts/example-topology.sh regenerates it).
TEST(ExampleTopology, IsTheTwoStagePlanOfTheToursPackage) {
  test::TempDir tmp;
  const auto pkg = tmp / "pkg";
  const auto w = run_cli({"write-package", test::data_path("llama-tiny-q8_0.gguf").string(), "--out-dir", pkg.string(),
                          "--model-id", "org/Tiny-GGUF:Q8_0", "--source-revision", "0123abc", "--source-file",
                          "llama-tiny-q8_0.gguf"},
                         {"SOURCE_DATE_EPOCH=1790000000"});
  ASSERT_EQ(w.exit_code, 0) << w.err;
  const auto t = peer::load_topology(fs::path(SKIPPY_SOURCE_DIR) / "examples" / "topology.json");
  EXPECT_EQ(t.manifest_sha256, sha256_file(pkg / "model-package.json"));
  ASSERT_TRUE(peer::pinned_commit(t.package_ref)) << t.package_ref;
  const auto plan = run_cli({"plan", pkg.string(), "--stages", "2", "--json"});
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  const auto stages = nlohmann::json::parse(plan.out)["stages"];
  ASSERT_EQ(t.stages.size(), stages.size());
  for (size_t i = 0; i < stages.size(); ++i) {
    EXPECT_EQ(t.stages[i].layers.start, stages[i]["layer_start"].get<uint32_t>());
    EXPECT_EQ(t.stages[i].layers.end, stages[i]["layer_end"].get<uint32_t>());
  }
}

}  // namespace
}  // namespace skippy
