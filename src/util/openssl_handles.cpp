#include "util/openssl_handles.h"

#include <openssl/err.h>

#include <algorithm>

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

std::string base64(std::string_view raw) {
  // EVP_EncodeBlock takes an int length: encode in slices of whole 3-byte
  // groups, which concatenate to the encoding of the whole.
  constexpr size_t kSlice = size_t{3} << 20;
  std::string out(4 * ((raw.size() + 2) / 3) + 1, '\0');  // + EVP_EncodeBlock's NUL
  size_t w = 0;
  for (size_t at = 0; at < raw.size();) {
    const size_t n = std::min(kSlice, raw.size() - at);
    w += static_cast<size_t>(EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data() + w),
                                             reinterpret_cast<const unsigned char*>(raw.data() + at), static_cast<int>(n)));
    at += n;
  }
  out.resize(w);
  return out;
}

}  // namespace skippy::detail
