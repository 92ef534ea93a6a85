#include "publish/output_readback.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include "skippy/error.h"
#include "util/file.h"
#include "util/sha256.h"
#include "util/parallel.h"

namespace skippy::detail {

std::string hash_written_output(const std::filesystem::path& path, uint64_t size) {
  const Fd fd = open_regular_file(path);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw_io(path.string() + ": cannot stat");
  if (static_cast<uint64_t>(st.st_size) != size) {
    throw_invalid(path.string() + ": wrote " + std::to_string(st.st_size) + " bytes, expected " + std::to_string(size));
  }
  return sha256_file(path);
}

std::vector<std::string> hash_written_outputs(const std::vector<std::pair<std::filesystem::path, uint64_t>>& files,
                                              unsigned threads) {
  std::vector<std::string> out(files.size());
  std::atomic<size_t> next{0};
  std::exception_ptr err;
  std::mutex err_mu;
  auto worker = [&] {
    for (size_t i; (i = next.fetch_add(1)) < files.size();) {
      try {
        out[i] = hash_written_output(files[i].first, files[i].second);
      } catch (...) {
        std::lock_guard g(err_mu);
        if (!err) err = std::current_exception();
        return;
      }
    }
  };
  std::vector<std::thread> ts;
  const size_t n = std::min<size_t>(worker_threads(threads), files.size());
  for (size_t t = 1; t < n; ++t) ts.emplace_back(worker);
  if (!files.empty()) worker();
  for (auto& t : ts) t.join();
  if (err) std::rethrow_exception(err);
  return out;
}

}  // namespace skippy::detail
