// The one base64 encoder (util/openssl_handles.h) that signatures and the
// Hub's commit bodies use: RFC 4648's test vectors, and an input longer than
// the encoder's internal slice so the slices must join seamlessly.
#include <gtest/gtest.h>

#include <string>

#include "util/openssl_handles.h"

namespace {

TEST(Base64, Rfc4648TestVectors) {
  using skippy::detail::base64;
  EXPECT_EQ(base64(""), "");
  EXPECT_EQ(base64("f"), "Zg==");
  EXPECT_EQ(base64("fo"), "Zm8=");
  EXPECT_EQ(base64("foo"), "Zm9v");
  EXPECT_EQ(base64("foob"), "Zm9vYg==");
  EXPECT_EQ(base64("fooba"), "Zm9vYmE=");
  EXPECT_EQ(base64("foobar"), "Zm9vYmFy");
  EXPECT_EQ(base64(std::string("\0\xff\xfe", 3)), "AP/+");
}

TEST(Base64, LongInputsEncodeAsOneWhole) {
  // 3 MiB + 2 bytes: one full slice, then a tail that needs padding.
  std::string in((size_t{3} << 20) + 2, '\0');
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<char>(i * 131 + (i >> 7));
  const std::string out = skippy::detail::base64(in);
  ASSERT_EQ(out.size(), 4 * ((in.size() + 2) / 3));
  EXPECT_EQ(out.substr(out.size() - 1), "=");
  // The encoding of the first 3 bytes of the second slice sits where the
  // first slice's output ends: no NUL or padding between slices.
  const size_t slice = size_t{3} << 20;
  EXPECT_EQ(out.substr(4 * slice / 3, 3), skippy::detail::base64(in.substr(slice, 2)).substr(0, 3));
  EXPECT_EQ(out.find('='), out.size() - 1);
  EXPECT_EQ(out.find('\0'), std::string::npos);
}

}  // namespace
