// hf://ns/repo[@branch] as a place to publish to (skippy/hub_publish.h).
#include "skippy/error.h"
#include "skippy/source.h"
#include "skippy/hub_publish.h"

namespace skippy {

std::string PushTarget::text() const { return std::string(kHfScheme) + repo + "@" + branch; }

PushTarget parse_push_target(std::string_view ref) {
  const std::string text(ref);
  if (!is_hf_ref(ref)) throw Error(ErrorKind::kUsage, text + ": expected hf://ns/repo or hf://ns/repo@branch");
  const auto rest = ref.substr(kHfScheme.size());
  if (rest.find(':') != std::string_view::npos) {
    throw Error(ErrorKind::kUsage, text + ": publish to a branch with hf://ns/repo@branch (a commit goes on a branch)");
  }
  const HfRef r = parse_hf_ref(ref);
  if (is_commit_hash(r.revision)) {
    throw Error(ErrorKind::kUsage, text + ": \"" + r.revision + "\" is a commit id; publish to a branch (hf://" + r.repo_id +
                                       "@main)");
  }
  if (r.revision.starts_with("refs/")) {
    throw Error(ErrorKind::kUsage, text + ": name the branch without refs/ (hf://" + r.repo_id + "@branch)");
  }
  return {r.repo_id, r.revision};
}

}  // namespace skippy
