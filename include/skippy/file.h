// Files as the library touches them: read-only maps for headers, positional
// reads for streaming model bytes (so resident memory stays flat), and
// atomic output (temporary name, fsync, rename).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>

namespace skippy {

// A whole file opened read-only: an fd for pread() plus a lazy mmap for
// random access to headers. Pages are faulted in only where touched.
class MappedFile {
 public:
  // Throws Error(kIo / kNotFound) naming the path.
  static std::shared_ptr<const MappedFile> open(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::filesystem::path& path() const noexcept { return path_; }
  uint64_t size() const noexcept { return size_; }
  int fd() const noexcept { return fd_; }
  std::span<const uint8_t> bytes() const noexcept {
    return {static_cast<const uint8_t*>(data_), static_cast<size_t>(size_)};
  }
  // Reads exactly buf.size() bytes at `offset`; throws on error or short read.
  void pread_exact(uint64_t offset, std::span<uint8_t> buf) const;
  // Tells the kernel the range will be read sequentially / is no longer needed.
  void advise_sequential() const noexcept;

 private:
  MappedFile() = default;
  std::filesystem::path path_;
  int fd_ = -1;
  void* data_ = nullptr;
  uint64_t size_ = 0;
};

// Writes a file under a temporary name beside its final path; commit()
// fsyncs and renames it into place (and fsyncs the directory). Destroying an
// uncommitted AtomicFile removes the temporary.
class AtomicFile {
 public:
  explicit AtomicFile(std::filesystem::path final_path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  int fd() const noexcept { return fd_; }
  const std::filesystem::path& temp_path() const noexcept { return temp_; }
  const std::filesystem::path& final_path() const noexcept { return final_; }
  void write_all(std::span<const uint8_t> data);
  void pwrite_all(uint64_t offset, std::span<const uint8_t> data);
  // Sets the final size and reserves the blocks up front (fallocate, else a
  // sparse ftruncate): on ext4 this makes the writes that follow several
  // times faster than growing the file page by page.
  void preallocate(uint64_t size);
  // Copies `len` bytes of `src` at `src_offset` to `offset` in the kernel
  // (copy_file_range: no trip through user space, several times faster than
  // pwrite here). `same_bytes` must hold those bytes: it is written with
  // pwrite where the kernel cannot copy (another filesystem, old kernel).
  void copy_range(const MappedFile& src, uint64_t src_offset, uint64_t offset, std::span<const uint8_t> same_bytes);
  // Starts writing [offset, offset + len) back to disk without waiting for
  // it (sync_file_range), so the fsync at commit has little left to do.
  void start_writeback(uint64_t offset, uint64_t len) noexcept;
  // fsync now (several files can sync on several threads); commit() then
  // skips its own fsync.
  void sync();
  // fsync (unless sync() ran), rename into place, then fsync the directory
  // unless the caller will do that once for many files.
  void commit(bool sync_directory = true);

 private:
  std::filesystem::path final_;
  std::filesystem::path temp_;
  int fd_ = -1;
  bool committed_ = false;
  bool synced_ = false;
};

// Whole small files (manifests, JSON): refuses files over `max_bytes`.
std::string read_small_file(const std::filesystem::path& path, uint64_t max_bytes);
void write_file_atomic(const std::filesystem::path& path, std::string_view contents);
void fsync_directory(const std::filesystem::path& dir);

}  // namespace skippy
