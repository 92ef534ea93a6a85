// The file-system calls that decide what a crash leaves behind (writing
// bytes, making them durable, giving a file its final name), routed through
// one table, in the spirit of LevelDB's Env: tests install a table that fails
// the Nth call or records what was synced (tests/fault_io.h), and check that
// every writer leaves either the old state or a complete new one. One
// indirect call per system call, nothing per byte. Internal to the library.
#pragma once

#include <sys/types.h>

namespace skippy::detail {

struct IoCalls {
  ssize_t (*write)(int fd, const void* data, size_t n);
  ssize_t (*pwrite)(int fd, const void* data, size_t n, off_t offset);
  ssize_t (*copy_file_range)(int fd_in, off64_t* off_in, int fd_out, off64_t* off_out, size_t n, unsigned flags);
  int (*fsync)(int fd);
  int (*rename)(const char* from, const char* to);
  // Swaps two existing paths atomically (renameat2 RENAME_EXCHANGE); -1 with
  // errno EINVAL or ENOSYS where the file system cannot.
  int (*exchange)(const char* a, const char* b);
};

// The calls in use: the system's unless a test installed others.
const IoCalls& io() noexcept;
// The system's own calls.
const IoCalls& system_io() noexcept;
// Installs `calls` (nullptr: the system's again). For tests, between
// operations: not while another thread is writing.
void set_io(const IoCalls* calls) noexcept;

}  // namespace skippy::detail
