// An owner directory (owner.key, owner.crt) as `identity init-owner` makes
// it, but with a certificate that expired yesterday: valid from three days
// ago until one day ago (openssl 3.0's req cannot date one in the past).
#pragma once

#include <filesystem>

namespace skippy::test {

void make_expired_owner(const std::filesystem::path& dir);

}  // namespace skippy::test
