// Files as the library touches them: one owning descriptor type, opening
// that refuses anything but a regular file before it can block (a FIFO in
// place of a manifest or a model must fail, not hang), read-only maps for
// headers, positional reads for streaming model bytes (so resident memory
// stays flat), and one atomic writer (temporary name, optional fsync,
// rename) with one temporary-name rule.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "util/io_env.h"

namespace skippy {

// An owned file descriptor: closed when destroyed (or reset), movable.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) noexcept : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  int release() noexcept { return std::exchange(fd_, -1); }
  void reset(int fd = -1) noexcept;
  // close(2) with its error reported (data written through the fd may fail
  // only here on some filesystems). Throws Error(kIo) naming `path`.
  void close(const std::filesystem::path& path);

 private:
  int fd_ = -1;
};

// Opens an existing file read-only and makes sure it is a regular file
// without ever blocking on it: the open is non-blocking, the type is checked
// with fstat, then the descriptor is made blocking again. Follows symlinks.
// Throws Error(kNotFound) when it does not exist, Error(kInvalidInput) when
// it is not a regular file (a directory, FIFO, socket or device), Error(kIo)
// otherwise; each names the path.
Fd open_regular_file(const std::filesystem::path& path);

// A path as the user meant it: lexically normal ("a/./b/../c" is "a/c"), with
// no trailing separator ("pkg/" and "pkg/." are "pkg"), and "." or ".." (or
// one ending in "..") made absolute, so it has a real last name to stage
// beside and rename. Empty stays empty.
std::filesystem::path clean_path(const std::filesystem::path& p);

// The one rule for temporary names: ".<final name>.partial-<12 hex>" beside
// the final path (clean_path()'s form: "pkg/" stages beside pkg, not in
// it), so a rename is atomic and no reader trusts the file.
std::filesystem::path temporary_path_for(const std::filesystem::path& final_path);
// True for a file name temporary_path_for() makes, or an earlier version
// made (".<name>.partial-<hex>"): leftovers of a crash.
bool is_temporary_name(std::string_view file_name) noexcept;

// Reads exactly buf.size() bytes of `fd` at `offset` (EINTR retried);
// throws Error naming `what` and the byte on a failed or short read (a
// file that changed while it was read).
void pread_exact(int fd, uint64_t offset, std::span<uint8_t> buf, const std::string& what);

// A whole file opened read-only: an fd for pread() plus a lazy mmap for
// random access to headers. Pages are faulted in only where touched.
class MappedFile {
 public:
  // Throws open_regular_file's errors, or Error(kIo) naming the path.
  static std::shared_ptr<const MappedFile> open(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::filesystem::path& path() const noexcept { return path_; }
  uint64_t size() const noexcept { return size_; }
  int fd() const noexcept { return fd_.get(); }
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
  Fd fd_;
  void* data_ = nullptr;
  uint64_t size_ = 0;
};

// How much an AtomicFile promises once commit() returns.
enum class Durability {
  // The bytes are on disk before the rename and the rename is on disk after
  // it: a crash leaves the old file or the whole new one.
  kDurable,
  // What cp promises: a reader never sees a partial file under the final
  // name; the bytes reach the disk with the kernel's writeback. A crash may
  // leave an empty or torn file under the final name on some filesystems,
  // so only for derived data that is checked before use.
  kRenameOnly,
};

// Writes a file under temporary_path_for(final_path); commit() (fsyncs per
// the durability and) renames it into place. Destroying an uncommitted
// AtomicFile removes the temporary. Its writes, fsyncs and rename go
// through `env` (src/util/io_env.h; nullptr: the system's): the writing
// operation's own. Thread-safety: pwrite_all, copy_range and
// start_writeback may run on several threads at once for disjoint ranges;
// everything else needs one thread at a time.
class AtomicFile {
 public:
  explicit AtomicFile(std::filesystem::path final_path, Durability durability = Durability::kDurable,
                      IoEnv* env = nullptr);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  int fd() const noexcept { return fd_.get(); }
  IoEnv& env() const noexcept { return *env_; }
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
  // kDurable: fsync (unless sync() ran), rename into place, then fsync the
  // directory unless the caller will do that once for many files.
  // kRenameOnly: close and rename.
  void commit(bool sync_directory = true);

 private:
  std::filesystem::path final_;
  std::filesystem::path temp_;
  Fd fd_;
  Durability durability_;
  IoEnv* env_;
  bool committed_ = false;
  std::atomic<bool> synced_{false};  // written by concurrent range writers
};

// Whole small files (manifests, JSON): refuses files over `max_bytes` and
// anything that is not a regular file (open_regular_file's errors).
std::string read_small_file(const std::filesystem::path& path, uint64_t max_bytes);
void write_file_atomic(const std::filesystem::path& path, std::string_view contents,
                       Durability durability = Durability::kDurable, IoEnv* env = nullptr);
void fsync_directory(const std::filesystem::path& dir, IoEnv* env = nullptr);

}  // namespace skippy
