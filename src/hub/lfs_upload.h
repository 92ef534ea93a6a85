// Sending one LFS object the way the batch API's actions say (publish's
// storage side; hub_publish.cpp plans, batches and commits). Internal.
//
// Who gets which headers is the official clients' rule (huggingface_hub's
// lfs.py, @huggingface/hub's commit.ts), whatever host an href names; the
// storage may share the Hub's origin, and a presigned S3 URL that also
// carries an Authorization header is refused (HTTP 400):
//   basic upload   PUT href with exactly the action's "header" entries;
//   multipart      PUT each part URL with no header of ours, then POST the
//                  completion href (JSON, the LFS content type, no token:
//                  it is signed);
//   verify         POST href with the action's header entries, plus the
//                  token only when href is one of the Hub's API endpoints
//                  (hub_api_url) and the action gave no Authorization.
// Storage transfers obey the minimum rate; 429/5xx and dropped connections
// are retried (retry.h, each retry reported).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "hub/http.h"
#include "hub/retry.h"

namespace skippy::detail {

struct LfsUploader {
  std::string endpoint;              // HF_ENDPOINT, no trailing '/'
  std::string repo;                  // "ns/name"
  std::optional<std::string> token;
  RetryPolicy policy;
  uint64_t min_rate_bytes_per_sec = 0;
  unsigned min_rate_secs = 30;
  // Request-body bytes handed to the connection (negative: an attempt that
  // failed takes its bytes back), and bytes storage accepted.
  std::function<void(int64_t)> on_progress;
  std::function<void(uint64_t)> on_stored;

  // Sends [0, size) of `fd` as the upload action says (basic, or multipart
  // when its header has chunk_size). nullopt once storage holds the bytes;
  // else storage's 4xx refusal (most often an expired URL: the caller asks
  // for fresh actions). Throws for retries used up, a protocol violation,
  // or a failed completion.
  std::optional<HttpResponse> send(int fd, uint64_t size, const std::string& sha256, const nlohmann::json& upload_action,
                                   const std::string& what) const;
  // The verify action, when there is one (null: nothing to do). Throws when
  // the Hub does not confirm the object.
  void verify(const nlohmann::json& verify_action, const std::string& sha256, uint64_t size, const std::string& what) const;

  // True when `url` is one of the Hub's own API endpoints (http.h:
  // is_hub_api_url): the only URLs the token goes to.
  bool hub_api_url(const std::string& url) const;

 private:
  HttpResponse put_slice(int fd, const std::string& url, const std::vector<std::string>& headers, uint64_t offset,
                         uint64_t length, const std::string& what) const;
  std::optional<HttpResponse> send_multipart(int fd, uint64_t size, const std::string& sha256, const std::string& href,
                                             const nlohmann::json& header, const std::string& what) const;
};

// An action's "header" object as HTTP header lines, checked (names are
// tokens, values strings without CR, LF or NUL); throws kInvalidInput
// naming `what` otherwise. Absent: none.
std::vector<std::string> lfs_action_headers(const nlohmann::json& action, const std::string& what);

}  // namespace skippy::detail
