// The projector a stage serves with, for either schema (select_projector:
// schema 1's projectors and schema 2's sidecars are the catalog's sidecars).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "skippy/error.h"
#include "skippy/manifest.h"

namespace skippy::consume_detail {

struct DeclaredProjector {
  std::string_view path;
  std::string_view kind;
};

struct ProjectorPick {
  size_t index = 0;  // into the declared list
  std::string reason;
};

// The declared projector at `path` when one is given (it must be declared,
// and of a kind this runtime supports: Error(kInvalidInput) "<who>: ..."
// otherwise); without one, the first mmproj when `default_mmproj` (stage 0
// or single-stage serving); nullopt when there is none.
inline std::optional<ProjectorPick> pick_projector(const std::vector<DeclaredProjector>& declared,
                                                   const std::optional<std::string>& path, bool default_mmproj,
                                                   const std::string& who) {
  if (path) {
    std::optional<size_t> found;
    for (size_t i = 0; i < declared.size(); ++i) {
      if (declared[i].path == *path) found = i;
    }
    if (!found) {
      throw_invalid(who + ": projector \"" + *path +
                    "\" is not declared in the manifest (projectors are never inferred from file names)");
    }
    const auto& p = declared[*found];
    if (!is_known_projector_kind(p.kind)) {
      throw_invalid(who + ": projector \"" + std::string(p.path) + "\" has kind \"" + std::string(p.kind) +
                    "\", which this runtime does not support; refusing to serve a stage that needs it");
    }
    return ProjectorPick{*found, "explicit projector path"};
  }
  if (!default_mmproj) return std::nullopt;
  for (size_t i = 0; i < declared.size(); ++i) {
    if (declared[i].kind == kProjectorKindMmproj) {
      return ProjectorPick{i, "first declared mmproj projector (stage 0 or single-stage serving)"};
    }
  }
  return std::nullopt;
}

}  // namespace skippy::consume_detail
