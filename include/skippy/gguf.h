// Reading GGUF files (versions 2 and 3), strictly.
//
// The reader treats every file as untrusted: each count, length, dimension
// product and offset is checked against the file before use (overflow-safe);
// tensors must be aligned, in range and non-overlapping; duplicate keys and
// tensor names are errors. An error names the file, the byte offset and the
// problem. Nothing is allocated in proportion to a count before the count is
// proven to fit in the bytes that remain.
//
// Opening maps the file and parses the header only; tensor data is never read
// here. Views (string_view, span) returned by a GgufFile stay valid as long as
// the GgufFile (or a copy of it) lives.
//
// Thread-safety: a GgufFile is immutable once opened or parsed: any number of
// threads may read it (and the GgufValue views into it) at once. The free
// functions are pure.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>


namespace skippy {

class MappedFile;  // the mapped bytes (internal: src/util/file.h)

inline constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" little-endian
inline constexpr uint32_t kGgufDefaultAlignment = 32;
inline constexpr size_t kGgufMaxDims = 4;
// A tensor directory read with GgufLimits::directory_only (a package schema 2
// metadata carrier) may describe tensors of up to 8 dimensions, as the
// reference's catalog reader allows; ggml (and so any GGUF llama.cpp loads)
// has 4.
inline constexpr size_t kGgufDirectoryMaxDims = 8;
inline constexpr size_t kGgufMaxTensorName = 63;  // ggml: GGML_MAX_NAME - 1

enum class GgufType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

std::string_view gguf_type_name(GgufType t) noexcept;
bool gguf_type_valid(uint32_t t) noexcept;
// Byte size of a fixed-width scalar type; 0 for string and array.
size_t gguf_scalar_size(GgufType t) noexcept;

// A KV value exactly as it is encoded in a file (for arrays: element type,
// count and elements), plus typed accessors. It does not own its bytes.
class GgufValue {
 public:
  GgufValue() = default;
  GgufValue(GgufType type, std::span<const uint8_t> encoded) : type_(type), encoded_(encoded) {}

  GgufType type() const noexcept { return type_; }
  // The value's encoding, without the leading type tag: what a writer copies.
  std::span<const uint8_t> encoded() const noexcept { return encoded_; }

  // Scalars. Integers convert between widths only when the value fits;
  // nullopt when the type does not match.
  std::optional<uint64_t> as_uint() const noexcept;
  std::optional<int64_t> as_int() const noexcept;
  std::optional<double> as_float() const noexcept;
  std::optional<bool> as_bool() const noexcept;
  std::optional<std::string_view> as_string() const noexcept;

  // Arrays.
  bool is_array() const noexcept { return type_ == GgufType::kArray; }
  GgufType array_type() const noexcept;     // element type
  uint64_t array_size() const noexcept;     // element count
  std::optional<std::vector<std::string_view>> as_string_array() const;
  std::optional<std::vector<int64_t>> as_int_array() const;

 private:
  GgufType type_ = GgufType::kUint8;
  std::span<const uint8_t> encoded_;
};

struct GgufKv {
  std::string_view key;
  GgufValue value;
  uint64_t offset = 0;  // where the KV starts in the file
};

struct GgufTensorInfo {
  std::string_view name;
  uint32_t type = 0;                // ggml type id
  std::vector<int64_t> ne;          // dims, ne[0] fastest; 1..4 of them (directory_only: 1..8)
  uint64_t offset = 0;              // relative to the data section
  uint64_t bytes = 0;               // payload bytes
  uint64_t file_offset = 0;         // absolute: data_offset + offset
  uint64_t info_offset = 0;         // where the tensor info starts in the file
};

// Bounds beyond the file's own size; the defaults accept every real model.
struct GgufLimits {
  uint64_t max_string_bytes = 256ull << 20;  // one string value
  uint64_t max_key_bytes = 65535;
  uint64_t max_array_elements = 1ull << 32;
  uint64_t max_kv_count = 1ull << 20;
  uint64_t max_tensor_count = 1ull << 22;
  uint32_t max_array_depth = 8;              // nested arrays
  // The file holds a tensor directory without the tensors' bytes (a package
  // schema 2 metadata carrier): tensor offsets are checked for alignment
  // only, not against the file, nor against each other. The caller decides
  // what the file's payload must be (a carrier's: none). Tensors may have up
  // to kGgufDirectoryMaxDims dimensions, and a tensor with a zero dimension
  // (no bytes: a placeholder the reference's catalog skips) needs no aligned
  // offset.
  bool directory_only = false;
};

struct GgufPrefix;

class GgufFile {
 public:
  // Maps and parses `path`. Throws Error(kInvalidInput) naming the file, byte
  // offset and problem; Error(kIo/kNotFound) when the file cannot be read.
  static GgufFile open(const std::filesystem::path& path, const GgufLimits& limits = {});
  // Parses bytes held by the caller (they must outlive the result); `name`
  // appears in errors. Used by the fuzzer and by tests.
  static GgufFile parse(std::span<const uint8_t> bytes, std::string name, const GgufLimits& limits = {});
  // The header of a file of `file_size` bytes from its first bytes,
  // `prefix` (a download still arriving): the header when the prefix holds
  // all of it, else how many bytes from the start it needs at least, as
  // what the prefix holds says (a length or a count read there). Whatever
  // the prefix can decide is decided: a bad magic or version, a count or a
  // length that cannot fit in `file_size`, a malformed KV within the
  // prefix each throw what parse() of the whole file would, so a caller
  // never fetches more of a file its first bytes refuse. The tensors'
  // bytes are not checked (limits.directory_only is set). The result's
  // views point into `prefix`.
  static GgufPrefix parse_prefix(std::span<const uint8_t> prefix, uint64_t file_size, std::string name,
                                 GgufLimits limits = {});

  const std::string& name() const noexcept { return name_; }
  const std::filesystem::path& path() const noexcept { return path_; }
  // The open file (null for parse()): streaming readers pread from it.
  const std::shared_ptr<const MappedFile>& file() const noexcept { return file_; }

  uint32_t version() const noexcept { return version_; }
  uint32_t alignment() const noexcept { return alignment_; }
  uint64_t header_end() const noexcept { return header_end_; }   // after tensor infos
  uint64_t data_offset() const noexcept { return data_offset_; } // header_end padded
  uint64_t file_size() const noexcept { return bytes_.size(); }

  const std::vector<GgufKv>& kvs() const noexcept { return kvs_; }
  const GgufKv* find_kv(std::string_view key) const noexcept;
  std::optional<std::string_view> get_string(std::string_view key) const noexcept;
  std::optional<uint64_t> get_uint(std::string_view key) const noexcept;

  const std::vector<GgufTensorInfo>& tensors() const noexcept { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const noexcept;
  uint64_t tensor_bytes_total() const noexcept;
  // A view of a tensor's bytes in the map (touches pages: for small tensors
  // and tests; stream big ones through file()->pread_exact).
  std::span<const uint8_t> tensor_data(const GgufTensorInfo& t) const noexcept;

  // Helpers for common keys. architecture(): "general.architecture" or "".
  std::string_view architecture() const noexcept;
  std::optional<uint64_t> block_count() const noexcept;      // <arch>.block_count
  std::optional<uint64_t> embedding_length() const noexcept; // <arch>.embedding_length

 private:
  GgufFile() = default;
  // `file_size`: the size of the file bytes_ begins (bytes_.size() for a whole file).
  void parse_all(const GgufLimits& limits, uint64_t file_size);

  std::string name_;
  std::filesystem::path path_;
  std::shared_ptr<const MappedFile> file_;
  std::span<const uint8_t> bytes_;
  uint32_t version_ = 0;
  uint32_t alignment_ = kGgufDefaultAlignment;
  uint64_t header_end_ = 0;
  uint64_t data_offset_ = 0;
  std::vector<GgufKv> kvs_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string_view, size_t> kv_index_;
  std::unordered_map<std::string_view, size_t> tensor_index_;
};

// GgufFile::parse_prefix's answer.
struct GgufPrefix {
  std::optional<GgufFile> file;  // the header, when the prefix held all of it
  uint64_t needed = 0;           // else: the bytes from the file's start it needs at least (more than the prefix)
};

// Split shards: "PREFIX-00001-of-00003.gguf".
struct SplitName {
  std::string prefix;   // path prefix before "-NNNNN-of-MMMMM.gguf"
  uint32_t index = 0;   // 1-based
  uint32_t count = 0;
};
std::optional<SplitName> parse_split_name(const std::filesystem::path& path);
std::filesystem::path split_path(const std::string& prefix, uint32_t index, uint32_t count);

// Split keys a shard carries (split.no is 0-based in the file).
struct SplitInfo {
  uint32_t no = 0;
  uint32_t count = 0;
  uint64_t tensors_count = 0;
};
// nullopt when the file has no split.* keys; throws when they are malformed.
std::optional<SplitInfo> read_split_info(const GgufFile& f);

bool is_valid_utf8(std::string_view s) noexcept;

}  // namespace skippy
