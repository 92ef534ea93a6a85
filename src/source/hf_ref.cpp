#include "skippy/source.h"

#include <algorithm>

#include "skippy/error.h"

namespace skippy {
namespace {

constexpr size_t kMaxRepoIdLength = 96;
constexpr size_t kMaxRevisionLength = 255;

[[noreturn]] void usage(std::string_view what, const std::string& why) {
  throw Error(ErrorKind::kUsage, std::string(what) + ": " + why);
}

bool repo_char(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
}
bool word_char(char c) noexcept { return repo_char(c) && c != '-' && c != '.'; }

}  // namespace

bool is_hf_ref(std::string_view text) noexcept { return text.starts_with(kHfScheme); }

bool is_commit_hash(std::string_view s) noexcept {
  return s.size() == 40 && std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

void check_repo_id(std::string_view id, std::string_view what) {
  const auto slash = id.find('/');
  if (slash == std::string_view::npos || id.find('/', slash + 1) != std::string_view::npos) {
    usage(what, "the repository must be namespace/repo (exactly one '/')");
  }
  for (const auto part : {id.substr(0, slash), id.substr(slash + 1)}) {
    if (part.empty()) usage(what, "empty namespace or repository name");
    if (part.size() > kMaxRepoIdLength) usage(what, "namespace or repository name longer than 96 characters");
    for (const char c : part) {
      if (!repo_char(c)) usage(what, "repository ids may contain only letters, digits, '-', '_' and '.'");
    }
    if (!word_char(part.front()) || !word_char(part.back())) {
      usage(what, "namespace and repository name must start and end with a letter, digit or '_'");
    }
  }
  if (id.find("--") != std::string_view::npos || id.find("..") != std::string_view::npos) {
    usage(what, "repository ids may not contain \"--\" or \"..\"");
  }
}

void check_revision(std::string_view rev, std::string_view what) {
  if (rev.empty()) usage(what, "empty revision");
  if (rev.size() > kMaxRevisionLength) usage(what, "revision is longer than 255 characters");
  for (const char c : rev) {
    const bool ok = repo_char(c) || c == '/';
    if (!ok) usage(what, "revision may contain only letters, digits, '-', '_', '.' and '/'");
  }
  size_t pos = 0;
  for (;;) {
    const auto next = rev.find('/', pos);
    const auto comp = rev.substr(pos, next == std::string_view::npos ? std::string_view::npos : next - pos);
    if (comp.empty() || comp.front() == '.' || comp.ends_with(".lock")) {
      usage(what, "revision \"" + std::string(rev) +
                      "\" could act as a path (empty, '.'-leading or \".lock\" component); use a commit, branch or tag");
    }
    if (next == std::string_view::npos) break;
    pos = next + 1;
  }
  if (rev.find("..") != std::string_view::npos) usage(what, "revision may not contain \"..\"");
}

std::string HfRef::text() const { return std::string(kHfScheme) + repo_id + "@" + revision; }

HfRef parse_hf_ref(std::string_view text) {
  const std::string what(text);
  if (!is_hf_ref(text)) usage(what, "not an hf:// reference");
  auto rest = text.substr(kHfScheme.size());
  HfRef ref;
  const auto sep = rest.find_first_of("@:");
  ref.repo_id = std::string(rest.substr(0, sep));
  if (sep != std::string_view::npos) {
    ref.revision = std::string(rest.substr(sep + 1));
    ref.revision_given = true;
    if (ref.revision.empty()) usage(what, "empty revision after '" + std::string(1, rest[sep]) + "'");
  } else {
    ref.revision = std::string(kDefaultRevision);
  }
  check_repo_id(ref.repo_id, what);
  check_revision(ref.revision, what);
  return ref;
}

std::string ModelCoordinate::text() const { return repo_id + ":" + distribution; }

bool looks_like_model_coordinate(std::string_view text) noexcept {
  if (is_hf_ref(text) || text.starts_with('/') || text.starts_with('.')) return false;
  const auto slash = text.find('/');
  const auto colon = text.find(':');
  return slash != std::string_view::npos && colon != std::string_view::npos && colon > slash &&
         text.find('/', slash + 1) > colon;
}

ModelCoordinate parse_model_coordinate(std::string_view text) {
  const std::string what(text);
  const auto colon = text.find(':');
  if (colon == std::string_view::npos) usage(what, "a Hub source is org/repo:distribution (e.g. org/Model-GGUF:Q4_K_M)");
  ModelCoordinate c;
  c.repo_id = std::string(text.substr(0, colon));
  auto dist = text.substr(colon + 1);
  if (const auto at = dist.find('@'); at != std::string_view::npos) {
    c.revision = std::string(dist.substr(at + 1));
    dist = dist.substr(0, at);
  }
  c.distribution = std::string(dist);
  check_repo_id(c.repo_id, what);
  check_revision(c.revision, what);
  if (c.distribution.empty()) usage(what, "empty distribution after ':' (e.g. Q4_K_M)");
  for (const char c2 : c.distribution) {
    if (!repo_char(c2)) usage(what, "the distribution may contain only letters, digits, '-', '_' and '.'");
  }
  return c;
}

}  // namespace skippy
