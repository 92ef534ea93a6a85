// libcurl, loaded on first use instead of at process start.
//
// Why: linking libcurl makes the dynamic loader map and initialize its whole
// dependency tree (GnuTLS, Kerberos, LDAP, libssh2, RTMP, ... 25 libraries on
// Debian) in EVERY run of the CLI, even `select` or `--version`, which never
// touch the network: measured ~12 ms of a ~19 ms `--version` (the
// target is a whole `select` process under 20 ms). So nothing links libcurl;
// this file defines the libcurl entry points the project calls (src/hub,
// tests/hub_standin.cpp), with libcurl's own names and signatures from
// <curl/curl.h>, and each forwards to the real function, found with dlsym in
// libcurl.so.4 dlopen'ed at the first call. Callers are unchanged.
//
// If libcurl cannot be loaded, the calls fail the way libcurl reports
// failure (NULL handle, CURLE_FAILED_INIT) and curl_easy_strerror() says why.
// Only the functions below are forwarded: a new curl_* call elsewhere is an
// undefined symbol at link time, to be added here.
//
// Kept out of unity batches (CMakeLists): the definitions below must not see
// another file's includes or macros.
#include <curl/curl.h>
#include <dlfcn.h>

#include <cstdarg>
#include <mutex>
#include <string>

namespace skippy::curl_lazy_detail {

// SONAME of libcurl's ABI 4 (stable since 2006); the unversioned name is the
// development symlink, a fallback only.
constexpr const char* kSonames[] = {"libcurl.so.4", "libcurl.so"};

struct Api {
  void* handle = nullptr;
  std::string error;  // why it could not be loaded
  CURLcode (*global_init)(long) = nullptr;
  CURL* (*easy_init)() = nullptr;
  CURLcode (*easy_setopt)(CURL*, CURLoption, ...) = nullptr;
  CURLcode (*easy_getinfo)(CURL*, CURLINFO, ...) = nullptr;
  CURLcode (*easy_perform)(CURL*) = nullptr;
  void (*easy_reset)(CURL*) = nullptr;
  void (*easy_cleanup)(CURL*) = nullptr;
  const char* (*easy_strerror)(CURLcode) = nullptr;
  curl_slist* (*slist_append)(curl_slist*, const char*) = nullptr;
  void (*slist_free_all)(curl_slist*) = nullptr;
};

template <class F>
bool bind(void* h, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(h, name));
  return f != nullptr;
}

// The API, loaded at the first call (thread-safe); handle is null, and
// error says why, when libcurl could not be loaded.
const Api& state() {
  static Api a;
  static std::once_flag once;
  std::call_once(once, [] {
    for (const char* name : kSonames) {
      if ((a.handle = dlopen(name, RTLD_NOW | RTLD_LOCAL)) != nullptr) break;
      const char* e = dlerror();
      if (a.error.empty()) a.error = e ? e : name;
    }
    if (!a.handle) {
      a.error = "libcurl could not be loaded (" + a.error + ")";
      return;
    }
    const bool ok = bind(a.handle, "curl_global_init", a.global_init) && bind(a.handle, "curl_easy_init", a.easy_init) &&
                    bind(a.handle, "curl_easy_setopt", a.easy_setopt) &&
                    bind(a.handle, "curl_easy_getinfo", a.easy_getinfo) &&
                    bind(a.handle, "curl_easy_perform", a.easy_perform) &&
                    bind(a.handle, "curl_easy_reset", a.easy_reset) &&
                    bind(a.handle, "curl_easy_cleanup", a.easy_cleanup) &&
                    bind(a.handle, "curl_easy_strerror", a.easy_strerror) &&
                    bind(a.handle, "curl_slist_append", a.slist_append) &&
                    bind(a.handle, "curl_slist_free_all", a.slist_free_all);
    if (!ok) {
      const char* e = dlerror();
      a.error = std::string("libcurl is missing a function (") + (e ? e : "?") + ")";
      a.handle = nullptr;  // stays mapped; never used
    }
  });
  return a;
}

const Api* api() {
  const Api& a = state();
  return a.handle ? &a : nullptr;
}

}  // namespace skippy::curl_lazy_detail

// The entry points, with <curl/curl.h>'s declarations (C linkage). Names in
// parentheses: curl's type-checking macros (typecheck-gcc.h) must not expand.
using skippy::curl_lazy_detail::api;

// curl_easy_setopt/getinfo are variadic after an enum (CURLoption, CURLINFO),
// as <curl/curl.h> declares them and libcurl itself defines them; clang
// warns that va_start after a parameter that might be promoted is undefined.
// Both enums have int as their underlying type (every enumerator fits in an
// int), so the promotion is the identity; the warning is silenced for
// these two definitions only.
#if defined(__clang__)
#define SKIPPY_VARARGS_AFTER_ENUM_BEGIN _Pragma("clang diagnostic push") _Pragma("clang diagnostic ignored \"-Wvarargs\"")
#define SKIPPY_VARARGS_AFTER_ENUM_END _Pragma("clang diagnostic pop")
#else
#define SKIPPY_VARARGS_AFTER_ENUM_BEGIN
#define SKIPPY_VARARGS_AFTER_ENUM_END
#endif
static_assert(sizeof(CURLoption) == sizeof(int) && sizeof(CURLINFO) == sizeof(int));

extern "C" {

CURLcode(curl_global_init)(long flags) {
  const auto* a = api();
  return a ? a->global_init(flags) : CURLE_FAILED_INIT;
}

CURL*(curl_easy_init)(void) {
  const auto* a = api();
  return a ? a->easy_init() : nullptr;
}

SKIPPY_VARARGS_AFTER_ENUM_BEGIN
// The one variadic argument's type is given by the option's range, as
// libcurl itself reads it (CURLOPTTYPE_*): long, curl_off_t, or a pointer
// (object, function or blob pointer; all one pointer-sized argument).
CURLcode(curl_easy_setopt)(CURL* curl, CURLoption option, ...) {
  const auto* a = api();
  if (!a) return CURLE_FAILED_INIT;
  va_list ap;
  va_start(ap, option);
  CURLcode rc;
  if (option < CURLOPTTYPE_OBJECTPOINT) {
    rc = a->easy_setopt(curl, option, va_arg(ap, long));
  } else if (option >= CURLOPTTYPE_OFF_T && option < CURLOPTTYPE_BLOB) {
    rc = a->easy_setopt(curl, option, va_arg(ap, curl_off_t));
  } else {
    rc = a->easy_setopt(curl, option, va_arg(ap, void*));
  }
  va_end(ap);
  return rc;
}

// Every CURLINFO takes one pointer to where the answer goes.
CURLcode(curl_easy_getinfo)(CURL* curl, CURLINFO info, ...) {
  const auto* a = api();
  if (!a) return CURLE_FAILED_INIT;
  va_list ap;
  va_start(ap, info);
  const CURLcode rc = a->easy_getinfo(curl, info, va_arg(ap, void*));
  va_end(ap);
  return rc;
}

SKIPPY_VARARGS_AFTER_ENUM_END

CURLcode(curl_easy_perform)(CURL* curl) {
  const auto* a = api();
  return a ? a->easy_perform(curl) : CURLE_FAILED_INIT;
}

void(curl_easy_reset)(CURL* curl) {
  if (const auto* a = api()) a->easy_reset(curl);
}

void(curl_easy_cleanup)(CURL* curl) {
  if (const auto* a = api()) a->easy_cleanup(curl);
}

const char*(curl_easy_strerror)(CURLcode code) {
  const auto& s = skippy::curl_lazy_detail::state();
  return s.handle ? s.easy_strerror(code) : s.error.c_str();
}

curl_slist*(curl_slist_append)(curl_slist* list, const char* text) {
  const auto* a = api();
  return a ? a->slist_append(list, text) : nullptr;
}

void(curl_slist_free_all)(curl_slist* list) {
  if (const auto* a = api()) a->slist_free_all(list);
}

}  // extern "C"
