// The GGUF reader against hostile files made by hand: every rule of
// include/skippy/gguf.h broken one at a time. Each rejection must be a
// skippy::Error naming the file, the byte offset ("byte N") and the problem;
// nothing may crash, hang or allocate in proportion to a count the file
// cannot back. The byte builder below writes GGUF v3 field by field and
// remembers where each field starts, so expected offsets are computed, not
// hard-coded.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "skippy/error.h"
#include "gguf/ggml_types.h"
#include "skippy/gguf.h"
#include "test_util.h"

namespace skippy {
namespace {

constexpr const char* kName = "hostile.gguf";
constexpr uint32_t kF32 = 0;
constexpr uint32_t kF16 = 1;
constexpr uint32_t kQ8_0 = 8;
constexpr uint32_t kQ4_K = 12;
constexpr uint64_t k2p60 = uint64_t{1} << 60;
constexpr uint64_t kU64Max = std::numeric_limits<uint64_t>::max();

uint32_t tag(GgufType t) { return static_cast<uint32_t>(t); }

// Little-endian bytes with named positions ("marks").
class Bytes {
 public:
  Bytes& u8(uint8_t v) {
    b_.push_back(v);
    return *this;
  }
  Bytes& u16(uint16_t v) { return le(v); }
  Bytes& u32(uint32_t v) { return le(v); }
  Bytes& i32(int32_t v) { return le(v); }
  Bytes& u64(uint64_t v) { return le(v); }
  Bytes& f32(float v) { return le(v); }
  Bytes& raw(std::string_view s) {
    b_.insert(b_.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& raw(const std::vector<uint8_t>& v) {
    b_.insert(b_.end(), v.begin(), v.end());
    return *this;
  }
  Bytes& str(std::string_view s) { return u64(s.size()).raw(s); }
  Bytes& fill(uint64_t n) {
    for (uint64_t i = 0; i < n; ++i) b_.push_back(static_cast<uint8_t>(b_.size() * 7 + 3));
    return *this;
  }
  Bytes& pad_to(uint64_t a) {
    while (b_.size() % a != 0) b_.push_back(0);
    return *this;
  }
  Bytes& mark(const std::string& name) {
    marks_[name] = b_.size();
    return *this;
  }
  uint64_t at(const std::string& name) const {
    const auto it = marks_.find(name);
    if (it == marks_.end()) throw std::logic_error("no mark " + name);
    return it->second;
  }
  uint64_t size() const { return b_.size(); }
  const std::vector<uint8_t>& bytes() const { return b_; }
  std::vector<uint8_t>& bytes() { return b_; }
  std::vector<uint8_t> prefix(uint64_t n) const { return {b_.begin(), b_.begin() + static_cast<ptrdiff_t>(n)}; }

 private:
  template <typename T>
  Bytes& le(T v) {
    uint8_t tmp[sizeof(T)];
    std::memcpy(tmp, &v, sizeof v);
    for (uint8_t byte : tmp) b_.push_back(byte);
    return *this;
  }
  std::vector<uint8_t> b_;
  std::map<std::string, uint64_t> marks_;
};

// Value encodings (without the type tag).
std::vector<uint8_t> v_u32(uint32_t v) { return Bytes().u32(v).bytes(); }
std::vector<uint8_t> v_u64(uint64_t v) { return Bytes().u64(v).bytes(); }
std::vector<uint8_t> v_str(std::string_view s) { return Bytes().str(s).bytes(); }
std::vector<uint8_t> v_arr(GgufType elem, uint64_t count, const std::vector<uint8_t>& body) {
  return Bytes().u32(tag(elem)).u64(count).raw(body).bytes();
}
std::vector<uint8_t> v_str_arr(const std::vector<std::string>& items) {
  Bytes b;
  b.u32(tag(GgufType::kString)).u64(items.size());
  for (const auto& s : items) b.str(s);
  return b.bytes();
}
// `levels` arrays nested one inside the next; the innermost is an empty u8 array.
std::vector<uint8_t> v_nested(uint64_t levels) {
  Bytes b;
  for (uint64_t i = 1; i < levels; ++i) b.u32(tag(GgufType::kArray)).u64(1);
  b.u32(tag(GgufType::kUint8)).u64(0);
  return b.bytes();
}

struct KvSpec {
  std::string key;
  uint32_t type;
  std::vector<uint8_t> value;
};

struct TensorSpec {
  std::string name;
  uint32_t type = kF32;
  std::vector<uint64_t> ne{8};
  std::optional<uint64_t> offset;   // default: after the previous tensor, aligned
  std::optional<uint32_t> n_dims;   // default: ne.size()
};

struct Spec {
  uint32_t magic = kGgufMagic;
  uint32_t version = 3;
  std::optional<uint64_t> n_tensors;  // default: tensors.size()
  std::optional<uint64_t> n_kv;       // default: kvs.size()
  std::vector<KvSpec> kvs;
  std::vector<TensorSpec> tensors;
  uint64_t alignment = kGgufDefaultAlignment;  // for default offsets and padding
};

// Payload bytes of a tensor spec, or 0 when its dims are not a valid shape.
uint64_t spec_bytes(const TensorSpec& t) {
  std::vector<int64_t> ne;
  for (uint64_t d : t.ne) {
    if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return 0;
    ne.push_back(static_cast<int64_t>(d));
  }
  return ggml_tensor_bytes(t.type, ne).value_or(0);
}

// Marks: "version", "n_tensors", "n_kv", "kvI", "kvI.type", "kvI.value",
// "tI", "tI.n_dims", "tI.neD", "tI.type", "tI.offset", "header_end", "data".
// The data section ends exactly where the last tensor's payload ends.
Bytes build(const Spec& s) {
  Bytes b;
  b.u32(s.magic).mark("version").u32(s.version);
  b.mark("n_tensors").u64(s.n_tensors.value_or(s.tensors.size()));
  b.mark("n_kv").u64(s.n_kv.value_or(s.kvs.size()));
  for (size_t i = 0; i < s.kvs.size(); ++i) {
    const std::string k = "kv" + std::to_string(i);
    b.mark(k).str(s.kvs[i].key).mark(k + ".type").u32(s.kvs[i].type).mark(k + ".value").raw(s.kvs[i].value);
  }
  uint64_t next = 0;
  uint64_t data_end = 0;
  for (size_t i = 0; i < s.tensors.size(); ++i) {
    const auto& t = s.tensors[i];
    const std::string k = "t" + std::to_string(i);
    b.mark(k).str(t.name).mark(k + ".n_dims").u32(t.n_dims.value_or(static_cast<uint32_t>(t.ne.size())));
    for (size_t d = 0; d < t.ne.size(); ++d) b.mark(k + ".ne" + std::to_string(d)).u64(t.ne[d]);
    const uint64_t off = t.offset.value_or(next);
    const uint64_t bytes = spec_bytes(t);
    b.mark(k + ".type").u32(t.type).mark(k + ".offset").u64(off);
    if (off < (uint64_t{1} << 20) && bytes < (uint64_t{1} << 20)) {
      data_end = std::max(data_end, off + bytes);
      next = (off + bytes + s.alignment - 1) / s.alignment * s.alignment;
    }
  }
  b.mark("header_end").pad_to(s.alignment).mark("data").fill(data_end);
  return b;
}

// A small valid file touching every value type, nested arrays and three
// tensors of three ggml types. Its header end is not aligned, so a gap of
// padding precedes the data.
Spec valid_spec() {
  Spec s;
  s.kvs = {
      {"general.architecture", tag(GgufType::kString), v_str("llama")},
      {"general.description", tag(GgufType::kString), v_str(std::string(120, 'd'))},
      {"llama.block_count", tag(GgufType::kUint32), v_u32(2)},
      {"arr.i32", tag(GgufType::kArray), v_arr(GgufType::kInt32, 4, Bytes().i32(-1).i32(0).i32(7).i32(9).bytes())},
      {"arr.str", tag(GgufType::kArray), v_str_arr({"ab", "cde"})},
      {"flag", tag(GgufType::kBool), {1}},
      {"big", tag(GgufType::kUint64), v_u64(1234567890123ull)},
      {"f", tag(GgufType::kFloat32), Bytes().f32(0.5f).bytes()},
      {"nested", tag(GgufType::kArray), v_nested(3)},
      {"split.no", tag(GgufType::kUint16), Bytes().u16(0).bytes()},
      {"split.count", tag(GgufType::kUint16), Bytes().u16(1).bytes()},
  };
  s.tensors = {
      {"token_embd.weight", kF32, {8, 2}, {}, {}},
      {"blk.0.attn_q.weight", kQ8_0, {64, 1, 1}, {}, {}},
      {"blk.1.ffn_up.weight", kF16, {5}, {}, {}},
  };
  return s;
}

// One tensor, no KVs: the smallest shape for tensor-info rules.
Spec one_tensor(TensorSpec t) {
  Spec s;
  s.tensors = {std::move(t)};
  return s;
}

// Uses every accessor of a parsed file, so sanitizers see them run.
void exercise(const GgufFile& f) {
  for (const auto& kv : f.kvs()) {
    const auto& v = kv.value;
    (void)v.as_uint();
    (void)v.as_int();
    (void)v.as_float();
    (void)v.as_bool();
    (void)v.as_string();
    (void)v.array_type();
    (void)v.array_size();
    (void)v.as_string_array();
    (void)v.as_int_array();
    EXPECT_EQ(f.find_kv(kv.key), &kv);
  }
  for (const auto& t : f.tensors()) {
    EXPECT_EQ(f.find_tensor(t.name), &t);
    EXPECT_EQ(f.tensor_data(t).size(), t.bytes);
    EXPECT_EQ(t.offset % f.alignment(), 0u);
    EXPECT_LE(t.file_offset + t.bytes, f.file_size());
  }
  (void)f.tensor_bytes_total();
  (void)f.architecture();
  (void)f.block_count();
  (void)f.embedding_length();
  try {
    (void)read_split_info(f);
  } catch (const Error&) {
  }
}

::testing::AssertionResult check_message(const std::string& msg, const std::string& file, uint64_t offset,
                                         std::string_view problem) {
  const std::string prefix = file + ": byte " + std::to_string(offset) + ": ";
  if (msg.rfind(prefix, 0) != 0) {
    return ::testing::AssertionFailure() << "message does not start with '" << prefix << "': " << msg;
  }
  if (msg.find(problem) == std::string::npos) {
    return ::testing::AssertionFailure() << "message lacks '" << problem << "': " << msg;
  }
  return ::testing::AssertionSuccess();
}

// The parse fails with Error(kInvalidInput) "hostile.gguf: byte <offset>: ...<problem>...".
::testing::AssertionResult Rejects(const std::vector<uint8_t>& bytes, uint64_t offset, std::string_view problem,
                                   const GgufLimits& limits = {}) {
  try {
    const auto f = GgufFile::parse(bytes, kName, limits);
    return ::testing::AssertionFailure() << "parsed; expected '" << problem << "' at byte " << offset;
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kInvalidInput) return ::testing::AssertionFailure() << "wrong kind: " << e.what();
    return check_message(e.what(), kName, offset, problem);
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "not a skippy::Error: " << e.what();
  }
}
::testing::AssertionResult Rejects(const Bytes& b, uint64_t offset, std::string_view problem,
                                   const GgufLimits& limits = {}) {
  return Rejects(b.bytes(), offset, problem, limits);
}

// Same through GgufFile::open: the message names the path.
::testing::AssertionResult RejectsFile(const std::filesystem::path& p, uint64_t offset, std::string_view problem) {
  try {
    const auto f = GgufFile::open(p);
    return ::testing::AssertionFailure() << "opened; expected '" << problem << "'";
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kInvalidInput) return ::testing::AssertionFailure() << "wrong kind: " << e.what();
    return check_message(e.what(), p.string(), offset, problem);
  }
}

// Parses or throws skippy::Error; anything else (another exception, a
// sanitizer report, a crash) fails. Returns whether it parsed.
bool parses_or_throws(std::span<const uint8_t> bytes, const std::string& name) {
  try {
    const auto f = GgufFile::parse(bytes, name);
    exercise(f);
    return true;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput) << e.what();
    EXPECT_EQ(std::string(e.what()).rfind(name + ": byte ", 0), 0u) << e.what();
    return false;
  } catch (const std::exception& e) {
    ADD_FAILURE() << name << ": not a skippy::Error: " << e.what();
    return false;
  }
}

template <typename F>
double seconds(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<std::filesystem::path> fixture_files() {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::directory_iterator(SKIPPY_TEST_DATA_DIR)) {
    if (e.path().extension() == ".gguf") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// ---- the builder itself -----------------------------------------------------

TEST(GgufHostile, BuilderMakesAValidFile) {
  const Bytes b = build(valid_spec());
  const auto f = GgufFile::parse(b.bytes(), kName);
  exercise(f);
  EXPECT_EQ(f.kvs().size(), 11u);
  ASSERT_EQ(f.tensors().size(), 3u);
  EXPECT_EQ(f.header_end(), b.at("header_end"));
  EXPECT_NE(f.header_end() % 32, 0u) << "the padding gap is part of what truncation tests cover";
  EXPECT_EQ(f.data_offset(), b.at("data"));
  EXPECT_EQ(f.tensors()[1].offset, 64u);
  EXPECT_EQ(f.tensors()[1].bytes, 68u);
  EXPECT_EQ(f.tensors()[2].offset, 160u);
  EXPECT_EQ(f.file_size(), f.data_offset() + 170u) << "no bytes after the last tensor";
  EXPECT_EQ(f.architecture(), "llama");
  EXPECT_EQ(f.block_count(), 2u);
  EXPECT_EQ(f.find_kv("arr.i32")->value.as_int_array(), (std::vector<int64_t>{-1, 0, 7, 9}));
  const auto strs = f.find_kv("arr.str")->value.as_string_array();
  ASSERT_TRUE(strs);
  EXPECT_EQ(*strs, (std::vector<std::string_view>{"ab", "cde"}));
  EXPECT_EQ(f.find_kv("nested")->value.array_size(), 1u);
  ASSERT_TRUE(read_split_info(f));
  EXPECT_EQ(read_split_info(f)->count, 1u);
}

// ---- truncation -------------------------------------------------------------

TEST(GgufHostile, TruncationAtEveryByteIsAnErrorNamingAnOffsetWithinTheFile) {
  const Bytes b = build(valid_spec());
  const std::regex problem(
      "truncated|cannot fit in|runs past the end of the file|file ends before the data section|file too small");
  for (uint64_t len = 0; len < b.size(); ++len) {
    SCOPED_TRACE("cut at " + std::to_string(len));
    const auto cut = b.prefix(len);
    try {
      const auto f = GgufFile::parse(cut, kName);
      ADD_FAILURE() << "a truncated file parsed";
    } catch (const Error& e) {
      const std::string msg = e.what();
      std::smatch m;
      ASSERT_TRUE(std::regex_search(msg, m, std::regex("^hostile\\.gguf: byte ([0-9]+): "))) << msg;
      EXPECT_LE(std::stoull(m[1].str()), len) << msg;
      EXPECT_TRUE(std::regex_search(msg, problem)) << msg;
    }
  }
}

TEST(GgufHostile, TruncationInsideEachHeaderFieldNamesTheField) {
  const Bytes b = build(valid_spec());
  struct Cut {
    uint64_t len;
    uint64_t offset;
    std::string problem;
  };
  const uint64_t kv3 = b.at("kv3"), kv4v = b.at("kv4.value");  // arr.i32, arr.str
  const std::vector<Cut> cuts = {
      {0, 0, "file too small to be GGUF (0 bytes)"},
      {3, 0, "file too small to be GGUF (3 bytes)"},
      {5, 4, "truncated version"},
      {8, 8, "truncated tensor count"},
      {15, 8, "truncated tensor count"},
      {20, 16, "truncated KV count"},
      {24, 16, "KV count 11 cannot fit in the file"},
      {b.at("kv1.value") + 8 + 100, b.at("kv1.value") + 8, "truncated string: needs 120 bytes, 100 remain"},
      {kv3 + 3, kv3, "truncated key"},
      {kv3 + 8 + 2, kv3 + 8, "truncated key"},
      {b.at("kv3.type") + 1, b.at("kv3.type"), "truncated value type"},
      {b.at("kv3.value") + 2, b.at("kv3.value"), "truncated array element type"},
      {b.at("kv3.value") + 4 + 3, b.at("kv3.value") + 4, "truncated array length"},
      {b.at("kv3.value") + 12 + 5, b.at("kv3.value") + 4, "array of 4 i32 runs past the end of the file"},
      {kv4v + 12 + 5, kv4v + 4, "array of 2 string cannot fit in the 5 bytes that remain"},
      {kv4v + 12 + 10 + 8 + 1, kv4v + 12 + 10 + 8, "truncated string: needs 3 bytes, 1 remain"},
      {b.at("kv5.value"), b.at("kv5.value"), "truncated bool"},
      {b.at("kv6.value") + 3, b.at("kv6.value"), "truncated value"},
      // A nested array needs at least 12 bytes, so the outer count is what fails.
      {b.at("kv8.value") + 12 + 6, b.at("kv8.value") + 4, "array of 1 array cannot fit in the 6 bytes that remain"},
      {b.at("t1") + 4, b.at("t1"), "truncated tensor name"},
      {b.at("t1") + 8 + 5, b.at("t1") + 8, "truncated tensor name"},
      {b.at("t1.n_dims") + 1, b.at("t1.n_dims"), "truncated tensor dimension count"},
      {b.at("t1.ne2") + 7, b.at("t1.ne2"), "truncated tensor dimension"},
      {b.at("t1.type") + 2, b.at("t1.type"), "truncated tensor type"},
      {b.at("t2.offset") + 1, b.at("t2.offset"), "truncated tensor offset"},
      {b.at("header_end") + 1, b.at("header_end"), "file ends before the data section"},
      {b.at("data") + 10, b.at("t0"), "tensor 'token_embd.weight' data [0, +64) runs past the end of the file"},
      {b.size() - 1, b.at("t2"), "tensor 'blk.1.ffn_up.weight' data [160, +10) runs past the end"},
  };
  for (const auto& c : cuts) {
    SCOPED_TRACE("cut at " + std::to_string(c.len));
    EXPECT_TRUE(Rejects(b.prefix(c.len), c.offset, c.problem));
  }
}

TEST(GgufHostile, OpenNamesThePathOfATruncatedOrEmptyFile) {
  test::TempDir tmp;
  const Bytes b = build(valid_spec());
  test::write_file(tmp / "empty.gguf", {});
  EXPECT_TRUE(RejectsFile(tmp / "empty.gguf", 0, "file too small to be GGUF (0 bytes)"));
  test::write_file(tmp / "cut.gguf", b.prefix(b.at("t1.type") + 2));
  EXPECT_TRUE(RejectsFile(tmp / "cut.gguf", b.at("t1.type"), "truncated tensor type"));
  test::write_file(tmp / "short-data.gguf", b.prefix(b.size() - 1));
  EXPECT_TRUE(RejectsFile(tmp / "short-data.gguf", b.at("t2"), "runs past the end of the file"));
}

// ---- magic and version ------------------------------------------------------

TEST(GgufHostile, EmptyFileIsRejected) {
  EXPECT_TRUE(Rejects(std::vector<uint8_t>{}, 0, "file too small to be GGUF (0 bytes)"));
}

TEST(GgufHostile, BadMagicIsRejected) {
  for (uint32_t magic : {0x47554747u /* GGUG */, 0x4C4D4747u /* GGML */, 0u, 0x47475546u /* FUGG */}) {
    Spec s = valid_spec();
    s.magic = magic;
    EXPECT_TRUE(Rejects(build(s), 0, "not a GGUF file (bad magic)")) << magic;
  }
}

TEST(GgufHostile, VersionOneIsRejected) {
  Spec s = valid_spec();
  s.version = 1;
  EXPECT_TRUE(Rejects(build(s), 4, "GGUF version 1 is not supported"));
}

TEST(GgufHostile, BigEndianVersionIsRejected) {
  for (uint32_t v : {2u, 3u}) {
    Spec s = valid_spec();
    s.version = __builtin_bswap32(v);  // what a big-endian writer puts on disk
    EXPECT_TRUE(Rejects(build(s), 4, "big-endian GGUF is not supported")) << v;
  }
}

TEST(GgufHostile, UnknownVersionIsRejected) {
  for (uint32_t v : {0u, 4u, 0xFFFFFFFFu}) {
    Spec s = valid_spec();
    s.version = v;
    EXPECT_TRUE(Rejects(build(s), 4, "unsupported GGUF version " + std::to_string(v))) << v;
  }
}

TEST(GgufHostile, VersionTwoIsAccepted) {
  Spec s = valid_spec();
  s.version = 2;
  EXPECT_EQ(GgufFile::parse(build(s).bytes(), kName).version(), 2u);
}

// ---- counts and lengths: fail fast, allocate nothing ------------------------

TEST(GgufHostile, HugeTensorCountFailsFastAtTheCount) {
  for (uint64_t n : {k2p60, kU64Max, uint64_t{1} << 32, uint64_t{100}}) {
    Spec s = valid_spec();
    s.n_tensors = n;
    const Bytes b = build(s);
    EXPECT_LT(seconds([&] {
      EXPECT_TRUE(Rejects(b, 8, "tensor count " + std::to_string(n) + " cannot fit in the file"));
    }), 1.0);
  }
}

TEST(GgufHostile, HugeKvCountFailsFastAtTheCount) {
  for (uint64_t n : {k2p60, kU64Max, uint64_t{1} << 32, uint64_t{200}}) {
    Spec s = valid_spec();
    s.n_kv = n;
    const Bytes b = build(s);
    EXPECT_LT(seconds([&] { EXPECT_TRUE(Rejects(b, 16, "KV count " + std::to_string(n) + " cannot fit")); }), 1.0);
  }
}

TEST(GgufHostile, CountLimitsApplyEvenWhenTheFileIsBigEnough) {
  const Bytes b = build(valid_spec());
  GgufLimits kv_limit;
  kv_limit.max_kv_count = 10;
  EXPECT_TRUE(Rejects(b, 16, "KV count 11 cannot fit", kv_limit));
  GgufLimits t_limit;
  t_limit.max_tensor_count = 2;
  EXPECT_TRUE(Rejects(b, 8, "tensor count 3 cannot fit", t_limit));
}

TEST(GgufHostile, HugeArrayCountFailsFastAtTheCount) {
  struct Case {
    GgufType elem;
    uint64_t count;
    std::string problem;
  };
  const std::vector<Case> cases = {
      {GgufType::kUint8, k2p60, "array length 1152921504606846976 exceeds the limit of 4294967296"},
      {GgufType::kString, kU64Max, "array length 18446744073709551615 exceeds the limit"},
      {GgufType::kUint8, uint64_t{1} << 31, "array of 2147483648 u8 runs past the end of the file"},
      {GgufType::kUint64, uint64_t{1} << 32, "array of 4294967296 u64 runs past the end of the file"},
      {GgufType::kString, uint64_t{1} << 31, "array of 2147483648 string cannot fit in the"},
      {GgufType::kArray, uint64_t{1} << 31, "array of 2147483648 array cannot fit in the"},
  };
  for (const auto& c : cases) {
    Spec s = valid_spec();
    s.kvs.push_back({"huge", tag(GgufType::kArray), v_arr(c.elem, c.count, {})});
    const Bytes b = build(s);
    const uint64_t at = b.at("kv11.value") + 4;
    EXPECT_LT(seconds([&] { EXPECT_TRUE(Rejects(b, at, c.problem)); }), 1.0);
  }
}

TEST(GgufHostile, ArrayByteSizeOverflowIsCaughtWhenTheCountLimitIsLifted) {
  // 2^61 + 1 u64 elements: count * 8 wraps to 8 in 64 bits.
  GgufLimits open;
  open.max_array_elements = kU64Max;
  Spec s = valid_spec();
  s.kvs.push_back({"wrap", tag(GgufType::kArray), v_arr(GgufType::kUint64, (uint64_t{1} << 61) + 1, v_u64(0))});
  const Bytes b = build(s);
  EXPECT_TRUE(Rejects(b, b.at("kv11.value") + 4, "array of 2305843009213693953 u64 runs past the end", open));
}

TEST(GgufHostile, HugeStringLengthFailsFastAtTheLength) {
  Spec s = valid_spec();
  s.kvs.push_back({"s", tag(GgufType::kString), v_u64(k2p60)});
  Bytes b = build(s);
  EXPECT_TRUE(Rejects(b, b.at("kv11.value"), "string length 1152921504606846976 exceeds the limit of 268435456"));

  // Under the limit but longer than the file.
  s.kvs.back().value = v_u64(uint64_t{1} << 20);
  b = build(s);
  EXPECT_TRUE(Rejects(b, b.at("kv11.value") + 8, "truncated string: needs 1048576 bytes"));

  // No limit at all: the length is still checked against the file.
  GgufLimits open;
  open.max_string_bytes = kU64Max;
  s.kvs.back().value = v_u64(kU64Max);
  b = build(s);
  EXPECT_TRUE(Rejects(b, b.at("kv11.value") + 8, "truncated string: needs 18446744073709551615 bytes", open));
}

TEST(GgufHostile, StringLimitIsEnforced) {
  GgufLimits small;
  small.max_string_bytes = 100;
  const Bytes b = build(valid_spec());
  EXPECT_TRUE(Rejects(b, b.at("kv1.value"), "string length 120 exceeds the limit of 100", small));
}

TEST(GgufHostile, HugeKeyLengthFailsFastAtTheLength) {
  Spec s = valid_spec();
  Bytes b = build(s);
  b.bytes()[b.at("kv2") + 7] = 0x10;  // key length 2^60 + 17
  EXPECT_TRUE(Rejects(b, b.at("kv2"), "key length 1152921504606846993 exceeds the limit of 65535"));
  s.kvs[2].key = std::string(65536, 'k');
  b = build(s);
  EXPECT_TRUE(Rejects(b, b.at("kv2"), "key length 65536 exceeds the limit of 65535"));
}

TEST(GgufHostile, HugeTensorNameLengthFailsFastAtTheLength) {
  Bytes b = build(valid_spec());
  b.bytes()[b.at("t1") + 7] = 0x10;
  EXPECT_TRUE(Rejects(b, b.at("t1"), "tensor name length 1152921504606846995 exceeds the limit"));
}

// ---- KV rules -----------------------------------------------------------------

TEST(GgufHostile, InvalidKvValueTypeIsRejected) {
  for (uint32_t t : {13u, 14u, 100u, 0x80000000u, 0xFFFFFFFFu}) {
    Spec s = valid_spec();
    s.kvs[2].type = t;
    const Bytes b = build(s);
    EXPECT_TRUE(Rejects(b, b.at("kv2.type"), "KV 'llama.block_count' has invalid value type " + std::to_string(t)));
  }
}

TEST(GgufHostile, InvalidArrayElementTypeIsRejected) {
  Spec s = valid_spec();
  s.kvs[3].value = v_arr(static_cast<GgufType>(13), 1, v_u32(0));
  Bytes b = build(s);
  EXPECT_TRUE(Rejects(b, b.at("kv3.value"), "invalid array element type 13"));
  // Inside a nested array: the offset is the inner array's.
  s.kvs[3].value = v_arr(GgufType::kArray, 1, v_arr(static_cast<GgufType>(0xFFFFFFFF), 0, {}));
  b = build(s);
  EXPECT_TRUE(Rejects(b, b.at("kv3.value") + 12, "invalid array element type 4294967295"));
}

TEST(GgufHostile, BoolOtherThanZeroOrOneIsRejected) {
  for (uint8_t v : {uint8_t{2}, uint8_t{0x80}, uint8_t{0xFF}}) {
    Spec s = valid_spec();
    s.kvs[5].value = {v};
    Bytes b = build(s);
    EXPECT_TRUE(Rejects(b, b.at("kv5.value"), "bool value " + std::to_string(v) + " is neither 0 nor 1"));
    // ... and as an array element.
    s = valid_spec();
    s.kvs[5] = {"bools", tag(GgufType::kArray), v_arr(GgufType::kBool, 3, {1, 0, v})};
    b = build(s);
    EXPECT_TRUE(Rejects(b, b.at("kv5.value") + 12 + 2, "bool value " + std::to_string(v) + " is neither 0 nor 1"));
  }
}

TEST(GgufHostile, DuplicateKvKeyIsRejected) {
  Spec s = valid_spec();
  s.kvs.push_back({"llama.block_count", tag(GgufType::kUint32), v_u32(3)});
  const Bytes b = build(s);
  EXPECT_TRUE(Rejects(b, b.at("kv11"), "duplicate KV key 'llama.block_count'"));
}

TEST(GgufHostile, DuplicateKvKeyOfAnotherTypeIsRejected) {
  Spec s = valid_spec();
  s.kvs.insert(s.kvs.begin() + 1, {"general.architecture", tag(GgufType::kUint8), {1}});
  const Bytes b = build(s);
  EXPECT_TRUE(Rejects(b, b.at("kv1"), "duplicate KV key 'general.architecture'"));
}

TEST(GgufHostile, EmptyKeyIsRejected) {
  Spec s = valid_spec();
  s.kvs[4].key = "";
  const Bytes b = build(s);
  EXPECT_TRUE(Rejects(b, b.at("kv4"), "empty KV key"));
}

const std::vector<std::string>& bad_utf8() {
  static const std::vector<std::string> v = {
      "\xff",                      // never valid
      "key\x80",                   // stray continuation byte
      "\xc0\xaf",                  // overlong '/'
      "\xe0\x80\xaf",              // overlong, 3 bytes
      "\xed\xa0\x80",              // UTF-16 surrogate
      "\xf4\x90\x80\x80",          // past U+10FFFF
      "ok\xe2\x82",                // sequence cut short
      "\xf8\x88\x80\x80\x80",      // 5-byte form
      "a\xc3(",                    // lead byte without continuation
  };
  return v;
}

TEST(GgufHostile, NonUtf8KeyIsRejected) {
  for (const auto& key : bad_utf8()) {
    Spec s = valid_spec();
    s.kvs[2].key = key;
    const Bytes b = build(s);
    EXPECT_TRUE(Rejects(b, b.at("kv2"), "KV key is not valid UTF-8"));
  }
}

TEST(GgufHostile, Utf8KeysAndNamesAreAccepted) {
  Spec s = valid_spec();
  s.kvs[2].key = "g\xc3\xa9n\xc3\xa9ral.\xe5\x90\x8d\xe5\x89\x8d";  // "général.名前"
  s.tensors[0].name = "\xf0\x9f\xa6\x99.weight";                      // "🦙.weight"
  const Bytes b = build(s);  // must outlive the parsed file
  const auto f = GgufFile::parse(b.bytes(), kName);
  EXPECT_NE(f.find_kv(s.kvs[2].key), nullptr);
  EXPECT_NE(f.find_tensor(s.tensors[0].name), nullptr);
}

TEST(GgufHostile, ArraysNestedBeyondTheDepthLimitAreRejected) {
  // The value of kv8 is an array; the array at nesting level L (1-based)
  // starts 12 * (L - 1) bytes into it. Level 1 is depth 0.
  Spec s = valid_spec();
  s.kvs[8].value = v_nested(9);  // depth 8: the limit
  EXPECT_NO_THROW(GgufFile::parse(build(s).bytes(), kName));
  s.kvs[8].value = v_nested(10);
  Bytes b = build(s);
  EXPECT_TRUE(Rejects(b, b.at("kv8.value") + 12 * 9, "arrays nested deeper than 8"));

  GgufLimits shallow;
  shallow.max_array_depth = 2;
  s.kvs[8].value = v_nested(3);
  EXPECT_NO_THROW(GgufFile::parse(build(s).bytes(), kName, shallow));
  s.kvs[8].value = v_nested(4);
  b = build(s);
  EXPECT_TRUE(Rejects(b, b.at("kv8.value") + 12 * 3, "arrays nested deeper than 2", shallow));

  // 100000 levels: rejected at the limit, without recursing further.
  s.kvs[8].value = v_nested(100000);
  b = build(s);
  EXPECT_LT(seconds([&] { EXPECT_TRUE(Rejects(b, b.at("kv8.value") + 12 * 9, "arrays nested deeper than 8")); }),
            1.0);
}

// ---- general.alignment ------------------------------------------------------

TEST(GgufHostile, AlignmentOfWrongTypeIsRejected) {
  const std::vector<KvSpec> wrong = {
      {"general.alignment", tag(GgufType::kUint64), v_u64(32)},
      {"general.alignment", tag(GgufType::kInt32), v_u32(32)},
      {"general.alignment", tag(GgufType::kUint16), Bytes().u16(32).bytes()},
      {"general.alignment", tag(GgufType::kString), v_str("32")},
      {"general.alignment", tag(GgufType::kArray), v_arr(GgufType::kUint32, 1, v_u32(32))},
  };
  for (const auto& kv : wrong) {
    Spec s = valid_spec();
    s.kvs.insert(s.kvs.begin() + 3, kv);
    const Bytes b = build(s);
    EXPECT_TRUE(Rejects(b, b.at("kv3"),
                        "general.alignment must be u32, found " + std::string(gguf_type_name(static_cast<GgufType>(kv.type)))));
  }
}

TEST(GgufHostile, AlignmentNotAPowerOfTwoIsRejected) {
  for (uint32_t a : {0u, 3u, 48u, 96u, 0xFFFFFFFFu, 0x80000001u}) {
    Spec s = valid_spec();
    s.kvs.push_back({"general.alignment", tag(GgufType::kUint32), v_u32(a)});
    const Bytes b = build(s);
    EXPECT_TRUE(Rejects(b, b.at("kv11"), "general.alignment " + std::to_string(a) + " is not a power of two"));
  }
}

TEST(GgufHostile, AlignmentIsHonouredForOffsetsAndDataStart) {
  Spec s = valid_spec();
  s.alignment = 128;
  s.kvs.push_back({"general.alignment", tag(GgufType::kUint32), v_u32(128)});
  const Bytes b = build(s);
  const auto f = GgufFile::parse(b.bytes(), kName);
  EXPECT_EQ(f.alignment(), 128u);
  EXPECT_EQ(f.data_offset() % 128, 0u);
  EXPECT_EQ(f.tensors()[1].offset, 128u);
  // Offset 64 is aligned for 32 but not for 128.
  Bytes bad = b;
  bad.bytes()[bad.at("t1.offset")] = 64;
  EXPECT_TRUE(Rejects(bad, bad.at("t1.offset"), "offset 64 is not a multiple of the alignment 128"));
}

TEST(GgufHostile, HugeAlignmentDoesNotAllocate) {
  // 2^31 is a power of two: legal, but the data section would start past
  // the end of this small file.
  Spec s = valid_spec();
  s.kvs.push_back({"general.alignment", tag(GgufType::kUint32), v_u32(0x80000000u)});
  s.tensors.resize(1);  // at offset 0, aligned to anything
  const Bytes b = build(s);
  EXPECT_TRUE(Rejects(b, b.at("header_end"), "file ends before the data section (needs 2147483648 bytes"));
  // With no tensors the data section may be absent.
  s.tensors.clear();
  EXPECT_EQ(GgufFile::parse(build(s).bytes(), kName).alignment(), 0x80000000u);
}

// ---- tensor-info rules ------------------------------------------------------

TEST(GgufHostile, UnknownGgmlTypeIsRejected) {
  // 4, 5, 31-33 and 36-38 were removed from ggml; 40+ do not exist yet.
  for (uint32_t id : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 40u, 41u, 255u, 0xFFFFFFFFu}) {
    Spec s = valid_spec();
    s.tensors[1].type = id;
    s.tensors[1].ne = {256};
    s.tensors[1].offset = 64;
    const Bytes b = build(s);
    EXPECT_TRUE(Rejects(b, b.at("t1.type"), "tensor 'blk.0.attn_q.weight' has unknown ggml type " + std::to_string(id)));
  }
}

TEST(GgufHostile, EveryKnownGgmlTypeIsAccepted) {
  for (const auto& tt : ggml_type_table()) {
    const Bytes b = build(one_tensor({"t", tt.id, {tt.block_size, 2}, {}, {}}));
    const auto f = GgufFile::parse(b.bytes(), kName);
    EXPECT_EQ(f.tensors()[0].bytes, 2u * tt.type_size) << tt.name;
  }
}

TEST(GgufHostile, ZeroDimensionsAreRejected) {
  const Bytes b = build(one_tensor({"t", kF32, {}, {}, {}}));
  EXPECT_TRUE(Rejects(b, b.at("t0.n_dims"), "tensor 't' has 0 dimensions (1..4 allowed)"));
}

TEST(GgufHostile, FiveDimensionsAreRejected) {
  Bytes b = build(one_tensor({"t", kF32, {1, 1, 1, 1, 1}, {}, {}}));
  EXPECT_TRUE(Rejects(b, b.at("t0.n_dims"), "tensor 't' has 5 dimensions (1..4 allowed)"));
  b = build(one_tensor({"t", kF32, {1}, {}, 0xFFFFFFFFu}));
  EXPECT_TRUE(Rejects(b, b.at("t0.n_dims"), "tensor 't' has 4294967295 dimensions"));
}

TEST(GgufHostile, NegativeDimensionIsRejected) {
  Bytes b = build(one_tensor({"t", kF32, {uint64_t{1} << 63}, {}, {}}));
  EXPECT_TRUE(Rejects(b, b.at("t0.ne0"), "tensor 't' dimension 0 is out of range"));
  b = build(one_tensor({"t", kF32, {4, 2, kU64Max}, {}, {}}));  // -1
  EXPECT_TRUE(Rejects(b, b.at("t0.ne2"), "tensor 't' dimension 2 is out of range"));
}

TEST(GgufHostile, DimensionProductOverflowingInt64IsRejected) {
  const std::vector<std::vector<uint64_t>> shapes = {
      {uint64_t{1} << 32, uint64_t{1} << 32},                    // elements 2^64
      {uint64_t{1} << 31, uint64_t{1} << 31, 2, 2},              // elements 2^64
      {uint64_t{1} << 62},                                        // elements fit; 4 * 2^62 bytes do not
      {3, 0x5555555555555556ull},                                 // 3 * ... wraps to 2
      {(uint64_t{1} << 63) - 1, 2},
  };
  for (const auto& ne : shapes) {
    const Bytes b = build(one_tensor({"t", kF32, ne, {}, {}}));
    EXPECT_TRUE(Rejects(b, b.at("t0.n_dims"), "tensor 't' dimensions overflow a 64-bit size"));
  }
  // Q8_0: 2.8e17 blocks of 34 bytes overflow int64 though the 8.96e18 elements fit.
  const Bytes q = build(one_tensor({"q", kQ8_0, {8960000000000000000ull}, {}, {}}));
  EXPECT_TRUE(Rejects(q, q.at("t0.n_dims"), "tensor 'q' dimensions overflow a 64-bit size"));
}

TEST(GgufHostile, LargeButRepresentableSizeRunsPastTheFile) {
  const Bytes b = build(one_tensor({"t", kF32, {uint64_t{1} << 40}, {}, {}}));
  EXPECT_TRUE(Rejects(b, b.at("t0"), "tensor 't' data [0, +4398046511104) runs past the end of the file"));
}

TEST(GgufHostile, FirstDimensionNotABlockMultipleIsRejected) {
  Bytes b = build(one_tensor({"q", kQ8_0, {33, 2}, {}, {}}));
  EXPECT_TRUE(Rejects(b, b.at("t0.n_dims"), "tensor 'q' first dimension 33 is not a multiple of the Q8_0 block size 32"));
  b = build(one_tensor({"k", kQ4_K, {128}, {}, {}}));
  EXPECT_TRUE(Rejects(b, b.at("t0.n_dims"), "first dimension 128 is not a multiple of the Q4_K block size 256"));
}

TEST(GgufHostile, DuplicateTensorNameIsRejected) {
  Spec s = valid_spec();
  s.tensors[2].name = s.tensors[0].name;
  const Bytes b = build(s);
  EXPECT_TRUE(Rejects(b, b.at("t2"), "duplicate tensor name 'token_embd.weight'"));
}

TEST(GgufHostile, EmptyTensorNameIsRejected) {
  Spec s = valid_spec();
  s.tensors[1].name = "";
  const Bytes b = build(s);
  EXPECT_TRUE(Rejects(b, b.at("t1"), "empty tensor name"));
}

TEST(GgufHostile, NonUtf8TensorNameIsRejected) {
  for (const auto& name : bad_utf8()) {
    Spec s = valid_spec();
    s.tensors[1].name = name;
    const Bytes b = build(s);
    EXPECT_TRUE(Rejects(b, b.at("t1"), "tensor name is not valid UTF-8"));
  }
}

TEST(GgufHostile, TensorNameOf64BytesIsRejected) {
  Spec s = valid_spec();
  s.tensors[1].name = std::string(63, 'n');
  EXPECT_NO_THROW(GgufFile::parse(build(s).bytes(), kName));
  for (size_t len : {64u, 65u, 1000u}) {
    s.tensors[1].name = std::string(len, 'n');
    const Bytes b = build(s);
    EXPECT_TRUE(Rejects(b, b.at("t1"), "is longer than 63 bytes"));
  }
}

// ---- tensor placement -------------------------------------------------------

TEST(GgufHostile, MisalignedTensorOffsetIsRejected) {
  for (uint64_t off : {1u, 16u, 31u, 33u, 65u}) {
    Spec s = valid_spec();
    s.tensors[2].offset = 160 + off;
    const Bytes b = build(s);
    EXPECT_TRUE(Rejects(b, b.at("t2.offset"),
                        "tensor 'blk.1.ffn_up.weight' offset " + std::to_string(160 + off) +
                            " is not a multiple of the alignment 32"));
  }
}

TEST(GgufHostile, TensorOffsetPastTheEndIsRejected) {
  for (uint64_t off : {uint64_t{192}, uint64_t{1} << 40, kU64Max - 31, kU64Max - 63}) {
    Spec s = valid_spec();
    s.tensors[2].offset = off;
    Bytes b = build(s);
    // Keep the file as long as with a good offset, so only the offset is wrong.
    b.bytes().resize(b.at("data") + 170, 0);
    EXPECT_TRUE(Rejects(b, b.at("t2"), "tensor 'blk.1.ffn_up.weight' data [" + std::to_string(off) + ", +10) runs past"));
  }
}

TEST(GgufHostile, TensorDataRunningOnePastTheEndIsRejected) {
  Bytes b = build(valid_spec());
  b.bytes().pop_back();
  EXPECT_TRUE(Rejects(b, b.at("t2"), "data section holds 169 bytes"));
}

TEST(GgufHostile, OverlappingTensorsAreRejected) {
  Spec s = valid_spec();
  s.tensors[1].offset = 32;  // token_embd.weight covers [0, 64)
  Bytes b = build(s);
  EXPECT_TRUE(Rejects(b, b.at("t1"), "tensor 'blk.0.attn_q.weight' data overlaps tensor 'token_embd.weight'"));

  s = valid_spec();
  s.tensors[2].offset = 0;  // the same start as token_embd.weight
  b = build(s);
  b.bytes().resize(b.at("data") + 170, 0);
  // Equal starts: either may be named as the second.
  EXPECT_TRUE(Rejects(b, b.at("t2"), "tensor 'blk.1.ffn_up.weight' data overlaps tensor 'token_embd.weight'") ||
              Rejects(b, b.at("t0"), "tensor 'token_embd.weight' data overlaps tensor 'blk.1.ffn_up.weight'"));

  // Listed in reverse: the later-listed tensor is the earlier in the file.
  s = valid_spec();
  s.tensors[0].offset = 96;  // token_embd.weight: [96, 160)
  s.tensors[1].offset = 0;
  s.tensors[1].ne = {128};   // Q8_0, 4 blocks: [0, 136)
  s.tensors[2].offset = 160;
  b = build(s);
  EXPECT_TRUE(Rejects(b, b.at("t0"), "tensor 'token_embd.weight' data overlaps tensor 'blk.0.attn_q.weight'"));
}

TEST(GgufHostile, OverlapIsFoundAcrossAnEmptyTensorBetween) {
  // big covers [0, 128); empty (0 bytes) sits at 32; small at 64 lies inside big.
  Spec s;
  s.tensors = {
      {"big", kF32, {32}, 0, {}},
      {"empty", kF32, {0}, 32, {}},
      {"small", kF32, {8}, 64, {}},
  };
  const Bytes b = build(s);
  EXPECT_TRUE(Rejects(b, b.at("t2"), "tensor 'small' data overlaps tensor 'big'"));
}

TEST(GgufHostile, EmptyTensorsMayShareAnOffset) {
  Spec s;
  s.tensors = {{"a", kF32, {0}, 0, {}}, {"b", kF32, {4, 0}, 0, {}}, {"c", kF32, {4}, 0, {}}};
  const Bytes b = build(s);
  const auto f = GgufFile::parse(b.bytes(), kName);
  EXPECT_EQ(f.tensor_bytes_total(), 16u);
}

// ---- the same rules through GgufFile::open ----------------------------------

TEST(GgufHostile, OpenNamesThePathInEveryRejection) {
  test::TempDir tmp;
  Spec s = valid_spec();
  s.tensors[1].offset = 32;
  Bytes b = build(s);
  test::write_file(tmp / "overlap.gguf", b.bytes());
  EXPECT_TRUE(RejectsFile(tmp / "overlap.gguf", b.at("t1"), "data overlaps tensor 'token_embd.weight'"));
  s = valid_spec();
  s.kvs[3].key = "\xc0\xaf";
  b = build(s);
  test::write_file(tmp / "utf8.gguf", b.bytes());
  EXPECT_TRUE(RejectsFile(tmp / "utf8.gguf", b.at("kv3"), "KV key is not valid UTF-8"));
  s = valid_spec();
  s.version = 1;
  test::write_file(tmp / "v1.gguf", build(s).bytes());
  EXPECT_TRUE(RejectsFile(tmp / "v1.gguf", 4, "GGUF version 1 is not supported"));
}

// ---- real files, damaged ----------------------------------------------------

// Byte offset of tensor `t`'s offset field in its file.
uint64_t offset_field(const GgufTensorInfo& t) { return t.info_offset + 8 + t.name.size() + 4 + 8 * t.ne.size() + 4; }

TEST(GgufHostile, FixtureWithTensorsMadeToOverlapIsRejected) {
  const auto bytes = test::read_file(test::data_path("llama-tiny-f16.gguf"));
  const auto f = GgufFile::parse(bytes, kName);
  const auto& t0 = f.tensors()[0];
  const auto& t1 = f.tensors()[1];
  ASSERT_GT(t0.bytes, 0u);
  auto hostile = bytes;
  std::memcpy(hostile.data() + offset_field(t1), &t0.offset, 8);
  // Both now start at the same offset: either may be named as the second.
  EXPECT_TRUE(Rejects(hostile, t1.info_offset, "overlaps") || Rejects(hostile, t0.info_offset, "overlaps"));
}

TEST(GgufHostile, FixtureWithAMisalignedOffsetIsRejected) {
  const auto bytes = test::read_file(test::data_path("qwen3moe-tiny.gguf"));  // alignment 128
  const auto f = GgufFile::parse(bytes, kName);
  const auto& t = f.tensors()[3];
  auto hostile = bytes;
  const uint64_t off = t.offset + 64;
  std::memcpy(hostile.data() + offset_field(t), &off, 8);
  EXPECT_TRUE(Rejects(hostile, offset_field(t), "is not a multiple of the alignment 128"));
}

// Every fixture with one byte flipped, at every byte of the fixed header,
// in the length, first key byte and type tag of KVs spread over the file, in
// the rank, ggml type and offset of tensor infos spread over the file, and at
// pseudo-random header positions, either parses or throws skippy::Error.
// scripts/test.sh --sanitize runs it under ASan/UBSan; the fuzzer goes further.
TEST(GgufHostile, FixturesWithAByteFlippedNeverCrash) {
  for (const auto& p : fixture_files()) {
    SCOPED_TRACE(p.filename().string());
    auto bytes = test::read_file(p);
    const auto good = GgufFile::parse(bytes, p.filename().string());
    std::vector<uint64_t> positions;
    for (uint64_t i = 0; i < 40; ++i) positions.push_back(i);
    const auto& kvs = good.kvs();
    for (size_t i = 0; i < kvs.size(); i += 1 + kvs.size() / 16) {
      for (uint64_t d : {0u, 7u, 8u}) positions.push_back(kvs[i].offset + d);
      positions.push_back(kvs[i].offset + 8 + kvs[i].key.size());  // type tag
    }
    const auto& ts = good.tensors();
    for (size_t i = 0; i < ts.size(); i += 1 + ts.size() / 8) {
      positions.push_back(ts[i].info_offset + 8 + ts[i].name.size());                     // n_dims
      positions.push_back(ts[i].info_offset + 8 + ts[i].name.size() + 4 + 8 * ts[i].ne.size());  // type
      positions.push_back(offset_field(ts[i]) + 7);
    }
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < 16; ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      positions.push_back(x % good.header_end());
    }
    int parsed = 0;
    for (const uint64_t pos : positions) {
      for (const uint8_t flip : {uint8_t{0xFF}, uint8_t{0x80}}) {
        bytes[pos] ^= flip;
        parsed += parses_or_throws(bytes, "flipped.gguf") ? 1 : 0;
        bytes[pos] ^= flip;
      }
    }
    EXPECT_LT(parsed, static_cast<int>(2 * positions.size()));
  }
}

TEST(GgufHostile, FixturesTruncatedAtEveryFieldNeverCrash) {
  for (const auto& p : fixture_files()) {
    SCOPED_TRACE(p.filename().string());
    const auto bytes = test::read_file(p);
    const auto good = GgufFile::parse(bytes, p.filename().string());
    std::vector<uint64_t> cuts{0, 1, 4, 7, 8, 16, 24, 25, good.header_end(), good.data_offset(), bytes.size() - 1};
    for (size_t i = 0; i < good.kvs().size(); i += 1 + good.kvs().size() / 12) cuts.push_back(good.kvs()[i].offset + 9);
    for (size_t i = 0; i < good.tensors().size(); i += 1 + good.tensors().size() / 8) {
      cuts.push_back(good.tensors()[i].info_offset + 3);
      cuts.push_back(good.tensors()[i].file_offset + 1);
    }
    for (const uint64_t len : cuts) {
      const std::span<const uint8_t> cut(bytes.data(), std::min<uint64_t>(len, bytes.size()));
      const bool ok = parses_or_throws(cut, "cut.gguf");
      // A file without tensors may legitimately end at its header.
      if (!good.tensors().empty() || len < good.header_end()) {
        EXPECT_FALSE(ok) << "cut at " << len;
      }
    }
  }
}

}  // namespace
}  // namespace skippy
