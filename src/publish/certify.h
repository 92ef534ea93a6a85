// Certifying a schema 2 tensor table against the original source (see
// skippy/package_convert.h). Internal to the publish library.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "skippy/gguf.h"

namespace skippy::detail {

struct CertTensor {
  std::string name;
  uint32_t type = 0;
  std::vector<uint64_t> dims;
  size_t file = 0;          // index into CertInput::files
  uint64_t offset = 0;      // absolute, in that file
  uint64_t size = 0;
};

struct CertFile {
  std::filesystem::path path;
  std::string label;         // "artifact layer-00003 (layers/layer-00003.gguf)"
  uint64_t bytes = 0;
  std::string sha256;        // expected; checked when hash_files
};

struct CertSourceFile {
  std::string path;
  std::optional<uint64_t> bytes;
  std::optional<std::string> sha256;
};

struct CertInput {
  std::vector<CertFile> files;
  std::vector<CertTensor> tensors;
  const GgufFile* kvs = nullptr;            // the carrier (or the schema 1 metadata fragment)
  std::vector<CertSourceFile> source_files; // the root's files[], in shard order
  uint32_t layer_count = 0;
  bool hash_files = true;
};

struct CertOutput {
  std::vector<std::string> shard_sha256;  // every source shard, computed
  std::vector<uint64_t> shard_bytes;
  uint64_t tensors = 0;
  uint64_t bytes_compared = 0;
  uint64_t bytes_hashed = 0;
};

// Throws Error(kIntegrity) naming the tensor / file / key that differs.
CertOutput certify(const CertInput& in, const std::filesystem::path& source, unsigned threads,
                   const std::function<void(uint64_t, uint64_t)>& on_progress);

}  // namespace skippy::detail
