// Errors are exceptions carrying a message a person can act on: it names the
// file (or field) and the problem. Every public call documents which it throws.
#pragma once

#include <stdexcept>
#include <string>

namespace skippy {

enum class ErrorKind {
  kInvalidInput,  // a file, manifest or argument breaks a rule (CLI exit 1)
  kIo,            // the operating system refused (open, read, write, rename)
  kNotFound,      // a file, tensor, key or package part does not exist
  kUsage,         // a caller misused the API (CLI exit 2)
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message)
      : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

// Shorthands used across the library.
[[noreturn]] void throw_invalid(const std::string& message);
[[noreturn]] void throw_io(const std::string& message);  // appends strerror(errno)
[[noreturn]] void throw_not_found(const std::string& message);

}  // namespace skippy
