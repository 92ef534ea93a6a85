// Writing GGUF v3: KVs in the order added, tensor infos in the order added,
// explicit alignment and zero padding, tensor data streamed from source
// files with positional reads (never whole files in memory). The same inputs
// always give the same bytes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "skippy/file.h"
#include "skippy/gguf.h"

namespace skippy {

class GgufWriter {
 public:
  struct Kv {
    std::string key;
    GgufType type;
    std::vector<uint8_t> encoded;  // the value's encoding without its type tag
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
  void add_kv(std::string key, const GgufValue& value);
  void add_kv(std::string key, GgufType type, std::vector<uint8_t> encoded);
  void add_u32(std::string key, uint32_t v);
  void add_i32(std::string key, int32_t v);
  void add_u64(std::string key, uint64_t v);
  void add_u16(std::string key, uint16_t v);
  void add_bool(std::string key, bool v);
  void add_string(std::string key, std::string_view v);
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

  // Layout. header() is everything before the data section, padded.
  std::vector<uint8_t> header() const;
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

// Encoders for building values by hand (tests, new keys).
std::vector<uint8_t> gguf_encode_string(std::string_view s);

}  // namespace skippy
