#include "gguf/gguf_writer.h"

#include <algorithm>
#include <cstring>

#include "util/file.h"
#include "skippy/error.h"
#include "gguf/ggml_types.h"
#include "util/sha256.h"

namespace skippy {
namespace {

// resize + memcpy rather than insert: GCC 12 -O3 misreads vector::insert
// growth as an overflow (-Wstringop-overflow false positive).
void put_bytes(std::vector<uint8_t>& out, const void* p, size_t n) {
  if (n == 0) return;
  const size_t at = out.size();
  out.resize(at + n);
  std::memcpy(out.data() + at, p, n);
}

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  put_bytes(out, &v, sizeof v);
}

void put_string(std::vector<uint8_t>& out, std::string_view s) {
  put<uint64_t>(out, s.size());
  put_bytes(out, s.data(), s.size());
}

uint64_t pad_to(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

template <typename T>
std::vector<uint8_t> encode_scalar(T v) {
  std::vector<uint8_t> out;
  put<T>(out, v);
  return out;
}

// An array's head: element type, count.
std::vector<uint8_t> array_head(GgufType element, size_t count, size_t element_bytes) {
  std::vector<uint8_t> out;
  out.reserve(12 + count * element_bytes);
  put<uint32_t>(out, static_cast<uint32_t>(element));
  put<uint64_t>(out, count);
  return out;
}

bool is_integer_type(GgufType t) noexcept {
  return t != GgufType::kFloat32 && t != GgufType::kFloat64 && gguf_scalar_size(t) != 0;
}

bool is_signed_type(GgufType t) noexcept {
  return t == GgufType::kInt8 || t == GgufType::kInt16 || t == GgufType::kInt32 || t == GgufType::kInt64;
}

[[noreturn]] void array_misuse(GgufType element, const std::string& why) {
  throw Error(ErrorKind::kUsage, "GGUF array of type " + std::to_string(static_cast<uint32_t>(element)) + ": " + why);
}

}  // namespace

std::vector<uint8_t> gguf_encode_array(GgufType element, std::span<const uint64_t> values) {
  if (!is_integer_type(element)) array_misuse(element, "not an integer or bool element type");
  const size_t width = gguf_scalar_size(element);
  const uint64_t max = element == GgufType::kBool ? 1
                       : width == 8               ? UINT64_MAX
                                                  : (uint64_t{1} << (8 * width - (is_signed_type(element) ? 1 : 0))) - 1;
  auto out = array_head(element, values.size(), width);
  for (const uint64_t v : values) {
    if (v > max) array_misuse(element, "value " + std::to_string(v) + " does not fit");
    if (width == 8 && is_signed_type(element) && v > uint64_t{INT64_MAX}) array_misuse(element, "value " + std::to_string(v) + " does not fit");
    put_bytes(out, &v, width);  // little-endian: the low bytes
  }
  return out;
}

std::vector<uint8_t> gguf_encode_array(GgufType element, std::span<const int64_t> values) {
  if (!is_integer_type(element) || element == GgufType::kBool) array_misuse(element, "not an integer element type");
  const size_t width = gguf_scalar_size(element);
  const bool sign = is_signed_type(element);
  const int64_t hi = width == 8 ? INT64_MAX : static_cast<int64_t>((uint64_t{1} << (8 * width - (sign ? 1 : 0))) - 1);
  const int64_t lo = !sign ? 0 : width == 8 ? INT64_MIN : -hi - 1;
  auto out = array_head(element, values.size(), width);
  for (const int64_t v : values) {
    if (v < lo || v > hi) array_misuse(element, "value " + std::to_string(v) + " does not fit");
    put_bytes(out, &v, width);  // two's complement, little-endian: the low bytes
  }
  return out;
}

std::vector<uint8_t> gguf_encode_array(GgufType element, std::span<const double> values) {
  auto out = array_head(element, values.size(), gguf_scalar_size(element));
  if (element == GgufType::kFloat32) {
    for (const double v : values) put<float>(out, static_cast<float>(v));
  } else if (element == GgufType::kFloat64) {
    for (const double v : values) put<double>(out, v);
  } else {
    array_misuse(element, "not a float element type");
  }
  return out;
}

std::vector<uint8_t> gguf_encode_string_array(std::span<const std::string_view> values) {
  auto out = array_head(GgufType::kString, values.size(), 8);
  for (const auto v : values) put_string(out, v);
  return out;
}

std::vector<uint8_t> gguf_encode_string_array(std::span<const std::string> values) {
  auto out = array_head(GgufType::kString, values.size(), 8);
  for (const auto& v : values) put_string(out, v);
  return out;
}

GgufBytes::GgufBytes(std::vector<uint8_t> own) : own_(std::move(own)), size_(own_.size()) {
  if (!own_.empty()) pieces_.push_back({nullptr, 0, own_.size()});
}

GgufBytes GgufBytes::borrow(std::span<const uint8_t> bytes) {
  GgufBytes b;
  b.append_borrowed(bytes);
  return b;
}

void GgufBytes::append(std::span<const uint8_t> bytes) {
  if (bytes.empty()) return;
  const size_t at = own_.size();
  put_bytes(own_, bytes.data(), bytes.size());
  if (!pieces_.empty() && pieces_.back().borrowed == nullptr && pieces_.back().off + pieces_.back().len == at) {
    pieces_.back().len += bytes.size();
  } else {
    pieces_.push_back({nullptr, at, bytes.size()});
  }
  size_ += bytes.size();
}

void GgufBytes::append_borrowed(std::span<const uint8_t> bytes) {
  if (bytes.empty()) return;
  pieces_.push_back({bytes.data(), 0, bytes.size()});
  size_ += bytes.size();
}

void GgufBytes::for_each(const std::function<void(std::span<const uint8_t>)>& fn) const {
  for (const auto& p : pieces_) fn({p.borrowed != nullptr ? p.borrowed : own_.data() + p.off, p.len});
}

std::vector<uint8_t> GgufBytes::flatten() const {
  std::vector<uint8_t> out;
  out.reserve(static_cast<size_t>(size_));
  for_each([&](std::span<const uint8_t> s) { put_bytes(out, s.data(), s.size()); });
  return out;
}

std::vector<uint8_t> gguf_encode_string(std::string_view s) {
  std::vector<uint8_t> out;
  put_string(out, s);
  return out;
}

GgufWriter::GgufWriter(uint32_t alignment) : alignment_(alignment) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    throw Error(ErrorKind::kUsage, "GGUF alignment " + std::to_string(alignment) + " is not a power of two");
  }
}

void GgufWriter::add_kv(std::string key, GgufType type, std::vector<uint8_t> encoded) {
  if (has_kv(key)) throw Error(ErrorKind::kUsage, "duplicate GGUF key '" + key + "'");
  auto owned = std::make_shared<const std::vector<uint8_t>>(std::move(encoded));
  const std::span<const uint8_t> view(*owned);
  kvs_.push_back(Kv{std::move(key), type, view, std::move(owned)});
}

void GgufWriter::add_kv(std::string key, const GgufValue& value) {
  add_kv(std::move(key), value.type(), std::vector<uint8_t>(value.encoded().begin(), value.encoded().end()));
}

void GgufWriter::add_kv_borrowed(std::string key, const GgufValue& value) {
  if (has_kv(key)) throw Error(ErrorKind::kUsage, "duplicate GGUF key '" + key + "'");
  kvs_.push_back(Kv{std::move(key), value.type(), value.encoded(), nullptr});
}

void GgufWriter::add_u32(std::string key, uint32_t v) { add_kv(std::move(key), GgufType::kUint32, encode_scalar(v)); }
void GgufWriter::add_i32(std::string key, int32_t v) { add_kv(std::move(key), GgufType::kInt32, encode_scalar(v)); }
void GgufWriter::add_u64(std::string key, uint64_t v) { add_kv(std::move(key), GgufType::kUint64, encode_scalar(v)); }
void GgufWriter::add_u16(std::string key, uint16_t v) { add_kv(std::move(key), GgufType::kUint16, encode_scalar(v)); }
void GgufWriter::add_bool(std::string key, bool v) {
  add_kv(std::move(key), GgufType::kBool, encode_scalar<uint8_t>(v ? 1 : 0));
}
void GgufWriter::add_string(std::string key, std::string_view v) {
  add_kv(std::move(key), GgufType::kString, gguf_encode_string(v));
}

void GgufWriter::add_array(std::string key, GgufType element, std::span<const uint64_t> values) {
  add_kv(std::move(key), GgufType::kArray, gguf_encode_array(element, values));
}
void GgufWriter::add_array(std::string key, GgufType element, std::span<const int64_t> values) {
  add_kv(std::move(key), GgufType::kArray, gguf_encode_array(element, values));
}
void GgufWriter::add_array(std::string key, GgufType element, std::span<const double> values) {
  add_kv(std::move(key), GgufType::kArray, gguf_encode_array(element, values));
}
void GgufWriter::add_string_array(std::string key, std::span<const std::string_view> values) {
  add_kv(std::move(key), GgufType::kArray, gguf_encode_string_array(values));
}
void GgufWriter::add_string_array(std::string key, std::span<const std::string> values) {
  add_kv(std::move(key), GgufType::kArray, gguf_encode_string_array(values));
}

bool GgufWriter::has_kv(std::string_view key) const noexcept {
  return std::any_of(kvs_.begin(), kvs_.end(), [&](const Kv& kv) { return kv.key == key; });
}

void GgufWriter::add_tensor(std::string name, uint32_t type, std::vector<int64_t> ne,
                            std::shared_ptr<const MappedFile> source, uint64_t source_offset) {
  if (name.empty() || name.size() > kGgufMaxTensorName) {
    throw_invalid("tensor name '" + name + "' must be 1.." + std::to_string(kGgufMaxTensorName) + " bytes");
  }
  if (ne.empty() || ne.size() > kGgufMaxDims) throw_invalid("tensor '" + name + "' must have 1..4 dimensions");
  const auto bytes = ggml_tensor_bytes(type, ne);
  if (!bytes) throw_invalid("tensor '" + name + "' has an invalid type or shape");
  for (const auto& t : tensors_) {
    if (t.name == name) throw_invalid("duplicate tensor name '" + name + "'");
  }
  if (source && (source_offset > source->size() || *bytes > source->size() - source_offset)) {
    throw_invalid("tensor '" + name + "' source range lies outside " + source->path().string());
  }
  Tensor t;
  t.name = std::move(name);
  t.type = type;
  t.ne = std::move(ne);
  t.bytes = *bytes;
  t.offset = data_size_;
  t.source = std::move(source);
  t.source_offset = source_offset;
  data_size_ += pad_to(t.bytes, alignment_);
  tensors_.push_back(std::move(t));
}

void GgufWriter::add_tensor_from(const GgufFile& file, const GgufTensorInfo& t) {
  add_tensor(std::string(t.name), t.type, t.ne, file.file(), t.file_offset);
}

uint64_t GgufWriter::tensor_bytes() const noexcept {
  uint64_t n = 0;
  for (const auto& t : tensors_) n += t.bytes;
  return n;
}

std::vector<uint8_t> GgufWriter::header() const { return header_bytes().flatten(); }

GgufBytes GgufWriter::header_bytes() const {
  for (const auto& kv : kvs_) {
    if (kv.key == "general.alignment") {
      uint32_t v = 0;
      if (kv.type != GgufType::kUint32 || kv.encoded.size() != 4) {
        throw Error(ErrorKind::kUsage, "general.alignment must be a u32");
      }
      std::memcpy(&v, kv.encoded.data(), 4);
      if (v != alignment_) {
        throw Error(ErrorKind::kUsage, "general.alignment " + std::to_string(v) +
                                           " does not match the writer's alignment " + std::to_string(alignment_));
      }
    }
  }
  if (alignment_ != kGgufDefaultAlignment && !has_kv("general.alignment")) {
    throw Error(ErrorKind::kUsage, "alignment " + std::to_string(alignment_) + " needs a general.alignment KV");
  }
  // Counts, keys, type tags and tensor infos are the header's own bytes; a
  // borrowed KV value is a view of its source.
  GgufBytes out;
  std::vector<uint8_t> own;
  auto flush = [&] {
    out.append(own);
    own.clear();
  };
  put<uint32_t>(own, kGgufMagic);
  put<uint32_t>(own, 3);
  put<uint64_t>(own, tensors_.size());
  put<uint64_t>(own, kvs_.size());
  for (const auto& kv : kvs_) {
    put_string(own, kv.key);
    put<uint32_t>(own, static_cast<uint32_t>(kv.type));
    if (kv.borrowed()) {
      flush();
      out.append_borrowed(kv.encoded);
    } else {
      put_bytes(own, kv.encoded.data(), kv.encoded.size());
    }
    if (own.size() >= (1u << 20)) flush();
  }
  for (const auto& t : tensors_) {
    put_string(own, t.name);
    put<uint32_t>(own, static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) put<uint64_t>(own, static_cast<uint64_t>(d));
    put<uint32_t>(own, t.type);
    put<uint64_t>(own, t.offset);
  }
  // llama.cpp's writers leave a tensor-less file (a vocab) unpadded.
  const uint64_t unpadded = out.size() + own.size();
  if (!tensors_.empty()) own.resize(own.size() + static_cast<size_t>(pad_to(unpadded, alignment_) - unpadded), 0);
  flush();
  return out;
}

uint64_t GgufWriter::data_offset() const {
  // Computed without building the header: sizes only.
  uint64_t n = 4 + 4 + 8 + 8;
  for (const auto& kv : kvs_) n += 8 + kv.key.size() + 4 + kv.encoded.size();
  for (const auto& t : tensors_) n += 8 + t.name.size() + 4 + 8 * t.ne.size() + 4 + 8;
  return tensors_.empty() ? n : pad_to(n, alignment_);
}

std::string GgufWriter::write(AtomicFile& out, const std::function<void(uint64_t)>& on_bytes) const {
  Sha256 sha;
  const auto head = header_bytes();
  out.preallocate(total_size());
  head.for_each([&](std::span<const uint8_t> s) {
    out.write_all(s);
    sha.update(s);
  });
  if (on_bytes) on_bytes(head.size());
  constexpr size_t kChunk = 8u << 20;
  std::vector<uint8_t> buf(kChunk);
  static const std::vector<uint8_t> kZeros(4096, 0);
  for (const auto& t : tensors_) {
    if (!t.source && t.bytes != 0) throw Error(ErrorKind::kUsage, "tensor '" + t.name + "' has no source");
    uint64_t done = 0;
    while (done < t.bytes) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, t.bytes - done));
      t.source->pread_exact(t.source_offset + done, {buf.data(), n});
      out.write_all({buf.data(), n});
      sha.update({buf.data(), n});
      done += n;
      if (on_bytes) on_bytes(n);
    }
    for (uint64_t pad = pad_to(t.bytes, alignment_) - t.bytes; pad != 0;) {
      const std::span<const uint8_t> z(kZeros.data(), static_cast<size_t>(std::min<uint64_t>(pad, kZeros.size())));
      out.write_all(z);
      sha.update(z);
      pad -= z.size();
    }
  }
  return sha.hex_digest();
}

}  // namespace skippy
