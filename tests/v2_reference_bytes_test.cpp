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

#include "skippy/catalog_stage.h"
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

// part_writer.rs's write_part, for the named tensors of a single-file source.
RefPart reference_part(const GgufFile& src, std::vector<std::string> names) {
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
    offset = align_to(offset + src.find_tensor(n)->bytes, alignment);
  }
  for (size_t i = 0; i < names.size(); ++i) {
    const GgufTensorInfo& t = *src.find_tensor(names[i]);
    put_string(b, t.name);
    put32(b, static_cast<uint32_t>(t.ne.size()));
    for (const int64_t d : t.ne) put64(b, static_cast<uint64_t>(d));
    put32(b, t.type);
    put64(b, offsets[i]);
  }
  const uint64_t data_start = align_to(b.size(), alignment);
  b.resize(data_start, 0);
  for (size_t i = 0; i < names.size(); ++i) {
    const GgufTensorInfo& t = *src.find_tensor(names[i]);
    b.resize(data_start + offsets[i], 0);  // the zero gap up to the aligned offset
    const auto data = src.tensor_data(t);
    b.insert(b.end(), data.begin(), data.end());
    r.tensor_offset[names[i]] = data_start + offsets[i];
  }
  return r;  // nothing after the last tensor
}

// Each payload part of the package in `pkg`: its path and its tensors in our
// part's order (by offset).
std::vector<std::pair<fs::path, std::vector<std::string>>> parts_of(const fs::path& pkg) {
  const auto cat = open_local_catalog_v2(pkg).catalog;
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

}  // namespace v2refbytes_test
}  // namespace skippy
