// The file-system calls that decide what a crash leaves behind (writing
// bytes, making them durable, giving a file its final name), behind one
// interface, in the spirit of LevelDB's Env: an operation takes the IoEnv
// it writes through in its options, as LevelDB's Options::env
// (MaterializeOptions, WritePackageOptions, the convert options; downloads:
// Sources::io_env, carried by the HfRepoCache the blob writer writes into),
// nullptr meaning the system's. The smaller writers (sign-package,
// restamp-package, validate-package --write-result, export, prune, peer
// identities) take none and write through the system's. There is no
// process-wide default to swap: tests hand the operation one that fails the
// Nth call or records what was synced (tests/fault_io.h), and check that
// every writer leaves either the old state or a complete new one. One
// virtual call per system call, nothing per byte. Internal to the library.
//
// Thread-safety: the system's IoEnv is stateless and safe from any thread;
// an operation calls its IoEnv from the threads it writes on.
#pragma once

#include <sys/types.h>

namespace skippy {

class IoEnv {
 public:
  virtual ~IoEnv() = default;
  virtual ssize_t write(int fd, const void* data, size_t n) = 0;
  virtual ssize_t pwrite(int fd, const void* data, size_t n, off_t offset) = 0;
  virtual ssize_t copy_file_range(int fd_in, off64_t* off_in, int fd_out, off64_t* off_out, size_t n,
                                  unsigned flags) = 0;
  virtual int fsync(int fd) = 0;
  virtual int rename(const char* from, const char* to) = 0;
  // Swaps two existing paths atomically (renameat2 RENAME_EXCHANGE); -1 with
  // errno EINVAL or ENOSYS where the file system cannot.
  virtual int exchange(const char* a, const char* b) = 0;
};

namespace detail {

// The system's own calls.
IoEnv& system_io() noexcept;
// The IoEnv an operation was given: `env`, or the system's without one.
inline IoEnv& io(IoEnv* env) noexcept { return env ? *env : system_io(); }

}  // namespace detail
}  // namespace skippy
