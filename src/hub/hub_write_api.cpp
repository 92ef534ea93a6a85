#include "hub/hub_write_api.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <set>

#include "hub/hub_status.h"
#include "hub/retry.h"
#include "skippy/error.h"
#include "skippy/package_signature.h"

namespace skippy::detail {

using nlohmann::json;

std::string check_write_token(const json& j, const std::string& repo, const std::string& where, const std::string& endpoint,
                              const std::string& what) {
  std::string user;
  if (!j.is_object()) throw_invalid(what + ": the Hub's answer is not an object");
  if (j.contains("name") && j["name"].is_string()) user = j["name"].get<std::string>();
  const json* tok = nullptr;
  if (j.contains("auth") && j["auth"].is_object() && j["auth"].contains("accessToken") && j["auth"]["accessToken"].is_object()) {
    tok = &j["auth"]["accessToken"];
  }
  if (!tok || !tok->contains("role") || !(*tok)["role"].is_string()) return user;  // no word on the role: the Hub decides
  const std::string role = (*tok)["role"].get<std::string>();
  if (role == "read") {
    throw Error(ErrorKind::kUnauthorized, where + ": the token in use (HF_TOKEN) is read-only (role \"read\"); "
                                                   "publishing needs a write token (" +
                                                       endpoint + "/settings/tokens)");
  }
  if (role == "fineGrained") {
    const std::string ns = repo.substr(0, repo.find('/'));
    bool can = false;
    const json& fg = tok->contains("fineGrained") ? (*tok)["fineGrained"] : json();
    if (fg.is_object() && fg.contains("scoped") && fg["scoped"].is_array()) {
      for (const auto& s : fg["scoped"]) {
        if (!s.is_object() || !s.contains("entity") || !s["entity"].is_object() || !s.contains("permissions") ||
            !s["permissions"].is_array()) {
          continue;
        }
        const auto& ent = s["entity"];
        const std::string name = ent.contains("name") && ent["name"].is_string() ? ent["name"].get<std::string>() : "";
        if (name != ns && name != repo) continue;
        for (const auto& p : s["permissions"]) can = can || (p.is_string() && p.get<std::string>() == "repo.write");
      }
    }
    if (!can) {
      throw Error(ErrorKind::kUnauthorized, where + ": the fine-grained token in use (HF_TOKEN) has no repo.write "
                                                     "permission for " +
                                                         ns + " or " + repo);
    }
  }
  return user;
}

std::string commit_ndjson(const std::string& summary, const std::string& description, const std::string& parent,
                          std::vector<CommitFile> files, const std::vector<std::string>& deleted) {
  std::string body = json{{"key", "header"},
                          {"value", description.empty() ? json{{"summary", summary}, {"parentCommit", parent}}
                                                        : json{{"summary", summary}, {"description", description},
                                                               {"parentCommit", parent}}}}
                         .dump() +
                     "\n";
  std::sort(files.begin(), files.end(), [](const CommitFile& a, const CommitFile& b) { return a.path < b.path; });
  for (const auto& f : files) {
    if (f.lfs) {
      body += json{{"key", "lfsFile"}, {"value", {{"path", f.path}, {"algo", "sha256"}, {"oid", f.sha256}, {"size", f.size}}}}.dump();
    } else {
      body += json{{"key", "file"}, {"value", {{"path", f.path}, {"content", base64(*f.content)}, {"encoding", "base64"}}}}.dump();
    }
    body += "\n";
  }
  for (const auto& p : deleted) body += json{{"key", "deletedFile"}, {"value", {{"path", p}}}}.dump() + "\n";
  return body;
}

std::map<std::string, HeadFile> revision_files(const nlohmann::json& j) {
  std::map<std::string, HeadFile> files;
  if (!j.is_object() || !j.contains("siblings") || !j["siblings"].is_array()) return files;
  for (const auto& s : j["siblings"]) {
    if (!s.is_object() || !s.contains("rfilename") || !s["rfilename"].is_string()) continue;
    HeadFile f;
    if (s.contains("blobId") && s["blobId"].is_string()) f.blob_id = s["blobId"].get<std::string>();
    if (s.contains("lfs") && s["lfs"].is_object() && s["lfs"].contains("sha256") && s["lfs"]["sha256"].is_string()) {
      f.sha256 = s["lfs"]["sha256"].get<std::string>();
    }
    files[s["rfilename"].get<std::string>()] = f;
  }
  return files;
}

std::vector<std::string> package_files_to_delete(const std::map<std::string, HeadFile>& remote,
                                                 const std::set<std::string>& paths) {
  std::vector<std::string> out;
  for (const auto& [p, f] : remote) {
    const bool owned = p == "model-package.json" || p == "README.md" || p == kSignatureFileName ||
                       p == kValidationFileName || p.starts_with("shared/") || p.starts_with("layers/") ||
                       p.starts_with("projectors/");
    if (owned && !paths.count(p)) out.push_back(p);
  }
  return out;
}

void throw_write_api_error(const HttpResponse& r, const std::string& what, const std::string& repo,
                           const std::string& branch, const std::string& endpoint) {
  const auto code = hub_error_code(r);
  const std::string tail = reason_tail(r);
  if (code == HubErrorCode::kRepoNotFound) {
    throw_hub_error(r, hub_error_code_kind(code, r.status), what + ": repository " + repo + " not found on " + endpoint +
                                                 " (or the token cannot see it); pass --create to create it");
  }
  if (code == HubErrorCode::kRevisionNotFound) throw_hub_error(r, hub_error_code_kind(code, r.status), what + ": branch \"" + branch + "\" not found" + tail);
  if (r.status == 401) throw_hub_status(r, what + ": the token in use (HF_TOKEN) was refused (HTTP 401)" + tail);
  if (r.status == 403) {
    throw_hub_status(r, what + ": access denied (HTTP 403)" + tail + "; publishing needs a token with write access to " + repo);
  }
  if (r.status == 404) throw_hub_status(r, what + ": not found (HTTP 404)" + tail);
  throw_hub_status(r, what + ": HTTP " + std::to_string(r.status) + tail);
}

json parse_json(const HttpResponse& r, const std::string& what) {
  try {
    return json::parse(r.body);
  } catch (const std::exception& e) {
    throw_invalid(what + ": the Hub's answer is not JSON (" + e.what() + ")");
  }
}

std::string pread_all(int fd, uint64_t offset, size_t n, const std::filesystem::path& path) {
  std::string out(n, '\0');
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd, out.data() + got, n - got, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw_io("cannot read " + path.string());
    if (r == 0) throw_integrity(path.string() + ": the file is shorter than its declared size (did it change?)");
    got += static_cast<size_t>(r);
  }
  return out;
}

namespace {
bool http_href(const nlohmann::json& action) {
  if (!action.is_object() || !action.contains("href") || !action["href"].is_string()) return false;
  const auto& u = action["href"].get_ref<const std::string&>();
  return u.starts_with("http://") || u.starts_with("https://");
}
}  // namespace

LfsBatchAnswer parse_lfs_batch(const nlohmann::json& j, const std::map<std::string, std::string>& asked,
                               const std::string& what) {
  if (!j.is_object() || !j.contains("objects") || !j["objects"].is_array()) throw_invalid(what + ": the answer has no objects list");
  LfsBatchAnswer out;
  out.xet = j.contains("transfer") && j["transfer"] == "xet";
  std::set<std::string> answered;
  for (const auto& o : j["objects"]) {
    if (!o.is_object() || !o.contains("oid") || !o["oid"].is_string()) throw_invalid(what + ": an object without an oid");
    const std::string oid = o["oid"].get<std::string>();
    const auto it = asked.find(oid);
    if (it == asked.end()) throw_invalid(what + ": the Hub answered for an object not asked about (" + oid.substr(0, 80) + ")");
    answered.insert(oid);
    if (o.contains("error")) {
      const auto& e = o["error"];
      const std::string msg = e.is_object() && e.contains("message") && e["message"].is_string() ? e["message"].get<std::string>() : e.dump();
      throw_invalid(what + ": the Hub refused " + it->second + ": " + msg.substr(0, 300));
    }
    LfsBatchObject b{oid, nullptr, nullptr};
    const auto* act = o.contains("actions") && o["actions"].is_object() ? &o["actions"] : nullptr;
    if (act && act->contains("upload")) {
      b.upload = (*act)["upload"];
      b.verify = act->contains("verify") ? (*act)["verify"] : nlohmann::json();
      if (!out.xet && !http_href(b.upload)) throw_invalid(what + ": the upload action for " + it->second + " has no http(s) href");
      if (!out.xet && !b.verify.is_null() && !http_href(b.verify)) {
        throw_invalid(what + ": the verify action for " + it->second + " has no http(s) href");
      }
    }
    out.objects.push_back(std::move(b));
  }
  for (const auto& [oid, name] : asked) {
    if (!answered.count(oid)) throw_invalid(what + ": the Hub did not answer for " + name);
  }
  return out;
}

}  // namespace skippy::detail
