// Errors are exceptions carrying a kind and a message a person can act on:
// the message names the file (or field, or reference) and the problem. The
// kind tells a caller what happened without parsing the message, and it is
// kept when an error is rethrown with more context (Error::with_context).
// Every public call documents what it throws.
//
// Thread-safety: an Error is an immutable value; the functions are pure.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace skippy {

enum class ErrorKind {
  kUsage,          // a caller misused the API or the command line (CLI exit 2)
  kInvalidInput,   // a file, manifest, reference or argument breaks a rule
  kNotFound,       // a file, package, repository, revision or part does not exist
  kOffline,        // the answer needs the network and HF_HUB_OFFLINE=1 forbids it
  kUnauthorized,   // a token or peer was refused, or a gated repository needs access
  kIntegrity,      // bytes do not match their declared size or digest
  kTransport,      // the network failed: refused or dropped connection, timeout,
                   // retries exhausted, a peer that stopped answering
  kIo,             // the operating system refused (open, read, write, rename, disk full)
};

// Stable snake_case names ("usage", "invalid_input", "not_found", "offline",
// "unauthorized", "integrity", "transport", "io"): the CLI's JSON error
// documents and the C API's codes use them.
std::string_view error_kind_name(ErrorKind kind) noexcept;

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }
  // The same kind with "<context>: " in front of the message.
  Error with_context(std::string_view context) const;

 private:
  ErrorKind kind_;
};

// Shorthands used across the library.
[[noreturn]] void throw_invalid(const std::string& message);

// a + b for sizes a file, a manifest or a peer declares (untrusted): throws
// Error(kInvalidInput) "<what>: the sum of the declared sizes overflows 64
// bits" instead of wrapping. Every sum over untrusted sizes goes through it
// (or is bounded by one that did: the package parsers check their totals).
inline uint64_t checked_add(uint64_t a, uint64_t b, std::string_view what) {
  uint64_t out = 0;
  if (__builtin_add_overflow(a, b, &out)) {
    throw_invalid(std::string(what) + ": the sum of the declared sizes overflows 64 bits");
  }
  return out;
}
[[noreturn]] void throw_io(const std::string& message);  // appends strerror(errno)
[[noreturn]] void throw_not_found(const std::string& message);
[[noreturn]] void throw_integrity(const std::string& message);

}  // namespace skippy
