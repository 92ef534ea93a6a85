// Hugging Face package references (spec: "Repository Identity"):
//   hf://namespace/repo            revision "main"
//   hf://namespace/repo:revision
//   hf://namespace/repo@revision
// and model coordinates for write-package, "org/repo:distribution".
//
// Both parts are checked before they are used in a URL or a cache path: a
// repo id is what the Hub allows (letters, digits, '-', '_', '.'; no "--" or
// ".."; at most 96 characters), a revision is a commit, branch or tag name
// whose '/'-separated components are never empty, "." or ".." and never
// start with '.', so neither can act as a path.
//
// Thread-safety: pure functions and plain values, safe from any thread.
#pragma once

#include <string>
#include <string_view>

namespace skippy {

inline constexpr std::string_view kHfScheme = "hf://";
inline constexpr std::string_view kDefaultRevision = "main";

struct HfRef {
  std::string repo_id;            // "namespace/repo"
  std::string revision;           // "main" when not given
  bool revision_given = false;
  std::string text() const;       // canonical "hf://ns/repo@rev"
};

bool is_hf_ref(std::string_view text) noexcept;
// Throws Error(kUsage) with a message naming the reference and the rule.
HfRef parse_hf_ref(std::string_view text);

// 40 lowercase hex digits: a full commit id (which never moves).
bool is_commit_hash(std::string_view s) noexcept;

// The Hub's repo id rules ("ns/repo"); throws Error(kUsage) naming `what`.
void check_repo_id(std::string_view repo_id, std::string_view what);
// Revision rules; throws Error(kUsage) naming `what`.
void check_revision(std::string_view revision, std::string_view what);

// "org/repo:distribution" (write-package's Hub source coordinate), with an
// optional "@revision" suffix. The distribution is a quantization tag such
// as Q4_K_M or UD-Q4_K_XL matched against the repo's GGUF file names.
struct ModelCoordinate {
  std::string repo_id;
  std::string distribution;
  std::string revision = std::string(kDefaultRevision);
  std::string text() const;       // "org/repo:distribution"
};
// True when `text` has the shape of a coordinate (one '/', a ':' after it);
// callers check for an existing local path first.
bool looks_like_model_coordinate(std::string_view text) noexcept;
ModelCoordinate parse_model_coordinate(std::string_view text);

}  // namespace skippy
