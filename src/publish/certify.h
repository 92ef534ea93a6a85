// Certifying a schema 2 tensor table against the original source (see
// skippy/package_convert.h). Internal to the publish library.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "skippy/gguf.h"
#include "skippy/model_source.h"
#include "skippy/package_catalog.h"

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

// certify()'s input for a built catalog of the package in `package_dir`.
CertInput cert_input_of(const PackageCatalog& catalog, const std::filesystem::path& package_dir, bool hash_artifacts);
// What certify() checks without the bytes (coverage, types, dims, sizes,
// layer count, the carrier's KVs); per source tensor its index in
// in.tensors for those `catalogued` lists.
std::vector<size_t> check_catalog_structure(const CertInput& in, const ModelSource& model, const std::string& src_name,
                                            std::vector<size_t>& catalogued);
// The root's source files are these shards, of these sizes and digests.
void check_source_identity(const CertInput& in, const ModelSource& model, const std::vector<std::string>& sha,
                           const std::vector<uint64_t>& bytes);

class SourceDigests;

// certify() one artifact at a time, each as soon as it is complete on disk
// (write-package --schema 2 --validate when the parts leave the disk as they
// are uploaded, or the source is streamed and never stored): a part is read
// back (pread, its pages dropped from the cache first), parsed by the GGUF
// reader, and every tensor in it checked against the source (type, dims,
// size, and its bytes: compared with the source's mapping, or with
// `digests` taken from the stream), the whole file against the writer's
// SHA-256; finish() then checks the finished catalog's structure against
// the source and that each of its tensors is located where a checked part
// holds it. Throws Error(kIntegrity) naming what differs. One call at a time.
class CertifyAsWritten {
 public:
  CertifyAsWritten(const ModelSource& model, const SourceDigests* digests) : model_(model), digests_(digests) {}
  // A payload part (tensors) complete at `path`.
  void check_part(const std::filesystem::path& path, uint64_t bytes, const std::string& sha256);
  // Another artifact (the carrier, a sidecar, a publisher file): its size and SHA-256.
  void check_file(const std::filesystem::path& path, uint64_t bytes, const std::string& sha256);
  CertOutput finish(const PackageCatalog& catalog, const std::filesystem::path& package_dir);

 private:
  struct Located {
    std::filesystem::path file;
    uint64_t offset = 0, size = 0;
  };
  const ModelSource& model_;
  const SourceDigests* digests_;
  std::map<std::string, Located, std::less<>> located_;        // tensor name -> where a checked part holds it
  std::map<std::filesystem::path, std::string> checked_;      // file -> the SHA-256 it was checked against
  uint64_t compared_ = 0, hashed_ = 0;
};

}  // namespace skippy::detail
