#include "util/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "skippy/error.h"
#include "util/io_env.h"

namespace skippy {

namespace fs = std::filesystem;

void Fd::reset(int fd) noexcept {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

void Fd::close(const fs::path& path) {
  const int fd = std::exchange(fd_, -1);
  if (fd >= 0 && ::close(fd) != 0 && errno != EINTR) throw_io(path.string() + ": close failed");
}

Fd open_regular_file(const fs::path& path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY));
  if (!fd) {
    if (errno == ENOENT) throw_not_found(path.string() + ": no such file");
    if (errno == ENXIO) throw_invalid(path.string() + ": not a regular file");
    throw_io(path.string() + ": cannot open");
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw_io(path.string() + ": cannot stat");
  if (!S_ISREG(st.st_mode)) {
    throw_invalid(path.string() + ": not a regular file" +
                  (S_ISDIR(st.st_mode) ? " (a directory)" : S_ISFIFO(st.st_mode) ? " (a FIFO)" : ""));
  }
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) != 0) throw_io(path.string() + ": cannot set flags");
  return fd;
}

namespace {

constexpr std::string_view kTemporaryMarker = ".partial-";
constexpr size_t kTemporarySuffixLength = 12;

std::string random_suffix() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s(kTemporarySuffixLength, '0');
  for (auto& c : s) c = kHex[rng() & 15];
  return s;
}

}  // namespace

fs::path clean_path(const fs::path& p) {
  if (p.empty()) return p;
  const auto strip = [](fs::path n) {
    while (!n.has_filename() && n.has_relative_path()) n = n.parent_path();  // "a/b/" -> "a/b"
    return n;
  };
  fs::path n = strip(p.lexically_normal());
  if (n.filename() == "." || n.filename() == "..") n = strip(fs::absolute(n).lexically_normal());
  return n;
}

fs::path temporary_path_for(const fs::path& final_path) {
  const fs::path target = clean_path(final_path);
  return target.parent_path() / ("." + target.filename().string() + std::string(kTemporaryMarker) + random_suffix());
}

bool is_temporary_name(std::string_view name) noexcept {
  const auto at = name.rfind(kTemporaryMarker);
  if (!name.starts_with('.') || at == std::string_view::npos || at < 2) return false;
  const auto suffix = name.substr(at + kTemporaryMarker.size());
  // Any hex suffix up to 32 digits: earlier versions used 16.
  return !suffix.empty() && suffix.size() <= 32 && suffix.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

std::shared_ptr<const MappedFile> MappedFile::open(const fs::path& path) {
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->fd_ = open_regular_file(path);
  struct stat st {};
  if (::fstat(f->fd_.get(), &st) != 0) throw_io(path.string() + ": cannot stat");
  f->size_ = static_cast<uint64_t>(st.st_size);
  if (f->size_ > 0) {
    void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_SHARED, f->fd_.get(), 0);
    if (p == MAP_FAILED) throw_io(path.string() + ": cannot map");
    f->data_ = p;
  }
  return f;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(data_, size_);
}

void pread_exact(int fd, uint64_t offset, std::span<uint8_t> buf, const std::string& what) {
  size_t done = 0;
  while (done < buf.size()) {
    const ssize_t n = ::pread(fd, buf.data() + done, buf.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_io(what + ": read failed at byte " + std::to_string(offset + done));
    }
    if (n == 0) {
      throw_invalid(what + ": unexpected end of file at byte " + std::to_string(offset + done) +
                    " (file changed while reading?)");
    }
    done += static_cast<size_t>(n);
  }
}

void MappedFile::pread_exact(uint64_t offset, std::span<uint8_t> buf) const {
  skippy::pread_exact(fd_.get(), offset, buf, path_.string());
}

void MappedFile::advise_sequential() const noexcept { ::posix_fadvise(fd_.get(), 0, 0, POSIX_FADV_SEQUENTIAL); }

AtomicFile::AtomicFile(fs::path final_path, Durability durability, IoEnv* env)
    : final_(std::move(final_path)), durability_(durability), env_(&detail::io(env)) {
  for (int attempt = 0;; ++attempt) {
    temp_ = temporary_path_for(final_);
    fd_.reset(::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (fd_) return;
    if (errno != EEXIST || attempt >= 8) throw_io(temp_.string() + ": cannot create");
  }
}

AtomicFile::~AtomicFile() {
  fd_.reset();
  if (!committed_) ::unlink(temp_.c_str());
}

void AtomicFile::write_all(std::span<const uint8_t> data) {
  synced_ = false;
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = env_->write(fd_.get(), data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_io(temp_.string() + ": write failed");
    }
    done += static_cast<size_t>(n);
  }
}

void AtomicFile::pwrite_all(uint64_t offset, std::span<const uint8_t> data) {
  synced_ = false;
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = env_->pwrite(fd_.get(), data.data() + done, data.size() - done, static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_io(temp_.string() + ": write failed");
    }
    done += static_cast<size_t>(n);
  }
}

void AtomicFile::preallocate(uint64_t size) {
  if (size == 0) return;
  if (::fallocate(fd_.get(), 0, 0, static_cast<off_t>(size)) == 0) return;
  if (errno == ENOSPC) throw_io(temp_.string() + ": cannot reserve " + std::to_string(size) + " bytes");
  if (::ftruncate(fd_.get(), static_cast<off_t>(size)) != 0) throw_io(temp_.string() + ": cannot size to " + std::to_string(size));
}

void AtomicFile::copy_range(const MappedFile& src, uint64_t src_offset, uint64_t offset,
                            std::span<const uint8_t> same_bytes) {
  synced_ = false;
  size_t done = 0;
  while (done < same_bytes.size()) {
    off64_t in = static_cast<off64_t>(src_offset + done);
    off64_t out = static_cast<off64_t>(offset + done);
    const ssize_t n = env_->copy_file_range(src.fd(), &in, fd_.get(), &out, same_bytes.size() - done, 0);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    // Unsupported here (EXDEV, EINVAL, ENOSYS, EOPNOTSUPP...) or no
    // progress: write the rest from the caller's copy.
    break;
  }
  if (done < same_bytes.size()) pwrite_all(offset + done, same_bytes.subspan(done));
}

void AtomicFile::start_writeback(uint64_t offset, uint64_t len) noexcept {
  if (len == 0) return;
  // Errors surface at the fsync; this is only a head start.
  (void)::sync_file_range(fd_.get(), static_cast<off64_t>(offset), static_cast<off64_t>(len), SYNC_FILE_RANGE_WRITE);
}

void AtomicFile::sync() {
  if (env_->fsync(fd_.get()) != 0) throw_io(temp_.string() + ": fsync failed");
  synced_ = true;
}

void AtomicFile::commit(bool sync_directory) {
  const bool durable = durability_ == Durability::kDurable;
  if (durable && !synced_) sync();
  fd_.close(temp_);
  if (env_->rename(temp_.c_str(), final_.c_str()) != 0) throw_io(final_.string() + ": rename failed");
  committed_ = true;
  if (durable && sync_directory) fsync_directory(final_.parent_path().empty() ? "." : final_.parent_path(), env_);
}

std::string read_small_file(const fs::path& path, uint64_t max_bytes) {
  const Fd fd = open_regular_file(path);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw_io(path.string() + ": cannot stat");
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    throw_invalid(path.string() + ": " + std::to_string(st.st_size) + " bytes exceeds the limit of " +
                  std::to_string(max_bytes));
  }
  std::string out;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_io(path.string() + ": read failed");
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max_bytes) {
      throw_invalid(path.string() + ": grew past the limit of " + std::to_string(max_bytes) + " bytes");
    }
  }
  return out;
}

void write_file_atomic(const fs::path& path, std::string_view contents, Durability durability, IoEnv* env) {
  AtomicFile f(path, durability, env);
  f.write_all({reinterpret_cast<const uint8_t*>(contents.data()), contents.size()});
  f.commit();
}

void fsync_directory(const fs::path& dir, IoEnv* env) {
  const Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return;  // best effort: some filesystems refuse directory fds
  detail::io(env).fsync(fd.get());
}

}  // namespace skippy
