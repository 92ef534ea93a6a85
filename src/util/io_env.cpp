#include "util/io_env.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

namespace skippy::detail {
namespace {

class SystemIo final : public IoEnv {
 public:
  ssize_t write(int fd, const void* data, size_t n) override { return ::write(fd, data, n); }
  ssize_t pwrite(int fd, const void* data, size_t n, off_t offset) override { return ::pwrite(fd, data, n, offset); }
  ssize_t copy_file_range(int fd_in, off64_t* off_in, int fd_out, off64_t* off_out, size_t n, unsigned flags) override {
    return ::copy_file_range(fd_in, off_in, fd_out, off_out, n, flags);
  }
  int fsync(int fd) override { return ::fsync(fd); }
  int rename(const char* from, const char* to) override { return std::rename(from, to); }
  int exchange(const char* a, const char* b) override { return ::renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE); }
};

SystemIo g_system;

}  // namespace

IoEnv& system_io() noexcept { return g_system; }

}  // namespace skippy::detail
