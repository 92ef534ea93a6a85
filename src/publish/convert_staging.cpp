// The staging and install every convert-package direction shares
// (publish/writer_internal.h): the output directory checked, a locked
// staging directory beside it (a killed run's swept), and the complete
// package swapped into place in one step.
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "publish/writer_internal.h"
#include "skippy/error.h"
#include "util/file.h"
#include "util/io_env.h"

namespace skippy::detail {

namespace fs = std::filesystem;

// Where the output goes: refused early when it is there and not ours to replace.
void check_convert_out_dir(const fs::path& out, bool force) {
  refuse_hf_cache_snapshot(out, "--out-dir");
  std::error_code ec;
  if (!fs::exists(out, ec)) return;
  if (!fs::is_directory(out, ec)) throw_invalid(out.string() + ": exists and is not a directory");
  if (!force && !fs::is_empty(out, ec)) {
    throw_invalid(out.string() + ": output directory is not empty (use --force to replace it)");
  }
}

// Puts the complete staging directory in place. An existing `out` (checked
// empty, or --force) is swapped with it in one step where the file system
// can (a reader finds the old output or the new package, whenever a crash
// comes), else moved aside first; the old one is removed after.
void install_staged_dir(const fs::path& staging, const fs::path& given, IoEnv* env) {
  const fs::path out = clean_path(given);
  std::error_code ec;
  const fs::path parent = out.parent_path().empty() ? fs::path(".") : out.parent_path();
  if (fs::exists(out, ec)) {
    if (detail::io(env).exchange(staging.c_str(), out.c_str()) == 0) {
      fsync_directory(parent, env);
      fs::remove_all(staging, ec);  // the old output, now under the staging name
      return;
    }
    if (errno != EINVAL && errno != ENOSYS) {
      throw Error(ErrorKind::kIo, out.string() + ": cannot swap the converted package into place: " + std::strerror(errno));
    }
  }
  fs::path old;
  if (fs::exists(out, ec)) {
    old = temporary_path_for(out);
    if (detail::io(env).rename(out.c_str(), old.c_str()) != 0) {
      throw Error(ErrorKind::kIo, out.string() + ": cannot move aside: " + std::strerror(errno));
    }
  }
  if (detail::io(env).rename(staging.c_str(), out.c_str()) != 0) {
    const int err = errno;
    if (!old.empty()) (void)detail::io(env).rename(old.c_str(), out.c_str());
    throw Error(ErrorKind::kIo, out.string() + ": cannot rename the converted package into place: " + std::strerror(err));
  }
  fsync_directory(parent, env);
  if (!old.empty()) fs::remove_all(old, ec);
}

// `out` as a name in a directory: "v2/" and "v2" are the same output.
ConvertStaging::ConvertStaging(const fs::path& out_dir) {
  const fs::path out = clean_path(out_dir);  // "pkg/" stages beside pkg
  const fs::path parent = out.parent_path().empty() ? fs::path(".") : out.parent_path();
  const std::string prefix = "." + out.filename().string() + ".partial-";
  std::error_code ec;
  // A killed run's staging: no live run holds its lock (a run holds it from
  // just after creating the directory until it is renamed or removed).
  for (auto it = fs::directory_iterator(parent, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(prefix) || !is_temporary_name(name)) continue;
    std::error_code sec;
    if (!fs::is_directory(it->symlink_status(sec))) continue;
    Fd fd(::open(it->path().c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd || ::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) continue;  // a live run's
    fs::remove_all(it->path(), sec);
  }
  path_ = temporary_path_for(out);
  fs::create_directories(path_, ec);
  if (ec) throw Error(ErrorKind::kIo, path_.string() + ": cannot create: " + ec.message());
  lock_fd_ = ::open(path_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (lock_fd_ < 0 || ::flock(lock_fd_, LOCK_EX) != 0) throw_io(path_.string() + ": cannot lock the staging directory");
}

ConvertStaging::~ConvertStaging() {
  std::error_code ec;
  if (!keep && !path_.empty()) fs::remove_all(path_, ec);
  if (lock_fd_ >= 0) ::close(lock_fd_);
}
}  // namespace skippy::detail
