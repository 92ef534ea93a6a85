#include "skippy/file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "skippy/error.h"

namespace skippy {

void throw_invalid(const std::string& message) { throw Error(ErrorKind::kInvalidInput, message); }
void throw_not_found(const std::string& message) { throw Error(ErrorKind::kNotFound, message); }
void throw_io(const std::string& message) {
  throw Error(ErrorKind::kIo, message + ": " + std::strerror(errno));
}

std::shared_ptr<const MappedFile> MappedFile::open(const std::filesystem::path& path) {
  std::shared_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f->fd_ < 0) {
    if (errno == ENOENT) throw_not_found(path.string() + ": no such file");
    throw_io(path.string() + ": cannot open");
  }
  struct stat st {};
  if (::fstat(f->fd_, &st) != 0) throw_io(path.string() + ": cannot stat");
  if (!S_ISREG(st.st_mode)) throw_invalid(path.string() + ": not a regular file");
  f->size_ = static_cast<uint64_t>(st.st_size);
  if (f->size_ > 0) {
    void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_SHARED, f->fd_, 0);
    if (p == MAP_FAILED) throw_io(path.string() + ": cannot map");
    f->data_ = p;
  }
  return f;
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(data_, size_);
  if (fd_ >= 0) ::close(fd_);
}

void MappedFile::pread_exact(uint64_t offset, std::span<uint8_t> buf) const {
  size_t done = 0;
  while (done < buf.size()) {
    const ssize_t n = ::pread(fd_, buf.data() + done, buf.size() - done,
                              static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_io(path_.string() + ": read failed at byte " + std::to_string(offset + done));
    }
    if (n == 0) {
      throw_invalid(path_.string() + ": unexpected end of file at byte " +
                    std::to_string(offset + done) + " (file changed while reading?)");
    }
    done += static_cast<size_t>(n);
  }
}

void MappedFile::advise_sequential() const noexcept {
  ::posix_fadvise(fd_, 0, 0, POSIX_FADV_SEQUENTIAL);
}

namespace {
std::string random_suffix() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s(12, '0');
  for (auto& c : s) c = kHex[rng() & 15];
  return s;
}
}  // namespace

AtomicFile::AtomicFile(std::filesystem::path final_path) : final_(std::move(final_path)) {
  // Hidden partial name in the same directory, so rename() is atomic and no
  // reader ever trusts it.
  temp_ = final_.parent_path() / ("." + final_.filename().string() + ".partial-" + random_suffix());
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) throw_io(temp_.string() + ": cannot create");
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_.c_str());
}

void AtomicFile::write_all(std::span<const uint8_t> data) {
  synced_ = false;
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd_, data.data() + done, data.size() - done);
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
    const ssize_t n = ::pwrite(fd_, data.data() + done, data.size() - done,
                               static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_io(temp_.string() + ": write failed");
    }
    done += static_cast<size_t>(n);
  }
}

void AtomicFile::preallocate(uint64_t size) {
  if (size == 0) return;
  if (::fallocate(fd_, 0, 0, static_cast<off_t>(size)) == 0) return;
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) throw_io(temp_.string() + ": cannot size to " + std::to_string(size));
}

void AtomicFile::copy_range(const MappedFile& src, uint64_t src_offset, uint64_t offset,
                            std::span<const uint8_t> same_bytes) {
  synced_ = false;
  size_t done = 0;
  while (done < same_bytes.size()) {
    off64_t in = static_cast<off64_t>(src_offset + done);
    off64_t out = static_cast<off64_t>(offset + done);
    const ssize_t n = ::copy_file_range(src.fd(), &in, fd_, &out, same_bytes.size() - done, 0);
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
  (void)::sync_file_range(fd_, static_cast<off64_t>(offset), static_cast<off64_t>(len), SYNC_FILE_RANGE_WRITE);
}

void AtomicFile::sync() {
  if (::fsync(fd_) != 0) throw_io(temp_.string() + ": fsync failed");
  synced_ = true;
}

void AtomicFile::commit(bool sync_directory) {
  if (!synced_) sync();
  if (::close(fd_) != 0) {
    fd_ = -1;
    throw_io(temp_.string() + ": close failed");
  }
  fd_ = -1;
  if (::rename(temp_.c_str(), final_.c_str()) != 0) throw_io(final_.string() + ": rename failed");
  committed_ = true;
  if (sync_directory) fsync_directory(final_.parent_path().empty() ? "." : final_.parent_path());
}

std::string read_small_file(const std::filesystem::path& path, uint64_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) throw_not_found(path.string() + ": no such file");
    throw_io(path.string() + ": cannot open");
  }
  std::string out;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw_invalid(path.string() + ": not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    throw_invalid(path.string() + ": " + std::to_string(st.st_size) + " bytes exceeds the limit of " +
                  std::to_string(max_bytes));
  }
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      throw_io(path.string() + ": read failed");
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max_bytes) {
      ::close(fd);
      throw_invalid(path.string() + ": grew past the limit of " + std::to_string(max_bytes) + " bytes");
    }
  }
  ::close(fd);
  return out;
}

void write_file_atomic(const std::filesystem::path& path, std::string_view contents) {
  AtomicFile f(path);
  f.write_all({reinterpret_cast<const uint8_t*>(contents.data()), contents.size()});
  f.commit();
}

void fsync_directory(const std::filesystem::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;  // best effort: some filesystems refuse directory fds
  ::fsync(fd);
  ::close(fd);
}

}  // namespace skippy
