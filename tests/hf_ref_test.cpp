// hf:// references, model coordinates, the Hugging Face cache layout and
// distribution matching: the parts of the Hub support that need no server.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "util/env.h"
#include "skippy/error.h"
#include "skippy/source.h"
#include "test_util.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using test::TempDir;

TEST(HfRef, ParsesTheThreeSpecForms) {
  auto a = parse_hf_ref("hf://meshllm/Qwen3-235B-A22B-UD-Q4_K_XL-layers");
  EXPECT_EQ(a.repo_id, "meshllm/Qwen3-235B-A22B-UD-Q4_K_XL-layers");
  EXPECT_EQ(a.revision, "main");
  EXPECT_FALSE(a.revision_given);
  auto b = parse_hf_ref("hf://meshllm/x-layers:8f4c2d1");
  EXPECT_EQ(b.repo_id, "meshllm/x-layers");
  EXPECT_EQ(b.revision, "8f4c2d1");
  EXPECT_TRUE(b.revision_given);
  auto c = parse_hf_ref("hf://meshllm/x-layers@main");
  EXPECT_EQ(c.revision, "main");
  EXPECT_EQ(c.text(), "hf://meshllm/x-layers@main");
  EXPECT_EQ(parse_hf_ref("hf://a/b@refs/pr/1").revision, "refs/pr/1");
  EXPECT_EQ(parse_hf_ref("hf://a_1/b.c@v1.0").revision, "v1.0");
}

TEST(HfRef, RefusesReposAndRevisionsThatCouldActAsPaths) {
  for (const char* bad : {"hf://", "hf://repo", "hf://a/b/c", "hf:///b", "hf://a/", "hf://../b", "hf://a/..",
                          "hf://a/b..c", "hf://a--b/c", "hf://-a/b", "hf://a/b-", "hf://a/b c", "hf://a/b@",
                          "hf://a/b:", "hf://a/b@..", "hf://a/b@../../etc", "hf://a/b@/abs", "hf://a/b@x//y",
                          "hf://a/b@x/", "hf://a/b@.hidden", "hf://a/b@x/../y", "hf://a/b@main.lock",
                          "hf://a/b@x\\y", "hf://a/b@x y", "hf://a/b@x%2F..", "hf://a/b@x:y@z"}) {
    try {
      (void)parse_hf_ref(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUsage) << bad;
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << "message names the reference: " << e.what();
    }
  }
  EXPECT_THROW((void)parse_hf_ref("hf://a/" + std::string(97, 'b')), Error);
  // The Hub's limit is per name: a 96-character repo name under a namespace is fine.
  EXPECT_EQ(parse_hf_ref("hf://meshllm/" + std::string(96, 'b')).repo_id, "meshllm/" + std::string(96, 'b'));
}

TEST(HfRef, CommitHashes) {
  EXPECT_TRUE(is_commit_hash("562dfadbf0ee1cfbbce5b65dc080364df9f818cf"));
  EXPECT_FALSE(is_commit_hash("562dfadbf0ee1cfbbce5b65dc080364df9f818c"));
  EXPECT_FALSE(is_commit_hash("562DFADBF0EE1CFBBCE5B65DC080364DF9F818CF"));
  EXPECT_FALSE(is_commit_hash("main"));
}

TEST(HfRef, ModelCoordinates) {
  EXPECT_TRUE(looks_like_model_coordinate("org/Model-GGUF:Q4_K_M"));
  EXPECT_FALSE(looks_like_model_coordinate("./model.gguf"));
  EXPECT_FALSE(looks_like_model_coordinate("/abs/dir:x/model.gguf"));
  EXPECT_FALSE(looks_like_model_coordinate("hf://org/repo:rev"));
  EXPECT_FALSE(looks_like_model_coordinate("model.gguf"));
  const auto c = parse_model_coordinate("unsloth/Qwen3-8B-GGUF:UD-Q4_K_XL");
  EXPECT_EQ(c.repo_id, "unsloth/Qwen3-8B-GGUF");
  EXPECT_EQ(c.distribution, "UD-Q4_K_XL");
  EXPECT_EQ(c.revision, "main");
  EXPECT_EQ(c.text(), "unsloth/Qwen3-8B-GGUF:UD-Q4_K_XL");
  EXPECT_EQ(parse_model_coordinate("a/b:Q8_0@v2").revision, "v2");
  EXPECT_THROW((void)parse_model_coordinate("a/b:"), Error);
  EXPECT_THROW((void)parse_model_coordinate("a/b:Q8/0"), Error);
  EXPECT_THROW((void)parse_model_coordinate("a/b:Q8_0@.."), Error);
}

class EnvGuard {
 public:
  explicit EnvGuard(std::vector<std::string> names) : names_(std::move(names)) {
    for (const auto& n : names_) {
      const char* v = std::getenv(n.c_str());
      saved_.push_back(v ? std::optional<std::string>(v) : std::nullopt);
      ::unsetenv(n.c_str());
    }
  }
  ~EnvGuard() {
    for (size_t i = 0; i < names_.size(); ++i) {
      if (saved_[i]) {
        ::setenv(names_[i].c_str(), saved_[i]->c_str(), 1);
      } else {
        ::unsetenv(names_[i].c_str());
      }
    }
  }

 private:
  std::vector<std::string> names_;
  std::vector<std::optional<std::string>> saved_;
};

TEST(HfCache, DirectoryFollowsHuggingfaceHubRules) {
  EnvGuard g({"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "HOME"});
  ::setenv("HOME", "/home/u", 1);
  EXPECT_EQ(env::hf_hub_cache_dir(), fs::path("/home/u/.cache/huggingface/hub"));
  ::setenv("XDG_CACHE_HOME", "/xdg", 1);
  EXPECT_EQ(env::hf_hub_cache_dir(), fs::path("/xdg/huggingface/hub"));
  ::setenv("HF_HOME", "/hfhome", 1);
  EXPECT_EQ(env::hf_hub_cache_dir(), fs::path("/hfhome/hub"));
  ::setenv("HF_HUB_CACHE", "/hubcache", 1);
  EXPECT_EQ(env::hf_hub_cache_dir(), fs::path("/hubcache"));
}

TEST(HfCache, LayoutRefsAndRelativeSymlinks) {
  TempDir t;
  HfRepoCache c(t.path(), "org/tiny-layers");
  EXPECT_EQ(c.repo_dir(), t.path() / "models--org--tiny-layers");
  const std::string sha(64, 'a');
  EXPECT_EQ(c.blob_path(sha), t.path() / "models--org--tiny-layers" / "blobs" / sha);
  EXPECT_EQ(c.incomplete_path(sha).filename().string(), sha + ".incomplete");
  EXPECT_EQ(c.lock_path(sha), t.path() / ".locks" / "models--org--tiny-layers" / (sha + ".lock"));
  EXPECT_THROW((void)c.blob_path("../../x"), Error) << "a hostile ETag cannot name a path";
  EXPECT_THROW((void)c.snapshot_dir("main"), Error);

  c.create_dirs();
  const std::string commit = "562dfadbf0ee1cfbbce5b65dc080364df9f818cf";
  EXPECT_FALSE(c.cached_commit("main"));
  EXPECT_EQ(c.cached_commit(commit), commit) << "a commit needs no ref";
  c.write_ref("main", commit);
  EXPECT_EQ(test::read_text(c.repo_dir() / "refs" / "main"), commit) << "no trailing newline, as huggingface_hub writes";
  EXPECT_EQ(c.cached_commit("main"), commit);
  c.write_ref("refs/pr/1", commit);
  EXPECT_TRUE(fs::is_regular_file(c.repo_dir() / "refs" / "refs" / "pr" / "1"));
  test::write_file(c.repo_dir() / "refs" / "broken", {'x', 'y'});
  EXPECT_FALSE(c.cached_commit("broken")) << "a malformed ref is a miss, not a commit";

  test::write_file(c.blob_path(sha), {1, 2, 3});
  EXPECT_FALSE(c.snapshot_file(commit, "layers/layer-00000.gguf"));
  const auto link = c.link(commit, "layers/layer-00000.gguf", sha);
  EXPECT_EQ(fs::read_symlink(link), fs::path("../../../blobs/" + sha));
  EXPECT_EQ(c.snapshot_file(commit, "layers/layer-00000.gguf"), link);
  EXPECT_EQ(test::read_file(link), (std::vector<uint8_t>{1, 2, 3}));
  const auto top = c.link(commit, "model-package.json", sha);
  EXPECT_EQ(fs::read_symlink(top), fs::path("../../blobs/" + sha));
  c.link(commit, "model-package.json", sha);  // relinking replaces atomically
  EXPECT_EQ(fs::read_symlink(top), fs::path("../../blobs/" + sha));
}

TEST(HfCache, NormalizesEtagsLikeHuggingfaceHub) {
  EXPECT_EQ(normalize_etag("\"abc\""), "abc");
  EXPECT_EQ(normalize_etag("W/\"abc\""), "abc");
  EXPECT_EQ(normalize_etag("abc"), "abc");
}

TEST(HubModel, MatchesOneDistributionAndEveryShard) {
  const std::vector<std::string> files = {
      "README.md",
      "Model-Q4_K_M.gguf",
      "Model-UD-Q4_K_XL.gguf",
      "Model-Q8_0.gguf",
      "mmproj-Model-Q8_0.gguf",
      "Q6_K/Model-Q6_K-00002-of-00002.gguf",
      "Q6_K/Model-Q6_K-00001-of-00002.gguf",
      "BF16/Model-BF16-00001-of-00003.gguf",
      "BF16/Model-BF16-00003-of-00003.gguf",
  };
  auto m = [&](const std::string& tag) { return match_distribution(files, parse_model_coordinate("org/M:" + tag)); };
  EXPECT_EQ(m("Q4_K_M"), std::vector<std::string>{"Model-Q4_K_M.gguf"});
  EXPECT_EQ(m("q4_k_m"), std::vector<std::string>{"Model-Q4_K_M.gguf"}) << "case-insensitive";
  EXPECT_EQ(m("UD-Q4_K_XL"), std::vector<std::string>{"Model-UD-Q4_K_XL.gguf"});
  EXPECT_EQ(m("Q8_0"), std::vector<std::string>{"Model-Q8_0.gguf"}) << "projectors are not the model";
  EXPECT_EQ(m("Q6_K"), (std::vector<std::string>{"Q6_K/Model-Q6_K-00001-of-00002.gguf", "Q6_K/Model-Q6_K-00002-of-00002.gguf"}));
  EXPECT_THROW(m("Q4_K"), Error) << "Q4_K is not a token of Q4_K_M";
  EXPECT_THROW(m("F16"), Error);
  try {
    m("BF16");
    ADD_FAILURE() << "a split model with a missing shard was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("2 of its 3 shards"), std::string::npos) << e.what();
  }
  try {
    match_distribution({"A-Q4_0.gguf", "B-Q4_0.gguf"}, parse_model_coordinate("org/M:Q4_0"));
    ADD_FAILURE() << "an ambiguous tag was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("more than one model"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace skippy
