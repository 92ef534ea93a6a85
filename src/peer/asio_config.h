// Included before any asio header by every src/peer file that uses asio
// coroutines (channel.h includes it first).
#pragma once

// asio 1.22 (Debian 12) enables co_await for clang only with libc++'s
// <experimental/coroutine>; clang with libstdc++'s C++20 <coroutine> (the
// fuzz build) works the same way GCC does, so say so.
#if defined(__clang__) && !defined(ASIO_HAS_CO_AWAIT) && defined(__cpp_impl_coroutine) && \
    __cpp_impl_coroutine >= 201902 && __has_include(<coroutine>)
#define ASIO_HAS_CO_AWAIT 1
#define ASIO_HAS_STD_COROUTINE 1
#endif

// GCC 12 reports -Wmismatched-new-delete on asio's awaitable frames, whose
// class-level operator new/delete are a matched pair: a known false
// positive of GCC 12's coroutine lowering (GCC 13 no longer reports it).
// Clang does not warn. Everything else stays an error under -Werror.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
