// The Hugging Face Hub as a Remote of the source layer (skippy/source.h),
// speaking the Hub's HTTP protocol as huggingface_hub does:
//
//   HEAD {endpoint}/{repo}/resolve/{revision}/{path}
//     -> X-Repo-Commit (the commit), X-Linked-Etag / X-Linked-Size (LFS
//        files; else ETag / Content-Length), and for LFS files a redirect
//        to a storage host, which is fetched WITHOUT the token;
//   GET  that URL (with Range to resume blobs/<etag>.incomplete; a large
//        file as byte ranges over several connections at once); for a
//        Xet-backed file (X-Xet-Hash on the HEAD) each range is read from
//        Xet storage instead (a read token, the reconstruction of the range,
//        its xorb ranges, decoded: docs/xet.md), that URL serving only what
//        Xet cannot (said once on stderr; HF_HUB_DISABLE_XET=1: never Xet);
//   GET  {endpoint}/api/models/{repo}/revision/{revision}?blobs=true
//     -> the commit and every file with its size and LFS SHA-256.
//
// Bytes enter the Hugging Face cache through the source layer's blob
// writer. Requests are retried on 429, 5xx and dropped connections with
// exponential backoff, honouring Retry-After, each retry reported
// (set_retry_reporter; a line on stderr by default); a transfer slower than
// HubConfig's minimum rate is a failed attempt; a signed storage URL that
// expires is refreshed. Errors keep their kind: kNotFound (RepoNotFound,
// RevisionNotFound, EntryNotFound, 404), kUnauthorized (401, 403,
// GatedRepo), kTransport (network, retries exhausted), kIntegrity (bytes
// that do not match), kInvalidInput (answers that break the protocol).
//
// Thread-safety: a Remote from make_hub_remote is used as source.h says (one
// call at a time; it downloads on threads of its own); HubConfig is a plain
// value. set_retry_reporter changes process-wide state: call it before any
// request starts; the reporter itself is called from retrying threads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "skippy/source.h"

namespace skippy {

struct HubConfig {
  std::string endpoint = "https://huggingface.co";
  std::optional<std::string> token;
  unsigned max_attempts = 5;     // per request, retries included
  unsigned backoff_ms = 1000;    // first retry delay; doubles, capped at 30 s
  unsigned parallel_downloads = 4;  // files at once (at least `connections`)
  // Connections one fetch opens at most, shared by all its files: a file of
  // at least 2 x min_range_bytes is fetched as byte ranges spread over them
  // (about four ranges per connection, each at least min_range_bytes and at
  // most 64 MiB); smaller files take one connection each. 1: one stream at
  // a time, as curl would.
  unsigned connections = 8;
  uint64_t min_range_bytes = uint64_t{4} << 20;
  // The minimum rate of a storage transfer (a download's bytes, an upload's
  // PUT), per connection, as libcurl's low-speed limit: a body in flight for
  // min_rate_secs that moved fewer than min_rate_bytes_per_sec on average
  // over the last min_rate_secs is abandoned as a failed attempt (retried,
  // then an error naming the rate). 0: no floor (a dead connection is still
  // given up after 60 s without a byte). 4 KiB/s is far below what a home
  // link gives one connection (8 downloads on 2 Mbit/s get 31 KiB/s each;
  // 4 uploads on a 256 kbit/s uplink 8 KiB/s each), and 4x above a storage
  // edge throttled to 1000 B/s.
  uint64_t min_rate_bytes_per_sec = 4096;
  unsigned min_rate_secs = 30;
  // From the environment (skippy/env.h: HF_ENDPOINT, HF_TOKEN..., and the
  // SKIPPY_HF_* tuning). Throws Error(kUsage) for a bad HF_ENDPOINT.
  static HubConfig from_env();
};

// One retry of a Hub request (a download, an upload, an API call): `what`
// failed for `reason` at attempt `attempt` of `attempts`, and is tried again
// in `delay_ms`.
struct RetryNotice {
  std::string what;
  std::string reason;
  unsigned attempt = 0;
  unsigned attempts = 0;
  unsigned delay_ms = 0;
};
using RetryReporter = std::function<void(const RetryNotice&)>;
// "retry: <what>: <reason> (attempt N of M failed; trying again in S s)".
std::string retry_line(const RetryNotice& notice);
// retry_line on stderr, one line (on a terminal, clearing a progress line
// first). What every retry does unless set_retry_reporter says otherwise.
void print_retry_line(const RetryNotice& notice);
// Replaces what every retry of the process does before it waits (called
// from the thread retrying, so it must be thread-safe); an empty function
// makes retries silent. Default: print_retry_line.
void set_retry_reporter(RetryReporter reporter);

// The Hub, as a remote that resolves revisions, lists repositories and
// downloads files (several at once).
std::shared_ptr<Remote> make_hub_remote(HubConfig config);

// What every command uses unless told otherwise: the Hugging Face cache
// (env::hf_hub_cache_dir()), then the Hub (HubConfig::from_env()) — or,
// with HF_HUB_OFFLINE=1, the cache alone (Sources::offline).
Sources default_sources();
// The same with the Hub configured as `hub` (fetch --connections).
Sources default_sources(const HubConfig& hub);

}  // namespace skippy
