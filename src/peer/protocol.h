// The peer artifact-transfer wire format (src/peer/PROTOCOL.md is the
// normative description; this header is its C++ form). Pure functions over
// bytes: no sockets, no files, so the fuzzer and the tests drive them
// directly.
//
// Decoding is strict. Every length and count is checked against the bytes
// that are left and against the field's own cap before anything is
// allocated; a message must be consumed exactly (no trailing bytes); any
// violation throws WireError naming the field. Encoding refuses values the
// decoder would refuse, so both sides agree on what is well-formed.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "skippy/peer.h"

namespace skippy::peer::wire {

// ------------------------------------------------------------- constants

// The byte that opens a stream: the mesh's "subprotocol" stream type.
inline constexpr uint8_t kStreamTypeSubprotocol = 0x0d;
// The byte that follows the open acknowledgement: what the stream carries.
inline constexpr uint8_t kKindArtifactTransfer = 0x03;

inline constexpr std::string_view kSubprotocolName = "skippy-stage";
inline constexpr uint16_t kSubprotocolMajor = 2;
inline constexpr uint16_t kSubprotocolMinor = 0;
inline constexpr std::string_view kFeatureArtifactTransfer = "artifact-transfer";

// Generation of each message layout (bumped when a layout changes; a
// receiver refuses generations it does not know).
inline constexpr uint16_t kOpenGeneration = 1;
inline constexpr uint16_t kRequestGeneration = 1;
inline constexpr uint16_t kResponseGeneration = 1;

// Every control frame: u32 little-endian length L, 1 <= L <= kMaxFrameBytes.
inline constexpr uint32_t kMaxFrameBytes = uint32_t{8} << 20;  // 8 MiB, the protocol's hard cap
// Tighter caps each receiver applies to the one frame it expects (the
// largest well-formed message of that kind, rounded up).
inline constexpr uint32_t kMaxOpenFrameBytes = 4096;
inline constexpr uint32_t kMaxRequestFrameBytes = 16384;
inline constexpr uint32_t kMaxResponseFrameBytes = 256;

// Field caps (bytes of UTF-8 / counts).
inline constexpr size_t kMaxNameBytes = 64;        // subprotocol and feature names
inline constexpr size_t kMaxFeatures = 32;
inline constexpr size_t kMaxIdBytes = 256;         // topology id, run id, stage id
inline constexpr size_t kMaxRefBytes = 1024;       // package ref
inline constexpr size_t kMaxPathBytes = 4096;      // relative path

// Raw artifact bytes follow an accepted response in writes of at most this.
inline constexpr size_t kChunkBytes = size_t{1} << 20;

using Digest32 = std::array<uint8_t, 32>;  // a SHA-256 or a node id, raw

// Thrown for every malformed input. The message names the field.
class WireError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// ------------------------------------------------------------- messages

// Client -> server, after kStreamTypeSubprotocol: the subprotocol it speaks
// and the features it would like to use.
struct Open {
  std::string name{kSubprotocolName};
  uint16_t major = kSubprotocolMajor;
  uint16_t minor = kSubprotocolMinor;
  std::vector<std::string> features;
  bool operator==(const Open&) const = default;
};

// Server -> client: the subprotocol the server speaks and the features it
// offers this authenticated peer (artifact-transfer only when enabled for it).
struct OpenAck {
  std::string name{kSubprotocolName};
  uint16_t major = kSubprotocolMajor;
  uint16_t minor = kSubprotocolMinor;
  std::vector<std::string> features;
  bool operator==(const OpenAck&) const = default;
  bool has_feature(std::string_view f) const;
};

// Client -> server, after kKindArtifactTransfer.
struct Request {
  Digest32 requester{};           // the requester's node id (must be the TLS peer)
  std::string topology_id;
  std::string run_id;
  std::string stage_id;
  std::string package_ref;        // "hf://..." (eligibility is the server's call)
  Digest32 manifest_sha256{};
  std::string rel_path;           // "model-package.json" or a safe relative path
  uint64_t offset = 0;            // resume from here
  std::optional<uint64_t> expected_size;
  std::optional<Digest32> expected_sha256;
  bool operator==(const Request&) const = default;
};

// Why a server refuses: the wire carries only the code (skippy/peer.h
// Refusal, 1..4); the words are fixed and say nothing about inventory,
// paths or caches.
using skippy::peer::Refusal;

// Server -> client.
struct Response {
  bool accepted = false;
  // accepted:
  uint64_t offset = 0;       // echoes the request's
  uint64_t total_size = 0;   // the whole artifact; bytes [offset, total_size) follow
  Digest32 sha256{};         // of the whole artifact
  // refused:
  Refusal refusal = Refusal::kUnavailable;
  bool operator==(const Response&) const = default;
};

// Payload encoders (the frame's length prefix not included) and decoders.
std::vector<uint8_t> encode(const Open& m);
std::vector<uint8_t> encode(const OpenAck& m);
std::vector<uint8_t> encode(const Request& m);
std::vector<uint8_t> encode(const Response& m);
Open decode_open(std::span<const uint8_t> payload);
OpenAck decode_open_ack(std::span<const uint8_t> payload);
Request decode_request(std::span<const uint8_t> payload);
Response decode_response(std::span<const uint8_t> payload);

// A frame: 4-byte little-endian length, then the payload.
std::vector<uint8_t> frame(std::span<const uint8_t> payload);
// The payload length a frame header announces, checked against
// 1..min(cap, kMaxFrameBytes). Throws WireError.
uint32_t frame_length(std::span<const uint8_t, 4> header, uint32_t cap, std::string_view what);

// Digests as hex (lowercase) and back. from_hex throws WireError on
// anything but 64 hex digits (either case).
std::string to_hex(const Digest32& d);
Digest32 digest_from_hex(std::string_view hex, std::string_view what);

}  // namespace skippy::peer::wire
