// A Xet file reconstruction (hub-docs docs/xet/download-protocol.md,
// api.md; xet-core cas_types QueryReconstructionResponse{,V2};
// huggingface.js XetBlob.ts): the answer of
// GET {casUrl}/v2/reconstructions/{file id} (or /v1/...) with
// `Range: bytes=a-b`, read as hostile input, and the plan of xorb range
// requests that delivers its bytes in file order. Internal (xet_download.cpp
// drives it; tests/xet_download_test.cpp checks it directly).
//
//   {"offset_into_first_range": n,
//    "terms": [{"hash": xorb, "unpacked_length": bytes, "range": {"start", "end"}}],
//    v2: "xorbs": {xorb: [{"url", "ranges": [{"chunks": {"start","end"},
//                                              "bytes": {"start","end"}}]}]}
//    v1: "fetch_info": {xorb: [{"range": {"start","end"}, "url",
//                               "url_range": {"start","end"}}]}}
//
// Chunk ranges are end-exclusive, byte ranges end-inclusive (an HTTP Range).
// The file's bytes [a, b] are the terms' chunks in order, less the first
// offset_into_first_range bytes, cut after b - a + 1 bytes.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace skippy::detail {

// Chunks [chunk_start, chunk_end) of xorb `xorb` (64 hex), unpacking to
// `unpacked` bytes (what the CAS says; the download checks it).
struct XetTerm {
  std::string xorb;
  uint32_t chunk_start = 0, chunk_end = 0;
  uint64_t unpacked = 0;
};

// Where chunks [chunk_start, chunk_end) of a xorb may be read: `url` (signed
// for these bytes; no Authorization) with Range: bytes=byte_first-byte_last.
struct XetFetchRange {
  std::string url;
  uint32_t chunk_start = 0, chunk_end = 0;
  uint64_t byte_first = 0, byte_last = 0;
};

struct XetReconstruction {
  uint64_t offset_into_first_range = 0;
  std::vector<XetTerm> terms;
  std::map<std::string, std::vector<XetFetchRange>> fetch;  // by xorb
};

// Parses an answer of version 2 ("xorbs") or 1 ("fetch_info"). Every field
// is type- and bounds-checked: hashes are 64 lowercase hex, chunk ranges
// non-empty, a term's unpacked length possible for its chunk count (1 to
// 128 KiB a chunk), a byte range possible for its chunks (9 bytes to a
// chunk header plus 256 KiB each), URLs http(s). Unknown keys are ignored.
// Throws Error(kInvalidInput) naming `what` and the field.
XetReconstruction parse_xet_reconstruction(std::string_view body, int version, const std::string& what);

// One request: `range` read whole (one Range header), serving terms
// [first_term, last_term) of the reconstruction, whose chunks lie in it in
// ascending order without overlap.
struct XetFetchStep {
  const XetFetchRange* range = nullptr;  // points into the reconstruction's `fetch`
  size_t first_term = 0, last_term = 0;
};

// The requests that deliver `want` bytes of `r` in file order: consecutive
// terms that one fetch range serves (ascending chunks) share a request.
// Throws Error(kIntegrity) naming `what` when the reconstruction cannot be
// the file's bytes: a term no fetch range covers, no terms, an offset at or
// past the first term's end, or terms holding fewer than offset + want bytes.
std::vector<XetFetchStep> plan_xet_fetches(const XetReconstruction& r, uint64_t want, const std::string& what);

}  // namespace skippy::detail
