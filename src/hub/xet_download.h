// Downloads through Xet storage (hub-docs docs/xet/download-protocol.md,
// auth.md): the byte ranges of a Xet-backed file read from the xorbs that
// hold its chunks instead of from the resolve URL. Internal: fetch_ranges
// (ranged_fetch.h) asks a XetRangeSource for each range it admitted, and the
// resolve path takes over wherever Xet cannot serve.
//
// For one range [a, b) of a file:
//   token   GET {Hub}/api/models/{repo}/xet-read-token/{commit} with the Hub
//           token -> {accessToken, exp, casUrl}; renewed before it expires
//           (30 s margin) and once when the CAS answers 401;
//   recon   GET {casUrl}/v2/reconstructions/{X-Xet-Hash} with
//           Range: bytes=a-(b-1) and the CAS token (v1 when v2 answers 404
//           or 501): terms and signed xorb URLs (xet_reconstruction.h);
//   xorbs   one GET per fetch range, Range: bytes=first-last exactly as
//           given (never several ranges in one request, so no storage has to
//           serve multipart answers), no Authorization; the chunks are
//           decoded as they arrive (xet/xorb.h ChunkRangeDecoder: at most one
//           chunk held), each term's unpacked length is checked, the first
//           offset_into_first_range bytes skipped, and the bytes written to
//           the range's target in order.
// A retry (transport, 429/5xx, a short body) or an expired signed URL asks
// for a fresh reconstruction of what is still missing; every request has the
// Hub client's deadlines and the xorb bodies its minimum rate.
//
// Outcomes: kDone; kFallback when Xet cannot serve the file in a way that
// is not about the bytes (no token, the CAS refusing or failing after its
// retries, an answer that is not a reconstruction): the caller fetches the
// rest of the range from the resolve URL, and the process says so once on
// stderr (then leaves Xet alone for 10 minutes, so a CAS that is down costs
// one file's retries, not every file's); Error(kIntegrity) naming the file
// when the CAS or storage describes or sends bytes that cannot be the
// file's (a chunk that does not decode, a term of another length than it
// says, a reconstruction without fetch ranges for its terms or shorter than
// the file): nothing falls back then. The SHA-256 of the whole file is the
// target's (the blob writer, the stream's reader) as on the resolve path.
//
// Thread-safety: one XetRangeSource per file; fetch() may run on several
// connections at once.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "hub/retry.h"
#include "hub/xet_cas.h"
#include "skippy/hub.h"

namespace skippy::detail {

class HttpConnection;
class RangeTarget;
struct HttpResponse;
struct XetReconstruction;
struct XetTerm;

// Where a Xet-backed file is: its file id and where its read token is asked for.
struct XetFileRef {
  std::string hash;       // X-Xet-Hash
  std::string token_url;  // a Hub URL (the Hub token goes there)
};

// The Xet facts of a resolve HEAD answer (X-Xet-Hash; the token route from
// X-Xet-Refresh-Route or the Link rel="xet-auth" when they are Hub URLs, else
// {endpoint}/api/models/{repo}/xet-read-token/{commit}); nullopt when the
// file is not Xet-backed or HF_HUB_DISABLE_XET is set.
std::optional<XetFileRef> xet_file_ref(const HttpResponse& head, const std::string& endpoint, const std::string& repo,
                                       const std::string& commit);

class XetRangeSource {
 public:
  XetRangeSource(XetFileRef ref, XetClientConfig cfg, uint64_t size);

  enum class Outcome { kDone, kFallback, kStopped };
  // Writes [pos, end) of the file into `target` over `conn`, advancing
  // `pos` by what was written. kStopped: `stop` turned true. Throws Error:
  // an integrity failure, or what the target throws.
  Outcome fetch(HttpConnection& conn, uint64_t& pos, uint64_t end, RangeTarget& target, const std::atomic<bool>& stop);
  // Every term of the file in order (chunk ranges of xorbs and their
  // unpacked lengths, no xorb bytes read): reconstructions of successive
  // ranges of up to 16 GiB, each asked from where the previous one's chunks
  // ended. Throws Error naming `what` when the CAS cannot say or its terms
  // do not add up to the file.
  std::vector<XetTerm> file_terms(const std::string& what);

 private:
  void run(HttpConnection& conn, uint64_t& pos, uint64_t end, RangeTarget& target, const std::atomic<bool>& stop);
  XetReconstruction reconstruction(uint64_t pos, uint64_t end, const std::string& what);
  XetToken token(bool renew, const std::string& seen, const std::string& what);

  XetFileRef ref_;
  XetClientConfig cfg_;
  uint64_t size_;
  std::mutex mu_;
  XetToken token_;  // (mu_)
  std::atomic<bool> v1_{false};   // the CAS has no /v2/reconstructions
  std::atomic<bool> off_{false};  // fell back: the file's other ranges skip Xet
};

// A source for the file `ref` describes, with `hub`'s token, retries and
// minimum rate (nullptr without one).
std::shared_ptr<XetRangeSource> make_xet_source(const std::optional<XetFileRef>& ref, const HubConfig& hub, uint64_t size);

}  // namespace skippy::detail
