// The second half of a pass's "hash after write" outputs
// (StreamOutput::hash_after_write, split_stream.h): a file whose pieces
// were written at offsets out of source order cannot be hashed front to
// back as it is written, so it is read back once complete. Internal to the
// package writer.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace skippy::detail {

// SHA-256 of the file at `path`, read back with pread in 1 MiB chunks; the
// file must hold exactly `size` bytes (Error naming it otherwise).
std::string hash_written_output(const std::filesystem::path& path, uint64_t size);

// The same for several (path, size) files, on up to `threads` threads;
// digests in the files' order. The first failure is rethrown.
std::vector<std::string> hash_written_outputs(const std::vector<std::pair<std::filesystem::path, uint64_t>>& files,
                                              unsigned threads);

}  // namespace skippy::detail
