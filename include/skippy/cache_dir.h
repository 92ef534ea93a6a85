// Where skippy keeps its local, derived caches (verification records,
// materialized stages). One rule for every module:
//   $SKIPPY_CACHE_DIR, else $XDG_CACHE_HOME/skippy, else $HOME/.cache/skippy
// (empty variables count as unset, a relative XDG_CACHE_HOME is ignored as
// the XDG spec says; with no HOME, the password database's home directory,
// then <temp dir>/skippy-cache-<uid>).
#pragma once

#include <filesystem>

namespace skippy {

// The root cache directory (not created here).
std::filesystem::path skippy_cache_dir();

}  // namespace skippy
