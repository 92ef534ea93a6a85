// Package schema 2's smaller drift from the reference: the bare
// generator_version, the model card (README.md) and its re-stamp, non-finite
// float metadata refused, validate-package's format check.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "schema_v2_package.h"
#include "skippy/stage.h"
#include "skippy/error.h"
#include "util/file.h"
#include "skippy/gguf.h"
#include "gguf/gguf_writer.h"
#include "skippy/manifest_v2.h"
#include "skippy/package_catalog.h"
#include "skippy/version.h"
#include "test_util.h"

namespace skippy {
namespace v2drift_test {

namespace fs = std::filesystem;
using test::run_cli;
using test::TempDir;

TEST(V2Drift, BareGeneratorVersionAndAModelCardThatFollowsARestamp) {
  TempDir t;
  const auto r = test::write_pkg(test::model_fixtures().front(), t / "pkg", {"--schema", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto root = std::optional<PackageRootV2>(test::root_v2(t / "pkg"));
  EXPECT_EQ(root->generator_version, std::string(library_version()));  // "0.x.y", as the reference writes "0.77.0"
  const auto card = test::read_text(t / "pkg/README.md");
  for (const std::string& want : std::vector<std::string>{root->package_id, "Native ABI `" + root->native_abi_version + "`", "shared/metadata.gguf",
                                 "restamp-package", "validate-package", "<!-- skippy-model-package: schema 2 model card -->"}) {
    EXPECT_NE(card.find(want), std::string::npos) << want;
  }
  // publish would carry it; verify does not care: it is not an artifact.
  EXPECT_EQ(run_cli({"verify", (t / "pkg").string()}).exit_code, 0);
  const auto rs = run_cli({"restamp-package", (t / "pkg").string(), "--native-abi-version", "0.1.41", "--json"});
  ASSERT_EQ(rs.exit_code, 0) << rs.err;
  const auto j = nlohmann::json::parse(rs.out);
  EXPECT_EQ(j["rewritten"], nlohmann::json::array({"README.md"}));
  const auto after = test::read_text(t / "pkg/README.md");
  EXPECT_NE(after.find(j["package_id"].get<std::string>()), std::string::npos);
  EXPECT_EQ(after.find(root->package_id), std::string::npos) << "the old package_id is gone";
  EXPECT_NE(after.find("Native ABI `0.1.41`"), std::string::npos);
  // A README that is not our card stays as it is.
  test::write_file(t / "pkg/README.md", std::vector<uint8_t>{'A', 'B', 'I', ' ', '0', '.', '1', '.', '4', '1'});
  const auto rs2 = run_cli({"restamp-package", (t / "pkg").string(), "--native-abi-version", "0.1.64", "--json"});
  ASSERT_EQ(rs2.exit_code, 0) << rs2.err;
  EXPECT_EQ(test::read_text(t / "pkg/README.md"), "ABI 0.1.41");
  EXPECT_NE(rs2.out.find("not skippy-model-package's model card"), std::string::npos) << rs2.out;
}

// The fixture with a NaN f32 KV and an f64 array holding infinity.
fs::path with_non_finite_kvs(const fs::path& out) {
  const auto g = GgufFile::open(test::model_fixtures().front());
  GgufWriter w(g.alignment());
  for (const auto& kv : g.kvs()) w.add_kv(std::string(kv.key), kv.value);
  std::vector<uint8_t> nan(4);
  const float f = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(nan.data(), &f, 4);
  w.add_kv("test.nan", GgufType::kFloat32, nan);
  std::vector<uint8_t> arr(4 + 8 + 16);
  const uint32_t et = static_cast<uint32_t>(GgufType::kFloat64);
  const uint64_t n = 2;
  const double vals[2] = {1.0, std::numeric_limits<double>::infinity()};
  std::memcpy(arr.data(), &et, 4);
  std::memcpy(arr.data() + 4, &n, 8);
  std::memcpy(arr.data() + 12, vals, 16);
  w.add_kv("test.inf", GgufType::kArray, arr);
  for (const auto& t : g.tensors()) w.add_tensor_from(g, t);
  AtomicFile af(out);
  w.write(af);
  af.commit();
  return out;
}

TEST(V2Drift, NonFiniteFloatMetadataIsRefusedWrittenOrRead) {
  TempDir t;
  EXPECT_FALSE(non_finite_float_kv(GgufFile::open(test::model_fixtures().front())));
  const auto src = with_non_finite_kvs(t / "nan.gguf");
  const auto bad = non_finite_float_kv(GgufFile::open(src));
  ASSERT_TRUE(bad);
  EXPECT_NE(bad->find("test.nan"), std::string::npos) << *bad;
  // The writer refuses before anything is written.
  const auto r = test::write_pkg(src, t / "pkg", {"--schema", "2"});
  EXPECT_EQ(r.exit_code, 1);
  test::expect_json_error(r, "invalid_input", "test.nan");
  EXPECT_FALSE(fs::exists(t / "pkg" / "model-package.json"));
  // A carrier holding one (the test-side writer copies every KV) is refused by the reader.
  (void)test::write_schema_v2_package(src, t / "ref");
  try {
    (void)test::local_catalog(t / "ref");
    ADD_FAILURE() << "read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a finite number"), std::string::npos) << e.what();
  }
}

TEST(V2Drift, ValidatePackageRefusesAFormatOtherThanGguf) {
  TempDir t;
  test::SchemaV2Options o;
  o.edit_root = [](nlohmann::ordered_json& root) { root["format"] = "safetensors"; };
  o.recompute_id_after_edit = true;
  (void)test::write_schema_v2_package(test::model_fixtures().front(), t.path(), o);
  const auto r = run_cli({"validate-package", test::model_fixtures().front().string(), t.path().string(), "--json"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("only gguf is supported"), std::string::npos) << r.out;
}

}  // namespace v2drift_test
}  // namespace skippy
