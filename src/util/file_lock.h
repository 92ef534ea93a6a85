// An exclusive flock(2) on a lock file, held for the object's lifetime:
// the cross-process lock of the materialize cache and of the Hugging Face
// cache (huggingface_hub's filelock uses flock too, so the two interlock).
// The lock file may be unlinked by a pruner while we wait on it; after
// getting the lock we check the path still names the inode we locked, else
// retry. Internal to the library.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <optional>
#include <utility>

#include "skippy/error.h"
#include "util/file.h"

namespace skippy::detail {

class FileLock {
 public:
  // Blocks until the lock is ours (wait) or returns nullopt when another
  // process holds it (!wait). Creates the lock file (not its directory).
  // `mode` for a new lock file (before the umask): 0666 where other users'
  // tools share the directory, as huggingface_hub's cache is shared.
  static std::optional<FileLock> acquire(const std::filesystem::path& path, bool wait, mode_t mode = 0644) {
    for (;;) {
      Fd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, mode));
      if (!fd) throw_io(path.string() + ": cannot open the lock file");
      FileLock lock(std::move(fd), path);
      int rc;
      do {
        rc = ::flock(lock.fd_.get(), LOCK_EX | (wait ? 0 : LOCK_NB));
      } while (rc != 0 && errno == EINTR);
      if (rc != 0) {
        if (!wait && errno == EWOULDBLOCK) return std::nullopt;
        throw_io(path.string() + ": cannot lock");
      }
      struct stat held {}, named {};
      if (::fstat(lock.fd_.get(), &held) != 0) throw_io(path.string() + ": cannot stat the lock file");
      if (::stat(path.c_str(), &named) == 0 && named.st_dev == held.st_dev && named.st_ino == held.st_ino) {
        return lock;
      }
      // Unlinked while we waited: lock the new file instead.
    }
  }
  FileLock(FileLock&&) noexcept = default;
  FileLock& operator=(FileLock&&) = delete;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  ~FileLock() = default;  // closing the descriptor releases the flock
  // Removes the lock file while still holding it (prune).
  void unlink_file() noexcept { ::unlink(path_.c_str()); }

 private:
  FileLock(Fd fd, std::filesystem::path path) : fd_(std::move(fd)), path_(std::move(path)) {}
  Fd fd_;
  std::filesystem::path path_;
};

}  // namespace skippy::detail
