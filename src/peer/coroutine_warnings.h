// Included first by every src/peer file that defines an asio coroutine.
// GCC 12 reports -Wmismatched-new-delete on asio's awaitable frames, whose
// class-level operator new/delete are a matched pair: a known false
// positive of GCC 12's coroutine lowering (GCC 13 no longer reports it).
// Clang does not warn. Everything else stays an error under -Werror.
#pragma once

#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ < 13
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
