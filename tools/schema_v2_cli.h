// The CLI's package schema 2 paths (local package directories): `select`
// and `inspect` dispatch here when model-package.json says schema_version 2.
#pragma once

#include <string>

#include "skippy/package_layout.h"

namespace skippy::cli {

// True when `ref` is a local directory whose model-package.json declares
// schema_version 2 (hf:// references are not read as schema 2 yet).
bool is_local_schema_v2(const std::string& ref);

// `projector_options`: --projector or --single-stage was given (sidecar
// selection is not built for schema 2 yet: a usage error, never ignored).
int select_schema_v2(const std::string& ref, LayerRange range, bool json, bool projector_options);
int inspect_schema_v2(const std::string& ref, bool json);

}  // namespace skippy::cli
