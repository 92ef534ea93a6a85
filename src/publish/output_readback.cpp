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
#include "xet/file_hasher.h"

namespace skippy::detail {

OutputHasher::OutputHasher(bool xet_chunks) {
  if (!xet_chunks) return;
  chunks_ = std::make_shared<std::vector<ContentChunk>>();
  xet_ = std::make_unique<xet::FileHasher>(
      [c = chunks_.get()](const xet::ChunkInfo& info, std::span<const uint8_t>) {
        ContentChunk k;
        std::copy(info.hash.bytes.begin(), info.hash.bytes.end(), k.hash.begin());
        k.length = info.length;
        c->push_back(k);
      },
      /*with_sha256=*/false);
}
OutputHasher::~OutputHasher() = default;
OutputHasher::OutputHasher(OutputHasher&&) noexcept = default;
OutputHasher& OutputHasher::operator=(OutputHasher&&) noexcept = default;

void OutputHasher::update(std::span<const uint8_t> bytes) {
  sha_.update(bytes);
  if (xet_) xet_->update(bytes);
}

OutputDigest OutputHasher::finish() {
  OutputDigest d;
  d.sha256 = sha_.hex_digest();
  if (xet_) {
    (void)xet_->finish();
    chunks_->shrink_to_fit();
    d.xet_chunks = std::move(chunks_);
    xet_.reset();
  }
  return d;
}

OutputDigest digest_written_output(const std::filesystem::path& path, uint64_t size, bool xet_chunks) {
  const Fd fd = open_regular_file(path);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw_io(path.string() + ": cannot stat");
  if (static_cast<uint64_t>(st.st_size) != size) {
    throw_invalid(path.string() + ": wrote " + std::to_string(st.st_size) + " bytes, expected " + std::to_string(size));
  }
  OutputHasher h(xet_chunks);
  std::vector<uint8_t> buf(static_cast<size_t>(std::min<uint64_t>(size, uint64_t{1} << 20)));
  for (uint64_t off = 0; off < size;) {
    const std::span<uint8_t> b(buf.data(), static_cast<size_t>(std::min<uint64_t>(buf.size(), size - off)));
    pread_exact(fd.get(), off, b, path.string());
    h.update(b);
    off += b.size();
  }
  return h.finish();
}

std::string hash_written_output(const std::filesystem::path& path, uint64_t size) {
  return digest_written_output(path, size, false).sha256;
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
