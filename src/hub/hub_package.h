// hf:// layer packages: the Hub as an ArtifactSource behind open_package.
// Internal; callers use open_package (skippy/stage.h).
#pragma once

#include "skippy/hf_ref.h"
#include "skippy/stage.h"

namespace skippy::detail {

// Resolves the revision to a commit (cache first), brings
// model-package.json into the cache, validates it, and returns the snapshot
// directory as the package root with a source that fetches artifacts on
// demand. A moving revision (branch or tag name) adds a warning naming the
// commit to pin.
OpenedPackage open_hf_package(const HfRef& ref, const OpenOptions& options);

}  // namespace skippy::detail
