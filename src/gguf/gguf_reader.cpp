#include <algorithm>
#include <cstring>
#include <limits>
#include <regex>
#include <unordered_set>

#include "util/file.h"
#include "skippy/error.h"
#include "util/control_chars.h"
#include "gguf/ggml_types.h"
#include "skippy/gguf.h"

namespace skippy {

std::string_view gguf_type_name(GgufType t) noexcept {
  switch (t) {
    case GgufType::kUint8: return "u8";
    case GgufType::kInt8: return "i8";
    case GgufType::kUint16: return "u16";
    case GgufType::kInt16: return "i16";
    case GgufType::kUint32: return "u32";
    case GgufType::kInt32: return "i32";
    case GgufType::kFloat32: return "f32";
    case GgufType::kBool: return "bool";
    case GgufType::kString: return "string";
    case GgufType::kArray: return "array";
    case GgufType::kUint64: return "u64";
    case GgufType::kInt64: return "i64";
    case GgufType::kFloat64: return "f64";
  }
  return "invalid";
}

bool gguf_type_valid(uint32_t t) noexcept { return t <= static_cast<uint32_t>(GgufType::kFloat64); }

size_t gguf_scalar_size(GgufType t) noexcept {
  switch (t) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kBool: return 1;
    case GgufType::kUint16:
    case GgufType::kInt16: return 2;
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kFloat32: return 4;
    case GgufType::kUint64:
    case GgufType::kInt64:
    case GgufType::kFloat64: return 8;
    case GgufType::kString:
    case GgufType::kArray: return 0;
  }
  return 0;
}

bool is_valid_utf8(std::string_view s) noexcept {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are invalid.
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += len;
  }
  return true;
}

namespace {

template <typename T>
T load_le(const uint8_t* p) noexcept {
  T v;
  std::memcpy(&v, p, sizeof v);  // the project targets little-endian hosts
  return v;
}

// Thrown by a Cursor over the first bytes of a longer file when what it
// reads lies inside the file but past those bytes (GgufFile::parse_prefix
// turns it into "this many bytes are needed").
struct PrefixTooShort {
  uint64_t needed;  // bytes from the file's start
};

// A bounds-checked cursor over the file; every failure names file and offset.
// Its bytes may be the first ones of a file of `file_size` bytes: counts and
// lengths are checked against the whole file (a count that cannot fit in it
// is refused at once), and a read past the bytes held but inside the file
// throws PrefixTooShort.
class Cursor {
 public:
  Cursor(std::span<const uint8_t> bytes, uint64_t file_size, const std::string& name)
      : bytes_(bytes), size_(file_size), name_(name) {}

  uint64_t pos() const noexcept { return pos_; }
  uint64_t remaining() const noexcept { return size_ - pos_; }

  [[noreturn]] void fail(uint64_t at, const std::string& what) const {
    throw_invalid(name_ + ": byte " + std::to_string(at) + ": " + what);
  }

  void need(uint64_t n, const char* what) const {
    if (n > remaining()) {
      fail(pos_, std::string("truncated ") + what + ": needs " + std::to_string(n) + " bytes, " +
                     std::to_string(remaining()) + " remain");
    }
    if (n > bytes_.size() - pos_) throw PrefixTooShort{pos_ + n};
  }

  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v = load_le<T>(bytes_.data() + pos_);
    pos_ += sizeof(T);
    return v;
  }

  std::span<const uint8_t> take(uint64_t n, const char* what) {
    need(n, what);
    auto s = bytes_.subspan(static_cast<size_t>(pos_), static_cast<size_t>(n));
    pos_ += n;
    return s;
  }

  std::string_view read_string(uint64_t max_len, const char* what) {
    const uint64_t at = pos_;
    const auto len = read<uint64_t>(what);
    if (len > max_len) {
      fail(at, std::string(what) + " length " + std::to_string(len) + " exceeds the limit of " +
                   std::to_string(max_len));
    }
    auto s = take(len, what);
    return {reinterpret_cast<const char*>(s.data()), s.size()};
  }

 private:
  std::span<const uint8_t> bytes_;
  uint64_t size_;
  const std::string& name_;
  uint64_t pos_ = 0;
};

// Walks one encoded value of `type`, validating it.
void skip_value(Cursor& c, GgufType type, const GgufLimits& limits, uint32_t depth);

void skip_array_body(Cursor& c, const GgufLimits& limits, uint32_t depth) {
  const uint64_t at = c.pos();
  if (depth > limits.max_array_depth) {
    c.fail(at, "arrays nested deeper than " + std::to_string(limits.max_array_depth));
  }
  const auto elem_raw = c.read<uint32_t>("array element type");
  if (!gguf_type_valid(elem_raw)) c.fail(at, "invalid array element type " + std::to_string(elem_raw));
  const auto elem = static_cast<GgufType>(elem_raw);
  const uint64_t count_at = c.pos();
  const auto count = c.read<uint64_t>("array length");
  if (count > limits.max_array_elements) {
    c.fail(count_at, "array length " + std::to_string(count) + " exceeds the limit of " +
                         std::to_string(limits.max_array_elements));
  }
  if (const size_t sz = gguf_scalar_size(elem); sz != 0) {
    if (count > c.remaining() / sz) {
      c.fail(count_at, "truncated (or a corrupt count): array of " + std::to_string(count) + " " +
                           std::string(gguf_type_name(elem)) + " runs past the end of the file");
    }
    const auto data = c.take(count * sz, "array data");
    if (elem == GgufType::kBool) {
      for (size_t i = 0; i < data.size(); ++i) {
        if (data[i] > 1) {
          c.fail(count_at + 8 + i, "bool value " + std::to_string(data[i]) + " is neither 0 nor 1");
        }
      }
    }
    return;
  }
  // Strings need >= 8 bytes each, nested arrays >= 12: reject impossible
  // counts before walking them.
  const uint64_t min_elem = elem == GgufType::kString ? 8 : 12;
  if (count > c.remaining() / min_elem) {
    c.fail(count_at, "truncated (or a corrupt count): array of " + std::to_string(count) + " " +
                         std::string(gguf_type_name(elem)) + " cannot fit in the " + std::to_string(c.remaining()) +
                         " bytes that remain");
  }
  for (uint64_t i = 0; i < count; ++i) skip_value(c, elem, limits, depth + 1);
}

void skip_value(Cursor& c, GgufType type, const GgufLimits& limits, uint32_t depth) {
  const uint64_t start = c.pos();
  switch (type) {
    case GgufType::kString:
      c.read_string(limits.max_string_bytes, "string");
      break;
    case GgufType::kArray:
      skip_array_body(c, limits, depth);
      break;
    case GgufType::kBool: {
      const auto b = c.read<uint8_t>("bool");
      if (b > 1) c.fail(start, "bool value " + std::to_string(b) + " is neither 0 nor 1");
      break;
    }
    default:
      c.take(gguf_scalar_size(type), "value");
  }
}

uint64_t align_up(uint64_t v, uint64_t a, bool* overflow) {
  const uint64_t r = v % a;
  if (r == 0) return v;
  if (v > std::numeric_limits<uint64_t>::max() - (a - r)) {
    *overflow = true;
    return v;
  }
  return v + (a - r);
}

}  // namespace

// ---- GgufValue --------------------------------------------------------------

std::optional<uint64_t> GgufValue::as_uint() const noexcept {
  switch (type_) {
    case GgufType::kUint8: return load_le<uint8_t>(encoded_.data());
    case GgufType::kUint16: return load_le<uint16_t>(encoded_.data());
    case GgufType::kUint32: return load_le<uint32_t>(encoded_.data());
    case GgufType::kUint64: return load_le<uint64_t>(encoded_.data());
    case GgufType::kInt8:
    case GgufType::kInt16:
    case GgufType::kInt32:
    case GgufType::kInt64: {
      const auto v = as_int();
      if (v && *v >= 0) return static_cast<uint64_t>(*v);
      return std::nullopt;
    }
    default: return std::nullopt;
  }
}

std::optional<int64_t> GgufValue::as_int() const noexcept {
  switch (type_) {
    case GgufType::kInt8: return load_le<int8_t>(encoded_.data());
    case GgufType::kInt16: return load_le<int16_t>(encoded_.data());
    case GgufType::kInt32: return load_le<int32_t>(encoded_.data());
    case GgufType::kInt64: return load_le<int64_t>(encoded_.data());
    case GgufType::kUint8:
    case GgufType::kUint16:
    case GgufType::kUint32:
    case GgufType::kUint64: {
      const auto v = as_uint();
      if (v && *v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return static_cast<int64_t>(*v);
      return std::nullopt;
    }
    default: return std::nullopt;
  }
}

std::optional<double> GgufValue::as_float() const noexcept {
  if (type_ == GgufType::kFloat32) return load_le<float>(encoded_.data());
  if (type_ == GgufType::kFloat64) return load_le<double>(encoded_.data());
  return std::nullopt;
}

std::optional<bool> GgufValue::as_bool() const noexcept {
  if (type_ != GgufType::kBool) return std::nullopt;
  return encoded_[0] != 0;
}

std::optional<std::string_view> GgufValue::as_string() const noexcept {
  if (type_ != GgufType::kString) return std::nullopt;
  return std::string_view(reinterpret_cast<const char*>(encoded_.data()) + 8, encoded_.size() - 8);
}

GgufType GgufValue::array_type() const noexcept {
  if (type_ != GgufType::kArray) return GgufType::kUint8;
  return static_cast<GgufType>(load_le<uint32_t>(encoded_.data()));
}

uint64_t GgufValue::array_size() const noexcept {
  if (type_ != GgufType::kArray) return 0;
  return load_le<uint64_t>(encoded_.data() + 4);
}

std::optional<std::vector<std::string_view>> GgufValue::as_string_array() const {
  if (type_ != GgufType::kArray || array_type() != GgufType::kString) return std::nullopt;
  std::vector<std::string_view> out;
  const uint64_t n = array_size();
  out.reserve(static_cast<size_t>(n));  // validated against the file at parse time
  size_t pos = 12;
  for (uint64_t i = 0; i < n; ++i) {
    const auto len = load_le<uint64_t>(encoded_.data() + pos);
    pos += 8;
    out.emplace_back(reinterpret_cast<const char*>(encoded_.data()) + pos, static_cast<size_t>(len));
    pos += static_cast<size_t>(len);
  }
  return out;
}

std::optional<std::vector<int64_t>> GgufValue::as_int_array() const {
  if (type_ != GgufType::kArray) return std::nullopt;
  const GgufType et = array_type();
  const size_t sz = gguf_scalar_size(et);
  if (sz == 0 || et == GgufType::kFloat32 || et == GgufType::kFloat64 || et == GgufType::kBool) return std::nullopt;
  std::vector<int64_t> out;
  const uint64_t n = array_size();
  out.reserve(static_cast<size_t>(n));
  for (uint64_t i = 0; i < n; ++i) {
    GgufValue v(et, encoded_.subspan(12 + static_cast<size_t>(i) * sz, sz));
    const auto x = v.as_int();
    if (!x) return std::nullopt;  // u64 beyond int64
    out.push_back(*x);
  }
  return out;
}

// ---- GgufFile ---------------------------------------------------------------

GgufFile GgufFile::open(const std::filesystem::path& path, const GgufLimits& limits) {
  GgufFile f;
  f.file_ = MappedFile::open(path);
  f.path_ = path;
  f.name_ = path.string();
  f.bytes_ = f.file_->bytes();
  f.parse_all(limits, f.bytes_.size());
  return f;
}

GgufFile GgufFile::parse(std::span<const uint8_t> bytes, std::string name, const GgufLimits& limits) {
  GgufFile f;
  f.name_ = std::move(name);
  f.bytes_ = bytes;
  f.parse_all(limits, bytes.size());
  return f;
}

GgufPrefix GgufFile::parse_prefix(std::span<const uint8_t> prefix, uint64_t file_size, std::string name,
                                  GgufLimits limits) {
  if (prefix.size() > file_size) {
    throw Error(ErrorKind::kUsage, name + ": " + std::to_string(prefix.size()) + " first bytes of a file of " +
                                       std::to_string(file_size));
  }
  limits.directory_only = true;  // the tensors' bytes are not here
  GgufPrefix out;
  GgufFile f;
  f.name_ = std::move(name);
  f.bytes_ = prefix;
  try {
    f.parse_all(limits, file_size);
  } catch (const PrefixTooShort& s) {
    out.needed = s.needed;
    return out;
  }
  out.file = std::move(f);
  return out;
}

void GgufFile::parse_all(const GgufLimits& limits, uint64_t file_size) {
  Cursor c(bytes_, file_size, name_);
  if (file_size < 4) c.fail(0, "file too small to be GGUF (" + std::to_string(file_size) + " bytes)");
  const auto magic = c.read<uint32_t>("magic");
  if (magic != kGgufMagic) c.fail(0, "not a GGUF file (bad magic)");
  const auto version = c.read<uint32_t>("version");
  if (version == 1) c.fail(4, "GGUF version 1 is not supported (only 2 and 3)");
  if (version != 2 && version != 3) {
    if ((version & 0xFFFF) == 0 && version != 0) c.fail(4, "big-endian GGUF is not supported");
    c.fail(4, "unsupported GGUF version " + std::to_string(version) + " (only 2 and 3)");
  }
  version_ = version;
  const uint64_t tc_at = c.pos();
  const auto n_tensors = c.read<uint64_t>("tensor count");
  const uint64_t kc_at = c.pos();
  const auto n_kv = c.read<uint64_t>("KV count");
  // A KV takes at least 8 (key length) + 1 (key) + 4 (type) + 1 bytes; a
  // tensor info at least 8 + 1 + 4 + 8 + 4 + 8.
  if (n_kv > limits.max_kv_count || n_kv > c.remaining() / 14) {
    c.fail(kc_at, "KV count " + std::to_string(n_kv) + " cannot fit in the file");
  }
  if (n_tensors > limits.max_tensor_count || n_tensors > c.remaining() / 33) {
    c.fail(tc_at, "tensor count " + std::to_string(n_tensors) + " cannot fit in the file");
  }

  kvs_.reserve(static_cast<size_t>(n_kv));
  for (uint64_t i = 0; i < n_kv; ++i) {
    const uint64_t at = c.pos();
    const auto key = c.read_string(limits.max_key_bytes, "key");
    if (key.empty()) c.fail(at, "empty KV key");
    if (!is_valid_utf8(key)) c.fail(at, "KV key is not valid UTF-8");
    const uint64_t type_at = c.pos();
    const auto type_raw = c.read<uint32_t>("value type");
    if (!gguf_type_valid(type_raw)) {
      c.fail(type_at, "KV '" + std::string(key) + "' has invalid value type " + std::to_string(type_raw));
    }
    const auto type = static_cast<GgufType>(type_raw);
    const uint64_t vstart = c.pos();
    skip_value(c, type, limits, 0);
    GgufKv kv{key, GgufValue(type, bytes_.subspan(static_cast<size_t>(vstart), static_cast<size_t>(c.pos() - vstart))), at};
    if (!kv_index_.emplace(key, kvs_.size()).second) c.fail(at, "duplicate KV key '" + std::string(key) + "'");
    kvs_.push_back(kv);
  }

  if (const GgufKv* a = find_kv("general.alignment")) {
    if (a->value.type() != GgufType::kUint32) {
      c.fail(a->offset, "general.alignment must be u32, found " + std::string(gguf_type_name(a->value.type())));
    }
    const auto v = *a->value.as_uint();
    if (v == 0 || (v & (v - 1)) != 0) {
      c.fail(a->offset, "general.alignment " + std::to_string(v) + " is not a power of two");
    }
    alignment_ = static_cast<uint32_t>(v);
  }

  tensors_.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t;
    t.info_offset = c.pos();
    const auto name = c.read_string(limits.max_key_bytes, "tensor name");
    if (name.empty()) c.fail(t.info_offset, "empty tensor name");
    if (name.size() > kGgufMaxTensorName) {
      c.fail(t.info_offset, "tensor name '" + std::string(name.substr(0, 80)) + "' is longer than " +
                                std::to_string(kGgufMaxTensorName) + " bytes");
    }
    if (!is_valid_utf8(name)) c.fail(t.info_offset, "tensor name is not valid UTF-8");
    // The rule every identity string follows (stage admission descriptors,
    // manifests): a name with a control character (NUL, ESC, a newline, a
    // bidirectional control) is one ggml would cut or a terminal would act on.
    if (const auto why = control_character_problem(name)) c.fail(t.info_offset, "tensor name " + *why);
    t.name = name;
    const uint64_t nd_at = c.pos();
    const auto n_dims = c.read<uint32_t>("tensor dimension count");
    const size_t max_dims = limits.directory_only ? kGgufDirectoryMaxDims : kGgufMaxDims;
    if (n_dims == 0 || n_dims > max_dims) {
      c.fail(nd_at, "tensor '" + std::string(name) + "' has " + std::to_string(n_dims) + " dimensions (1.." +
                        std::to_string(max_dims) + " allowed)");
    }
    t.ne.resize(n_dims);
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t dim_at = c.pos();
      const auto v = c.read<uint64_t>("tensor dimension");
      if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        c.fail(dim_at, "tensor '" + std::string(name) + "' dimension " + std::to_string(d) + " is out of range");
      }
      t.ne[d] = static_cast<int64_t>(v);
    }
    const uint64_t type_at = c.pos();
    t.type = c.read<uint32_t>("tensor type");
    const auto* traits = ggml_type_traits(t.type);
    if (traits == nullptr) {
      c.fail(type_at, "tensor '" + std::string(name) + "' has unknown ggml type " + std::to_string(t.type));
    }
    const auto bytes = ggml_tensor_bytes(t.type, t.ne);
    if (!bytes) {
      if (t.ne[0] % traits->block_size != 0) {
        c.fail(nd_at, "tensor '" + std::string(name) + "' first dimension " + std::to_string(t.ne[0]) +
                          " is not a multiple of the " + std::string(traits->name) + " block size " +
                          std::to_string(traits->block_size));
      }
      c.fail(nd_at, "tensor '" + std::string(name) + "' dimensions overflow a 64-bit size");
    }
    t.bytes = *bytes;
    const uint64_t off_at = c.pos();
    t.offset = c.read<uint64_t>("tensor offset");
    if (t.offset % alignment_ != 0 && !(limits.directory_only && t.bytes == 0)) {
      c.fail(off_at, "tensor '" + std::string(name) + "' offset " + std::to_string(t.offset) +
                         " is not a multiple of the alignment " + std::to_string(alignment_));
    }
    if (!tensor_index_.emplace(name, tensors_.size()).second) {
      c.fail(t.info_offset, "duplicate tensor name '" + std::string(name) + "'");
    }
    tensors_.push_back(std::move(t));
  }

  header_end_ = c.pos();
  bool overflow = false;
  data_offset_ = align_up(header_end_, alignment_, &overflow);
  if (overflow) c.fail(header_end_, "data section offset overflows");
  if (limits.directory_only) {
    for (auto& t : tensors_) {
      t.file_offset = data_offset_ + t.offset;
      if (t.file_offset < t.offset) c.fail(t.info_offset, "tensor '" + std::string(t.name) + "' offset overflows");
    }
    return;
  }
  if (!tensors_.empty() && data_offset_ > bytes_.size()) {
    c.fail(header_end_, "truncated: the file ends before the data section (needs " + std::to_string(data_offset_) + " bytes, has " +
                            std::to_string(bytes_.size()) + ")");
  }
  const uint64_t data_size = bytes_.size() > data_offset_ ? bytes_.size() - data_offset_ : 0;
  for (auto& t : tensors_) {
    if (t.offset > data_size || t.bytes > data_size - t.offset) {
      c.fail(t.info_offset, "tensor '" + std::string(t.name) + "' data [" + std::to_string(t.offset) + ", +" +
                                std::to_string(t.bytes) + ") runs past the end of the file: truncated? (data section holds " +
                                std::to_string(data_size) + " bytes)");
    }
    t.file_offset = data_offset_ + t.offset;
  }
  // Overlap: sort by offset, each non-empty tensor must begin at or after
  // the end of the previous non-empty one (empty tensors overlap nothing and
  // must not hide an overlap between their neighbours).
  std::vector<const GgufTensorInfo*> by_off;
  by_off.reserve(tensors_.size());
  for (const auto& t : tensors_) by_off.push_back(&t);
  std::sort(by_off.begin(), by_off.end(), [](auto* a, auto* b) { return a->offset < b->offset; });
  const GgufTensorInfo* prev = nullptr;
  for (const auto* cur : by_off) {
    if (cur->bytes == 0) continue;
    if (prev != nullptr && prev->offset + prev->bytes > cur->offset) {
      c.fail(cur->info_offset, "tensor '" + std::string(cur->name) + "' data overlaps tensor '" +
                                   std::string(prev->name) + "'");
    }
    prev = cur;
  }
}

const GgufKv* GgufFile::find_kv(std::string_view key) const noexcept {
  const auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kvs_[it->second];
}

std::optional<std::string_view> GgufFile::get_string(std::string_view key) const noexcept {
  const auto* kv = find_kv(key);
  return kv ? kv->value.as_string() : std::nullopt;
}

std::optional<uint64_t> GgufFile::get_uint(std::string_view key) const noexcept {
  const auto* kv = find_kv(key);
  return kv ? kv->value.as_uint() : std::nullopt;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const noexcept {
  const auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

uint64_t GgufFile::tensor_bytes_total() const noexcept {
  uint64_t total = 0;
  for (const auto& t : tensors_) total += t.bytes;
  return total;
}

std::span<const uint8_t> GgufFile::tensor_data(const GgufTensorInfo& t) const noexcept {
  return bytes_.subspan(static_cast<size_t>(t.file_offset), static_cast<size_t>(t.bytes));
}

std::string_view GgufFile::architecture() const noexcept {
  return get_string("general.architecture").value_or(std::string_view{});
}

std::optional<uint64_t> GgufFile::block_count() const noexcept {
  const auto arch = architecture();
  if (arch.empty()) return std::nullopt;
  return get_uint(std::string(arch) + ".block_count");
}

std::optional<uint64_t> GgufFile::embedding_length() const noexcept {
  const auto arch = architecture();
  if (arch.empty()) return std::nullopt;
  return get_uint(std::string(arch) + ".embedding_length");
}

// ---- split shards -----------------------------------------------------------

std::optional<SplitName> parse_split_name(const std::filesystem::path& path) {
  static const std::regex kRe(R"((.*)-(\d{5})-of-(\d{5})\.gguf)");
  std::smatch m;
  const std::string s = path.string();
  if (!std::regex_match(s, m, kRe)) return std::nullopt;
  SplitName n;
  n.prefix = m[1].str();
  n.index = static_cast<uint32_t>(std::stoul(m[2].str()));
  n.count = static_cast<uint32_t>(std::stoul(m[3].str()));
  if (n.index == 0 || n.count == 0 || n.index > n.count) return std::nullopt;
  return n;
}

std::filesystem::path split_path(const std::string& prefix, uint32_t index, uint32_t count) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "-%05u-of-%05u.gguf", index, count);
  return prefix + buf;
}

std::optional<SplitInfo> read_split_info(const GgufFile& f) {
  const auto* no = f.find_kv("split.no");
  const auto* count = f.find_kv("split.count");
  const auto* tensors = f.find_kv("split.tensors.count");
  if (!no && !count && !tensors) return std::nullopt;
  if (!no || !count) throw_invalid(f.name() + ": split.* keys incomplete (need split.no and split.count)");
  const auto n = no->value.as_uint();
  const auto c = count->value.as_uint();
  if (!n || !c || *c == 0 || *n >= *c || *c > 99999) {
    throw_invalid(f.name() + ": split.no/split.count are not valid shard numbers");
  }
  SplitInfo info;
  info.no = static_cast<uint32_t>(*n);
  info.count = static_cast<uint32_t>(*c);
  if (tensors) {
    const auto t = tensors->value.as_uint();
    if (!t) throw_invalid(f.name() + ": split.tensors.count is not a non-negative integer");
    info.tensors_count = *t;
  }
  return info;
}

}  // namespace skippy
