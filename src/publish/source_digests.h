// What write-package --validate needs from a source it never stores
// (write-package --stream): each source tensor's SHA-256, taken from the
// bytes as they arrive, and each shard's SHA-256 as the pass computed it
// (already checked against the Hub's LFS oid). With these, every fragment
// is checked on its own, re-read from disk, before it is uploaded and
// deleted (detail::PackageCheck, validator_internal.h). Internal to the
// publish library.
//
// Thread-safety: observe() is called by one thread at a time (the pass's
// reader); the rest may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "skippy/model_source.h"
#include "util/sha256.h"

namespace skippy::detail {

class SourceDigests {
 public:
  // The source's tensor extents (the placeholders' headers suffice).
  explicit SourceDigests(const ModelSource& model);
  SourceDigests(const SourceDigests&) = delete;
  SourceDigests& operator=(const SourceDigests&) = delete;

  // Bytes of `shard` at `offset`, in file order (each shard from 0, one
  // after the other): feeds the digest of every tensor they overlap.
  void observe(size_t shard, uint64_t offset, std::span<const uint8_t> bytes);
  void set_shard_sha256(size_t shard, const std::string& sha256);

  // model.tensors()[index]'s digest, once its last byte went by.
  std::optional<std::string> tensor_sha256(size_t index) const;
  std::optional<std::string> shard_sha256(size_t shard) const;

 private:
  const ModelSource& model_;
  std::vector<std::vector<size_t>> by_shard_;  // tensor indexes by offset, per shard
  std::vector<size_t> cursor_;                 // per shard: first tensor not yet complete
  std::vector<std::unique_ptr<Sha256>> open_;  // per tensor, while its bytes arrive
  mutable std::mutex mu_;
  std::vector<std::optional<std::string>> tensor_sha_, shard_sha_;  // under mu_
};

}  // namespace skippy::detail
