// What the write pass learns of an output's bytes as they go by
// (OutputHasher): the SHA-256 and, when an upload through Xet follows, the
// file's Xet chunks, so the upload reads only the bytes of new chunks.
// And the second half of a pass's "hash after write" outputs
// (StreamOutput::hash_after_write, split_stream.h): a file whose pieces
// were written at offsets out of source order cannot be hashed front to
// back as it is written, so it is read back once complete. Internal to the
// package writer.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "skippy/package_writer.h"
#include "util/sha256.h"

namespace skippy::xet {
class FileHasher;
}

namespace skippy::detail {

struct OutputDigest {
  std::string sha256;
  std::shared_ptr<const std::vector<ContentChunk>> xet_chunks;  // null unless asked for
};

// One output's bytes, fed in file order. Used by one thread at a time.
class OutputHasher {
 public:
  explicit OutputHasher(bool xet_chunks = false);
  ~OutputHasher();
  OutputHasher(OutputHasher&&) noexcept;
  OutputHasher& operator=(OutputHasher&&) noexcept;
  void update(std::span<const uint8_t> bytes);
  // The digest of everything fed; the hasher is spent after this.
  OutputDigest finish();

 private:
  Sha256 sha_;
  std::unique_ptr<xet::FileHasher> xet_;
  std::shared_ptr<std::vector<ContentChunk>> chunks_;
};

// The digest of the file at `path`, read back; with `xet_chunks` its Xet
// chunks too. The file must hold exactly `size` bytes (Error naming it
// otherwise).
OutputDigest digest_written_output(const std::filesystem::path& path, uint64_t size, bool xet_chunks);

// SHA-256 of the file at `path`, read back with pread in 1 MiB chunks; the
// file must hold exactly `size` bytes (Error naming it otherwise).
std::string hash_written_output(const std::filesystem::path& path, uint64_t size);

// The same for several (path, size) files, on up to `threads` threads;
// digests in the files' order. The first failure is rethrown.
std::vector<std::string> hash_written_outputs(const std::vector<std::pair<std::filesystem::path, uint64_t>>& files,
                                              unsigned threads);

}  // namespace skippy::detail
