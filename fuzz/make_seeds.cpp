// Writes the fuzzer's seed corpus (fuzz/corpus/) from the llama.cpp fixtures
// in tests/data, small enough to commit:
//   <fixture>.head   the first 2 KiB of the fixture (a truncated real header);
//   <fixture>.min    the fixture re-encoded with every KV kept (strings and
//                    arrays cut to a few elements) and every tensor kept with
//                    its name, type and rank but the smallest legal shape;
//   synth-*.gguf     hand-made valid files: every value type, nested arrays
//                    (up to the depth limit), every ggml type, alignment 64,
//                    version 2, no tensors.
// Usage: gguf_fuzz_seeds <tests/data> <out dir>
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "skippy/error.h"
#include "gguf/ggml_types.h"
#include "skippy/gguf.h"

namespace {

using skippy::GgufType;
namespace fs = std::filesystem;

class Out {
 public:
  template <typename T>
  void le(T v) {
    uint8_t tmp[sizeof(T)];
    std::memcpy(tmp, &v, sizeof v);
    b.insert(b.end(), tmp, tmp + sizeof(T));
  }
  void u32(uint32_t v) { le(v); }
  void u64(uint64_t v) { le(v); }
  void raw(const void* p, size_t n) {
    const auto* c = static_cast<const uint8_t*>(p);
    b.insert(b.end(), c, c + n);
  }
  void str(std::string_view s) {
    u64(s.size());
    raw(s.data(), s.size());
  }
  void pad(uint64_t a) {
    while (b.size() % a != 0) b.push_back(0);
  }
  std::vector<uint8_t> b;
};

struct Tensor {
  std::string name;
  uint32_t type;
  std::vector<int64_t> ne;
};

struct Kv {
  std::string key;
  GgufType type;
  std::vector<uint8_t> value;
};

std::vector<uint8_t> make_gguf(uint32_t version, uint32_t alignment, const std::vector<Kv>& kvs,
                               const std::vector<Tensor>& tensors) {
  Out o;
  o.u32(skippy::kGgufMagic);
  o.u32(version);
  o.u64(tensors.size());
  o.u64(kvs.size());
  for (const auto& kv : kvs) {
    o.str(kv.key);
    o.u32(static_cast<uint32_t>(kv.type));
    o.raw(kv.value.data(), kv.value.size());
  }
  uint64_t off = 0;
  std::vector<uint64_t> sizes;
  for (const auto& t : tensors) {
    o.str(t.name);
    o.u32(static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) o.u64(static_cast<uint64_t>(d));
    o.u32(t.type);
    o.u64(off);
    const uint64_t bytes = skippy::ggml_tensor_bytes(t.type, t.ne).value();
    sizes.push_back(bytes);
    off = (off + bytes + alignment - 1) / alignment * alignment;
  }
  o.pad(alignment);
  for (size_t i = 0; i < tensors.size(); ++i) {
    for (uint64_t k = 0; k < sizes[i]; ++k) o.b.push_back(static_cast<uint8_t>(k * 31 + i));
    if (i + 1 < tensors.size()) o.pad(alignment);
  }
  return o.b;
}

// A KV value cut down: strings to 48 bytes, arrays to 4 elements (nested
// arrays kept only when small).
bool shrink_value(const skippy::GgufValue& v, std::vector<uint8_t>& out) {
  Out o;
  if (v.type() == GgufType::kString) {
    const auto s = *v.as_string();
    o.str(s.substr(0, 48));
  } else if (!v.is_array()) {
    const auto e = v.encoded();
    o.raw(e.data(), e.size());
  } else if (v.array_type() == GgufType::kString) {
    const auto items = *v.as_string_array();
    const size_t n = std::min<size_t>(items.size(), 4);
    o.u32(static_cast<uint32_t>(GgufType::kString));
    o.u64(n);
    for (size_t i = 0; i < n; ++i) o.str(items[i].substr(0, 24));
  } else if (const size_t sz = skippy::gguf_scalar_size(v.array_type()); sz != 0) {
    const uint64_t n = std::min<uint64_t>(v.array_size(), 4);
    o.u32(static_cast<uint32_t>(v.array_type()));
    o.u64(n);
    o.raw(v.encoded().data() + 12, n * sz);
  } else {
    if (v.encoded().size() > 256) return false;
    o.raw(v.encoded().data(), v.encoded().size());
  }
  out = std::move(o.b);
  return true;
}

std::vector<uint8_t> minimised(const skippy::GgufFile& f) {
  std::vector<Kv> kvs;
  for (const auto& kv : f.kvs()) {
    Kv k{std::string(kv.key), kv.value.type(), {}};
    if (shrink_value(kv.value, k.value)) kvs.push_back(std::move(k));
  }
  std::vector<Tensor> tensors;
  for (const auto& t : f.tensors()) {
    Tensor s{std::string(t.name), t.type, std::vector<int64_t>(t.ne.size(), 1)};
    s.ne[0] = skippy::ggml_type_traits(t.type)->block_size;
    tensors.push_back(std::move(s));
  }
  return make_gguf(f.version(), f.alignment(), kvs, tensors);
}

template <typename T>
std::vector<uint8_t> enc(T v) {
  Out o;
  o.le(v);
  return o.b;
}

std::vector<uint8_t> enc_str(std::string_view s) {
  Out o;
  o.str(s);
  return o.b;
}

std::vector<uint8_t> enc_arr(GgufType elem, uint64_t n, const std::vector<uint8_t>& body) {
  Out o;
  o.u32(static_cast<uint32_t>(elem));
  o.u64(n);
  o.raw(body.data(), body.size());
  return o.b;
}

std::vector<Kv> every_value_type() {
  std::vector<uint8_t> strs = enc_str("a");
  const auto s2 = enc_str("\xc3\xa9t\xc3\xa9");
  strs.insert(strs.end(), s2.begin(), s2.end());
  const auto inner_u32 = enc_arr(GgufType::kUint32, 2, {1, 0, 0, 0, 2, 0, 0, 0});
  const auto inner_str = enc_arr(GgufType::kString, 1, enc_str("x"));
  std::vector<uint8_t> nested = inner_u32;
  nested.insert(nested.end(), inner_str.begin(), inner_str.end());
  return {
      {"general.architecture", GgufType::kString, enc_str("llama")},
      {"llama.block_count", GgufType::kUint32, enc<uint32_t>(2)},
      {"llama.embedding_length", GgufType::kUint64, enc<uint64_t>(64)},
      {"v.u8", GgufType::kUint8, enc<uint8_t>(200)},
      {"v.i8", GgufType::kInt8, enc<int8_t>(-3)},
      {"v.u16", GgufType::kUint16, enc<uint16_t>(65535)},
      {"v.i16", GgufType::kInt16, enc<int16_t>(-300)},
      {"v.i32", GgufType::kInt32, enc<int32_t>(-70000)},
      {"v.f32", GgufType::kFloat32, enc<float>(0.25f)},
      {"v.bool", GgufType::kBool, enc<uint8_t>(1)},
      {"v.i64", GgufType::kInt64, enc<int64_t>(-5)},
      {"v.f64", GgufType::kFloat64, enc<double>(1.5)},
      {"v.empty", GgufType::kString, enc_str("")},
      {"a.str", GgufType::kArray, enc_arr(GgufType::kString, 2, strs)},
      {"a.i32", GgufType::kArray, enc_arr(GgufType::kInt32, 2, {0xFF, 0xFF, 0xFF, 0xFF, 7, 0, 0, 0})},
      {"a.bool", GgufType::kArray, enc_arr(GgufType::kBool, 3, {1, 0, 1})},
      {"a.empty", GgufType::kArray, enc_arr(GgufType::kFloat32, 0, {})},
      {"a.nested", GgufType::kArray, enc_arr(GgufType::kArray, 2, nested)},
      {"split.no", GgufType::kUint16, enc<uint16_t>(0)},
      {"split.count", GgufType::kUint16, enc<uint16_t>(1)},
      {"split.tensors.count", GgufType::kInt32, enc<int32_t>(2)},
  };
}

void write(const fs::path& p, const std::vector<uint8_t>& b) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
  if (!out) throw std::runtime_error("cannot write " + p.string());
  std::printf("%-48s %7zu bytes\n", p.filename().c_str(), b.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s <tests/data> <out dir>\n", argv[0]);
    return 2;
  }
  const fs::path data = argv[1];
  const fs::path out = argv[2];
  fs::create_directories(out);
  std::vector<fs::path> fixtures;
  for (const auto& e : fs::directory_iterator(data)) {
    if (e.path().extension() == ".gguf") fixtures.push_back(e.path());
  }
  std::sort(fixtures.begin(), fixtures.end());
  for (const auto& p : fixtures) {
    const auto f = skippy::GgufFile::open(p);
    const auto bytes = f.file()->bytes();
    const std::string stem = p.stem().string();
    write(out / (stem + ".head"), {bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(std::min<size_t>(2048, bytes.size()))});
    const auto mini = minimised(f);
    (void)skippy::GgufFile::parse(mini, stem + ".min");  // must be valid
    write(out / (stem + ".min"), mini);
  }

  const std::vector<Tensor> two = {{"token_embd.weight", 1, {8, 2}}, {"blk.0.attn_q.weight", 8, {32, 1}}};
  std::vector<std::pair<std::string, std::vector<uint8_t>>> synth;
  synth.emplace_back("synth-every-value-type.gguf", make_gguf(3, 32, every_value_type(), two));
  auto aligned = every_value_type();
  aligned.push_back({"general.alignment", GgufType::kUint32, enc<uint32_t>(64)});
  synth.emplace_back("synth-alignment-64.gguf", make_gguf(3, 64, aligned, two));
  synth.emplace_back("synth-v2.gguf", make_gguf(2, 32, {{"general.architecture", GgufType::kString, enc_str("gpt2")}}, two));
  synth.emplace_back("synth-no-tensors.gguf", make_gguf(3, 32, every_value_type(), {}));
  std::vector<Tensor> all_types;
  for (const auto& t : skippy::ggml_type_table()) {
    all_types.push_back({"t." + std::string(t.name), t.id, {static_cast<int64_t>(t.block_size), 1, 2}});
  }
  all_types.push_back({"empty", 0, {0, 4}});
  // Arrays nested 9 deep: the most the default limits allow, one mutation
  // away from the depth error.
  std::vector<uint8_t> deep = enc_arr(GgufType::kUint8, 1, {7});
  for (int i = 0; i < 8; ++i) deep = enc_arr(GgufType::kArray, 1, deep);
  synth.emplace_back("synth-nested-9.gguf", make_gguf(3, 32, {{"a.deep", GgufType::kArray, deep}}, {}));
  synth.emplace_back("synth-every-ggml-type.gguf", make_gguf(3, 32, {}, all_types));
  for (const auto& [name, bytes] : synth) {
    (void)skippy::GgufFile::parse(bytes, name);
    write(out / name, bytes);
  }
  return 0;
}
