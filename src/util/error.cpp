#include "skippy/error.h"

#include <cerrno>
#include <cstring>

namespace skippy {

std::string_view error_kind_name(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::kUsage: return "usage";
    case ErrorKind::kInvalidInput: return "invalid_input";
    case ErrorKind::kNotFound: return "not_found";
    case ErrorKind::kOffline: return "offline";
    case ErrorKind::kUnauthorized: return "unauthorized";
    case ErrorKind::kIntegrity: return "integrity";
    case ErrorKind::kTransport: return "transport";
    case ErrorKind::kIo: return "io";
  }
  return "invalid_input";
}

Error Error::with_context(std::string_view context) const {
  return Error(kind_, std::string(context) + ": " + what());
}

void throw_invalid(const std::string& message) { throw Error(ErrorKind::kInvalidInput, message); }
void throw_not_found(const std::string& message) { throw Error(ErrorKind::kNotFound, message); }
void throw_integrity(const std::string& message) { throw Error(ErrorKind::kIntegrity, message); }
void throw_io(const std::string& message) { throw Error(ErrorKind::kIo, message + ": " + std::strerror(errno)); }

}  // namespace skippy
