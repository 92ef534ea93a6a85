// What of a schema 2 payload part is byte-identical to the reference
// writer's: each part's bytes computed here independently from the rules of
// the reference's part_writer.rs (the source KVs as wire bytes minus
// split.no / split.count / split.tensors.count, general.alignment appended
// as a u32 when absent; the tensor table in name order at offsets advanced by
// align_to(offset + stored bytes); the header padded to the alignment; the
// payload streamed with zero gaps and nothing after the last tensor), and
// compared with what `write-package --schema 2` writes: the same bytes but
// for the trailing padding when the part's tensors are in name order (always
// for a one-tensor part); otherwise the same KV section and the same bytes
// per tensor at other offsets (docs/schema-2.md, "Byte identity").
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include <nlohmann/json.hpp>

#include "hub_standin.h"
#include "skippy/stage.h"
#include "skippy/package_catalog.h"
#include "skippy/gguf.h"
#include "test_util.h"
#include "util/file.h"

namespace skippy {
namespace v2refbytes_test {

namespace fs = std::filesystem;
using test::TempDir;

void put32(std::vector<uint8_t>& b, uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put64(std::vector<uint8_t>& b, uint64_t v) {
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_string(std::vector<uint8_t>& b, std::string_view s) {
  put64(b, s.size());
  b.insert(b.end(), s.begin(), s.end());
}
uint64_t align_to(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

struct RefPart {
  std::vector<uint8_t> bytes;
  uint64_t kv_begin = 0, kv_end = 0;                // the KV section
  std::map<std::string, uint64_t> tensor_offset;    // absolute, per tensor
};

// part_writer.rs's write_part, for the named tensors of a source given as
// its shards (the first one's KVs and alignment; each tensor from the shard
// that holds it).
RefPart reference_part(const std::vector<const GgufFile*>& shards, std::vector<std::string> names) {
  const GgufFile& src = *shards.front();
  auto find = [&](const std::string& n) -> std::pair<const GgufFile*, const GgufTensorInfo*> {
    for (const auto* f : shards) {
      if (const auto* t = f->find_tensor(n)) return {f, t};
    }
    ADD_FAILURE() << n << " is in no shard";
    return {nullptr, nullptr};
  };
  std::sort(names.begin(), names.end());
  RefPart r;
  auto& b = r.bytes;
  b.insert(b.end(), {'G', 'G', 'U', 'F'});
  put32(b, 3);
  put64(b, names.size());
  std::vector<uint8_t> kvs;
  uint64_t count = 0;
  bool has_alignment = false;
  for (const auto& kv : src.kvs()) {
    if (kv.key == "split.no" || kv.key == "split.count" || kv.key == "split.tensors.count") continue;
    has_alignment = has_alignment || kv.key == "general.alignment";
    put_string(kvs, kv.key);
    put32(kvs, static_cast<uint32_t>(kv.value.type()));
    kvs.insert(kvs.end(), kv.value.encoded().begin(), kv.value.encoded().end());
    ++count;
  }
  if (!has_alignment) {
    put_string(kvs, "general.alignment");
    put32(kvs, 4);  // u32
    put32(kvs, src.alignment());
    ++count;
  }
  put64(b, count);
  r.kv_begin = b.size();
  b.insert(b.end(), kvs.begin(), kvs.end());
  r.kv_end = b.size();
  const uint64_t alignment = src.alignment();
  std::vector<uint64_t> offsets;
  uint64_t offset = 0;
  for (const auto& n : names) {
    offsets.push_back(offset);
    offset = align_to(offset + find(n).second->bytes, alignment);
  }
  for (size_t i = 0; i < names.size(); ++i) {
    const GgufTensorInfo& t = *find(names[i]).second;
    put_string(b, t.name);
    put32(b, static_cast<uint32_t>(t.ne.size()));
    for (const int64_t d : t.ne) put64(b, static_cast<uint64_t>(d));
    put32(b, t.type);
    put64(b, offsets[i]);
  }
  const uint64_t data_start = align_to(b.size(), alignment);
  b.resize(data_start, 0);
  for (size_t i = 0; i < names.size(); ++i) {
    const auto [file, t] = find(names[i]);
    b.resize(data_start + offsets[i], 0);  // the zero gap up to the aligned offset
    const auto data = file->tensor_data(*t);
    b.insert(b.end(), data.begin(), data.end());
    r.tensor_offset[names[i]] = data_start + offsets[i];
  }
  return r;  // nothing after the last tensor
}
RefPart reference_part(const GgufFile& src, std::vector<std::string> names) { return reference_part({&src}, std::move(names)); }

// Each payload part of the package in `pkg`: its path and its tensors in our
// part's order (by offset).
std::vector<std::pair<fs::path, std::vector<std::string>>> parts_of(const fs::path& pkg) {
  const auto cat = test::local_catalog(pkg).catalog;
  std::map<size_t, std::vector<const CatalogTensor*>> by_artifact;
  for (const auto& t : cat.tensors) by_artifact[t.artifact].push_back(&t);
  std::vector<std::pair<fs::path, std::vector<std::string>>> out;
  for (auto& [i, ts] : by_artifact) {
    std::sort(ts.begin(), ts.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
    std::vector<std::string> names;
    for (const auto* t : ts) names.push_back(t->name);
    out.emplace_back(pkg / cat.artifacts[i].path, std::move(names));
  }
  return out;
}

TEST(V2ReferenceBytes, AOneTensorPartIsTheReferencesBytesButForTheTrailingPadding) {
  TempDir t;
  // The fixture's tensors all take a multiple of the alignment; a 3-element
  // F32 tensor (12 bytes) does not.
  const fs::path src_path = test::with_extra_tensors(test::data_path("llama-tiny-q8_0.gguf"), t.path(), {{"rope_freqs.weight", 3}});
  // A budget of one byte: every tensor is a part of its own (the reference's budget rule).
  const auto w = test::write_pkg(src_path, t / "pkg", {"--schema", "2", "--max-artifact-bytes", "1"});
  ASSERT_EQ(w.exit_code, 0) << w.err;
  const auto src = GgufFile::open(src_path);
  const auto parts = parts_of(t / "pkg");
  ASSERT_EQ(parts.size(), src.tensors().size());
  size_t padded = 0, identical = 0;
  for (const auto& [path, names] : parts) {
    SCOPED_TRACE(path.string());
    ASSERT_EQ(names.size(), 1u);
    const auto ours = test::read_file(path);
    const auto ref = reference_part(src, names).bytes;
    ASSERT_GE(ours.size(), ref.size());
    EXPECT_TRUE(std::equal(ref.begin(), ref.end(), ours.begin())) << "differs before the reference's end";
    EXPECT_LT(ours.size() - ref.size(), src.alignment());
    EXPECT_TRUE(std::all_of(ours.begin() + static_cast<std::ptrdiff_t>(ref.size()), ours.end(), [](uint8_t c) { return c == 0; }));
    const bool aligned_size = src.find_tensor(names[0])->bytes % src.alignment() == 0;
    EXPECT_EQ(ours.size() == ref.size(), aligned_size) << "only a size off the alignment leaves trailing zeros";
    padded += ours.size() != ref.size();
    identical += ours == ref;
  }
  EXPECT_EQ(padded, 1u) << "rope_freqs.weight's part, and only it, ends in padding the reference does not write";
  EXPECT_EQ(identical, parts.size() - 1);
}

TEST(V2ReferenceBytes, AManyTensorPartHasTheSameKvSectionAndTensorBytesInAnotherOrder) {
  TempDir t;
  const fs::path src_path = test::data_path("llama-tiny-q8_0.gguf");
  const auto w = test::write_pkg(src_path, t / "pkg", {"--schema", "2"});
  ASSERT_EQ(w.exit_code, 0) << w.err;
  const auto src = GgufFile::open(src_path);
  size_t reordered = 0;
  for (const auto& [path, names] : parts_of(t / "pkg")) {
    SCOPED_TRACE(path.string());
    const auto ours = test::read_file(path);
    const RefPart ref = reference_part(src, names);
    // The header up to the end of the KV section: identical.
    ASSERT_GE(ours.size(), ref.kv_end);
    EXPECT_TRUE(std::equal(ref.bytes.begin(), ref.bytes.begin() + static_cast<std::ptrdiff_t>(ref.kv_end), ours.begin()));
    std::vector<std::string> sorted = names;
    std::sort(sorted.begin(), sorted.end());
    if (sorted == names) {
      EXPECT_TRUE(std::equal(ref.bytes.begin(), ref.bytes.end(), ours.begin()));
      continue;
    }
    ++reordered;
    // Every tensor's bytes are the same, at the offset each layout gives it.
    const auto part = GgufFile::open(path);
    for (const auto& n : names) {
      const auto* pt = part.find_tensor(n);
      ASSERT_NE(pt, nullptr) << n;
      const auto at = ref.tensor_offset.at(n);
      EXPECT_TRUE(std::equal(ref.bytes.begin() + static_cast<std::ptrdiff_t>(at),
                             ref.bytes.begin() + static_cast<std::ptrdiff_t>(at + pt->bytes),
                             ours.begin() + static_cast<std::ptrdiff_t>(pt->file_offset)))
          << n;
    }
  }
  EXPECT_GT(reordered, 0u) << "a layer's tensors in source order are not in name order (the one layout difference)";
}

// ---- write-package --schema 2 --layout reference: the reference's parts, byte for byte ----

const std::vector<std::string> kRefLayout = {"--schema", "2", "--layout", "reference"};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Every payload part of `pkg` is exactly reference_part(shards, its tensors);
// returns how many parts hold several tensors.
size_t expect_parts_are_the_references(const fs::path& pkg, const std::vector<const GgufFile*>& shards,
                                       size_t* unaligned_inside = nullptr) {
  size_t several = 0;
  for (const auto& [path, names] : parts_of(pkg)) {
    SCOPED_TRACE(path.string());
    std::vector<std::string> sorted = names;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(names, sorted) << "the part's tensors lie in name order";
    const auto ours = test::read_file(path);
    const auto ref = reference_part(shards, names).bytes;
    EXPECT_EQ(ours.size(), ref.size());
    EXPECT_TRUE(ours == ref) << "differs from the reference's part_writer bytes";
    several += names.size() > 1;
    if (unaligned_inside) {
      for (size_t i = 0; i + 1 < names.size(); ++i) {  // a gap of zeros follows it
        for (const auto* f : shards) {
          const auto* t = f->find_tensor(names[i]);
          if (t && t->bytes % f->alignment() != 0) ++*unaligned_inside;
        }
      }
    }
  }
  return several;
}

TEST(V2ReferenceBytes, TheReferenceLayoutWritesEveryPartAsThePartWriterDoes) {
  TempDir t;
  // Tensors whose bytes are not a multiple of the alignment (12, 20 and 28
  // bytes), written before the fixture's own, so source order is not name
  // order: one among the layerless tensors, two inside layers (one sorts
  // first in its layer, one last).
  const fs::path src_path = test::with_extra_tensors(
      test::data_path("llama-tiny-q8_0.gguf"), t.path(),
      {{"rope_freqs.weight", 3}, {"blk.0.attn_aaa.weight", 5}, {"blk.3.zzz.weight", 7}});
  const auto src = GgufFile::open(src_path);
  // The default budget (whole layers), and one that cuts every layer into
  // -partMM parts of several tensors each.
  for (const std::vector<std::string>& budget : {std::vector<std::string>{}, {"--max-artifact-bytes", "15000"}}) {
    SCOPED_TRACE(budget.empty() ? "whole layers" : "a 15000-byte budget");
    const fs::path out = t / (budget.empty() ? "whole" : "parts");
    const auto w = test::write_pkg(src_path, out, with(with(kRefLayout, budget), {"--validate"}));
    ASSERT_EQ(w.exit_code, 0) << w.err;
    size_t unaligned_inside = 0;
    const size_t several = expect_parts_are_the_references(out, {&src}, &unaligned_inside);
    const auto parts = parts_of(out);
    EXPECT_GT(several, parts.size() / 2) << "most parts hold several tensors";
    EXPECT_GT(unaligned_inside, 0u) << "a tensor off the alignment is followed by a zero gap";
    const bool split = std::any_of(parts.begin(), parts.end(), [](const auto& p) {
      return p.first.filename().string().find("-part") != std::string::npos;
    });
    EXPECT_EQ(split, !budget.empty());
    // The default layout of the same source differs (source order, padding): not the reference's.
    if (budget.empty()) {
      const auto d = test::write_pkg(src_path, t / "default", {"--schema", "2"});
      ASSERT_EQ(d.exit_code, 0) << d.err;
      EXPECT_NE(nlohmann::json::parse(d.out)["package_id"], nlohmann::json::parse(w.out)["package_id"]);
    }
  }
}

TEST(V2ReferenceBytes, ASplitSourcesReferencePartsTakeTheFirstShardsKvsAndEveryShardsTensors) {
  TempDir t;
  const auto s1 = GgufFile::open(test::data_path("llama-tiny-q4_0-00001-of-00003.gguf"));
  const auto s2 = GgufFile::open(test::data_path("llama-tiny-q4_0-00002-of-00003.gguf"));
  const auto s3 = GgufFile::open(test::data_path("llama-tiny-q4_0-00003-of-00003.gguf"));
  ASSERT_NE(s1.find_kv("split.count"), nullptr) << "the fixture's KVs hold the bookkeeping keys the part drops";
  const auto w = test::write_pkg(test::data_path("llama-tiny-q4_0-00001-of-00003.gguf"), t / "pkg", kRefLayout);
  ASSERT_EQ(w.exit_code, 0) << w.err;
  EXPECT_GT(expect_parts_are_the_references(t / "pkg", {&s1, &s2, &s3}), 0u);
}

TEST(V2ReferenceBytes, AReferenceLayoutPackageVerifiesSelectsMaterializesAndFetches) {
  TempDir t;
  const fs::path src = test::data_path("llama-tiny-q8_0.gguf");
  ASSERT_EQ(test::write_pkg(src, t / "ref", with(kRefLayout, {"--max-artifact-bytes", "15000"})).exit_code, 0);
  ASSERT_EQ(test::write_pkg(src, t / "src", {"--schema", "2", "--max-artifact-bytes", "15000"}).exit_code, 0);
  const std::vector<std::string> env = {"SKIPPY_CACHE_DIR=" + (t / "cache").string()};
  auto ok = [](const test::CliResult& r) {
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json();
  };
  const auto ref = (t / "ref").string();
  EXPECT_EQ(ok(test::run_cli({"verify", ref, "--json"}, env))["verified"], true);
  EXPECT_EQ(ok(test::run_cli({"validate-package", src.string(), ref, "--json"}))["valid"], true);
  const auto sel = ok(test::run_cli({"select", ref, "--layers", "2..5", "--json"}, env));
  EXPECT_FALSE(sel["parts"].empty());
  // A stage materialized from either layout holds the same tensors with the same bytes (in each
  // carrier's directory order: the reference's lists the parts by id, each in name order).
  for (const char* which : {"ref", "src"}) {
    ok(test::run_cli({"materialize", (t / which).string(), "--layers", "2..5", "--verify", "--out",
                      (t / (std::string(which) + ".gguf")).string(), "--json"},
                     env));
  }
  const auto a = GgufFile::open(t / "ref.gguf");
  const auto b = GgufFile::open(t / "src.gguf");
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  for (const auto& ta : a.tensors()) {
    const auto* tb = b.find_tensor(ta.name);
    ASSERT_NE(tb, nullptr) << ta.name;
    EXPECT_EQ(ta.ne, tb->ne) << ta.name;
    EXPECT_TRUE(std::ranges::equal(a.tensor_data(ta), b.tensor_data(*tb))) << ta.name;
  }
  // Over the Hub: a stage's parts fetch and verify.
  test::HubStandin hub;
  const auto commit = hub.publish("org/ref-layout", t / "ref");
  const std::vector<std::string> hub_env = {"HF_ENDPOINT=" + hub.endpoint(), "HF_HUB_CACHE=" + (t / "hf").string(),
                                            "HF_HOME=" + (t / "hfhome").string(),
                                            "SKIPPY_CACHE_DIR=" + (t / "skippy").string(), "HF_TOKEN=",
                                            "HF_HUB_OFFLINE="};
  const auto f = ok(test::run_cli({"fetch", "hf://org/ref-layout@" + commit, "--layers", "0..2", "--json"}, hub_env));
  EXPECT_EQ(f["verified"], true) << f.dump(2);
  EXPECT_EQ(f["schema_version"], 2);
}

// The reference's carrier, computed from its parts' headers as its native
// skippy_write_gguf_metadata_from_parts does (patched llama.cpp,
// src/skippy/model_package.cpp) through ggml's GGUF writer (gguf.cpp):
// gguf_set_kv from the first part (by id), split bookkeeping and
// skippy.package.materialized removed, the carrier keys appended; the
// directory part after part (ids in order), each part's directory in its
// order, dimensions up to the last one not 1 (ggml_n_dims), offsets
// consecutive at ggml's default alignment (32), the header padded to it;
// locators: the part's rank, its data offset + the tensor's, the stored
// bytes, the part's alignment.
std::vector<uint8_t> reference_carrier(const fs::path& pkg) {
  const auto cat = test::local_catalog(pkg).catalog;
  std::vector<const CatalogArtifact*> parts;
  for (const auto& a : cat.artifacts) {
    if (a.kind == CatalogArtifactKind::kPayload) parts.push_back(&a);
  }
  std::sort(parts.begin(), parts.end(), [](auto* a, auto* b) { return a->id < b->id; });
  std::vector<GgufFile> files;
  for (const auto* a : parts) files.push_back(GgufFile::open(pkg / a->path));
  std::vector<uint8_t> kvs;
  uint64_t n_kv = 0;
  for (const auto& kv : files.front().kvs()) {
    if (kv.key == "split.no" || kv.key == "split.count" || kv.key == "split.tensors.count" ||
        kv.key == "skippy.package.materialized" || kv.key.starts_with("skippy.package.")) {
      continue;  // (the carrier keys are set anew, at the end)
    }
    put_string(kvs, kv.key);
    put32(kvs, static_cast<uint32_t>(kv.value.type()));
    kvs.insert(kvs.end(), kv.value.encoded().begin(), kv.value.encoded().end());
    ++n_kv;
  }
  std::vector<uint8_t> dir;
  std::vector<uint64_t> part, offset, size, align;
  uint64_t n_tensors = 0, at = 0, prev = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    for (const auto& t : files[i].tensors()) {
      size_t n_dims = t.ne.size();
      while (n_dims > 1 && t.ne[n_dims - 1] == 1) --n_dims;
      put_string(dir, t.name);
      put32(dir, static_cast<uint32_t>(n_dims));
      for (size_t d = 0; d < n_dims; ++d) put64(dir, static_cast<uint64_t>(t.ne[d]));
      put32(dir, t.type);
      at = n_tensors == 0 ? 0 : at + align_to(prev, 32);
      put64(dir, at);
      prev = t.bytes;
      ++n_tensors;
      part.push_back(i);
      offset.push_back(files[i].data_offset() + t.offset);
      size.push_back(t.bytes);
      align.push_back(files[i].alignment());
    }
  }
  auto put_array = [&](std::string_view key, uint32_t type, const std::vector<uint64_t>& v) {
    put_string(kvs, key);
    put32(kvs, 9);  // array
    put32(kvs, type);
    put64(kvs, v.size());
    for (const uint64_t x : v) type == 4 ? put32(kvs, static_cast<uint32_t>(x)) : put64(kvs, x);
  };
  put_string(kvs, "skippy.package.metadata_only");
  put32(kvs, 7);
  kvs.push_back(1);
  put_string(kvs, "skippy.package.part_count");
  put32(kvs, 4);
  put32(kvs, static_cast<uint32_t>(files.size()));
  put_string(kvs, "skippy.package.locator_schema");
  put32(kvs, 4);
  put32(kvs, 1);
  put_array("skippy.package.tensor_part", 4, part);
  put_array("skippy.package.tensor_offset", 10, offset);
  put_array("skippy.package.tensor_size", 10, size);
  put_array("skippy.package.tensor_alignment", 4, align);
  n_kv += 7;
  std::vector<uint8_t> b = {'G', 'G', 'U', 'F'};
  put32(b, 3);
  put64(b, n_tensors);
  put64(b, n_kv);
  b.insert(b.end(), kvs.begin(), kvs.end());
  b.insert(b.end(), dir.begin(), dir.end());
  b.resize(align_to(b.size(), 32), 0);
  return b;
}

TEST(V2ReferenceBytes, TheReferenceLayoutsCarrierIsTheOneTheReferenceBuildsFromItsParts) {
  TempDir t;
  const fs::path llama = test::with_extra_tensors(test::data_path("llama-tiny-q8_0.gguf"), t.path(),
                                                  {{"rope_freqs.weight", 3}, {"blk.0.attn_aaa.weight", 5}});
  struct Case {
    std::string name;
    fs::path src;
    std::vector<std::string> flags;
    bool references = true;  // false: a source the reference's carrier writer cannot carry
  };
  const std::vector<Case> cases = {
      {"llama, whole layers", llama, {}},
      {"llama, -partMM parts", llama, {"--max-artifact-bytes", "15000"}},
      {"three shards", test::data_path("llama-tiny-q4_0-00001-of-00003.gguf"), {}},
      {"moe", test::data_path("glm4moe-mtp-tiny.gguf"), {}},
      // general.alignment 128: ggml's writer would lay the directory out at 32 and pad to 32, a
      // carrier whose data offset is not its length; so this tool's carrier, and a note.
      {"alignment 128", test::data_path("qwen3moe-tiny.gguf"), {}, false},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const fs::path out = t / ("pkg-" + std::to_string(&c - cases.data()));
    const auto w = test::write_pkg(c.src, out, with(kRefLayout, c.flags));
    ASSERT_EQ(w.exit_code, 0) << w.err;
    const std::string notes = nlohmann::json::parse(w.out)["notes"].dump();
    const auto ours = test::read_file(out / "shared" / "metadata.gguf");
    const auto ref = reference_carrier(out);
    if (c.references) {
      EXPECT_EQ(notes.find("the carrier this tool's"), std::string::npos) << notes;
      EXPECT_EQ(ours.size(), ref.size());
      EXPECT_TRUE(ours == ref) << "differs from the reference's carrier";
    } else {
      EXPECT_NE(notes.find("the carrier this tool's: the source's alignment is 128"), std::string::npos) << notes;
      EXPECT_NE(ours, ref);
    }
    // Still a carrier our reader takes, and the package verifies against its source.
    const auto v = test::run_cli({"validate-package", c.src.string(), out.string(), "--json"});
    EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
  }
  // The default layout's carrier is this tool's (source order, the source's alignment): not the reference's.
  ASSERT_EQ(test::write_pkg(llama, t / "default", {"--schema", "2"}).exit_code, 0);
  EXPECT_NE(test::read_file(t / "default" / "shared" / "metadata.gguf"), reference_carrier(t / "default"));
}

TEST(V2ReferenceBytes, LayoutGoesWithSchema2AndIsSourceOrReference) {
  TempDir t;
  const fs::path src = test::data_path("llama-tiny-q8_0.gguf");
  const auto v1 = test::write_pkg(src, t / "v1", {"--layout", "reference"});
  EXPECT_EQ(v1.exit_code, 2);
  test::expect_json_error(v1, "usage", "--layout goes with --schema 2");
  const auto other = test::write_pkg(src, t / "other", {"--schema", "2", "--layout", "name"});
  EXPECT_EQ(other.exit_code, 2);
  EXPECT_NE(other.err.find("--layout"), std::string::npos) << other.err;
  EXPECT_FALSE(fs::exists(t / "v1")) << "refused before anything is written";
}

}  // namespace v2refbytes_test
}  // namespace skippy
