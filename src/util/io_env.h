// The file-system calls that decide what a crash leaves behind (writing
// bytes, making them durable, giving a file its final name), behind one
// interface, in the spirit of LevelDB's Env: an operation takes the IoEnv
// it writes through (materialize: MaterializeOptions::io_env, as LevelDB's
// Options::env), the system's by default. Tests pass one that fails the
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
// The IoEnv of a write that was given none: the system's, unless a test
// made another the default for the operations that do not take one yet
// (write-package, the blob writer, convert-package).
IoEnv& io() noexcept;
// `env`, or io() without one.
inline IoEnv& io(IoEnv* env) noexcept { return env ? *env : io(); }
// Makes `env` the default (nullptr: the system's again). For tests, between
// operations: not while another thread is writing.
void set_io(IoEnv* env) noexcept;

}  // namespace detail
}  // namespace skippy
