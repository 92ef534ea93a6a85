// What publish sends to and reads from the Hub's write API, as plain
// functions (hub_publish.cpp does the requests): the NDJSON body of
// POST /api/models/{repo}/commit/{branch}, base64 for it and for preupload
// samples, and the verdict on a GET /api/whoami-v2 answer. Internal.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace skippy::detail {

std::string base64(std::string_view in);

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

}  // namespace skippy::detail
