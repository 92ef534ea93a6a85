// Little-endian fields in Xet's binary formats (xorbs, shards): a writer that
// appends to a byte vector and a bounds-checked reader over bytes that came
// from the network. Every read names what it wanted, so a short or hostile
// input ends in an Error(kInvalidInput) saying "<what>: <field> at byte N
// needs K bytes, M left" instead of reading past the end. Internal to the library.
//
// Thread-safety: plain values; one thread at a time.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "skippy/error.h"
#include "xet/hash.h"

namespace skippy::xet {

inline void put_u8(std::vector<uint8_t>& out, uint8_t v) { out.push_back(v); }
inline void put_u24(std::vector<uint8_t>& out, uint32_t v) {
  out.push_back(static_cast<uint8_t>(v));
  out.push_back(static_cast<uint8_t>(v >> 8));
  out.push_back(static_cast<uint8_t>(v >> 16));
}
inline void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
inline void put_u64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
inline void put_bytes(std::vector<uint8_t>& out, std::span<const uint8_t> b) { out.insert(out.end(), b.begin(), b.end()); }
inline void put_zeros(std::vector<uint8_t>& out, size_t n) { out.insert(out.end(), n, uint8_t{0}); }
inline void put_hash(std::vector<uint8_t>& out, const Hash& h) { put_bytes(out, h.bytes); }

inline uint32_t get_u24(const uint8_t* p) { return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16; }
inline uint32_t get_u32(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}
inline uint64_t get_u64(const uint8_t* p) { return uint64_t{get_u32(p)} | uint64_t{get_u32(p + 4)} << 32; }

class ByteReader {
 public:
  ByteReader(std::span<const uint8_t> bytes, std::string_view what) : bytes_(bytes), what_(what) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return bytes_.size() - pos_; }
  bool at_end() const { return pos_ == bytes_.size(); }
  const std::string& what() const { return what_; }

  // The next n bytes, or Error(kInvalidInput) naming `field`.
  std::span<const uint8_t> take(size_t n, std::string_view field) {
    if (remaining() < n) {
      throw Error(ErrorKind::kInvalidInput, what_ + ": " + std::string(field) + " at byte " + std::to_string(pos_) +
                                                " needs " + std::to_string(n) + " bytes, " +
                                                std::to_string(remaining()) + " left (truncated?)");
    }
    const auto s = bytes_.subspan(pos_, n);
    pos_ += n;
    return s;
  }
  // The next n bytes without consuming them.
  std::span<const uint8_t> peek(size_t n, std::string_view field) {
    const size_t at = pos_;
    const auto s = take(n, field);
    pos_ = at;
    return s;
  }
  uint8_t u8(std::string_view field) { return take(1, field)[0]; }
  uint32_t u24(std::string_view field) { return get_u24(take(3, field).data()); }
  uint32_t u32(std::string_view field) { return get_u32(take(4, field).data()); }
  uint64_t u64(std::string_view field) { return get_u64(take(8, field).data()); }
  Hash hash(std::string_view field) {
    Hash h;
    const auto b = take(32, field);
    std::copy(b.begin(), b.end(), h.bytes.begin());
    return h;
  }

  // Error(kInvalidInput) "<what>: <message> (at byte N)".
  [[noreturn]] void fail(const std::string& message) const { fail_at(pos_, message); }
  [[noreturn]] void fail_at(size_t at, const std::string& message) const {
    throw Error(ErrorKind::kInvalidInput, what_ + ": " + message + " (at byte " + std::to_string(at) + ")");
  }

 private:
  std::span<const uint8_t> bytes_;
  std::string what_;
  size_t pos_ = 0;
};

}  // namespace skippy::xet
