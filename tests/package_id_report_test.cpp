// Every consuming command reports which package it read, the same way for
// every schema: schema_version and package_id in its JSON. Schema 2's id is
// its root's package_id; schema 1 has no such field, and its id is
// "sha256:" and the manifest's SHA-256 (what caches key the package by).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.h"
#include "util/sha256.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using test::run_cli;

nlohmann::json json_of(const std::vector<std::string>& args) {
  const auto r = run_cli(args);
  EXPECT_EQ(r.exit_code, 0) << args[0] << ": " << r.err;
  return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
}

TEST(PackageIdReport, EveryConsumingCommandNamesTheSchemaAndThePackageIdOfEitherSchema) {
  test::TempDir tmp;
  const fs::path model = test::data_path("glm4moe-mtp-tiny.gguf");  // speculative has a strategy to report
  for (const int schema : {1, 2}) {
    SCOPED_TRACE(schema);
    const fs::path pkg = tmp / ("s" + std::to_string(schema));
    ASSERT_EQ(test::write_pkg(model, pkg, {"--schema", std::to_string(schema)}).exit_code, 0);
    const auto root = nlohmann::json::parse(test::read_text(pkg / "model-package.json"));
    const std::string manifest_sha = sha256_hex(test::read_text(pkg / "model-package.json"));
    const std::string want = schema == 2 ? root["package_id"].get<std::string>() : "sha256:" + manifest_sha;
    const std::string p = pkg.string();
    const std::vector<std::vector<std::string>> commands = {
        {"inspect", p, "--json"},
        {"select", p, "--layers", "0..2", "--json"},
        {"verify", p, "--json"},
        {"plan", p, "--stages", "2", "--json"},
        {"materialize", p, "--layers", "0..2", "--out", (tmp / ("stage" + std::to_string(schema) + ".gguf")).string(),
         "--json"},
        {"speculative", p, "--json"},
    };
    for (const auto& args : commands) {
      const auto j = json_of(args);
      EXPECT_EQ(j.value("schema_version", 0), schema) << args[0] << ": " << j.dump();
      EXPECT_EQ(j.value("package_id", ""), want) << args[0];
    }
  }
}

}  // namespace
}  // namespace skippy
