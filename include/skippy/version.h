// The library's version, "MAJOR.MINOR.PATCH" (CMake's project version): what
// --version prints, what a package README names as its writer, and what the C
// API's skippy_version() returns.
//
// Thread-safety: safe from any thread.
#pragma once

#include <string_view>

namespace skippy {

std::string_view library_version() noexcept;

}  // namespace skippy
