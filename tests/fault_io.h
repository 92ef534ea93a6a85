// Fault injection through the library's I/O seam (src/util/io_env.h), in the
// spirit of LevelDB's fault-injection Env: an IoEnv that counts the calls that decide what
// a crash leaves (write, pwrite, copy_file_range, fsync, rename), fail the
// Nth, or "crash" at the Nth (it and every later one fail, as if the
// machine stopped there), then drop what was never fsynced, and look at
// what a reader would find.
//
// The model of a crash: a file keeps the bytes it had at its last fsync
// (none if it was never synced); renames and exchanges are kept (the
// writers fsync the directory after them). A test hands it to the operation
// in the operation's options (MaterializeOptions::io_env,
// WritePackageOptions::io_env, the convert options', the HfRepoCache a
// download writes into): only that operation writes through it, so tests
// may run side by side.
#pragma once

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "util/io_env.h"

namespace skippy::test {

class FaultyIo final : public IoEnv {
 public:
  enum Op : unsigned { kWrite = 1, kFsync = 2, kRename = 4, kAny = 7 };

  // Counts the calls (nothing fails yet).
  FaultyIo() = default;
  FaultyIo(const FaultyIo&) = delete;
  FaultyIo& operator=(const FaultyIo&) = delete;

  // The Nth call (1-based) of the kinds in `ops` fails with `err`; the
  // others go through.
  void fail_nth(uint64_t n, unsigned ops = kAny, int err = EIO);
  // The Nth call of the kinds in `ops`, and every call of any kind after
  // it, fail with EIO: the machine stopped there.
  void crash_at(uint64_t n, unsigned ops = kAny);
  // Calls of the kinds in `ops` seen so far.
  uint64_t count(unsigned ops = kAny) const;
  bool fired() const;  // a call was failed
  // Every path written or fsynced through it, under its name now (renames
  // and exchanges followed): what an operation given it wrote through it.
  std::set<std::string> paths() const;
  // The crash's aftermath: every file written through the seam is cut to
  // what its last fsync made durable. Returns how many files lost bytes.
  size_t drop_unsynced();

  // The IoEnv: each call counted, failed when its turn has come, else the system's.
  ssize_t write(int fd, const void* data, size_t n) override;
  ssize_t pwrite(int fd, const void* data, size_t n, off_t offset) override;
  ssize_t copy_file_range(int fd_in, off64_t* off_in, int fd_out, off64_t* off_out, size_t n, unsigned flags) override;
  int fsync(int fd) override;
  int rename(const char* from, const char* to) override;
  int exchange(const char* a, const char* b) override;

 private:
  bool before(Op op, int fd, int* err);
  void after_fsync(int fd);
  void after_rename(const char* from, const char* to);
  void after_exchange(const char* a, const char* b);

  struct FileState {
    uint64_t synced = 0;  // size at the last fsync
  };
  mutable std::mutex mu_;
  std::map<std::string, FileState> files_;  // by path
  uint64_t counts_[3] = {0, 0, 0};
  uint64_t fail_at_ = 0;
  unsigned fail_ops_ = kAny;
  int fail_err_ = EIO;
  bool crash_ = false;
  bool crashed_ = false;
  bool fired_ = false;
};

}  // namespace skippy::test
