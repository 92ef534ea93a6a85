// publish --tag: the Hub's tag API (skippy/hub_publish.h: tag_hub_commit).
#include <nlohmann/json.hpp>

#include "hub/http.h"
#include "hub/hub_status.h"
#include "hub/retry.h"
#include "skippy/error.h"
#include "skippy/source.h"
#include "skippy/hub_publish.h"

namespace skippy {
namespace hub_tag_detail {

using nlohmann::json;

std::vector<std::string> headers(const HubConfig& hub) {
  std::vector<std::string> h = {"Accept-Encoding: identity", "Content-Type: application/json"};
  if (hub.token) h.push_back("Authorization: Bearer " + *hub.token);
  return h;
}

std::string reason(const detail::HttpResponse& r) { return "HTTP " + std::to_string(r.status) + detail::reason_tail(r); }

// The commit a tag names now (GET /api/models/{repo}/refs), or "" when the
// repository has no such tag or the answer says nothing usable.
std::string tag_target(const HubConfig& hub, const std::string& repo, const std::string& tag, const std::string& what) {
  detail::HttpRequest req;
  req.url = hub.endpoint + "/api/models/" + repo + "/refs";
  req.headers = headers(hub);
  const auto r = detail::perform_with_retries(req, {hub.max_attempts, hub.backoff_ms}, what + ": reading the tags");
  if (r.status != 200) return {};
  const json j = json::parse(r.body, nullptr, false);
  if (!j.is_object() || !j.contains("tags") || !j["tags"].is_array()) return {};
  for (const auto& t : j["tags"]) {
    if (!t.is_object() || !t.contains("name") || !t.contains("targetCommit") || !t["targetCommit"].is_string()) continue;
    if (t["name"] == tag || t["name"] == "refs/tags/" + tag) return t["targetCommit"].get<std::string>();
  }
  return {};
}

}  // namespace hub_tag_detail

void check_tag_name(std::string_view tag) {
  const std::string t(tag);
  auto bad = [&](const std::string& why) { throw Error(ErrorKind::kUsage, "--tag " + t + ": " + why); };
  if (t.empty()) bad("empty");
  if (t.size() > 128) bad("longer than 128 characters");
  if (is_commit_hash(t)) bad("a 40-hex name would be read as a commit id");
  if (t.starts_with("refs/")) bad("name the tag without refs/tags/");
  if (t.starts_with("-") || t.starts_with(".") || t.ends_with(".") || t.ends_with("/") || t.ends_with(".lock")) {
    bad("git refuses a name that starts with '-' or '.', or ends with '.', '/' or .lock");
  }
  if (t.find("..") != std::string::npos || t.find("//") != std::string::npos || t.find("@{") != std::string::npos) {
    bad("git refuses '..', '//' and '@{' in a name");
  }
  for (const unsigned char c : t) {
    if (c <= 0x20 || c == 0x7f || c == '~' || c == '^' || c == ':' || c == '?' || c == '*' || c == '[' || c == '\\') {
      bad("git refuses spaces, control characters and ~ ^ : ? * [ \\ in a name");
    }
  }
}

std::optional<std::string> find_hub_tag(const HubConfig& hub, const std::string& repo, const std::string& tag) {
  const std::string at = hub_tag_detail::tag_target(hub, repo, tag, "hf://" + repo);
  if (at.empty()) return std::nullopt;
  return at;
}

TagResult tag_hub_commit(const HubConfig& hub, const std::string& repo, const std::string& commit, const std::string& tag,
                         const std::string& message) {
  using namespace hub_tag_detail;
  check_tag_name(tag);
  const std::string what = "hf://" + repo + "@" + commit + ": tagging it " + tag;
  if (!is_commit_hash(commit)) throw Error(ErrorKind::kUsage, what + ": not a commit id");
  if (!hub.token) {
    throw Error(ErrorKind::kUnauthorized, what + ": tagging needs a token with write access; set HF_TOKEN");
  }
  json body = {{"tag", tag}};
  if (!message.empty()) body["message"] = message;
  detail::HttpRequest req;
  req.method = "POST";
  req.url = hub.endpoint + "/api/models/" + repo + "/tag/" + detail::url_encode(commit, false);
  req.headers = headers(hub);
  req.body = body.dump();
  const auto r = detail::perform_with_retries(req, {hub.max_attempts, hub.backoff_ms}, what, "is " + hub.endpoint + " reachable?");
  TagResult out{tag, commit, true, "hf://" + repo + "@" + tag};
  if (r.status == 200 || r.status == 201) return out;
  if (r.status == 409) {
    // The tag exists. On this very commit (a rerun, or a retried request
    // that landed): done. Elsewhere: a tag names one revision for good.
    const std::string at = tag_target(hub, repo, tag, what);
    if (at == commit) {
      out.created = false;
      return out;
    }
    detail::throw_hub_error(r, ErrorKind::kInvalidInput,
                what + ": refused: tag " + tag + " already exists" + (at.empty() ? "" : " on commit " + at) +
                    " (" + reason(r) + "); a tag names one revision and is never moved: pick a new name "
                    "(a tag per source revision), or delete the old tag on the Hub first");
  }
  if (r.status == 401) detail::throw_hub_status(r, what + ": the token in use (HF_TOKEN) was refused (" + reason(r) + ")");
  if (r.status == 403) detail::throw_hub_status(r, what + ": access denied (" + reason(r) + "); tagging needs write access to " + repo);
  detail::throw_hub_status(r, what + ": " + reason(r));
}

}  // namespace skippy
