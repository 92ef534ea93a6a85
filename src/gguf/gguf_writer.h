// Writing GGUF v3: KVs in the order added, tensor infos in the order added,
// explicit alignment and zero padding, tensor data streamed from source
// files with positional reads (never whole files in memory). The same inputs
// always give the same bytes.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "util/file.h"
#include "skippy/gguf.h"

namespace skippy {

// Bytes as a chain of pieces: its own (copied in) and borrowed ones (views
// the caller keeps alive). A GGUF header whose KV values are views of the
// source file's map costs no copy of them: a KV section that is nearly the
// whole file (hostile, or a huge vocabulary) is held once, by the map, however
// many fragments repeat it.
class GgufBytes {
 public:
  GgufBytes() = default;
  GgufBytes(std::vector<uint8_t> own);  // NOLINT: implicit, bytes are bytes
  GgufBytes(std::initializer_list<uint8_t> own) : GgufBytes(std::vector<uint8_t>(own)) {}
  // A view of `bytes`, which must outlive this and its copies.
  static GgufBytes borrow(std::span<const uint8_t> bytes);

  void append(std::span<const uint8_t> bytes);           // copied
  void append_borrowed(std::span<const uint8_t> bytes);  // viewed
  uint64_t size() const noexcept { return size_; }
  // Each piece in order (empty ones skipped).
  void for_each(const std::function<void(std::span<const uint8_t>)>& fn) const;
  std::vector<uint8_t> flatten() const;

 private:
  struct Piece {
    const uint8_t* borrowed = nullptr;  // null: own_[off, off + len)
    size_t off = 0;
    size_t len = 0;
  };
  std::vector<uint8_t> own_;
  std::vector<Piece> pieces_;
  uint64_t size_ = 0;
};

class GgufWriter {
 public:
  struct Kv {
    std::string key;
    GgufType type;
    std::span<const uint8_t> encoded;            // the value's encoding without its type tag
    std::shared_ptr<const std::vector<uint8_t>> owned;  // encoded's bytes, unless borrowed
    bool borrowed() const noexcept { return !owned; }
  };
  struct Tensor {
    std::string name;
    uint32_t type = 0;
    std::vector<int64_t> ne;
    uint64_t bytes = 0;
    uint64_t offset = 0;  // in the data section; assigned as tensors are added
    std::shared_ptr<const MappedFile> source;  // where the payload is read from
    uint64_t source_offset = 0;
  };

  // `alignment` must be a power of two. When it is not 32, the caller must
  // also add a matching u32 "general.alignment" KV (checked by header()).
  explicit GgufWriter(uint32_t alignment = kGgufDefaultAlignment);

  // KVs: a duplicate key throws Error(kUsage).
  // Copies the value's bytes.
  void add_kv(std::string key, const GgufValue& value);
  // Views the value's bytes instead: the GgufFile it came from must outlive
  // the writer and every header_bytes() it returns. For writers that repeat
  // a source's KVs (write-package): memory stays the source's map, whatever
  // the KV section holds.
  void add_kv_borrowed(std::string key, const GgufValue& value);
  void add_kv(std::string key, GgufType type, std::vector<uint8_t> encoded);
  void add_u32(std::string key, uint32_t v);
  void add_i32(std::string key, int32_t v);
  void add_u64(std::string key, uint64_t v);
  void add_u16(std::string key, uint16_t v);
  void add_bool(std::string key, bool v);
  void add_string(std::string key, std::string_view v);
  // Arrays (gguf_encode_array, gguf_encode_string_array below).
  void add_array(std::string key, GgufType element, std::span<const uint64_t> values);
  void add_array(std::string key, GgufType element, std::span<const int64_t> values);
  void add_array(std::string key, GgufType element, std::span<const double> values);
  void add_string_array(std::string key, std::span<const std::string_view> values);
  void add_string_array(std::string key, std::span<const std::string> values);
  bool has_kv(std::string_view key) const noexcept;

  // Tensors: validates name, dims and type (Error(kInvalidInput)); `source`
  // + `source_offset` name the payload bytes for write().
  void add_tensor(std::string name, uint32_t type, std::vector<int64_t> ne,
                  std::shared_ptr<const MappedFile> source, uint64_t source_offset);
  // Convenience: copies a tensor's identity and payload location from a file.
  void add_tensor_from(const GgufFile& file, const GgufTensorInfo& t);

  const std::vector<Kv>& kvs() const noexcept { return kvs_; }
  const std::vector<Tensor>& tensors() const noexcept { return tensors_; }
  uint32_t alignment() const noexcept { return alignment_; }

  // Layout. header() is everything before the data section, padded;
  // header_bytes() the same as a chain that views the borrowed KVs.
  std::vector<uint8_t> header() const;
  GgufBytes header_bytes() const;
  uint64_t data_offset() const;
  uint64_t data_size() const noexcept { return data_size_; }  // padded payload bytes
  uint64_t total_size() const { return data_offset() + data_size_; }
  uint64_t tensor_bytes() const noexcept;  // unpadded payload bytes

  // Streams the whole file to `out` (header, payloads read from their
  // sources, padding) and returns its SHA-256. `on_bytes` sees progress.
  std::string write(AtomicFile& out, const std::function<void(uint64_t)>& on_bytes = {}) const;

 private:
  uint32_t alignment_;
  std::vector<Kv> kvs_;
  std::vector<Tensor> tensors_;
  uint64_t data_size_ = 0;
};

// Encoders for building values by hand (tests, new keys), each without its
// type tag.
std::vector<uint8_t> gguf_encode_string(std::string_view s);
// An array of `element`, a fixed-size type: integers (and bool: 0 or 1)
// from unsigned or signed values, which must fit the element type; float32
// and float64 from doubles. Any other element type, or a value that does not
// fit, is Error(kUsage).
std::vector<uint8_t> gguf_encode_array(GgufType element, std::span<const uint64_t> values);
std::vector<uint8_t> gguf_encode_array(GgufType element, std::span<const int64_t> values);
std::vector<uint8_t> gguf_encode_array(GgufType element, std::span<const double> values);
// An array of strings.
std::vector<uint8_t> gguf_encode_string_array(std::span<const std::string_view> values);
std::vector<uint8_t> gguf_encode_string_array(std::span<const std::string> values);

}  // namespace skippy
