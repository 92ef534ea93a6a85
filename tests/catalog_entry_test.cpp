// catalog-entry: the entry nodes find a package by, in mesh-llm's catalog
// format, read back by a reader written here from the reference's own rules
// (model-resolver catalog.rs: CatalogEntry and its serde attributes; its
// resolver's variant match and find_layer_package), and proposed to a
// catalog dataset on the Hub stand-in as a pull request.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "hub_standin.h"
#include "test_util.h"

namespace skippy {
namespace catalog_entry_test {

namespace fs = std::filesystem;
using nlohmann::json;
using test::HubStandin;
using test::TempDir;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// The reference's reader: serde's rules for CatalogEntry (schema_version u32;
// source_repo optional, else the first variant's source.repo; variants an
// object or a legacy list; source.repo and curated.name required; a package's
// type and repo strings). Throws where it fails the whole load.
struct RefVariant {
  std::string name, source_repo, source_file, source_revision;
  std::vector<std::pair<std::string, std::string>> packages;  // type, repo
};
std::vector<RefVariant> reference_read(const json& e) {
  auto str = [](const json& o, const char* k) {
    if (!o.contains(k) || !o[k].is_string()) throw std::runtime_error(std::string("missing string ") + k);
    return o[k].get<std::string>();
  };
  if (!e.at("schema_version").is_number_unsigned()) throw std::runtime_error("schema_version");
  std::vector<std::pair<std::string, json>> vs;
  if (e.at("variants").is_object()) {
    for (const auto& [k, v] : e["variants"].items()) vs.emplace_back(k, v);
  } else if (e["variants"].is_array()) {
    size_t i = 0;
    for (const auto& v : e["variants"]) {
      std::string key = v.at("source").value("file", "");
      if (key.ends_with(".gguf")) key.resize(key.size() - 5);
      if (key.empty()) key = v.at("curated").value("name", "variant-" + std::to_string(i));
      vs.emplace_back(key, v);
      ++i;
    }
  } else {
    throw std::runtime_error("catalog variants must be an object or array");
  }
  std::vector<RefVariant> out;
  for (const auto& [k, v] : vs) {
    RefVariant r;
    r.name = k;
    r.source_repo = str(v.at("source"), "repo");
    (void)str(v.at("curated"), "name");
    r.source_file = v["source"].value("file", k + ".gguf");
    r.source_revision = v["source"].value("revision", "main");
    for (const auto& p : v.value("packages", json::array())) r.packages.emplace_back(str(p, "type"), str(p, "repo"));
    out.push_back(std::move(r));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

// find_layer_package: `org/repo:SELECTOR` matches a variant of that source
// repo whose name, or whose source file (exact or stem), is the selector;
// anything else is a case-insensitive substring of the names. The first
// layer-package (by repo) of the first match, as hf://{repo}.
std::optional<std::string> find_layer_package(const json& entry, const std::string& query) {
  const auto variants = reference_read(entry);
  const auto colon = query.find(':');
  for (const auto& v : variants) {
    bool match;
    if (colon != std::string::npos && query.find('/') < colon) {
      const std::string repo = query.substr(0, colon), sel = query.substr(colon + 1);
      std::string stem = v.source_file.substr(v.source_file.rfind('/') + 1);
      if (stem.ends_with(".gguf")) stem.resize(stem.size() - 5);
      match = lower(repo) == lower(v.source_repo) && (sel == v.name || sel == v.source_file || sel == stem);
    } else {
      const std::string q = lower(query);
      match = lower(v.name).find(q) != std::string::npos || lower(v.source_repo).find(q) != std::string::npos ||
              lower(v.source_file).find(q) != std::string::npos;
    }
    if (!match) continue;
    std::vector<std::string> repos;
    for (const auto& [type, repo] : v.packages) {
      if (type == "layer-package") repos.push_back(repo);
    }
    std::sort(repos.begin(), repos.end());
    if (!repos.empty()) return "hf://" + repos.front();
  }
  return std::nullopt;
}

json read_json(const fs::path& p) { return json::parse(test::read_text(p)); }

TEST(CatalogEntry, AnEntryWrittenOfflineIsFoundByModelNameByTheReferencesRules) {
  TempDir t;
  for (const std::string schema : {"1", "2"}) {
    SCOPED_TRACE("schema " + schema);
    const fs::path pkg = t / ("pkg" + schema), out = t / ("catalog" + schema);
    ASSERT_EQ(test::write_pkg(test::data_path("llama-tiny-q8_0.gguf"), pkg, {"--schema", schema}).exit_code, 0);
    const auto r = test::run_cli({"catalog-entry", pkg.string(), "--repo", "me/tiny-layers", "--out", out.string(), "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json j = json::parse(r.out);
    const fs::path file = out / "entries/org/tiny.json";
    EXPECT_EQ(j["written"], file.string());
    EXPECT_EQ(j["path"], "entries/org/tiny.json");
    EXPECT_EQ(j["variant"], "llama-tiny-q8_0");
    const json e = read_json(file);
    EXPECT_EQ(e, j["entry"]);
    EXPECT_EQ(e["schema_version"], 1);
    EXPECT_EQ(e["source_repo"], "org/tiny");
    const json& v = e["variants"]["llama-tiny-q8_0"];
    EXPECT_EQ(v["source"], json({{"repo", "org/tiny"}, {"file", "llama-tiny-q8_0.gguf"}, {"revision", "0123abc"}}));
    EXPECT_EQ(v["curated"]["size"], "8 layers");
    ASSERT_EQ(v["packages"].size(), 1u);
    EXPECT_EQ(v["packages"][0]["type"], "layer-package");
    EXPECT_EQ(v["packages"][0]["layer_count"], 8);
    EXPECT_GT(v["packages"][0]["total_bytes"].get<uint64_t>(), 3000000u);
    EXPECT_EQ(find_layer_package(e, "org/tiny:llama-tiny-q8_0"), "hf://me/tiny-layers");
    EXPECT_EQ(find_layer_package(e, "ORG/Tiny:llama-tiny-q8_0.gguf"), "hf://me/tiny-layers");
    EXPECT_EQ(find_layer_package(e, "tiny-q8"), "hf://me/tiny-layers");
    EXPECT_EQ(find_layer_package(e, "org/other:llama-tiny-q8_0"), std::nullopt);
  }
}

TEST(CatalogEntry, ASecondPackageJoinsTheVariantAndARerunReplacesItsOwnLine) {
  TempDir t;
  const fs::path pkg = t / "pkg", out = t / "catalog";
  ASSERT_EQ(test::write_pkg(test::data_path("llama-tiny-q8_0.gguf"), pkg).exit_code, 0);
  // An entry already holding another variant, another package and keys the reader ignores.
  fs::create_directories(out / "entries/org");
  {
    std::ofstream o(out / "entries/org/tiny.json");
    o << R"({"schema_version": 1, "source_repo": "org/tiny", "maintainer": "kept",
             "variants": {"llama-tiny-f16": {"source": {"repo": "org/tiny", "file": "llama-tiny-f16.gguf"},
                 "curated": {"name": "Tiny F16", "draft": false, "moe": null, "extra_files": []},
                 "packages": [{"type": "layer-package", "repo": "meshllm/tiny-f16-layers", "layer_count": 8}]},
               "llama-tiny-q8_0": {"source": {"repo": "org/tiny", "revision": "main"},
                 "curated": {"name": "Tiny Q8", "description": "curated by hand"},
                 "packages": [{"type": "layer-package", "repo": "meshllm/tiny-q8-layers", "layer_count": 8}]}}})";
  }
  for (int run = 0; run < 2; ++run) {
    const auto r = test::run_cli({"catalog-entry", pkg.string(), "--repo", "me/tiny-layers@0123456789abcdef0123456789abcdef01234567", "--out", out.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.err.find("updated"), std::string::npos) << r.err;
  }
  const json e = read_json(out / "entries/org/tiny.json");
  EXPECT_EQ(e["maintainer"], "kept");
  EXPECT_EQ(e["variants"]["llama-tiny-f16"]["packages"][0]["repo"], "meshllm/tiny-f16-layers");
  const json& v = e["variants"]["llama-tiny-q8_0"];
  EXPECT_EQ(v["curated"]["description"], "curated by hand");
  ASSERT_EQ(v["packages"].size(), 2u) << v.dump();
  EXPECT_EQ(v["packages"][0]["repo"], "meshllm/tiny-q8-layers");
  EXPECT_EQ(v["packages"][1]["repo"], "me/tiny-layers@0123456789abcdef0123456789abcdef01234567");
  EXPECT_EQ(v["source"]["revision"], "0123abc");
  // The reference's resolver takes the first by repo: mesh-llm's own here.
  EXPECT_EQ(find_layer_package(e, "org/tiny:llama-tiny-q8_0"), "hf://me/tiny-layers@0123456789abcdef0123456789abcdef01234567");
}

TEST(CatalogEntry, TheLegacyListFormAndASplitSourceKeepTheirShapes) {
  TempDir t;
  const fs::path pkg = t / "pkg", out = t / "catalog";
  ASSERT_EQ(test::write_pkg(test::data_path("llama-tiny-q4_0-00001-of-00003.gguf"), pkg).exit_code, 0);
  fs::create_directories(out / "entries/org");
  {
    std::ofstream o(out / "entries/org/tiny.json");
    o << R"({"schema_version": 1, "variants": [{"source": {"repo": "org/tiny", "file": "x.gguf"}, "curated": {"name": "x"}}]})";
  }
  const auto r = test::run_cli({"catalog-entry", pkg.string(), "--repo", "me/q4-layers", "--out", out.string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["variant"], "llama-tiny-q4_0");
  const json e = read_json(out / "entries/org/tiny.json");
  ASSERT_TRUE(e["variants"].is_array());
  ASSERT_EQ(e["variants"].size(), 2u);
  EXPECT_EQ(e["variants"][1]["curated"]["name"], "llama-tiny-q4_0");
  EXPECT_EQ(e["variants"][1]["source"]["file"], "llama-tiny-q4_0-00001-of-00003.gguf");
  EXPECT_EQ(find_layer_package(e, "org/tiny:llama-tiny-q4_0-00001-of-00003"), "hf://me/q4-layers");
}

TEST(CatalogEntry, AnEntryTheReferenceWouldRefuseIsRefusedNamingTheField) {
  TempDir t;
  const fs::path pkg = t / "pkg", out = t / "catalog";
  ASSERT_EQ(test::write_pkg(test::data_path("llama-tiny-q8_0.gguf"), pkg).exit_code, 0);
  fs::create_directories(out / "entries/org");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"schema_version": 1, "variants": "none"})", "variants must be an object or an array"},
      {R"({"variants": {}})", "schema_version is missing"},
      {R"({"schema_version": 1, "variants": {"a": {"source": {"repo": "org/tiny"}, "curated": {}}}})",
       "variants.a.curated.name is missing"},
      {R"({"schema_version": 1, "variants": {"a": {"source": {"repo": "org/tiny"}, "curated": {"name": "a"},
          "packages": [{"type": "layer-package", "repo": 7}]}}})", "variants.a.packages[].repo is not a string"},
      {R"({"schema_version": 1, "variants": {"a": {"source": {"repo": "org/tiny"}, "curated": {"name": "a", "draft": 3}}}})",
       "curated.draft is not a string, null or a boolean"},
      {R"({"schema_version": 1, "variants": {"a": {"source": {"repo": "org/tiny"}, "curated": {"name": "a",
          "extra_files": [{"file": "x"}]}}}})", "extra_files[].repo is missing"},
      {"{not json", "not JSON"}};
  for (const auto& [text, want] : cases) {
    SCOPED_TRACE(text);
    {
      std::ofstream o(out / "entries/org/tiny.json", std::ios::trunc);
      o << text;
    }
    const auto r = test::run_cli({"catalog-entry", pkg.string(), "--repo", "me/x", "--out", out.string(), "--json"});
    EXPECT_EQ(r.exit_code, 1);
    test::expect_json_error(r, "invalid_input", want);
    EXPECT_NE(r.err.find("entries/org/tiny.json"), std::string::npos) << r.err;
    EXPECT_EQ(test::read_text(out / "entries/org/tiny.json"), text) << "left as it was";
  }
}

TEST(CatalogEntry, UsageErrorsSayWhatIsMissing) {
  TempDir t;
  const fs::path pkg = t / "pkg";
  ASSERT_EQ(test::write_pkg(test::data_path("llama-tiny-q8_0.gguf"), pkg).exit_code, 0);
  auto r = test::run_cli({"catalog-entry", pkg.string(), "--json"});
  EXPECT_EQ(r.exit_code, 2);
  test::expect_json_error(r, "usage", "a local package needs --repo NS/NAME");
  r = test::run_cli({"catalog-entry", pkg.string(), "--repo", "me/x", "--direct", "--json"});
  EXPECT_EQ(r.exit_code, 2);
  test::expect_json_error(r, "usage", "--direct goes with --propose");
  r = test::run_cli({"catalog-entry", pkg.string(), "--repo", "not a repo", "--json"});
  EXPECT_EQ(r.exit_code, 2);
  test::expect_json_error(r, "usage", "is not ns/name[@revision]");
  // Printed when neither --out nor --propose.
  r = test::run_cli({"catalog-entry", pkg.string(), "--repo", "me/x"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["variants"]["llama-tiny-q8_0"]["packages"][0]["repo"], "me/x");
}

TEST(CatalogEntry, ProposingOpensAPullRequestOnTheDatasetAndLeavesMainAsItWas) {
  HubStandin hub;
  TempDir t;
  const fs::path pkg = t / "pkg";
  ASSERT_EQ(test::write_pkg(test::data_path("llama-tiny-q8_0.gguf"), pkg, {"--schema", "2"}).exit_code, 0);
  const std::string pkg_commit = hub.publish("me/tiny-layers", pkg);
  // The catalog dataset with an entry for the source already.
  const fs::path seed = t / "seed";
  fs::create_directories(seed / "entries/org");
  {
    std::ofstream o(seed / "entries/org/tiny.json");
    o << R"({"schema_version": 1, "source_repo": "org/tiny", "variants": {}})";
  }
  const std::string main_before = hub.publish("datasets/meshllm/catalog", seed);
  const std::vector<std::string> env = {"HF_ENDPOINT=" + hub.endpoint(), "HF_HUB_CACHE=" + (t / "hf").string(),
                                        "HF_HOME=" + (t / "hfhome").string(), "SKIPPY_HF_BACKOFF_MS=20"};
  auto with_token = env;
  with_token.push_back("HF_TOKEN=hf_test");
  auto r = test::run_cli({"catalog-entry", "hf://me/tiny-layers", "--propose", "--json"}, with_token);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["pull_request_url"], hub.endpoint() + "/datasets/meshllm/catalog/discussions/1");
  EXPECT_EQ(j["existed"], true);
  EXPECT_EQ(j["entry"]["variants"]["llama-tiny-q8_0"]["packages"][0]["package_revision"], pkg_commit);
  auto get = [&](const std::string& rev) {
    return HubStandin::http("GET", hub.endpoint() + "/datasets/meshllm/catalog/resolve/" + rev + "/entries/org/tiny.json",
                            {"Authorization: Bearer hf_test"});
  };
  const auto on_main = get("main");
  ASSERT_EQ(on_main.status, 200);
  EXPECT_EQ(json::parse(on_main.body)["variants"], json::object()) << "main is unchanged until the PR is merged";
  const auto on_pr = get("refs%2Fpr%2F1");
  ASSERT_EQ(on_pr.status, 200) << on_pr.body;
  EXPECT_EQ(json::parse(on_pr.body), j["entry"]);
  EXPECT_EQ(find_layer_package(json::parse(on_pr.body), "org/tiny:llama-tiny-q8_0"), "hf://me/tiny-layers");
  const auto repos = json::parse(HubStandin::http("GET", hub.endpoint() + "/_admin/repos").body);
  EXPECT_EQ(repos["datasets/meshllm/catalog"]["branches"]["main"], main_before);
  // --direct commits to main; a new source gets a new file.
  r = test::run_cli({"catalog-entry", "hf://me/tiny-layers", "--propose", "--direct", "--json"}, with_token);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(json::parse(r.out)["pull_request_url"].is_null());
  EXPECT_EQ(json::parse(get("main").body)["variants"]["llama-tiny-q8_0"]["packages"][0]["repo"], "me/tiny-layers");
  // A catalog without an entry for the source gets a new file; no such dataset is a clear error.
  fs::create_directories(t / "other");
  { std::ofstream(t / "other" / "README.md") << "my catalog\n"; }
  (void)hub.publish("datasets/me/catalog", t / "other");
  r = test::run_cli({"catalog-entry", "hf://me/tiny-layers", "--propose", "--dataset", "me/catalog", "--json"}, with_token);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["existed"], false);
  EXPECT_EQ(json::parse(r.out)["pull_request_url"], hub.endpoint() + "/datasets/me/catalog/discussions/1");
  r = test::run_cli({"catalog-entry", "hf://me/tiny-layers", "--propose", "--dataset", "me/none", "--json"}, with_token);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is me/none a dataset you can read?"), std::string::npos) << r.err;
  // Without a token: refused before anything is sent.
  r = test::run_cli({"catalog-entry", "hf://me/tiny-layers", "--propose", "--json"}, env);
  EXPECT_EQ(r.exit_code, 1);
  test::expect_json_error(r, "unauthorized", "proposing an entry needs a token; set HF_TOKEN");
}

}  // namespace catalog_entry_test
}  // namespace skippy
