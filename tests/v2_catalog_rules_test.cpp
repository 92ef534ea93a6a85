// The reference's catalog rules for package schema 2 tensors: a tensor with
// a zero dimension (a converter's placeholder, e.g. `__index_timestep_zero__`
// with dims [0]) is not catalogued, by the writers, the certification and the
// carrier reader; a carrier's directory may describe tensors of up to 8
// dimensions, while a GGUF that ggml loads (a source, a materialized stage)
// has at most 4. Real GGUF files, built here byte by byte where our own
// writer (rightly) refuses to make them.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>

#include "schema_v2_package.h"
#include "skippy/stage.h"
#include "skippy/error.h"
#include "skippy/gguf.h"
#include "skippy/package_catalog.h"
#include "test_util.h"
#include "util/file.h"
#include "util/sha256.h"

namespace skippy {
namespace v2rules_test {

namespace fs = std::filesystem;
using test::run_cli;
using test::TempDir;

// One tensor directory entry, written as it is (any dims).
struct RawTensor {
  std::string name;
  std::vector<uint64_t> ne;
  uint32_t type = 0;
  uint64_t offset = 0;  // relative to the data section
};

void put_u32(std::vector<uint8_t>& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_u64(std::vector<uint8_t>& b, uint64_t v) {
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_str(std::vector<uint8_t>& b, std::string_view s) {
  put_u64(b, s.size());
  b.insert(b.end(), s.begin(), s.end());
}

// A GGUF v3 with `kvs_from`'s KVs (their wire bytes), `tensors` as given,
// the header padded to the file's alignment, then `data` (the data section).
std::vector<uint8_t> raw_gguf(const GgufFile& kvs_from, const std::vector<RawTensor>& tensors,
                              std::span<const uint8_t> data) {
  std::vector<uint8_t> b;
  put_u32(b, kGgufMagic);
  put_u32(b, 3);
  put_u64(b, tensors.size());
  put_u64(b, kvs_from.kvs().size());
  for (const auto& kv : kvs_from.kvs()) {
    put_str(b, kv.key);
    put_u32(b, static_cast<uint32_t>(kv.value.type()));
    b.insert(b.end(), kv.value.encoded().begin(), kv.value.encoded().end());
  }
  for (const auto& t : tensors) {
    put_str(b, t.name);
    put_u32(b, static_cast<uint32_t>(t.ne.size()));
    for (const uint64_t d : t.ne) put_u64(b, d);
    put_u32(b, t.type);
    put_u64(b, t.offset);
  }
  while (b.size() % kvs_from.alignment() != 0) b.push_back(0);
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

std::vector<RawTensor> directory_of(const GgufFile& f) {
  std::vector<RawTensor> out;
  for (const auto& t : f.tensors()) {
    out.push_back({std::string(t.name), std::vector<uint64_t>(t.ne.begin(), t.ne.end()), t.type, t.offset});
  }
  return out;
}

// Rewrites the carrier of the schema 2 package in `dir` with its directory
// edited, then the root: the carrier's size and SHA-256, a recomputed
// package_id (so only the carrier's directory rule under test can fire).
void rewrite_carrier(const fs::path& dir, const std::function<void(std::vector<RawTensor>&)>& edit) {
  const fs::path carrier = dir / "shared/metadata.gguf";
  std::vector<uint8_t> bytes;
  {
    GgufLimits limits;
    limits.directory_only = true;
    const auto f = GgufFile::open(carrier, limits);
    auto dirents = directory_of(f);
    edit(dirents);
    bytes = raw_gguf(f, dirents, {});
  }
  fs::remove(carrier);
  test::write_file(carrier, bytes);
  auto root = nlohmann::ordered_json::parse(test::read_text(dir / "model-package.json"));
  for (auto& e : root["artifact_catalog"]["entries"]) {
    if (e["path"] == "shared/metadata.gguf") {
      e["byte_size"] = bytes.size();
      e["sha256"] = sha256_hex(std::span<const uint8_t>(bytes));
    }
  }
  root["package_id"] = test::schema_v2_package_id(root);
  const std::string text = root.dump(2);
  fs::remove(dir / "model-package.json");
  test::write_file(dir / "model-package.json", std::vector<uint8_t>(text.begin(), text.end()));
}

RawTensor* find_raw(std::vector<RawTensor>& d, std::string_view name) {
  for (auto& t : d) {
    if (t.name == name) return &t;
  }
  throw std::runtime_error("no tensor " + std::string(name));
}

constexpr const char* kPlaceholder = "__index_timestep_zero__";

// Schema 1 keeps a zero-dimension tensor in its fragment, but a fragment
// holding nothing else would declare tensor_count 1 with tensor_bytes 0,
// which the spec forbids: the writer refuses before writing, naming the
// tensor and the fix, instead of writing a package its own reader refuses.
TEST(V2CatalogRules, ASchema1FragmentOfOnlyZeroDimensionTensorsIsRefusedUpFront) {
  TempDir t;
  const fs::path src = test::with_extra_tensors(test::data_path("llama-tiny-q8_0.gguf"), t.path(), {{kPlaceholder, 0}});
  const auto w = test::write_pkg(src, t / "pkg");
  EXPECT_NE(w.exit_code, 0) << w.out;
  EXPECT_NE(w.err.find("shared/metadata.gguf would hold only tensors without bytes"), std::string::npos) << w.err;
  EXPECT_NE(w.err.find(kPlaceholder), std::string::npos) << w.err;
  EXPECT_NE(w.err.find("--schema 2"), std::string::npos) << w.err;
  EXPECT_FALSE(fs::exists(t / "pkg" / "model-package.json"));
  // Beside a tensor with bytes the placeholder is kept (schema 1 as always).
  TempDir t1;
  const fs::path src1 =
      test::with_extra_tensors(test::data_path("llama-tiny-q8_0.gguf"), t1.path(), {{"blk.0.placeholder_zero", 0}});
  const auto w1 = test::write_pkg(src1, t1 / "pkg");
  ASSERT_EQ(w1.exit_code, 0) << w1.err;
  EXPECT_EQ(run_cli({"validate-package", src1.string(), (t1 / "pkg").string()}).exit_code, 0);
}

TEST(V2CatalogRules, AZeroDimensionTensorIsNotCataloguedByTheWriters) {
  TempDir t;
  const fs::path src = test::with_extra_tensors(test::data_path("llama-tiny-q8_0.gguf"), t.path(), {{kPlaceholder, 0}});
  const auto source = GgufFile::open(src);
  ASSERT_NE(source.find_tensor(kPlaceholder), nullptr);
  ASSERT_EQ(source.find_tensor(kPlaceholder)->ne, std::vector<int64_t>{0});

  // write-package --schema 2: not in any part, not in the carrier's directory.
  const auto w = test::write_pkg(src, t / "pkg", {"--schema", "2"});
  ASSERT_EQ(w.exit_code, 0) << w.err;
  const auto pkg = test::local_catalog(t / "pkg");
  EXPECT_EQ(pkg.catalog.find_tensor(kPlaceholder), nullptr);
  EXPECT_EQ(pkg.catalog.tensors.size(), source.tensors().size() - 1);
  EXPECT_EQ(pkg.catalog.carrier_file->find_tensor(kPlaceholder), nullptr);
  for (const auto& e : fs::recursive_directory_iterator(t / "pkg")) {
    if (e.path().extension() != ".gguf") continue;
    GgufLimits limits;
    limits.directory_only = e.path().filename() == "metadata.gguf";  // the carrier: a directory, no payload
    EXPECT_EQ(GgufFile::open(e.path(), limits).find_tensor(kPlaceholder), nullptr) << e.path();
  }
  // Certification against the source does not expect it.
  const auto v = run_cli({"validate-package", src.string(), (t / "pkg").string(), "--json"});
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;

  // convert-package --to 2 of a schema 1 package whose layer fragment holds
  // such a placeholder leaves it out of the catalog and certifies.
  TempDir t1;
  const fs::path src1 =
      test::with_extra_tensors(test::data_path("llama-tiny-q8_0.gguf"), t1.path(), {{"blk.0.placeholder_zero", 0}});
  const auto w1 = test::write_pkg(src1, t1 / "v1");
  ASSERT_EQ(w1.exit_code, 0) << w1.err;
  ASSERT_NE(GgufFile::open(t1 / "v1/layers/layer-00000.gguf").find_tensor("blk.0.placeholder_zero"), nullptr);
  const auto c = run_cli({"convert-package", (t1 / "v1").string(), "--to", "2", "--out-dir", (t1 / "v2").string(),
                          "--source", src1.string(), "--json"});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  const auto converted = test::local_catalog(t1 / "v2");
  EXPECT_EQ(converted.catalog.find_tensor("blk.0.placeholder_zero"), nullptr);
  EXPECT_EQ(converted.catalog.tensors.size(), source.tensors().size() - 1);
}

TEST(V2CatalogRules, TheCarrierReaderSkipsAZeroDimensionEntry) {
  TempDir t;
  (void)test::write_schema_v2_package(test::data_path("llama-tiny-q8_0.gguf"), t / "pkg");
  const size_t before = test::local_catalog(t / "pkg").catalog.tensors.size();
  // A directory entry the reference's reader skips: its locator arrays keep
  // one entry per other tensor, so a reader that counted it would refuse.
  rewrite_carrier(t / "pkg", [](std::vector<RawTensor>& d) {
    d.insert(d.begin() + 3, RawTensor{kPlaceholder, {0}, 0, 0});
    d.push_back({"zero.middle.weight", {16, 0, 4}, 0, 7});  // zero bytes: its offset need not be aligned
  });
  const auto pkg = test::local_catalog(t / "pkg");
  EXPECT_EQ(pkg.catalog.tensors.size(), before);
  EXPECT_EQ(pkg.catalog.find_tensor(kPlaceholder), nullptr);
  EXPECT_EQ(pkg.catalog.find_tensor("zero.middle.weight"), nullptr);
  // Every locator still lands on its own tensor: the full stage materializes.
  const auto r = run_cli({"verify", (t / "pkg").string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto m = run_cli({"materialize", (t / "pkg").string(), "--layers", "0..8", "--out", (t / "full.gguf").string()});
  ASSERT_EQ(m.exit_code, 0) << m.err;
  EXPECT_EQ(GgufFile::open(t / "full.gguf").tensors().size(), before);
}

TEST(V2CatalogRules, UpToEightDimensionsInACarrierFourInAGgufThatGgmlLoads) {
  TempDir t;
  (void)test::write_schema_v2_package(test::data_path("llama-tiny-q8_0.gguf"), t / "pkg");
  // Same elements, same bytes, so every locator stays right.
  rewrite_carrier(t / "pkg", [](std::vector<RawTensor>& d) {
    auto* five = find_raw(d, "blk.0.attn_norm.weight");
    ASSERT_EQ(five->ne.size(), 1u);
    five->ne.resize(5, 1);
    auto* eight = find_raw(d, "output_norm.weight");
    eight->ne.resize(8, 1);
  });
  const auto pkg = test::local_catalog(t / "pkg");
  ASSERT_NE(pkg.catalog.find_tensor("blk.0.attn_norm.weight"), nullptr);
  EXPECT_EQ(pkg.catalog.find_tensor("blk.0.attn_norm.weight")->dims.size(), 5u);
  EXPECT_EQ(pkg.catalog.find_tensor("output_norm.weight")->dims.size(), 8u);
  // Selected, verified, and its bytes counted like any other tensor.
  const auto s = run_cli({"select", (t / "pkg").string(), "--layers", "0..1", "--json"});
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_NE(s.out.find("blk.0.attn_norm.weight"), std::string::npos);
  EXPECT_EQ(run_cli({"verify", (t / "pkg").string(), "--layers", "0..1"}).exit_code, 0);
  // Materialized: refused naming the tensor, nothing written; a stage without it works.
  const auto m = run_cli({"materialize", (t / "pkg").string(), "--layers", "0..1", "--out", (t / "s0.gguf").string()});
  EXPECT_NE(m.exit_code, 0);
  EXPECT_NE(m.err.find("tensor 'blk.0.attn_norm.weight' has 5 dimensions"), std::string::npos) << m.err;
  EXPECT_FALSE(fs::exists(t / "s0.gguf"));
  const auto ok = run_cli({"materialize", (t / "pkg").string(), "--layers", "1..2", "--out", (t / "s1.gguf").string()});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;

  // Nine dimensions: refused by the carrier reader, naming the tensor.
  TempDir t9;
  (void)test::write_schema_v2_package(test::data_path("llama-tiny-q8_0.gguf"), t9 / "pkg");
  rewrite_carrier(t9 / "pkg", [](std::vector<RawTensor>& d) { find_raw(d, "output_norm.weight")->ne.resize(9, 1); });
  try {
    (void)test::local_catalog(t9 / "pkg");
    ADD_FAILURE() << "a 9-dimension tensor was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'output_norm.weight' has 9 dimensions (1..8 allowed)"), std::string::npos)
        << e.what();
  }
}

TEST(V2CatalogRules, ASourceWithFiveDimensionsIsRefusedByTheWriter) {
  TempDir t;
  const auto src = GgufFile::open(test::data_path("llama-tiny-q8_0.gguf"));
  auto d = directory_of(src);
  find_raw(d, "blk.0.attn_norm.weight")->ne.resize(5, 1);
  const auto data = src.file()->bytes().subspan(static_cast<size_t>(src.data_offset()));
  const fs::path five = t / "five-dims.gguf";
  test::write_file(five, raw_gguf(src, d, data));
  const auto w = test::write_pkg(five, t / "pkg", {"--schema", "2"});
  EXPECT_NE(w.exit_code, 0);
  EXPECT_NE(w.err.find("tensor 'blk.0.attn_norm.weight' has 5 dimensions (1..4 allowed)"), std::string::npos) << w.err;
  EXPECT_FALSE(fs::exists(t / "pkg/model-package.json"));
}

}  // namespace v2rules_test
}  // namespace skippy
