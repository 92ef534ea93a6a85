// The NextN/MTP block's residency, as mesh-llm's newest runtime plans it
// (fork patch queue 0002 + 0008 at 19aa0066): native stage ranges cover the
// trunk (block_count - nextn_predict_layers); the terminal stage keeps every
// parameter its MTP graph reaches resident: the block's layers, the output
// path and, when the block has no nextn.embed_tokens of its own, the model's
// token_embd. A range ending at the trunk or at layer_count is that stage.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "gguf/gguf_writer.h"
#include "skippy/stage.h"
#include "skippy/gguf.h"
#include "test_util.h"
#include "util/file.h"

namespace skippy {
namespace nextn_residency_test {

namespace fs = std::filesystem;
using test::TempDir;

// glm4moe-mtp-tiny (4 layers, the last its NextN block with its own
// embed_tokens and shared head, output tied to the embeddings) with an
// output.weight of its own, so that token_embd is read by the terminal stage
// only for the MTP block, and (`own_embeddings` false) without the block's
// optional nextn.embed_tokens, so that the block embeds with token_embd.
fs::path untied_mtp_source(const fs::path& out, bool own_embeddings) {
  const auto g = GgufFile::open(test::data_path("glm4moe-mtp-tiny.gguf"));
  GgufWriter w(g.alignment());
  for (const auto& kv : g.kvs()) w.add_kv(std::string(kv.key), kv.value);
  for (const auto& t : g.tensors()) {
    if (!own_embeddings && t.name == "blk.3.nextn.embed_tokens.weight") continue;
    w.add_tensor_from(g, t);
    if (t.name == "token_embd.weight") w.add_tensor("output.weight", t.type, t.ne, g.file(), t.file_offset);
  }
  AtomicFile af(out);
  w.write(af);
  af.commit();
  return out;
}

struct Picked {
  std::set<std::string> tensors;
  std::vector<std::string> notes;
  bool has(const std::string& n) const { return tensors.contains(n); }
  bool note(const std::string& s) const {
    return std::any_of(notes.begin(), notes.end(), [&](const std::string& n) { return n.find(s) != std::string::npos; });
  }
};

Picked pick(const fs::path& pkg, const std::string& layers) {
  const auto r = test::run_cli({"select", pkg.string(), "--layers", layers, "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  Picked p;
  for (const auto& t : j.at("tensors")) p.tensors.insert(t.is_object() ? t.at("name").get<std::string>() : t.get<std::string>());
  for (const auto& n : j.at("notes")) p.notes.push_back(n.get<std::string>());
  // The admission the stage prints binds the same ids.
  std::set<std::string> admitted;
  for (const auto& id : j.at("stage_admission").at("resident_tensor_ids")) admitted.insert(id.get<std::string>());
  EXPECT_EQ(admitted, p.tensors) << layers;
  return p;
}

class NextnResidency : public ::testing::Test {
 protected:
  void SetUp() override {
    const fs::path src = untied_mtp_source(tmp_ / "glm4moe-mtp-untied.gguf", false);
    ASSERT_EQ(test::write_pkg(src, tmp_ / "pkg", {"--schema", "2"}).exit_code, 0);
    const fs::path own = untied_mtp_source(tmp_ / "glm4moe-mtp-own.gguf", true);
    ASSERT_EQ(test::write_pkg(own, tmp_ / "own", {"--schema", "2"}).exit_code, 0);
  }
  fs::path pkg() const { return tmp_ / "pkg"; }
  fs::path own() const { return tmp_ / "own"; }
  TempDir tmp_;
};

TEST_F(NextnResidency, ARangeEndingAtTheTrunkIsTheTerminalStageWithTheBlockTheOutputAndTheEmbeddings) {
  const Picked trunk = pick(pkg(), "1..3");
  EXPECT_TRUE(trunk.has("blk.3.nextn.eh_proj.weight"));
  EXPECT_TRUE(trunk.has("blk.3.attn_q.weight"));
  EXPECT_TRUE(trunk.has("output.weight"));
  EXPECT_TRUE(trunk.has("output_norm.weight"));
  EXPECT_TRUE(trunk.has("token_embd.weight")) << "the MTP block embeds the drafted token";
  EXPECT_TRUE(trunk.note("embeds the drafted token"));
  EXPECT_TRUE(trunk.note("ends at the trunk (layer 3)"));
  // The range ending at layer_count is the same stage.
  const Picked whole = pick(pkg(), "1..4");
  EXPECT_EQ(whole.tensors, trunk.tensors);
  EXPECT_TRUE(whole.note("embeds the drafted token"));
  EXPECT_FALSE(whole.note("ends at the trunk"));
  // A block with its own embed_tokens needs not the model's.
  const Picked own_trunk = pick(own(), "1..3");
  EXPECT_TRUE(own_trunk.has("blk.3.nextn.embed_tokens.weight"));
  EXPECT_TRUE(own_trunk.has("output.weight"));
  EXPECT_FALSE(own_trunk.has("token_embd.weight"));
  EXPECT_FALSE(own_trunk.note("drafted token"));
}

TEST_F(NextnResidency, AStageBeforeTheTrunkEndHoldsNoneOfIt) {
  const Picked first = pick(pkg(), "0..2");
  EXPECT_TRUE(first.has("token_embd.weight"));  // the input
  EXPECT_FALSE(first.has("output.weight"));
  EXPECT_FALSE(first.has("output_norm.weight"));
  for (const auto& t : first.tensors) EXPECT_FALSE(t.starts_with("blk.3.")) << t;
  EXPECT_FALSE(first.note("drafted token"));
  const Picked middle = pick(pkg(), "1..2");
  EXPECT_FALSE(middle.has("token_embd.weight"));
}

TEST_F(NextnResidency, ARangeOfOnlyTheBlockSaysTheReferencePlansNoSuchStage) {
  const Picked only = pick(pkg(), "3..4");
  EXPECT_TRUE(only.has("blk.3.nextn.eh_proj.weight"));
  EXPECT_TRUE(only.has("output.weight"));
  EXPECT_TRUE(only.note("plans no stage past it"));
}

TEST(NextnResidencyTied, ATiedOutputReadsTheEmbeddingsForBothReasonsAndSaysTheTie) {
  TempDir tmp;
  ASSERT_EQ(test::write_pkg(test::data_path("glm4moe-mtp-tiny.gguf"), tmp / "pkg", {"--schema", "2"}).exit_code, 0);
  const Picked p = pick(tmp / "pkg", "2..3");
  EXPECT_TRUE(p.has("token_embd.weight"));
  EXPECT_TRUE(p.has("blk.3.nextn.hnorm.weight"));
  EXPECT_TRUE(p.note("tied to its token embeddings"));
}

TEST(NextnResidencyNone, WithoutABlockARangeShortOfTheEndIsNotTerminal) {
  TempDir tmp;
  ASSERT_EQ(test::write_pkg(test::data_path("llama-tiny-q8_0.gguf"), tmp / "pkg", {"--schema", "2"}).exit_code, 0);
  const Picked p = pick(tmp / "pkg", "4..7");
  EXPECT_FALSE(p.has("output_norm.weight"));
  EXPECT_FALSE(p.has("token_embd.weight"));
  EXPECT_TRUE(pick(tmp / "pkg", "4..8").has("output_norm.weight"));
}

}  // namespace nextn_residency_test
}  // namespace skippy
