#include "util/io_env.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

namespace skippy::detail {
namespace {

ssize_t sys_write(int fd, const void* data, size_t n) { return ::write(fd, data, n); }
ssize_t sys_pwrite(int fd, const void* data, size_t n, off_t offset) { return ::pwrite(fd, data, n, offset); }
ssize_t sys_copy_file_range(int fd_in, off64_t* off_in, int fd_out, off64_t* off_out, size_t n, unsigned flags) {
  return ::copy_file_range(fd_in, off_in, fd_out, off_out, n, flags);
}
int sys_fsync(int fd) { return ::fsync(fd); }
int sys_rename(const char* from, const char* to) { return std::rename(from, to); }
int sys_exchange(const char* a, const char* b) { return ::renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE); }

constexpr IoCalls kSystem{sys_write, sys_pwrite, sys_copy_file_range, sys_fsync, sys_rename, sys_exchange};
std::atomic<const IoCalls*> g_calls{&kSystem};

}  // namespace

const IoCalls& io() noexcept { return *g_calls.load(std::memory_order_acquire); }
const IoCalls& system_io() noexcept { return kSystem; }
void set_io(const IoCalls* calls) noexcept { g_calls.store(calls ? calls : &kSystem, std::memory_order_release); }

}  // namespace skippy::detail
