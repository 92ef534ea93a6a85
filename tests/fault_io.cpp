// See fault_io.h.
#include "fault_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/io_env.h"

namespace skippy::test {
namespace {

std::string path_of_fd(int fd) {
  char buf[4096];
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

int index_of(FaultyIo::Op op) { return op == FaultyIo::kWrite ? 0 : op == FaultyIo::kFsync ? 1 : 2; }

}  // namespace

ssize_t FaultyIo::write(int fd, const void* data, size_t n) {
  int err = 0;
  if (!before(kWrite, fd, &err)) {
    errno = err;
    return -1;
  }
  return detail::system_io().write(fd, data, n);
}

ssize_t FaultyIo::pwrite(int fd, const void* data, size_t n, off_t offset) {
  int err = 0;
  if (!before(kWrite, fd, &err)) {
    errno = err;
    return -1;
  }
  return detail::system_io().pwrite(fd, data, n, offset);
}

ssize_t FaultyIo::copy_file_range(int in, off64_t* off_in, int out, off64_t* off_out, size_t n, unsigned flags) {
  int err = 0;
  if (!before(kWrite, out, &err)) {
    errno = err;
    return -1;
  }
  return detail::system_io().copy_file_range(in, off_in, out, off_out, n, flags);
}

int FaultyIo::fsync(int fd) {
  int err = 0;
  if (!before(kFsync, fd, &err)) {
    errno = err;
    return -1;
  }
  const int r = detail::system_io().fsync(fd);
  if (r == 0) after_fsync(fd);
  return r;
}

int FaultyIo::rename(const char* from, const char* to) {
  int err = 0;
  if (!before(kRename, -1, &err)) {
    errno = err;
    return -1;
  }
  const int r = detail::system_io().rename(from, to);
  if (r == 0) after_rename(from, to);
  return r;
}

int FaultyIo::exchange(const char* a, const char* b) {
  int err = 0;
  if (!before(kRename, -1, &err)) {
    errno = err;
    return -1;
  }
  const int r = detail::system_io().exchange(a, b);
  if (r == 0) after_exchange(a, b);
  return r;
}

void FaultyIo::fail_nth(uint64_t n, unsigned ops, int err) {
  std::lock_guard g(mu_);
  fail_at_ = n;
  fail_ops_ = ops;
  fail_err_ = err;
  crash_ = false;
}

void FaultyIo::crash_at(uint64_t n, unsigned ops) {
  std::lock_guard g(mu_);
  fail_at_ = n;
  fail_ops_ = ops;
  fail_err_ = EIO;
  crash_ = true;
}

uint64_t FaultyIo::count(unsigned ops) const {
  std::lock_guard g(mu_);
  uint64_t n = 0;
  for (const Op op : {kWrite, kFsync, kRename}) {
    if (ops & op) n += counts_[index_of(op)];
  }
  return n;
}

bool FaultyIo::fired() const {
  std::lock_guard g(mu_);
  return fired_;
}

std::set<std::string> FaultyIo::paths() const {
  std::lock_guard g(mu_);
  std::set<std::string> out;
  for (const auto& [p, s] : files_) out.insert(p);
  return out;
}

bool FaultyIo::before(Op op, int fd, int* err) {
  std::lock_guard g(mu_);
  if (fd >= 0 && (op == kWrite || op == kFsync)) {
    const std::string p = path_of_fd(fd);
    if (!p.empty() && p.front() == '/') files_.try_emplace(p);
  }
  ++counts_[index_of(op)];
  if (crashed_) {
    *err = EIO;
    return false;
  }
  if ((fail_ops_ & op) == 0) return true;
  uint64_t seen = 0;
  for (const Op o : {kWrite, kFsync, kRename}) {
    if (fail_ops_ & o) seen += counts_[index_of(o)];
  }
  if (fail_at_ != 0 && seen == fail_at_) {
    fired_ = true;
    crashed_ = crash_;
    *err = fail_err_;
    return false;
  }
  return true;
}

void FaultyIo::after_fsync(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return;
  std::lock_guard g(mu_);
  const std::string p = path_of_fd(fd);
  if (!p.empty()) files_[p].synced = static_cast<uint64_t>(st.st_size);
}

void FaultyIo::after_rename(const char* from, const char* to) {
  // A file, or every file under a directory, moves.
  std::lock_guard g(mu_);
  const std::string pf = from, pt = to;
  std::map<std::string, FileState> moved;
  for (auto it = files_.begin(); it != files_.end();) {
    if (it->first == pf || it->first.starts_with(pf + "/")) {
      moved[pt + it->first.substr(pf.size())] = it->second;
      it = files_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& [p, st] : moved) files_[p] = st;
}

void FaultyIo::after_exchange(const char* a, const char* b) {
  // Files under either path (directories swap whole) trade places.
  std::lock_guard g(mu_);
  const std::string pa = a, pb = b;
  std::map<std::string, FileState> moved;
  for (auto it = files_.begin(); it != files_.end();) {
    const std::string& p = it->first;
    auto under = [&](const std::string& root) { return p == root || p.starts_with(root + "/"); };
    if (under(pa)) {
      moved[pb + p.substr(pa.size())] = it->second;
    } else if (under(pb)) {
      moved[pa + p.substr(pb.size())] = it->second;
    } else {
      ++it;
      continue;
    }
    it = files_.erase(it);
  }
  files_.merge(moved);
}

size_t FaultyIo::drop_unsynced() {
  std::lock_guard g(mu_);
  size_t cut = 0;
  for (const auto& [path, s] : files_) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (static_cast<uint64_t>(st.st_size) > s.synced) {
      if (::truncate(path.c_str(), static_cast<off_t>(s.synced)) == 0) ++cut;
    }
  }
  return cut;
}

}  // namespace skippy::test
