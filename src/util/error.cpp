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
  // A file is named once: when the message starts with the path of the
  // file the context already names (its last part, "shared/metadata.gguf",
  // relative or as an absolute path ending in it), that path is dropped.
  const std::string_view message = what();
  const auto sep = context.rfind(": ");
  const std::string_view named = sep == std::string_view::npos ? context : context.substr(sep + 2);
  const auto colon = message.find(": ");
  if (!named.empty() && colon != std::string_view::npos) {
    const std::string_view first = message.substr(0, colon);
    if (first == named || (first.size() > named.size() && first.ends_with(named) &&
                           first[first.size() - named.size() - 1] == '/')) {
      return Error(kind_, std::string(context) + std::string(message.substr(colon)));
    }
  }
  return Error(kind_, std::string(context) + ": " + std::string(message));
}

void throw_invalid(const std::string& message) { throw Error(ErrorKind::kInvalidInput, message); }
void throw_not_found(const std::string& message) { throw Error(ErrorKind::kNotFound, message); }
void throw_integrity(const std::string& message) { throw Error(ErrorKind::kIntegrity, message); }
void throw_io(const std::string& message) { throw Error(ErrorKind::kIo, message + ": " + std::strerror(errno)); }

}  // namespace skippy
