// Xet chunking and hashing throughput on one core: what publishing through
// Xet adds to the write pass (docs/xet.md). Reads FILE with pread, 4 MiB at
// a time (as the uploader does), three ways:
//   chunk         gearhash CDC only (xet::Chunker)
//   chunk+blake3  chunks, chunk hashes, the file's Merkle hash (xet::FileHasher)
//   + sha256      the same plus the file's SHA-256 (what a git repository's shard needs)
// Each way runs RUNS times (default 3) after the page cache holds the file;
// the median is printed, one JSON object per line, for scripts/bench.sh.
//
//   build/bin/skippy-bench-xet FILE [RUNS]
#include <fcntl.h>
#include <unistd.h>

#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "xet/chunker.h"
#include "xet/file_hasher.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kReadSize = 4 << 20;

// Calls fn(buffer) for each 4 MiB read of the file; returns the bytes read.
uint64_t read_through(int fd, const std::function<void(std::span<const uint8_t>)>& fn) {
  std::vector<uint8_t> buf(kReadSize);
  uint64_t off = 0;
  for (;;) {
    const ssize_t n = ::pread(fd, buf.data(), buf.size(), static_cast<off_t>(off));
    if (n < 0) {
      std::perror("pread");
      std::exit(1);
    }
    if (n == 0) return off;
    fn(std::span<const uint8_t>(buf.data(), static_cast<size_t>(n)));
    off += static_cast<uint64_t>(n);
  }
}

struct Figure {
  uint64_t bytes = 0;
  uint64_t chunks = 0;
  double seconds = 0;
  double cpu_seconds = 0;
};

double thread_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

Figure chunk_only(int fd) {
  skippy::xet::Chunker chunker;
  Figure f;
  f.bytes = read_through(fd, [&](std::span<const uint8_t> data) {
    while (!data.empty()) {
      const auto cut = chunker.next_cut(data);
      if (!cut) break;
      ++f.chunks;
      data = data.subspan(*cut);
    }
  });
  if (f.bytes > 0) ++f.chunks;  // the last, uncut chunk
  return f;
}

Figure hash_file(int fd, bool sha256) {
  skippy::xet::FileHasher hasher({}, sha256);
  Figure f;
  f.bytes = read_through(fd, [&](std::span<const uint8_t> data) { hasher.update(data); });
  f.chunks = hasher.finish().chunk_count;
  return f;
}

void report(const char* way, int fd, int runs, const std::function<Figure(int)>& once) {
  std::vector<double> secs, cpus;
  Figure f;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = Clock::now();
    const double c0 = thread_cpu_seconds();
    f = once(fd);
    cpus.push_back(thread_cpu_seconds() - c0);
    secs.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(secs.begin(), secs.end());
  std::sort(cpus.begin(), cpus.end());
  const double s = secs[secs.size() / 2], c = cpus[cpus.size() / 2];
  // MiB per CPU second is the figure per core (wall time also counts other work on a shared machine).
  std::printf(
      "{\"way\":\"%s\",\"bytes\":%llu,\"chunks\":%llu,\"seconds\":%.3f,\"cpu_seconds\":%.3f,"
      "\"mib_per_cpu_s\":%.1f}\n",
      way, static_cast<unsigned long long>(f.bytes), static_cast<unsigned long long>(f.chunks), s, c,
      c > 0 ? static_cast<double>(f.bytes) / 1048576.0 / c : 0.0);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3 || std::strcmp(argv[1], "--help") == 0) {
    std::fprintf(stderr, "usage: %s FILE [RUNS]\n", argv[0]);
    return 2;
  }
  const int runs = argc == 3 ? std::max(1, std::atoi(argv[2])) : 3;
  const int fd = ::open(argv[1], O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    std::perror(argv[1]);
    return 1;
  }
  read_through(fd, [](std::span<const uint8_t>) {});  // page cache warm
  report("chunk", fd, runs, chunk_only);
  report("chunk+blake3", fd, runs, [](int f) { return hash_file(f, false); });
  report("chunk+blake3+sha256", fd, runs, [](int f) { return hash_file(f, true); });
  ::close(fd);
  return 0;
}
