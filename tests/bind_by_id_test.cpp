// Tensors are bound by exact id, as the reference's materialization_tensors
// binds them: an empty id, an id the catalog does not hold (a name is never
// another tensor's selector) and an alias tensor are refused by select (by
// layers, by tensors, by admission) and so by materialize. And the catalog
// rules of the reference's GGUF reader (gguf_catalog.rs) the carrier reader
// and the schema 2 writer apply: nested arrays and non-UTF-8 strings.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>

#include <nlohmann/json.hpp>

#include "format/schema2/reader.h"
#include "schema_v2_package.h"
#include "skippy/stage.h"
#include "skippy/error.h"
#include "skippy/gguf.h"
#include "skippy/package.h"
#include "skippy/stage_admission.h"
#include "gguf/gguf_writer.h"
#include "test_util.h"
#include "util/file.h"

namespace skippy {
namespace bind_by_id_test {

namespace fs = std::filesystem;
using test::TempDir;

// A reader for a schema 2 root carrying "toy_alias": {"alias": "x", "of": "y"}
// (stripped before the schema 2 reader sees it): its catalog declares tensor
// x an alias of y, as a format with aliases would.
class AliasReader final : public PackageReader {
 public:
  AliasReader(std::shared_ptr<const PackageReader> v2, std::string alias, std::string of)
      : v2_(std::move(v2)), alias_(std::move(alias)), of_(std::move(of)) {}
  const PackageIdentity& identity() const override { return v2_->identity(); }
  PackageCatalog catalog(const OpenedPlace& place, const CatalogNeed& need) const override {
    PackageCatalog c = v2_->catalog(place, need);
    for (auto& t : c.tensors) {
      if (t.name == alias_) t.alias_of = of_;
    }
    return c;
  }
  void check_place(const OpenedPlace& place) const override { v2_->check_place(place); }
  void on_open(OpenedPlace& place) const override { v2_->on_open(place); }
  ActivationWidth activation_width(const OpenedPlace& place, const PackageCatalog* catalog) const override {
    return v2_->activation_width(place, catalog);
  }
  PackageDescription describe(const OpenedPlace& place, const PackageCatalog& catalog) const override {
    return v2_->describe(place, catalog);
  }

 private:
  std::shared_ptr<const PackageReader> v2_;
  std::string alias_, of_;
};

std::shared_ptr<const PackageReader> make_alias_reader(std::string_view text, std::string_view origin) {
  auto j = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("toy_alias")) return nullptr;
  const auto marker = j["toy_alias"];
  j.erase("toy_alias");
  return std::make_shared<AliasReader>(schema2::make_reader(j.dump(), origin), marker.at("alias").get<std::string>(),
                                       marker.at("of").get<std::string>());
}

// A schema 2 package of the llama fixture whose reader calls blk.1.attn_q.weight an alias of blk.0's.
OpenedPackage alias_package(const TempDir& t) {
  static const bool registered = [] {
    register_package_reader({"toy alias reader", make_alias_reader});
    return true;
  }();
  (void)registered;
  const fs::path dir = t / "pkg";
  const auto w = test::write_pkg(test::model_fixtures().front(), dir, {"--schema", "2"});
  EXPECT_EQ(w.exit_code, 0) << w.err;
  auto root = nlohmann::ordered_json::parse(test::read_text(dir / "model-package.json"));
  root["toy_alias"] = {{"alias", "blk.1.attn_q.weight"}, {"of", "blk.0.attn_q.weight"}};
  const std::string text = root.dump(2);
  test::write_file(dir / "model-package.json", std::vector<uint8_t>(text.begin(), text.end()));
  return open_local_package(dir);
}

void expect_refused(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "admitted; wanted a refusal with: " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(BindById, AnAliasTensorIsNeverSelectedAdmittedOrMaterialized) {
  TempDir t;
  const auto pkg = alias_package(t);
  const auto cat = pkg.catalog(CatalogNeed::all());
  ASSERT_TRUE(cat.catalog.find_tensor("blk.1.attn_q.weight")->alias_of);
  // By layers: a range holding the alias is refused, one without it is served.
  expect_refused([&] { (void)select_stage(cat.catalog, {0, 4}); }, "tensor 'blk.1.attn_q.weight'");
  expect_refused([&] { (void)select_stage(cat.catalog, {0, 4}); }, "aliases 'blk.0.attn_q.weight'");
  EXPECT_NO_THROW((void)select_stage(cat.catalog, {2, 4}));
  // So materialize, which opens the stage through the same selection.
  expect_refused([&] { (void)open_stage(cat, {1, 2}); }, "alias materialization is unsupported");
  // By tensors.
  expect_refused([&] { (void)select_stage_tensors(cat.catalog, {"blk.1.attn_q.weight"}); }, "aliases");
  EXPECT_NO_THROW((void)select_stage_tensors(cat.catalog, {"blk.0.attn_q.weight"}));
  // By admission: the alias and an empty id refused in the tensors' pass.
  StageAdmission a;
  a.package_id = cat.catalog.package_id;
  a.resident_tensor_ids = {"blk.0.attn_q.weight", "blk.1.attn_q.weight"};
  expect_refused([&] { check_stage_admission(a, cat.catalog, "adm.json"); },
                 "adm.json: resident_tensor_ids[1]: tensor \"blk.1.attn_q.weight\" aliases \"blk.0.attn_q.weight\"");
  a.resident_tensor_ids = {"", "blk.0.attn_q.weight"};
  expect_refused([&] { check_stage_admission(a, cat.catalog, "adm.json"); }, "resident_tensor_ids[0]: tensor id is empty");
}

TEST(BindById, IdsAreExactNeverTrimmedNorGuessed) {
  TempDir t;
  const fs::path dir = t / "pkg";
  ASSERT_EQ(test::write_pkg(test::model_fixtures().front(), dir, {"--schema", "2"}).exit_code, 0);
  const auto cat = test::local_catalog(dir);
  expect_refused([&] { (void)select_stage_tensors(cat.catalog, {"blk.0.attn_q.weight", ""}); },
                 "tensor id at index 1 is empty");
  expect_refused([&] { (void)select_stage_tensors(cat.catalog, {"blk.0.attn_q.weight "}); }, "unknown tensor id");
  expect_refused([&] { (void)select_stage_tensors(cat.catalog, {"output"}); }, "unknown tensor id");
  // The CLI says the same.
  const auto r = test::run_cli({"select", dir.string(), "--tensors", "blk.0.attn_q.weight,blk.0.attn_q", "--json"});
  EXPECT_EQ(r.exit_code, 1);
  test::expect_json_error(r, "invalid_input", "tensor 'blk.0.attn_q' is not in the package's catalog (unknown tensor id");
}

// The fixture with one more KV of `type` and encoded value `value`.
fs::path with_kv(const fs::path& out, const std::string& key, GgufType type, const std::vector<uint8_t>& value) {
  const auto g = GgufFile::open(test::model_fixtures().front());
  GgufWriter w(g.alignment());
  for (const auto& kv : g.kvs()) w.add_kv(std::string(kv.key), kv.value);
  w.add_kv(key, type, value);
  for (const auto& tensor : g.tensors()) w.add_tensor_from(g, tensor);
  AtomicFile af(out);
  w.write(af);
  af.commit();
  return out;
}

std::vector<uint8_t> gguf_string(const std::string& s) {
  std::vector<uint8_t> out(8 + s.size());
  const uint64_t n = s.size();
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, s.data(), s.size());
  return out;
}

TEST(BindById, TheCatalogRefusesNestedArraysAndNonUtf8StringsWrittenOrRead) {
  TempDir t;
  // An array of one array of one u32.
  std::vector<uint8_t> nested;
  auto put32 = [&](uint32_t v) { nested.insert(nested.end(), reinterpret_cast<uint8_t*>(&v), reinterpret_cast<uint8_t*>(&v) + 4); };
  auto put64 = [&](uint64_t v) { nested.insert(nested.end(), reinterpret_cast<uint8_t*>(&v), reinterpret_cast<uint8_t*>(&v) + 8); };
  put32(static_cast<uint32_t>(GgufType::kArray));
  put64(1);
  put32(static_cast<uint32_t>(GgufType::kUint32));
  put64(1);
  put32(7);
  // A string array whose second element is not UTF-8; a scalar string the same.
  std::vector<uint8_t> strings;
  {
    const uint32_t et = static_cast<uint32_t>(GgufType::kString);
    const uint64_t n = 2;
    strings.insert(strings.end(), reinterpret_cast<const uint8_t*>(&et), reinterpret_cast<const uint8_t*>(&et) + 4);
    strings.insert(strings.end(), reinterpret_cast<const uint8_t*>(&n), reinterpret_cast<const uint8_t*>(&n) + 8);
    for (const auto& s : {std::string("ok"), std::string("bad\xff")}) {
      const auto e = gguf_string(s);
      strings.insert(strings.end(), e.begin(), e.end());
    }
  }
  struct Bad {
    std::string name;
    fs::path model;
    std::string needle;
  };
  const std::vector<Bad> cases = {
      {"nested", with_kv(t / "nested.gguf", "test.nested", GgufType::kArray, nested), "test.nested is an array of arrays"},
      {"string array", with_kv(t / "strings.gguf", "test.strings", GgufType::kArray, strings),
       "test.strings[1] is a string that is not valid UTF-8"},
      {"string", with_kv(t / "string.gguf", "test.string", GgufType::kString, gguf_string("caf\xe9")),
       "test.string is a string that is not valid UTF-8"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_TRUE(catalog_kv_refusal(GgufFile::open(c.model)));
    // The writer refuses before anything is written.
    const auto r = test::write_pkg(c.model, t / (c.name + "-ours"), {"--schema", "2"});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    test::expect_json_error(r, "invalid_input", c.needle);
    EXPECT_FALSE(fs::exists(t / (c.name + "-ours") / "model-package.json"));
    // A carrier holding it (the test-side writer copies every KV) is refused by the reader.
    (void)test::write_schema_v2_package(c.model, t / (c.name + "-ref"));
    expect_refused([&] { (void)test::local_catalog(t / (c.name + "-ref")); }, c.needle);
  }
  EXPECT_FALSE(catalog_kv_refusal(GgufFile::open(test::model_fixtures().front())));
}

}  // namespace bind_by_id_test
}  // namespace skippy
