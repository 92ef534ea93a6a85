// libFuzzer target for the peer-transfer frame parser (src/peer/protocol.h,
// src/peer/PROTOCOL.md): what a server reads from any peer on the network and
// what a client reads from a server. The first byte picks the input:
//   0 Open, 1 OpenAck, 2 Request, 3 Response (a message payload),
//   4 a stream as the server reads it: 0x0d, frame(Open) capped at 4 KiB,
//     0x03, frame(Request) capped at 16 KiB.
// Each must parse and keep its promises, or throw WireError. A parsed
// message re-encodes to exactly its input (the encoding is canonical) and a
// request names an hf:// ref and a safe relative path. Anything else - another
// exception, a sanitizer report, a broken promise - is a crash.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

#include "peer/protocol.h"
#include "skippy/manifest.h"

namespace {

using namespace skippy::peer::wire;

[[noreturn]] void broken(const char* what) {
  std::fprintf(stderr, "peer_frames_fuzz: broken promise: %s\n", what);
  std::abort();
}

#define CHECK(cond)             \
  do {                          \
    if (!(cond)) broken(#cond); \
  } while (0)

bool same(const std::vector<uint8_t>& a, std::span<const uint8_t> b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin());
}

void check_request(const Request& r, std::span<const uint8_t> in) {
  CHECK(same(encode(r), in));
  CHECK(r.package_ref.starts_with("hf://"));
  CHECK(skippy::is_safe_relative_path(r.rel_path));
  CHECK(!r.expected_size || r.offset <= *r.expected_size);
  CHECK(!r.topology_id.empty() && !r.run_id.empty() && !r.stage_id.empty());
}

// The server's reading order, over a byte string instead of a socket.
void stream(std::span<const uint8_t> in) {
  size_t pos = 0;
  auto take = [&](size_t n) -> std::span<const uint8_t> {
    if (in.size() - pos < n) throw WireError("stream: truncated");
    const auto s = in.subspan(pos, n);
    pos += n;
    return s;
  };
  auto read_frame = [&](uint32_t cap) {
    const auto h = take(4);
    const std::span<const uint8_t, 4> header(h.data(), 4);
    const uint32_t n = frame_length(header, cap, "frame");
    CHECK(n >= 1 && n <= cap && n <= kMaxFrameBytes);
    return take(n);
  };
  if (take(1)[0] != kStreamTypeSubprotocol) throw WireError("stream type");
  const auto open_payload = read_frame(kMaxOpenFrameBytes);
  const Open o = decode_open(open_payload);
  CHECK(same(encode(o), open_payload));
  if (take(1)[0] != kKindArtifactTransfer) throw WireError("kind");
  const auto req_payload = read_frame(kMaxRequestFrameBytes);
  check_request(decode_request(req_payload), req_payload);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::span<const uint8_t> in(data + 1, size - 1);
  try {
    switch (data[0] % 5) {
      case 0: {
        const Open m = decode_open(in);
        CHECK(same(encode(m), in));
        CHECK(m.features.size() <= kMaxFeatures);
        break;
      }
      case 1: {
        const OpenAck m = decode_open_ack(in);
        CHECK(same(encode(m), in));
        break;
      }
      case 2:
        check_request(decode_request(in), in);
        break;
      case 3: {
        const Response m = decode_response(in);
        CHECK(same(encode(m), in));
        CHECK(!m.accepted || m.offset <= m.total_size);
        break;
      }
      default:
        stream(in);
        break;
    }
  } catch (const WireError&) {
    // Refused: the expected outcome for most inputs.
  }
  return 0;
}
