// Owner directories (owner.key, owner.crt) as `identity init-owner` makes
// them, but made by hand with one thing wrong: a certificate that expired
// yesterday (valid from three days ago until one day ago; openssl 3.0's req
// cannot date one in the past), or one that is not a CA (CA:FALSE), which no
// reader may take as an owner.
#pragma once

#include <filesystem>

namespace skippy::test {

struct HandMadeOwner {
  bool expired = false;
  bool ca = true;
};
void make_owner_by_hand(const std::filesystem::path& dir, const HandMadeOwner& shape);

inline void make_expired_owner(const std::filesystem::path& dir) { make_owner_by_hand(dir, {.expired = true}); }
inline void make_non_ca_owner(const std::filesystem::path& dir) { make_owner_by_hand(dir, {.ca = false}); }

}  // namespace skippy::test
