// convert-package: schema 1 -> 2 without copying payload bytes (hard links,
// same SHA-256), certified against the source or refused; schema 2 -> 1
// (of packages our writer did not write) validating against the source;
// the round trip 1 -> 2 -> 1.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "schema_v2_package.h"
#include "skippy/stage.h"
#include "skippy/error.h"
#include "skippy/gguf.h"
#include "skippy/manifest.h"
#include "skippy/model_source.h"
#include "skippy/package_convert.h"
#include "skippy/package_validator.h"
#include "skippy/package_writer.h"
#include "util/sha256.h"
#include "test_util.h"

namespace skippy {
namespace convert_test {

namespace fs = std::filesystem;
using test::TempDir;

void write_v1(const fs::path& src, const fs::path& out) {
  WritePackageOptions o;
  o.source = src;
  o.out_dir = out;
  o.provenance.model_id = "org/tiny:Q8_0";
  o.provenance.revision = "0123abc";
  o.provenance.primary_file = src.filename().string();
  o.created_at_unix_secs = 1790000000;
  (void)write_package(o);
}

ino_t inode(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
  return st.st_ino;
}

// Nothing but `keep` in the directory (no staging leftover beside an output).
void expect_only(const fs::path& dir, const std::set<std::string>& keep) {
  for (const auto& e : fs::directory_iterator(dir)) {
    EXPECT_TRUE(keep.contains(e.path().filename().string())) << "left behind: " << e.path();
  }
}

TEST(Convert, OneToTwoOnEveryFixtureLinksEveryFragmentAndCertifies) {
  for (const auto& fixture : test::model_fixtures()) {
    SCOPED_TRACE(fixture.string());
    TempDir dir;
    write_v1(fixture, dir / "v1");
    ConvertToV2Options o;
    o.package_dir = dir / "v1";
    o.out_dir = dir / "v2";
    o.source = fixture;
    const auto r = convert_package_to_v2(o);
    EXPECT_TRUE(r.certified);
    const auto model = ModelSource::open(fixture);
    EXPECT_EQ(r.tensors_certified, model.tensors().size());
    EXPECT_EQ(r.bytes_compared, model.tensor_bytes());
    const auto opened = test::local_catalog(dir / "v2");  // our strict reader
    EXPECT_EQ(opened.catalog.package_id, r.package_id);
    const auto m1 = test::load_manifest(dir / "v1");
    size_t payload = 0;
    for (const auto& a : r.artifacts) {
      if (a.from.empty()) {
        EXPECT_EQ(a.path, "shared/metadata.gguf");  // the new carrier
        continue;
      }
      ++payload;
      EXPECT_EQ(a.how, "hard link");  // one filesystem: the same inode, the same bytes
      EXPECT_EQ(inode(dir / "v1" / a.from), inode(dir / "v2" / a.path)) << a.path;
      EXPECT_EQ(sha256_file(dir / "v2" / a.path), a.sha256);
      EXPECT_EQ(opened.catalog.find_artifact(a.id)->sha256, a.sha256);
    }
    EXPECT_EQ(payload + 1, opened.catalog.artifacts.size());
    EXPECT_EQ(r.linked_bytes, r.payload_bytes);
    // Every tensor at its locator is the source's (a second, catalog-side check).
    (void)certify_catalog(opened.catalog, dir / "v2", fixture, true);
    // The schema 1 metadata fragment has no tensors in these fixtures: no part for it.
    EXPECT_EQ(opened.catalog.find_artifact("common") != nullptr, m1.shared.metadata.tensor_count > 0);
    expect_only(dir.path(), {"v1", "v2"});
  }
}

TEST(Convert, AcrossFilesystemsTheFragmentsAreCopiedByteForByte) {
  // /dev/shm (tmpfs) is another filesystem than the test's TMPDIR: no hard
  // link is possible, so each fragment is copied (copy_file_range or pwrite).
  struct stat shm {}, tmp {};
  TempDir dir;
  if (::stat("/dev/shm", &shm) != 0 || ::stat(dir.path().c_str(), &tmp) != 0 || shm.st_dev == tmp.st_dev) {
    GTEST_SKIP() << "no second filesystem at /dev/shm";
  }
  const auto src = test::data_path("llama-tiny-q8_0.gguf");
  write_v1(src, dir / "v1");
  char tmpl[] = "/dev/shm/skippy-convert-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const fs::path other = tmpl;
  ConvertToV2Options o;
  o.package_dir = dir / "v1";
  o.out_dir = other / "v2";
  o.source = src;
  const auto r = convert_package_to_v2(o);
  EXPECT_EQ(r.linked_bytes, 0u);
  for (const auto& a : r.artifacts) {
    if (a.from.empty()) continue;
    EXPECT_EQ(a.how, "copy") << a.path;
    EXPECT_NE(inode(dir / "v1" / a.from), inode(other / "v2" / a.path));
    EXPECT_EQ(test::read_file(dir / "v1" / a.from), test::read_file(other / "v2" / a.path)) << a.path;
  }
  EXPECT_NO_THROW((void)test::local_catalog(other / "v2"));
  fs::remove_all(other);
}

TEST(Convert, WithoutASourceItRefusesAndSaysWhy) {
  const auto src = test::data_path("llama-tiny-q8_0.gguf");
  TempDir dir;
  write_v1(src, dir / "v1");
  auto r = test::run_cli({"convert-package", (dir / "v1").string(), "--to", "2", "--out-dir", (dir / "v2").string(), "--json"});
  EXPECT_EQ(r.exit_code, 2);
  test::expect_json_error(r, "usage", "coverage cannot be certified without --source");
  EXPECT_NE(r.out.find("original source"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir / "v2"));
  // --uncertified writes it, and says it is not certified.
  r = test::run_cli({"convert-package", (dir / "v1").string(), "--to", "2", "--out-dir", (dir / "v2").string(),
                     "--uncertified", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["certified"], false);
  EXPECT_NE(doc["certification"].get<std::string>().find("not certified"), std::string::npos);
  EXPECT_NO_THROW((void)test::local_catalog(dir / "v2"));
}

TEST(Convert, AWrongOrAlteredSourceIsRefusedNamingTheTensorAndNothingAppears) {
  const auto src = test::data_path("llama-tiny-q8_0.gguf");
  TempDir dir;
  write_v1(src, dir / "v1");
  auto refused = [&](const fs::path& source, const std::string& needle) {
    auto r = test::run_cli({"convert-package", (dir / "v1").string(), "--to", "2", "--out-dir", (dir / "v2").string(),
                            "--source", source.string(), "--json"});
    EXPECT_EQ(r.exit_code, 1);
    test::expect_json_error(r, "integrity", needle);
    EXPECT_FALSE(fs::exists(dir / "v2"));
    expect_only(dir.path(), {"v1", "altered.gguf"});
  };
  // Another model: types differ, tensor named.
  refused(test::data_path("llama-tiny-f16.gguf"), "tensor '");
  // The same model with one payload byte flipped in blk.3.ffn_down.weight.
  auto bytes = test::read_file(src);
  const auto g = GgufFile::open(src);
  const auto* t = g.find_tensor("blk.3.ffn_down.weight");
  ASSERT_NE(t, nullptr);
  bytes[t->file_offset + 17] ^= 0x40;
  test::write_file(dir / "altered.gguf", bytes);
  refused(dir / "altered.gguf", "tensor 'blk.3.ffn_down.weight': byte 17 differs");
}

TEST(Convert, SaysWhatHadNoPlaceInSchema2) {
  const auto src = test::data_path("llama-tiny-q8_0.gguf");
  TempDir dir;
  write_v1(src, dir / "v1");
  auto j = nlohmann::ordered_json::parse(test::read_text(dir / "v1/model-package.json"));
  j["generation"] = {{"policy", {{"decode", "auto"}}}, {"thresholds", {{"short_prefill_max_tokens", 64}}}};
  std::ofstream(dir / "v1/model-package.json") << j.dump(2) << "\n";
  auto r = test::run_cli({"convert-package", (dir / "v1").string(), "--to", "2", "--out-dir", (dir / "v2").string(),
                          "--source", src.string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto dropped = nlohmann::json::parse(r.out)["dropped"].dump();
  EXPECT_NE(dropped.find("generation.policy"), std::string::npos) << dropped;
  EXPECT_NE(dropped.find("generation.thresholds"), std::string::npos) << dropped;
  EXPECT_FALSE(test::root_v2(dir / "v2").generation.has_value());
}

TEST(Convert, TwoToOneOfAReferenceLayoutPackageValidatesAgainstTheSource) {
  for (const auto& fixture : test::model_fixtures()) {
    SCOPED_TRACE(fixture.string());
    TempDir dir;
    (void)test::write_schema_v2_package(fixture, dir / "v2");
    ConvertToV1Options o;
    o.package_dir = dir / "v2";
    o.out_dir = dir / "v1";
    (void)convert_package_to_v1(open_local_package(dir / "v2"), o);
    const auto report = validate_package(fixture, dir / "v1");
    std::string problems;
    for (const auto& p : report.problems) problems += p + "\n";
    EXPECT_TRUE(report.valid) << problems;
    // Full range materialized: every tensor is the source's.
    const auto model = ModelSource::open(fixture);
    auto r = test::run_cli({"materialize", (dir / "v1").string(), "--layers", "0.." + std::to_string(model.layer_count()),
                            "--out", (dir / "full.gguf").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto full = GgufFile::open(dir / "full.gguf");
    EXPECT_EQ(full.tensors().size(), model.tensors().size());
    for (const auto& st : model.tensors()) {
      const auto* ft = full.find_tensor(st.info->name);
      ASSERT_NE(ft, nullptr) << st.info->name;
      const auto a = full.tensor_data(*ft);
      const auto b = model.shards()[st.shard].tensor_data(*st.info);
      EXPECT_TRUE(a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin())) << st.info->name;
    }
  }
}

TEST(Convert, RoundTripOneTwoOneGivesTheSameFragments) {
  const auto src = test::data_path("llama-tiny-q4_0-00001-of-00003.gguf");
  TempDir dir;
  write_v1(src, dir / "a");
  ConvertToV2Options o;
  o.package_dir = dir / "a";
  o.out_dir = dir / "b";
  o.source = src;
  (void)convert_package_to_v2(o);
  ConvertToV1Options back;
  back.package_dir = dir / "b";
  back.out_dir = dir / "c";
  (void)convert_package_to_v1(open_local_package(dir / "b"), back);
  const auto ma = test::load_manifest(dir / "a");
  const auto mc = test::load_manifest(dir / "c");
  EXPECT_EQ(ma.shared.embeddings, mc.shared.embeddings);
  EXPECT_EQ(ma.shared.output, mc.shared.output);
  EXPECT_EQ(ma.layers, mc.layers);
  // The metadata fragment comes back but for write-package's record of the
  // split source's layout, which schema 2 cannot carry (materialize
  // --as-source of package c says so).
  const auto meta_a = GgufFile::open(dir / "a/shared/metadata.gguf");
  const auto meta_c = GgufFile::open(dir / "c/shared/metadata.gguf");
  const auto kvs_of = [](const GgufFile& g) {
    std::vector<std::pair<std::string, std::vector<uint8_t>>> kvs;
    for (const auto& kv : g.kvs()) {
      const auto v = kv.value.encoded();
      if (!kv.key.starts_with(kSourceRecordPrefix)) kvs.emplace_back(kv.key, std::vector<uint8_t>(v.begin(), v.end()));
    }
    return kvs;
  };
  EXPECT_EQ(kvs_of(meta_a), kvs_of(meta_c));
  EXPECT_TRUE(meta_a.find_kv(kSourceTensorsKey));
  EXPECT_EQ(meta_a.tensors().size(), meta_c.tensors().size());
  EXPECT_EQ(ma.source_model.files, mc.source_model.files);
  EXPECT_EQ(ma.model_id, mc.model_id);
  EXPECT_TRUE(validate_package(src, dir / "c").valid);
  // A flipped payload byte in the schema 2 package is caught on the way back.
  auto bytes = test::read_file(dir / "b/layers/layer-00002.gguf");
  fs::remove(dir / "b/layers/layer-00002.gguf");  // a hard link: do not change the schema 1 copy
  bytes[bytes.size() - 3] ^= 1;
  test::write_file(dir / "b/layers/layer-00002.gguf", bytes);
  back.out_dir = dir / "d";
  try {
    (void)convert_package_to_v1(open_local_package(dir / "b"), back);
    ADD_FAILURE() << "converted a tampered package";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIntegrity);
    EXPECT_NE(std::string(e.what()).find("layer-00002"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(dir / "d"));
}

}  // namespace convert_test
}  // namespace skippy
