// publisher_metadata[] and publisher_defaults of package schema 2: read and
// checked as the reference does, never payload parts nor stage parts, carried
// by every full transfer (verify, fetch, a peer's stage 0, publish), shown
// by inspect, written by --publisher-metadata, dropped (said) by
// convert-package --to 1.
#include <gtest/gtest.h>

#include <set>

#include <nlohmann/json.hpp>

#include "hub_standin.h"
#include "schema_v2_package.h"
#include "skippy/stage.h"
#include "skippy/error.h"
#include "skippy/manifest_v2.h"
#include "skippy/peer_topology.h"
#include "util/sha256.h"
#include "test_util.h"

namespace skippy {
namespace v2pub_test {

namespace fs = std::filesystem;
using nlohmann::ordered_json;
using test::run_cli;
using test::TempDir;

constexpr const char* kConfig = R"({"architectures": ["LlamaForCausalLM"], "torch_dtype": "bfloat16"})";
constexpr const char* kGenConfig = R"({"temperature": 0.6, "top_p": 0.9})";

void put(const fs::path& p, const std::string& s) {
  fs::create_directories(p.parent_path());
  test::write_file(p, std::vector<uint8_t>(s.begin(), s.end()));
}

// A reference-layout package with two publisher files under metadata/ and a
// compute dtype bound to the config; `edit` tampers with the root before the
// test-side writer recomputes the package_id by its own route.
test::SchemaV2Package publisher_package(const fs::path& dir,
                                        const std::function<void(ordered_json&)>& edit = [](ordered_json&) {}) {
  put(dir / "metadata/config.json", kConfig);
  put(dir / "metadata/generation_config.json", kGenConfig);
  test::SchemaV2Options o;
  o.edit_root = [dir, edit](ordered_json& root) {
    const std::string repo = root["source_model"]["repo"], rev = root["source_model"]["revision"];
    for (const auto& [id, name] : {std::pair<std::string, std::string>{"publisher-config-json", "config.json"},
                                   {"publisher-generation-config-json", "generation_config.json"}}) {
      const auto f = dir / "metadata" / name;
      root["artifact_catalog"]["entries"].push_back(
          {{"id", id}, {"path", "metadata/" + name}, {"byte_size", fs::file_size(f)}, {"sha256", sha256_hex(test::read_text(f))}});
    }
    root["publisher_metadata"] = {
        {{"role", "generation_config"}, {"artifact_id", "publisher-generation-config-json"}, {"source_repo", repo},
         {"source_revision", rev}, {"source_path", "generation_config.json"}},
        {{"role", "model_config"}, {"artifact_id", "publisher-config-json"}, {"source_repo", repo},
         {"source_revision", rev}, {"source_path", "config.json"}}};
    root["publisher_defaults"] = {
        {"compute_dtype", {{"dtype", "bf16"}, {"artifact_id", "publisher-config-json"}, {"json_path", "/torch_dtype"}}}};
    edit(root);
  };
  o.recompute_id_after_edit = true;
  return test::write_schema_v2_package(test::model_fixtures().front(), dir, o);
}

TEST(V2Publisher, ReadOutsideThePayloadRankingAndShown) {
  TempDir t;
  const auto written = publisher_package(t.path());
  const auto opened = test::local_catalog(t.path());  // locators still resolve: publisher ids are not ranked
  const auto& c = opened.catalog;
  EXPECT_EQ(c.package_id, written.root["package_id"].get<std::string>()) << "sorted by role rank inside the id";
  const auto* a = c.find_artifact("publisher-config-json");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->kind, CatalogArtifactKind::kPublisherMetadata);
  EXPECT_EQ(a->publisher_role, "model_config");
  EXPECT_FALSE(a->part_index);
  ASSERT_EQ(test::root_v2(opened).publisher_metadata.size(), 2u);
  EXPECT_EQ(test::root_v2(opened).publisher_defaults->compute_dtype->dtype, "bf16");
  // A stage never selects them; every artifact (verify of the whole package) includes them.
  std::set<std::string> stage;
  for (const auto& p : select_stage(c, {0, c.layer_count}).parts) stage.insert(p.rel_path);
  EXPECT_FALSE(stage.contains("metadata/config.json"));
  std::set<std::string> all;
  for (const auto& p : all_parts(c)) all.insert(p.rel_path);
  EXPECT_TRUE(all.contains("metadata/config.json"));
  EXPECT_TRUE(all.contains("metadata/generation_config.json"));
  auto v = run_cli({"verify", t.path().string(), "--json"});
  EXPECT_EQ(v.exit_code, 0) << v.err;
  // A flipped byte in a publisher file is found by verify.
  put(t.path() / "metadata/generation_config.json", R"({"temperature": 0.7, "top_p": 0.9})");
  v = run_cli({"verify", t.path().string(), "--json", "--no-cache"});
  EXPECT_EQ(v.exit_code, 1) << v.out;
  EXPECT_NE(v.out.find("metadata/generation_config.json"), std::string::npos) << v.out;
  put(t.path() / "metadata/generation_config.json", kGenConfig);
  // inspect, both ways.
  const auto ins = run_cli({"inspect", t.path().string(), "--json"});
  ASSERT_EQ(ins.exit_code, 0) << ins.err;
  const auto j = nlohmann::json::parse(ins.out);
  EXPECT_EQ(j["publisher_metadata"].size(), 2u);
  EXPECT_EQ(j["publisher_defaults"]["compute_dtype"]["json_path"], "/torch_dtype");
  const auto text = run_cli({"inspect", t.path().string()});
  EXPECT_NE(text.out.find("publisher file    model_config metadata/config.json (org/Model-GGUF@0123456 config.json)"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("publisher default compute dtype bf16 (publisher-config-json /torch_dtype)"), std::string::npos)
      << text.out;
  // A peer's stage 0 may fetch them; a later stage may not.
  const auto s0 = peer::stage_artifacts({"s0", 0, std::string(64, 'a'), {0, 1}}, c);
  const auto s1 = peer::stage_artifacts({"s1", 1, std::string(64, 'b'), {1, c.layer_count}}, c);
  EXPECT_NE(s0.find("metadata/config.json"), nullptr);
  EXPECT_EQ(s1.find("metadata/config.json"), nullptr);
  // convert-package --to 1 says what it leaves behind.
  const auto cv = run_cli({"convert-package", t.path().string(), "--to", "1", "--out-dir", (t / "v1").string(), "--json"});
  ASSERT_EQ(cv.exit_code, 0) << cv.err;
  EXPECT_NE(cv.out.find("publisher metadata publisher-config-json"), std::string::npos) << cv.out;
}

struct Tamper {
  const char* what;
  std::function<void(ordered_json&)> edit;
  const char* needle;
};

TEST(V2Publisher, TheReferencesRulesRefuseTamperedCopies) {
  const std::vector<Tamper> cases = {
      {"another revision", [](ordered_json& r) { r["publisher_metadata"][0]["source_revision"] = std::string(40, 'f'); },
       "publisher_metadata[0].source_revision: publisher metadata revision differs from source_model.revision"},
      {"a branch", [](ordered_json& r) { r["publisher_metadata"][0]["source_revision"] = "main"; }, "immutable 40-character"},
      {"another repo", [](ordered_json& r) { r["publisher_metadata"][0]["source_repo"] = "other/repo"; },
       "differs from source_model.repo"},
      {"an unknown role", [](ordered_json& r) { r["publisher_metadata"][0]["role"] = "readme"; }, "unknown variant"},
      {"an unknown artifact", [](ordered_json& r) { r["publisher_metadata"][0]["artifact_id"] = "nope"; }, "does not exist"},
      {"a duplicate", [](ordered_json& r) { r["publisher_metadata"][0] = r["publisher_metadata"][1]; }, "appears more than once"},
      {"an unsafe path", [](ordered_json& r) { r["publisher_metadata"][0]["source_path"] = "../x.json"; }, "source_path"},
      {"an unknown field", [](ordered_json& r) { r["publisher_metadata"][0]["sha256"] = "x"; }, "unknown field"},
      {"a default from a generation_config",
       [](ordered_json& r) { r["publisher_defaults"]["kv_cache_dtype"] = {{"dtype", "fp8"}, {"artifact_id", "publisher-generation-config-json"}, {"json_path", "/x"}}; },
       "cannot be sourced from generation_config"},
      {"an unbound default",
       [](ordered_json& r) { r["publisher_defaults"]["compute_dtype"]["artifact_id"] = r["source_model"]["metadata_artifact_id"]; },
       "not bound to publisher_metadata"},
      {"an unknown dtype", [](ordered_json& r) { r["publisher_defaults"]["compute_dtype"]["dtype"] = "int3"; }, "unknown variant"},
      {"an empty json_path", [](ordered_json& r) { r["publisher_defaults"]["compute_dtype"]["json_path"] = " "; }, "must not be empty"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    TempDir t;
    (void)publisher_package(t.path(), c.edit);
    try {
      (void)test::local_catalog(t.path());
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
      EXPECT_NE(std::string(e.what()).find(c.needle), std::string::npos) << e.what();
    }
  }
}

// write-package --schema 2 with a 40-hex revision (publisher files need a commit) and `extra`.
test::CliResult write_v2(const fs::path& out, const std::vector<std::string>& extra, const std::string& revision) {
  const auto src = test::model_fixtures().front();
  std::vector<std::string> args = {"write-package", src.string(), "--out-dir", out.string(), "--model-id",
                                   "org/tiny:Q8_0", "--source-revision", revision, "--source-file",
                                   src.filename().string(), "--schema", "2", "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  return run_cli(args);
}

// A publisher file nested without end is refused at a bounded depth, before
// it is built in memory (16 MiB of `{"a":` took about 500 MB to accept).
TEST(V2Publisher, DeeplyNestedPublisherJsonIsRefusedInBoundedMemory) {
  const std::string rev(40, 'a');
  TempDir t;
  const size_t n = (size_t{16} << 20) / 6;
  std::string nested;
  nested.reserve(n * 6 + 1);
  for (size_t i = 0; i < n; ++i) nested += R"({"a":)";
  nested += "1";
  nested.append(n, '}');
  put(t / "src/config.json", nested);
  const auto src = test::model_fixtures().front();
  const auto r = test::run_program("/usr/bin/time", {"-f", "max_rss_kb=%M", test::cli_path(), "write-package", src.string(),
                                                     "--out-dir", (t / "pkg").string(), "--model-id", "org/tiny:Q8_0",
                                                     "--source-revision", rev, "--source-file", src.filename().string(),
                                                     "--schema", "2", "--publisher-metadata",
                                                     (t / "src/config.json").string()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("nests JSON deeper than 64 levels"), std::string::npos) << r.err.substr(0, 400);
  EXPECT_FALSE(fs::exists(t / "pkg" / "model-package.json"));
  const auto at = r.err.find("max_rss_kb=");
  ASSERT_NE(at, std::string::npos) << r.err.substr(0, 400);
  const uint64_t rss_kb = std::stoull(r.err.substr(at + 11));
  // The rule for untrusted text: at most twice the input plus 100 MiB.
  EXPECT_LT(rss_kb * 1024, 2 * nested.size() + (uint64_t{100} << 20)) << rss_kb << " KiB";
}

TEST(V2Publisher, WrittenByWritePackageAndCarriedByFetchAndPublish) {
  const std::string rev(40, 'a');
  TempDir t;
  put(t / "src/config.json", R"({"num_hidden_layers": 999, "torch_dtype": "float16"})");
  auto r = write_v2(t / "bad", {"--publisher-metadata", (t / "src/config.json").string()}, rev);
  EXPECT_EQ(r.exit_code, 1);
  test::expect_json_error(r, "invalid_input", "num_hidden_layers=999 conflicts with GGUF");
  EXPECT_FALSE(fs::exists(t / "bad" / "model-package.json"));
  put(t / "src/config.json", R"({"torch_dtype": "float16", "quantization_config": {"kv_cache_scheme": {"type": "fp8"}}})");
  put(t / "src/chat_template.jinja", "{{ messages }}");
  r = write_v2(t / "pkg",
               {"--publisher-metadata", (t / "src/config.json").string(), "--publisher-metadata",
                (t / "src/chat_template.jinja").string()},
               rev);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto opened = test::local_catalog(t / "pkg");
  const auto& root = test::root_v2(opened);
  ASSERT_EQ(root.publisher_metadata.size(), 2u);
  EXPECT_EQ(root.publisher_metadata[1].artifact_id, "publisher-chat-template-jinja");
  EXPECT_EQ(root.publisher_metadata[1].role, "chat_template");
  EXPECT_EQ(test::read_text(t / "pkg/metadata/chat_template.jinja"), "{{ messages }}");
  EXPECT_EQ(root.publisher_defaults->compute_dtype->dtype, "f16");
  EXPECT_EQ(root.publisher_defaults->kv_cache_dtype->dtype, "fp8");
  EXPECT_EQ(root.publisher_defaults->kv_cache_dtype->json_path, "/quantization_config/kv_cache_scheme");
  // A name the reference does not know, or a revision that is not a commit, is refused.
  put(t / "src/README.md", "x");
  r = write_v2(t / "bad2", {"--publisher-metadata", (t / "src/README.md").string()}, rev);
  test::expect_json_error(r, "invalid_input", "unsupported publisher metadata file name");
  r = write_v2(t / "bad3", {"--publisher-metadata", (t / "src/config.json").string()}, "0123abc");
  test::expect_json_error(r, "invalid_input", "40-hex commit");

  // Through the Hub: publish carries them, a full fetch brings them, a stage's does not.
  test::HubStandin hub;
  hub.configure({{"token", "hf_test"}, {"url_ttl_secs", 3600}, {"reject_unknown_tokens", false},
                 {"resolve_cache_redirect", false}});
  const std::vector<std::string> env = {"HF_ENDPOINT=" + hub.endpoint(), "HF_HUB_CACHE=" + (t / "hf").string(),
                                        "HF_HOME=" + (t / "hfhome").string(), "SKIPPY_CACHE_DIR=" + (t / "skippy").string(),
                                        "HF_TOKEN=hf_test", "HF_HUB_OFFLINE="};
  r = run_cli({"publish", (t / "pkg").string(), "hf://org/pub-v2", "--create", "--json"}, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_cli({"fetch", "hf://org/pub-v2", "--layers", "0..1", "--json"}, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["downloaded"].dump().find("metadata/"), std::string::npos) << j["downloaded"].dump();
  r = run_cli({"fetch", "hf://org/pub-v2", "--json"}, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_NE(j["downloaded"].dump().find("metadata/config.json"), std::string::npos) << j.dump();
  const fs::path snap = j["snapshot_dir"].get<std::string>();
  EXPECT_EQ(test::read_text(snap / "metadata/chat_template.jinja"), "{{ messages }}");
}

TEST(V2Publisher, ReadFromTheHubSourceRepositoryWhenAsked) {
  TempDir t, model;
  fs::copy_file(test::data_path("llama-tiny-q8_0.gguf"), model / "Tiny-Q8_0.gguf");
  put(model / "config.json", kConfig);
  put(model / "generation_config.json", kGenConfig);
  put(model / "README.md", "#");
  test::HubStandin hub;
  const std::string commit = hub.publish("org/Tiny-GGUF", model.path());
  hub.configure({{"token", "hf_test"}, {"url_ttl_secs", 3600}, {"reject_unknown_tokens", false},
                 {"resolve_cache_redirect", false}});
  const std::vector<std::string> env = {"HF_ENDPOINT=" + hub.endpoint(), "HF_HUB_CACHE=" + (t / "hf").string(),
                                        "HF_HOME=" + (t / "hfhome").string(), "SKIPPY_CACHE_DIR=" + (t / "skippy").string(),
                                        "HF_TOKEN=", "HF_HUB_OFFLINE="};
  auto r = run_cli({"write-package", "org/Tiny-GGUF:Q8_0", "--schema", "2", "--hub-publisher-metadata", "--out-dir",
                    (t / "pkg").string(), "--json"},
                   env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto root = std::optional<PackageRootV2>(test::root_v2(t / "pkg"));
  ASSERT_EQ(root->publisher_metadata.size(), 2u);
  EXPECT_EQ(root->publisher_metadata[0].role, "model_config");
  EXPECT_EQ(root->publisher_metadata[0].source_repo, "org/Tiny-GGUF");
  EXPECT_EQ(root->publisher_metadata[0].source_revision, commit);
  EXPECT_EQ(root->publisher_metadata[1].role, "generation_config");
  EXPECT_EQ(test::read_text(t / "pkg/metadata/config.json"), kConfig);
  EXPECT_EQ(root->publisher_defaults->compute_dtype->dtype, "bf16");
  // Without the flag: none; with a local source: a usage error.
  r = run_cli({"write-package", "org/Tiny-GGUF:Q8_0", "--schema", "2", "--out-dir", (t / "pkg2").string(), "--json"}, env);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(test::root_v2(t / "pkg2").publisher_metadata.empty());
  r = test::write_pkg(test::model_fixtures().front(), t / "pkg3", {"--schema", "2", "--hub-publisher-metadata"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
}

}  // namespace v2pub_test
}  // namespace skippy
