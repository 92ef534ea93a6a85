// The one parser of byte sizes written by people: every size flag, the size
// environment variables and plan's budgets read sizes with it. Declared for
// users in skippy/plan.h; here for the libraries below plan.
#pragma once

#include <cstdint>
#include <string_view>

namespace skippy {

// "512M", "1.5GiB", "8GB", "123456": K/M/G/T (KiB...) = 1024^n, KB/MB/GB/TB =
// 1000^n. Throws Error(kUsage) "invalid size ..." on anything else.
uint64_t parse_byte_size(std::string_view text);

}  // namespace skippy
