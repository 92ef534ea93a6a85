// A third schema is a third reader into the same consumer. A toy schema 3,
// registered from outside the library (register_package_reader), reads a
// schema 1 layout under another schema_version: open_package picks its
// reader, and select, verify and materialize serve it with no line of
// consumer code knowing its schema. Without the registration the same root
// is refused by name, never read down another schema's branch.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "format/schema1/reader.h"
#include "skippy/error.h"
#include "skippy/materialize.h"
#include "skippy/package.h"
#include "skippy/stage.h"
#include "skippy/verify.h"
#include "test_util.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;

// Schema 3 as this test defines it: schema 1's files and fields, a
// schema_version of 3 and a "toy_schema" marker (so that no other test's
// root is ever claimed by it).
class ToyReader final : public PackageReader {
 public:
  explicit ToyReader(std::shared_ptr<const PackageReader> layout) : layout_(std::move(layout)), id_(layout_->identity()) {
    id_.schema_version = 3;
  }
  const PackageIdentity& identity() const override { return id_; }
  PackageCatalog catalog(const OpenedPlace& place, const CatalogNeed& need) const override {
    PackageCatalog c = layout_->catalog(place, need);
    static_cast<PackageIdentity&>(c) = id_;
    return c;
  }
  void check_place(const OpenedPlace& place) const override { layout_->check_place(place); }
  void on_open(OpenedPlace& place) const override { layout_->on_open(place); }
  ActivationWidth activation_width(const OpenedPlace& place, const PackageCatalog* catalog) const override {
    return layout_->activation_width(place, catalog);
  }
  PackageDescription describe(const OpenedPlace& place, const PackageCatalog& catalog) const override {
    auto d = layout_->describe(place, catalog);
    d.title = "toy package schema 3";
    return d;
  }

 private:
  std::shared_ptr<const PackageReader> layout_;
  PackageIdentity id_;
};

std::shared_ptr<const PackageReader> make_toy_reader(std::string_view text, std::string_view origin) {
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || j.value("schema_version", 0) != 3 || !j.value("toy_schema", false)) return nullptr;
  j["schema_version"] = 1;
  j.erase("toy_schema");
  return std::make_shared<ToyReader>(schema1::make_reader(j.dump(), origin));
}

fs::path write_toy_package(const test::TempDir& tmp, const std::string& name) {
  const fs::path dir = tmp / name;
  const auto w = test::write_pkg(test::data_path("llama-tiny-q8_0.gguf"), dir);
  EXPECT_EQ(w.exit_code, 0) << w.err;
  auto root = nlohmann::ordered_json::parse(test::read_text(dir / "model-package.json"));
  root["schema_version"] = 3;
  root["toy_schema"] = true;
  const std::string text = root.dump(2);
  test::write_file(dir / "model-package.json", std::vector<uint8_t>(text.begin(), text.end()));
  return dir;
}

// A schema_version nobody reads: every command says which ones this runtime
// reads (not schema 1's parser's "1 only", which would hide schema 2).
TEST(ThirdSchema, AnUnknownSchemaVersionIsRefusedNamingTheVersionsThisRuntimeReads) {
  test::TempDir tmp;
  const fs::path dir = tmp / "four";
  const fs::path src = test::data_path("llama-tiny-q8_0.gguf");
  ASSERT_EQ(test::write_pkg(src, dir).exit_code, 0);
  auto root = nlohmann::ordered_json::parse(test::read_text(dir / "model-package.json"));
  root["schema_version"] = 4;
  const std::string text = root.dump(2);
  test::write_file(dir / "model-package.json", std::vector<uint8_t>(text.begin(), text.end()));
  const std::string want = "schema_version: unsupported schema version 4; this runtime reads schema_version 1 and 2";
  for (const std::string cmd : {"inspect", "select", "verify"}) {
    SCOPED_TRACE(cmd);
    std::vector<std::string> args = {cmd, dir.string(), "--json"};
    if (cmd == "select") args.insert(args.end(), {"--layers", "0..1"});
    const auto r = test::run_cli(args);
    test::expect_json_error(r, "invalid_input", want);
  }
  const auto v = test::run_cli({"validate-package", src.string(), dir.string(), "--json"});
  EXPECT_EQ(v.exit_code, 1) << v.err;
  const auto report = nlohmann::json::parse(v.out);
  ASSERT_EQ(report["problems"].size(), 1u) << v.out;
  EXPECT_NE(report["problems"][0].get<std::string>().find(want), std::string::npos) << v.out;
}

TEST(ThirdSchema, IsRefusedByNameUntilAReaderIsRegisteredThenServedByTheSameConsumer) {
  test::TempDir tmp;
  const fs::path toy = write_toy_package(tmp, "toy");
  const fs::path plain = tmp / "plain";
  ASSERT_EQ(test::write_pkg(test::data_path("llama-tiny-q8_0.gguf"), plain).exit_code, 0);

  // No reader claims it: refused, naming the schema, before any artifact is read.
  try {
    (void)open_local_package(toy);
    ADD_FAILURE() << "a schema 3 root opened without its reader";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput) << e.what();
    EXPECT_NE(std::string(e.what()).find("schema_version"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("3"), std::string::npos) << e.what();
  }

  register_package_reader({"toy package schema 3", make_toy_reader});
  const OpenedPackage pkg = open_local_package(toy);
  EXPECT_EQ(pkg.schema_version(), 3u);
  EXPECT_NE(dynamic_cast<const ToyReader*>(pkg.reader.get()), nullptr);
  const OpenedPackage one = open_local_package(plain);
  EXPECT_EQ(one.schema_version(), 1u) << "a registered reader claims only its own roots";

  // The consumer, unchanged: select, verify, materialize; the stage's bytes
  // are the schema 1 package's.
  const LayerRange range{1, 3};
  const OpenedCatalog cat = pkg.catalog(CatalogNeed::stage(range));
  EXPECT_EQ(cat.catalog.schema_version, 3u);
  const StageSelection stage = open_stage(cat, range);
  VerifyOptions fresh;
  fresh.use_cache = false;
  const VerifyReport report = verify_stage(cat, stage, fresh);
  EXPECT_TRUE(report.verified);
  EXPECT_GT(report.artifacts, 0u);
  MaterializeOptions o;
  o.out = tmp / "toy-stage.gguf";
  (void)materialize_stage(cat, stage, o);
  const OpenedCatalog plain_cat = one.catalog(CatalogNeed::stage(range));
  MaterializeOptions p;
  p.out = tmp / "plain-stage.gguf";
  (void)materialize_stage(plain_cat, open_stage(plain_cat, range), p);
  // The files differ only where they name their package (its manifest digest).
  const auto a = test::read_file(*o.out), b = test::read_file(*p.out);
  EXPECT_EQ(a.size(), b.size());

  // A damaged layer is caught through the third reader as through the first.
  auto bytes = test::read_file(toy / "layers/layer-00002.gguf");
  bytes[bytes.size() - 1] ^= 1;
  test::write_file(toy / "layers/layer-00002.gguf", bytes);
  const VerifyReport bad = verify_stage(cat, stage, fresh);
  EXPECT_FALSE(bad.verified);
  ASSERT_EQ(bad.problems.size(), 1u);
  EXPECT_NE(bad.problems[0].find("layers/layer-00002.gguf"), std::string::npos) << bad.problems[0];
}

}  // namespace
}  // namespace skippy
