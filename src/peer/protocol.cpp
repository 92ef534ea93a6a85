#include "peer/protocol.h"

#include <algorithm>
#include <cstring>

#include "skippy/manifest.h"

namespace skippy::peer::wire {
namespace {

[[noreturn]] void bad(std::string_view what, std::string_view problem) {
  throw WireError(std::string(what) + ": " + std::string(problem));
}

// UTF-8 without control characters (C0, DEL, C1): what an id, a ref, a
// path or a feature name may hold. Overlong forms, surrogates and code
// points past U+10FFFF are refused.
bool printable_utf8(std::string_view s) noexcept {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<uint8_t>(s[i]);
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f) return false;
      ++i;
      continue;
    }
    size_t len = 0;
    uint32_t cp = 0;
    if ((c & 0xe0) == 0xc0) {
      len = 2;
      cp = c & 0x1fu;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3;
      cp = c & 0x0fu;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4;
      cp = c & 0x07u;
    } else {
      return false;
    }
    if (s.size() - i < len) return false;
    for (size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<uint8_t>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3fu);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff) || (cp >= 0x80 && cp < 0xa0)) {
      return false;
    }
    i += len;
  }
  return true;
}

void check_text(std::string_view s, size_t max, std::string_view what) {
  if (s.empty()) bad(what, "empty");
  if (s.size() > max) bad(what, std::to_string(s.size()) + " bytes, more than " + std::to_string(max));
  if (!printable_utf8(s)) bad(what, "not printable UTF-8");
}

class Writer {
 public:
  void u8(uint8_t v) { bytes(&v, 1); }
  void u16(uint16_t v) { le(v, 2); }
  void u32(uint32_t v) { le(v, 4); }
  void u64(uint64_t v) { le(v, 8); }
  void str(std::string_view s, size_t max, std::string_view what) {
    check_text(s, max, what);
    u16(static_cast<uint16_t>(s.size()));
    bytes(s.data(), s.size());
  }
  void digest(const Digest32& d) { bytes(d.data(), d.size()); }
  std::vector<uint8_t> take() { return std::move(out_); }

 private:
  void le(uint64_t v, size_t n) {
    uint8_t b[8];
    for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(v >> (8 * i));
    bytes(b, n);
  }
  void bytes(const void* p, size_t n) {
    const size_t at = out_.size();
    out_.resize(at + n);
    if (n > 0) std::memcpy(out_.data() + at, p, n);
  }
  std::vector<uint8_t> out_;
};

class Reader {
 public:
  explicit Reader(std::span<const uint8_t> in) : in_(in) {}
  uint8_t u8(std::string_view what) { return take(1, what)[0]; }
  uint16_t u16(std::string_view what) { return static_cast<uint16_t>(le(take(2, what))); }
  uint64_t u64(std::string_view what) { return le(take(8, what)); }
  std::string str(size_t max, std::string_view what) {
    const uint16_t n = u16(what);
    if (n > max) bad(what, "length " + std::to_string(n) + " is more than " + std::to_string(max));
    const auto b = take(n, what);
    std::string s(reinterpret_cast<const char*>(b.data()), b.size());
    check_text(s, max, what);
    return s;
  }
  Digest32 digest(std::string_view what) {
    const auto b = take(32, what);
    Digest32 d;
    std::copy(b.begin(), b.end(), d.begin());
    return d;
  }
  // 0 = absent, 1 = present; anything else is malformed.
  bool presence(std::string_view what) {
    const uint8_t p = u8(what);
    if (p > 1) bad(what, "presence byte " + std::to_string(p) + " (must be 0 or 1)");
    return p == 1;
  }
  void finish(std::string_view what) const {
    if (pos_ != in_.size()) bad(what, std::to_string(in_.size() - pos_) + " trailing byte(s)");
  }

 private:
  std::span<const uint8_t> take(size_t n, std::string_view what) {
    if (in_.size() - pos_ < n) {
      bad(what, "truncated: needs " + std::to_string(n) + " byte(s), " + std::to_string(in_.size() - pos_) + " left");
    }
    const auto s = in_.subspan(pos_, n);
    pos_ += n;
    return s;
  }
  static uint64_t le(std::span<const uint8_t> b) {
    uint64_t v = 0;
    for (size_t i = b.size(); i-- > 0;) v = (v << 8) | b[i];
    return v;
  }
  std::span<const uint8_t> in_;
  size_t pos_ = 0;
};

void write_features(Writer& w, const std::vector<std::string>& features, std::string_view what) {
  if (features.size() > kMaxFeatures) bad(what, std::to_string(features.size()) + " features, more than " + std::to_string(kMaxFeatures));
  w.u16(static_cast<uint16_t>(features.size()));
  for (const auto& f : features) w.str(f, kMaxNameBytes, what);
}

std::vector<std::string> read_features(Reader& r, std::string_view what) {
  const uint16_t n = r.u16(what);
  if (n > kMaxFeatures) bad(what, "count " + std::to_string(n) + " is more than " + std::to_string(kMaxFeatures));
  std::vector<std::string> out;
  out.reserve(n);
  for (uint16_t i = 0; i < n; ++i) out.push_back(r.str(kMaxNameBytes, what));
  return out;
}

void check_generation(uint16_t got, uint16_t want, std::string_view what) {
  if (got != want) bad(what, "generation " + std::to_string(got) + " (this implementation speaks " + std::to_string(want) + ")");
}

// Rules of a request beyond its field syntax; the same on both sides.
void check_request(const Request& m) {
  if (!m.package_ref.starts_with("hf://")) bad("request.package_ref", "not an hf:// reference");
  if (!is_safe_relative_path(m.rel_path)) bad("request.rel_path", "not a safe relative path");
  if (m.expected_size && m.offset > *m.expected_size) bad("request.offset", "beyond the expected size");
}

}  // namespace

bool OpenAck::has_feature(std::string_view f) const {
  return std::find(features.begin(), features.end(), f) != features.end();
}

std::vector<uint8_t> encode(const Open& m) {
  Writer w;
  w.u16(kOpenGeneration);
  w.str(m.name, kMaxNameBytes, "open.name");
  w.u16(m.major);
  w.u16(m.minor);
  write_features(w, m.features, "open.features");
  return w.take();
}

std::vector<uint8_t> encode(const OpenAck& m) {
  Writer w;
  w.u16(kOpenGeneration);
  w.str(m.name, kMaxNameBytes, "open_ack.name");
  w.u16(m.major);
  w.u16(m.minor);
  write_features(w, m.features, "open_ack.features");
  return w.take();
}

Open decode_open(std::span<const uint8_t> payload) {
  Reader r(payload);
  check_generation(r.u16("open.generation"), kOpenGeneration, "open.generation");
  Open m;
  m.name = r.str(kMaxNameBytes, "open.name");
  m.major = r.u16("open.major");
  m.minor = r.u16("open.minor");
  m.features = read_features(r, "open.features");
  r.finish("open");
  return m;
}

OpenAck decode_open_ack(std::span<const uint8_t> payload) {
  Reader r(payload);
  check_generation(r.u16("open_ack.generation"), kOpenGeneration, "open_ack.generation");
  OpenAck m;
  m.name = r.str(kMaxNameBytes, "open_ack.name");
  m.major = r.u16("open_ack.major");
  m.minor = r.u16("open_ack.minor");
  m.features = read_features(r, "open_ack.features");
  r.finish("open_ack");
  return m;
}

std::vector<uint8_t> encode(const Request& m) {
  check_request(m);
  Writer w;
  w.u16(kRequestGeneration);
  w.digest(m.requester);
  w.str(m.topology_id, kMaxIdBytes, "request.topology_id");
  w.str(m.run_id, kMaxIdBytes, "request.run_id");
  w.str(m.stage_id, kMaxIdBytes, "request.stage_id");
  w.str(m.package_ref, kMaxRefBytes, "request.package_ref");
  w.digest(m.manifest_sha256);
  w.str(m.rel_path, kMaxPathBytes, "request.rel_path");
  w.u64(m.offset);
  w.u8(m.expected_size ? 1 : 0);
  if (m.expected_size) w.u64(*m.expected_size);
  w.u8(m.expected_sha256 ? 1 : 0);
  if (m.expected_sha256) w.digest(*m.expected_sha256);
  return w.take();
}

Request decode_request(std::span<const uint8_t> payload) {
  Reader r(payload);
  check_generation(r.u16("request.generation"), kRequestGeneration, "request.generation");
  Request m;
  m.requester = r.digest("request.requester");
  m.topology_id = r.str(kMaxIdBytes, "request.topology_id");
  m.run_id = r.str(kMaxIdBytes, "request.run_id");
  m.stage_id = r.str(kMaxIdBytes, "request.stage_id");
  m.package_ref = r.str(kMaxRefBytes, "request.package_ref");
  m.manifest_sha256 = r.digest("request.manifest_sha256");
  m.rel_path = r.str(kMaxPathBytes, "request.rel_path");
  m.offset = r.u64("request.offset");
  if (r.presence("request.expected_size")) m.expected_size = r.u64("request.expected_size");
  if (r.presence("request.expected_sha256")) m.expected_sha256 = r.digest("request.expected_sha256");
  r.finish("request");
  check_request(m);
  return m;
}

std::vector<uint8_t> encode(const Response& m) {
  Writer w;
  w.u16(kResponseGeneration);
  if (m.accepted) {
    if (m.offset > m.total_size) bad("response.offset", "beyond total_size");
    w.u8(1);
    w.u64(m.offset);
    w.u64(m.total_size);
    w.digest(m.sha256);
  } else {
    w.u8(2);
    w.u8(static_cast<uint8_t>(m.refusal));
  }
  return w.take();
}

Response decode_response(std::span<const uint8_t> payload) {
  Reader r(payload);
  check_generation(r.u16("response.generation"), kResponseGeneration, "response.generation");
  Response m;
  const uint8_t status = r.u8("response.status");
  if (status == 1) {
    m.accepted = true;
    m.offset = r.u64("response.offset");
    m.total_size = r.u64("response.total_size");
    m.sha256 = r.digest("response.sha256");
    if (m.offset > m.total_size) bad("response.offset", "beyond total_size");
  } else if (status == 2) {
    const uint8_t code = r.u8("response.refusal");
    if (code < 1 || code > 4) bad("response.refusal", "unknown code " + std::to_string(code));
    m.refusal = static_cast<Refusal>(code);
  } else {
    bad("response.status", "unknown status " + std::to_string(status));
  }
  r.finish("response");
  return m;
}

std::vector<uint8_t> frame(std::span<const uint8_t> payload) {
  if (payload.empty() || payload.size() > kMaxFrameBytes) bad("frame", "payload of " + std::to_string(payload.size()) + " bytes");
  std::vector<uint8_t> out;
  out.reserve(4 + payload.size());
  const auto n = static_cast<uint32_t>(payload.size());
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

uint32_t frame_length(std::span<const uint8_t, 4> header, uint32_t cap, std::string_view what) {
  const uint32_t n = static_cast<uint32_t>(header[0]) | static_cast<uint32_t>(header[1]) << 8 |
                     static_cast<uint32_t>(header[2]) << 16 | static_cast<uint32_t>(header[3]) << 24;
  const uint32_t limit = std::min(cap, kMaxFrameBytes);
  if (n == 0) bad(what, "empty frame");
  if (n > limit) bad(what, "frame of " + std::to_string(n) + " bytes, more than the cap of " + std::to_string(limit));
  return n;
}

std::string to_hex(const Digest32& d) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  s.reserve(64);
  for (const uint8_t b : d) {
    s.push_back(kHex[b >> 4]);
    s.push_back(kHex[b & 0xf]);
  }
  return s;
}

Digest32 digest_from_hex(std::string_view hex, std::string_view what) {
  if (hex.size() != 64) bad(what, "not 64 hex digits");
  auto nib = [&](char c) -> uint8_t {
    if (c >= '0' && c <= '9') return static_cast<uint8_t>(c - '0');
    if (c >= 'a' && c <= 'f') return static_cast<uint8_t>(c - 'a' + 10);
    if (c >= 'A' && c <= 'F') return static_cast<uint8_t>(c - 'A' + 10);
    bad(what, "not 64 hex digits");
  };
  Digest32 d;
  for (size_t i = 0; i < 32; ++i) d[i] = static_cast<uint8_t>(nib(hex[2 * i]) << 4 | nib(hex[2 * i + 1]));
  return d;
}

}  // namespace skippy::peer::wire
