#include "skippy/version.h"

namespace skippy {

std::string_view library_version() noexcept { return SKIPPY_VERSION; }

}  // namespace skippy
