// What publish sends to and reads from the Hub's write API, as plain
// functions (hub_publish.cpp does the requests): the NDJSON body of
// POST /api/models/{repo}/commit/{branch} (base64 from util/openssl_handles.h),
// the verdict on a GET /api/whoami-v2 answer, the files of a
// GET revision answer, and the error a refused write call becomes. Internal.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "hub/http.h"
#include "util/openssl_handles.h"  // base64

namespace skippy::detail {

// The whoami answer `j` says whether the token may write to `repo`
// ("ns/name"): Error(kUnauthorized) naming `where` for a read-only token or
// a fine-grained one without repo.write on the namespace or the repo;
// kInvalidInput (naming `what`) when the answer is not an object. An answer
// without a role leaves the decision to the Hub's write endpoints. Returns
// the account name ("" when not given).
std::string check_write_token(const nlohmann::json& j, const std::string& repo, const std::string& where,
                              const std::string& endpoint, const std::string& what);

// One file of a commit: an LFS object (sha256, size) or a regular file
// (its bytes, base64 in the body).
struct CommitFile {
  std::string path;
  bool lfs = false;
  std::string sha256;
  uint64_t size = 0;
  const std::string* content = nullptr;  // regular files
};
// The header line (summary, description when not empty, parentCommit),
// then one line per file in path order, then one deletedFile line each.
std::string commit_ndjson(const std::string& summary, const std::string& description, const std::string& parent,
                          std::vector<CommitFile> files, const std::vector<std::string>& deleted);

// What a branch head holds, per path: the LFS SHA-256 or the git blob id.
struct HeadFile {
  std::string sha256;
  std::string blob_id;
};
// The files of a GET /api/models/{repo}/revision/{branch}?blobs=true answer
// (its "siblings"); entries without a string rfilename are skipped.
std::map<std::string, HeadFile> revision_files(const nlohmann::json& revision);
// The files of the branch (`remote`) a package owns (its root, README.md,
// the signature and validation.json, what is under shared/, layers/ and
// projectors/) that the new package (`paths`) does not have: its commit
// deletes them, and leaves a person's other files alone. Sorted.
std::vector<std::string> package_files_to_delete(const std::map<std::string, HeadFile>& remote,
                                                 const std::set<std::string>& paths);

// The Hub's answer `r` as JSON; kInvalidInput naming `what` when it is not.
nlohmann::json parse_json(const HttpResponse& r, const std::string& what);
// [offset, offset + n) of `fd` (the file at `path`), read fully;
// kIntegrity when the file is shorter (it changed).
std::string pread_all(int fd, uint64_t offset, size_t n, const std::filesystem::path& path);

// One object of an LFS batch answer.
struct LfsBatchObject {
  std::string oid;
  nlohmann::json upload;  // null: the Hub holds the object already
  nlohmann::json verify;  // null: nothing to verify
};
struct LfsBatchAnswer {
  bool xet = false;  // transfer "xet": the upload actions carry a Xet token (X-Xet-* headers), not a place to PUT
  std::vector<LfsBatchObject> objects;
};
// Checks a batch answer `j`: an object for each oid in `asked` and no other,
// none refused (the Hub's message, naming the file `name(oid)`), and every
// LFS upload or verify action with an http(s) href. Errors name `what`
// (kInvalidInput).
LfsBatchAnswer parse_lfs_batch(const nlohmann::json& j, const std::map<std::string, std::string>& asked,
                               const std::string& what);

// The error a refused call to the write API becomes, naming `what`: the
// Hub's RepoNotFound / RevisionNotFound (with --create advice), 401 and 403
// (kUnauthorized, the token), 404 (kNotFound), a retryable status
// (kTransport), anything else (kInvalidInput); the server's own words after.
[[noreturn]] void throw_write_api_error(const HttpResponse& r, const std::string& what, const std::string& repo,
                                        const std::string& branch, const std::string& endpoint);

}  // namespace skippy::detail
