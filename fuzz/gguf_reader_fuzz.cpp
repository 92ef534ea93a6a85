// libFuzzer target for the GGUF reader: any input must either parse or throw
// skippy::Error whose message names the input and a byte offset. A parsed
// file must keep every promise of include/skippy/gguf.h (views inside the
// input, tensors aligned, in range and disjoint, keys and names unique), and
// every accessor must be safe to call on it; the header read from any
// prefix of it (GgufFile::parse_prefix) is the whole input's. Anything else - another
// exception, a sanitizer report, a broken promise - is a crash.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "skippy/error.h"
#include "gguf/ggml_types.h"
#include "skippy/gguf.h"

namespace {

constexpr const char* kName = "fuzz.gguf";

[[noreturn]] void broken(const char* what) {
  std::fprintf(stderr, "gguf_reader_fuzz: broken promise: %s\n", what);
  std::abort();
}

#define CHECK(cond)                \
  do {                             \
    if (!(cond)) broken(#cond);    \
  } while (0)

bool inside(std::span<const uint8_t> whole, std::span<const uint8_t> part) {
  if (part.empty()) return true;
  return part.data() >= whole.data() && part.data() + part.size() <= whole.data() + whole.size();
}

bool inside(std::span<const uint8_t> whole, std::string_view s) {
  return inside(whole, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
}

// Sum of all bytes a view touches, so the reads cannot be optimised away
// and ASan sees every byte.
volatile uint64_t g_sink = 0;

void touch(std::string_view s) {
  uint64_t h = 0;
  for (char ch : s) h += static_cast<unsigned char>(ch);
  g_sink = g_sink + h;
}

void exercise_value(std::span<const uint8_t> input, const skippy::GgufValue& v) {
  CHECK(inside(input, v.encoded()));
  CHECK(skippy::gguf_type_valid(static_cast<uint32_t>(v.type())));
  const auto u = v.as_uint();
  const auto i = v.as_int();
  const auto f = v.as_float();
  const auto b = v.as_bool();
  const auto s = v.as_string();
  if (u && i) CHECK(static_cast<uint64_t>(*i) == *u);
  if (f) g_sink = g_sink + static_cast<uint64_t>(*f == *f);
  if (b) g_sink = g_sink + static_cast<uint64_t>(*b);
  if (s) {
    CHECK(v.type() == skippy::GgufType::kString);
    CHECK(inside(input, *s));
    touch(*s);
  }
  const auto at = v.array_type();
  const auto n = v.array_size();
  if (!v.is_array()) {
    CHECK(n == 0);
    return;
  }
  CHECK(skippy::gguf_type_valid(static_cast<uint32_t>(at)));
  if (const auto strs = v.as_string_array()) {
    CHECK(at == skippy::GgufType::kString);
    CHECK(strs->size() == n);
    for (const auto& e : *strs) {
      CHECK(inside(input, e));
      touch(e);
    }
  }
  if (const auto ints = v.as_int_array()) {
    CHECK(ints->size() == n);
    for (int64_t x : *ints) g_sink = g_sink + static_cast<uint64_t>(x);
  }
  if (const size_t sz = skippy::gguf_scalar_size(at); sz != 0) {
    CHECK(v.encoded().size() == 12 + n * sz);
  }
}

void exercise(std::span<const uint8_t> input, const skippy::GgufFile& f) {
  CHECK(f.version() == 2 || f.version() == 3);
  CHECK(f.alignment() != 0 && (f.alignment() & (f.alignment() - 1)) == 0);
  CHECK(f.header_end() <= f.file_size());
  CHECK(f.data_offset() >= f.header_end() && f.data_offset() % f.alignment() == 0);
  CHECK(f.file_size() == input.size());

  std::unordered_set<std::string_view> keys;
  for (const auto& kv : f.kvs()) {
    CHECK(!kv.key.empty() && skippy::is_valid_utf8(kv.key));
    CHECK(inside(input, kv.key));
    CHECK(keys.insert(kv.key).second);
    CHECK(f.find_kv(kv.key) == &kv);
    CHECK(kv.offset < f.header_end());
    exercise_value(input, kv.value);
    (void)f.get_string(kv.key);
    (void)f.get_uint(kv.key);
  }
  CHECK(f.find_kv("") == nullptr);

  std::unordered_set<std::string_view> names;
  std::vector<const skippy::GgufTensorInfo*> by_off;
  uint64_t total = 0;
  for (const auto& t : f.tensors()) {
    CHECK(!t.name.empty() && t.name.size() <= skippy::kGgufMaxTensorName && skippy::is_valid_utf8(t.name));
    CHECK(names.insert(t.name).second);
    CHECK(f.find_tensor(t.name) == &t);
    CHECK(t.ne.size() >= 1 && t.ne.size() <= skippy::kGgufMaxDims);
    CHECK(skippy::ggml_type_traits(t.type) != nullptr);
    CHECK(skippy::ggml_tensor_bytes(t.type, t.ne) == t.bytes);
    CHECK(t.offset % f.alignment() == 0);
    CHECK(t.file_offset == f.data_offset() + t.offset);
    CHECK(t.file_offset <= f.file_size() && t.bytes <= f.file_size() - t.file_offset);
    const auto data = f.tensor_data(t);
    CHECK(data.size() == t.bytes && inside(input, data));
    if (!data.empty()) g_sink = g_sink + data.front() + data.back();
    (void)skippy::ggml_type_name(t.type);
    total += t.bytes;
    if (t.bytes != 0) by_off.push_back(&t);
  }
  CHECK(f.tensor_bytes_total() == total);
  std::sort(by_off.begin(), by_off.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_off.size(); ++i) {
    CHECK(by_off[i - 1]->offset + by_off[i - 1]->bytes <= by_off[i]->offset);  // disjoint
  }

  touch(f.architecture());
  (void)f.block_count();
  (void)f.embedding_length();
  try {
    if (const auto split = skippy::read_split_info(f)) CHECK(split->no < split->count);
  } catch (const skippy::Error&) {
    // Malformed split.* keys are reported, not a crash.
  }
}

// GgufFile::parse_prefix on the input's first `cut` bytes must agree with
// the whole input parsed as a directory: the same header, or a refusal
// with the same message (what the prefix holds decides), or a need for
// more bytes that the input has.
void exercise_prefix(std::span<const uint8_t> input, size_t cut) {
  skippy::GgufLimits dir;
  dir.directory_only = true;
  std::optional<uint64_t> whole_end;
  std::string whole_error;
  try {
    whole_end = skippy::GgufFile::parse(input, kName, dir).header_end();
  } catch (const skippy::Error& e) {
    whole_error = e.what();
  }
  try {
    const auto p = skippy::GgufFile::parse_prefix(input.first(cut), input.size(), kName);
    if (p.file) {
      CHECK(whole_end && *whole_end == p.file->header_end() && p.file->header_end() <= cut);
    } else {
      CHECK(p.needed > cut && p.needed <= input.size());
    }
  } catch (const skippy::Error& e) {
    CHECK(!whole_end && whole_error == e.what());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> input(data, size);
  exercise_prefix(input, size);
  exercise_prefix(input, size / 2);
  if (size > 0) exercise_prefix(input, data[size - 1] % (size + 1));
  try {
    const auto f = skippy::GgufFile::parse(input, kName);
    exercise(input, f);
    const auto copy = f;  // views stay valid in copies
    CHECK(copy.kvs().size() == f.kvs().size());
    for (const auto& kv : copy.kvs()) CHECK(copy.find_kv(kv.key) == &kv);
  } catch (const skippy::Error& e) {
    // Every rejection names the input and the byte offset of the problem.
    const std::string_view msg = e.what();
    CHECK(e.kind() == skippy::ErrorKind::kInvalidInput);
    CHECK(msg.starts_with(std::string(kName) + ": byte "));
  }
  return 0;
}
