#include "util/mapped_read.h"

#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <type_traits>

namespace skippy::detail {
namespace {

thread_local sigjmp_buf* t_env = nullptr;
struct sigaction g_previous {};

void on_sigbus(int sig, siginfo_t* info, void* ctx) {
  // A guarded read of a page past the end of its file: back to run_guarded.
  if (t_env != nullptr && info != nullptr && info->si_code == BUS_ADRERR) siglongjmp(*t_env, 1);
  // Not ours: whoever handled SIGBUS before us, else the default (core dump).
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(sig, info, ctx);
    return;
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN && g_previous.sa_handler != nullptr) {
    g_previous.sa_handler(sig);
    return;
  }
  // Default action: return with SIG_DFL so the faulting access repeats and
  // the core dump shows it (a sent signal is raised again).
  ::signal(sig, SIG_DFL);
  if (info == nullptr || info->si_code <= 0) ::raise(sig);
}

void install() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    ::sigaction(SIGBUS, &sa, &g_previous);
  });
}

uint64_t page_size() noexcept {
  static const uint64_t size = [] {
    const long p = ::sysconf(_SC_PAGESIZE);
    return p > 0 ? static_cast<uint64_t>(p) : uint64_t{4096};
  }();
  return size;
}

}  // namespace

bool run_guarded(void (*fn)(void*), void* arg) noexcept {
  install();
  sigjmp_buf env;
  if (sigsetjmp(env, 1) != 0) {
    t_env = nullptr;
    return false;
  }
  t_env = &env;
  // Keep the compiler from moving the reads fn does outside the window in
  // which the handler sees t_env (it may inline fn under LTO).
  std::atomic_signal_fence(std::memory_order_seq_cst);
  fn(arg);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  t_env = nullptr;
  return true;
}

bool release_mapped(std::span<const uint8_t> whole, uint64_t offset, uint64_t len) noexcept {
  // Dropping a page that another reader still uses is harmless for a shared
  // read-only file mapping: it faults back in from the page cache.
  // A fault maps more than the page it touches: the cached pages of the
  // 64 KiB fault-around window, and on kernels whose page cache uses large
  // folios (ext4 since Linux 6.16, XFS earlier) the whole folio, up to 2 MiB.
  // So touching the start of a range also maps the tail of the range
  // released just before it. Released ranges are therefore widened to 2 MiB
  // boundaries; without that, a file read in pieces that do not start on
  // those boundaries (the tensors of a source model) keeps up to a folio per
  // piece resident and the RSS grows with the file. (Dropping a neighbour's
  // pages costs at most a minor fault when it is touched again.)
  constexpr uint64_t kFaultAround = 2u << 20;
  if (offset >= whole.size() || len == 0) return true;
  const auto base = reinterpret_cast<uintptr_t>(whole.data());  // page-aligned (mmap)
  const uint64_t lo = offset & ~(kFaultAround - 1);
  const uint64_t hi = std::min<uint64_t>((offset + len + kFaultAround - 1) & ~(kFaultAround - 1), whole.size());
  const uint64_t a = (base + lo) & ~(page_size() - 1);
  const uint64_t b = base + hi;
  return ::madvise(reinterpret_cast<void*>(a), b - a, MADV_DONTNEED) == 0;
}

void prefetch_mapped(std::span<const uint8_t> whole, uint64_t offset, uint64_t len) noexcept {
  if (offset >= whole.size()) return;
  const auto base = reinterpret_cast<uintptr_t>(whole.data());
  const uint64_t a = (base + offset) & ~(page_size() - 1);
  const uint64_t b = base + std::min<uint64_t>(offset + len, whole.size());
  ::madvise(reinterpret_cast<void*>(a), b - a, MADV_WILLNEED);
}

}  // namespace skippy::detail
