#include "util/mapped_read.h"

#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <type_traits>

namespace skippy::detail {
namespace {

thread_local sigjmp_buf* t_env = nullptr;
struct sigaction g_previous {};

void on_sigbus(int sig, siginfo_t* info, void* ctx) {
  if (t_env != nullptr) siglongjmp(*t_env, 1);  // a guarded read: back to run_guarded
  // Not ours: whoever handled SIGBUS before us, else the default (core dump).
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(sig, info, ctx);
    return;
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN && g_previous.sa_handler != nullptr) {
    g_previous.sa_handler(sig);
    return;
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
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

constexpr uint64_t kPage = 4096;

}  // namespace

bool run_guarded(void (*fn)(void*), void* arg) noexcept {
  install();
  sigjmp_buf env;
  if (sigsetjmp(env, 1) != 0) {
    t_env = nullptr;
    return false;
  }
  t_env = &env;
  fn(arg);
  t_env = nullptr;
  return true;
}

void release_mapped(std::span<const uint8_t> whole, uint64_t offset, uint64_t len) noexcept {
  // Dropping a page that another reader still uses is harmless for a shared
  // read-only file mapping: it faults back in from the page cache.
  if (offset >= whole.size()) return;
  const auto base = reinterpret_cast<uintptr_t>(whole.data());  // page-aligned (mmap)
  const uint64_t a = (base + offset) & ~(kPage - 1);
  const uint64_t b = base + std::min<uint64_t>(offset + len, whole.size());
  ::madvise(reinterpret_cast<void*>(a), b - a, MADV_DONTNEED);
}

void prefetch_mapped(std::span<const uint8_t> whole, uint64_t offset, uint64_t len) noexcept {
  if (offset >= whole.size()) return;
  const auto base = reinterpret_cast<uintptr_t>(whole.data());
  const uint64_t a = (base + offset) & ~(kPage - 1);
  const uint64_t b = base + std::min<uint64_t>(offset + len, whole.size());
  ::madvise(reinterpret_cast<void*>(a), b - a, MADV_WILLNEED);
}

}  // namespace skippy::detail
