#include "util/openssl_handles.h"

#include <openssl/err.h>

namespace skippy::detail {

std::string openssl_errors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out.empty() ? std::string("unknown OpenSSL error") : out;
}

}  // namespace skippy::detail
