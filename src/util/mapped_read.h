// Reading big files through their read-only mapping instead of copying them
// into buffers first: hashing and comparing straight from the page cache
// saves a memcpy of every byte. The price of a mapping is SIGBUS when the
// file shrinks under us (another process truncates it); reads done through
// guarded() turn that into a false return, which callers report as "the file
// changed while it was read", never a crash. Internal to the library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>

namespace skippy::detail {

// Runs fn(arg); returns false if it touched a mapped page that no longer
// exists (SIGBUS). fn must not own resources that need destructors at the
// point of the fault: keep it to hashing, memcmp and memcpy over a mapping.
bool run_guarded(void (*fn)(void*), void* arg) noexcept;

template <class F>
bool guarded(F&& f) noexcept {
  return run_guarded([](void* p) { (*static_cast<std::remove_reference_t<F>*>(p))(); }, &f);
}

// Tells the kernel we are done with [offset, offset + len) of a mapping:
// the pages leave our page tables (resident memory stays flat as a file
// streams through) but stay in the page cache. `whole` must be a complete
// MappedFile::bytes() (it is rounded to pages, and only a shared read-only
// file mapping may lose pages harmlessly). Returns madvise's success.
bool release_mapped(std::span<const uint8_t> whole, uint64_t offset, uint64_t len) noexcept;
// Asks for read-ahead of a mapped range (sequential streaming).
void prefetch_mapped(std::span<const uint8_t> whole, uint64_t offset, uint64_t len) noexcept;

}  // namespace skippy::detail
