#include "xet/chunk_codec.h"

#include <lz4frame.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "skippy/error.h"
#include "xet/bytes.h"

namespace skippy::xet {

const char* chunk_scheme_name(ChunkScheme scheme) noexcept {
  switch (scheme) {
    case ChunkScheme::kNone:
      return "none";
    case ChunkScheme::kLz4:
      return "lz4";
    case ChunkScheme::kBg4Lz4:
      return "bg4-lz4";
  }
  return "unknown";
}

ChunkHeader parse_chunk_header(std::span<const uint8_t, kChunkHeaderBytes> b, std::string_view what, size_t at) {
  auto fail = [&](const std::string& m) {
    throw Error(ErrorKind::kInvalidInput,
                std::string(what) + ": chunk header at byte " + std::to_string(at) + ": " + m);
  };
  if (std::memcmp(b.data(), "XETBLOB", 7) == 0) fail("is the start of a xorb footer (XETBLOB), not a chunk");
  if (b[0] != 0) fail("version " + std::to_string(b[0]) + " (only 0 is known)");
  ChunkHeader h;
  h.stored_size = get_u24(&b[1]);
  if (b[4] > 2) fail("unknown compression scheme " + std::to_string(b[4]));
  h.scheme = static_cast<ChunkScheme>(b[4]);
  h.size = get_u24(&b[5]);
  if (h.size == 0) fail("an empty chunk");
  if (h.size > kMaxChunkBytes) {
    fail("declares " + std::to_string(h.size) + " bytes, more than a chunk's " + std::to_string(kMaxChunkBytes));
  }
  if (h.stored_size == 0 || h.stored_size > kMaxStoredChunkBytes) {
    fail("declares " + std::to_string(h.stored_size) + " stored bytes (1 to " + std::to_string(kMaxStoredChunkBytes) +
         " allowed)");
  }
  if (h.scheme == ChunkScheme::kNone && h.stored_size != h.size) {
    fail("stored as is but declares " + std::to_string(h.stored_size) + " stored bytes for " +
         std::to_string(h.size) + " bytes");
  }
  return h;
}

void put_chunk_header(std::vector<uint8_t>& out, const ChunkHeader& h) {
  put_u8(out, 0);
  put_u24(out, h.stored_size);
  put_u8(out, static_cast<uint8_t>(h.scheme));
  put_u24(out, h.size);
}

namespace {
// Group g of n bytes holds n/4 bytes, plus one when g < n % 4.
size_t bg4_group_start(size_t n, size_t g) noexcept {
  const size_t q = n / 4, r = n % 4;
  return g * q + (g < r ? g : r);
}
}  // namespace

void bg4_split(std::span<const uint8_t> in, uint8_t* out) noexcept {
  const size_t n = in.size();
  uint8_t* g[4];
  for (size_t i = 0; i < 4; ++i) g[i] = out + bg4_group_start(n, i);
  const size_t q = n / 4;
  for (size_t i = 0; i < q; ++i) {
    g[0][i] = in[4 * i];
    g[1][i] = in[4 * i + 1];
    g[2][i] = in[4 * i + 2];
    g[3][i] = in[4 * i + 3];
  }
  for (size_t j = 0; j < n % 4; ++j) g[j][q] = in[4 * q + j];
}

void bg4_regroup(std::span<const uint8_t> in, uint8_t* out) noexcept {
  const size_t n = in.size();
  const uint8_t* g[4];
  for (size_t i = 0; i < 4; ++i) g[i] = in.data() + bg4_group_start(n, i);
  const size_t q = n / 4;
  for (size_t i = 0; i < q; ++i) {
    out[4 * i] = g[0][i];
    out[4 * i + 1] = g[1][i];
    out[4 * i + 2] = g[2][i];
    out[4 * i + 3] = g[3][i];
  }
  for (size_t j = 0; j < n % 4; ++j) out[4 * q + j] = g[j][q];
}

struct ChunkCodec::Lz4 {
  LZ4F_cctx* cctx = nullptr;
  LZ4F_dctx* dctx = nullptr;
  std::vector<uint8_t> frame;  // the candidate being compressed

  Lz4() {
    if (LZ4F_isError(LZ4F_createCompressionContext(&cctx, LZ4F_VERSION)) ||
        LZ4F_isError(LZ4F_createDecompressionContext(&dctx, LZ4F_VERSION))) {
      LZ4F_freeCompressionContext(cctx);
      LZ4F_freeDecompressionContext(dctx);
      throw Error(ErrorKind::kIo, "LZ4: cannot create a frame context (out of memory?)");
    }
  }
  ~Lz4() {
    LZ4F_freeCompressionContext(cctx);
    LZ4F_freeDecompressionContext(dctx);
  }

  static LZ4F_preferences_t prefs(size_t n) {
    LZ4F_preferences_t p;
    std::memset(&p, 0, sizeof p);
    // One block holds the whole chunk: 64 KiB blocks up to 64 KiB, else 256 KiB.
    p.frameInfo.blockSizeID = n <= 64 * 1024 ? LZ4F_max64KB : LZ4F_max256KB;
    p.frameInfo.blockMode = LZ4F_blockIndependent;
    p.frameInfo.contentChecksumFlag = LZ4F_noContentChecksum;
    p.frameInfo.blockChecksumFlag = LZ4F_noBlockChecksum;
    p.frameInfo.frameType = LZ4F_frame;
    p.compressionLevel = 0;  // LZ4's fast mode
    return p;
  }

  // Compresses `in` into `frame`; false when the frame would not be smaller
  // than `limit` bytes.
  bool compress(std::span<const uint8_t> in, size_t limit) {
    const LZ4F_preferences_t p = prefs(in.size());
    frame.resize(LZ4F_compressFrameBound(in.size(), &p));
    size_t n = 0;
    auto step = [&](size_t r) {
      if (LZ4F_isError(r)) throw Error(ErrorKind::kIo, std::string("LZ4: compression failed: ") + LZ4F_getErrorName(r));
      n += r;
    };
    step(LZ4F_compressBegin(cctx, frame.data(), frame.size(), &p));
    step(LZ4F_compressUpdate(cctx, frame.data() + n, frame.size() - n, in.data(), in.size(), nullptr));
    step(LZ4F_compressEnd(cctx, frame.data() + n, frame.size() - n, nullptr));
    frame.resize(n);
    return n < limit;
  }

  // Decodes one whole frame that fills exactly `out_size` bytes.
  void decompress(std::span<const uint8_t> in, uint8_t* out, size_t out_size, const std::string& where) {
    size_t in_pos = 0, out_pos = 0;
    for (;;) {
      size_t out_n = out_size - out_pos, in_n = in.size() - in_pos;
      const size_t r = LZ4F_decompress(dctx, out + out_pos, &out_n, in.data() + in_pos, &in_n, nullptr);
      if (LZ4F_isError(r)) {
        LZ4F_resetDecompressionContext(dctx);
        throw Error(ErrorKind::kInvalidInput, where + ": not a valid LZ4 frame (" + LZ4F_getErrorName(r) + ")");
      }
      in_pos += in_n;
      out_pos += out_n;
      if (r == 0) break;  // the frame is complete
      if (in_n == 0 && out_n == 0) {
        LZ4F_resetDecompressionContext(dctx);
        if (in_pos == in.size()) throw Error(ErrorKind::kInvalidInput, where + ": the LZ4 frame is truncated");
        throw Error(ErrorKind::kIntegrity, where + ": decodes to more than the " + std::to_string(out_size) +
                                               " bytes its header declares");
      }
    }
    if (in_pos != in.size()) {
      throw Error(ErrorKind::kInvalidInput, where + ": " + std::to_string(in.size() - in_pos) +
                                                " bytes follow the end of the LZ4 frame");
    }
    if (out_pos != out_size) {
      throw Error(ErrorKind::kIntegrity, where + ": decodes to " + std::to_string(out_pos) + " bytes, its header declares " +
                                             std::to_string(out_size));
    }
  }
};

ChunkCodec::ChunkCodec() : lz4_(std::make_unique<Lz4>()) {}
ChunkCodec::~ChunkCodec() = default;

// The scheme the chunk's first 8 KiB favour: kNone when neither shrinks them
// by at least 1/64 (the whole chunk would hardly pay for its decoding).
CompressionPolicy ChunkCodec::sample(std::span<const uint8_t> chunk) {
  constexpr size_t kSample = 8 * 1024;
  const auto s = chunk.first(std::min(chunk.size(), kSample));
  const size_t enough = s.size() - s.size() / 64;
  size_t lz4 = SIZE_MAX, bg4 = SIZE_MAX;
  if (lz4_->compress(s, enough)) lz4 = lz4_->frame.size();
  scratch_.resize(s.size());
  bg4_split(s, scratch_.data());
  if (lz4_->compress(scratch_, enough)) bg4 = lz4_->frame.size();
  if (lz4 == SIZE_MAX && bg4 == SIZE_MAX) return CompressionPolicy::kNone;
  return bg4 < lz4 ? CompressionPolicy::kBg4Lz4 : CompressionPolicy::kLz4;
}

ChunkHeader ChunkCodec::encode(std::span<const uint8_t> chunk, CompressionPolicy policy, std::vector<uint8_t>& out) {
  if (chunk.empty() || chunk.size() > kMaxChunkBytes) {
    throw Error(ErrorKind::kUsage, "xorb chunk of " + std::to_string(chunk.size()) + " bytes (1 to " +
                                       std::to_string(kMaxChunkBytes) + " allowed)");
  }
  ChunkHeader h;
  h.size = static_cast<uint32_t>(chunk.size());
  h.scheme = ChunkScheme::kNone;
  h.stored_size = h.size;
  std::vector<uint8_t> best;
  if (policy == CompressionPolicy::kSampled) policy = sample(chunk);
  if (policy == CompressionPolicy::kLz4 || policy == CompressionPolicy::kBest) {
    if (lz4_->compress(chunk, h.stored_size)) {
      h.scheme = ChunkScheme::kLz4;
      h.stored_size = static_cast<uint32_t>(lz4_->frame.size());
      best.swap(lz4_->frame);
    }
  }
  if (policy == CompressionPolicy::kBg4Lz4 || policy == CompressionPolicy::kBest) {
    scratch_.resize(chunk.size());
    bg4_split(chunk, scratch_.data());
    if (lz4_->compress(scratch_, h.stored_size)) {
      h.scheme = ChunkScheme::kBg4Lz4;
      h.stored_size = static_cast<uint32_t>(lz4_->frame.size());
      best.swap(lz4_->frame);
    }
  }
  put_chunk_header(out, h);
  if (h.scheme == ChunkScheme::kNone) {
    put_bytes(out, chunk);
  } else {
    put_bytes(out, best);
  }
  return h;
}

void ChunkCodec::decode(const ChunkHeader& h, std::span<const uint8_t> stored, uint8_t* out, std::string_view what,
                        size_t at) {
  const std::string where = std::string(what) + ": chunk at byte " + std::to_string(at);
  if (stored.size() != h.stored_size) {
    throw Error(ErrorKind::kInvalidInput, where + ": " + std::to_string(stored.size()) + " stored bytes, header declares " +
                                              std::to_string(h.stored_size));
  }
  switch (h.scheme) {
    case ChunkScheme::kNone:
      std::memcpy(out, stored.data(), h.size);
      return;
    case ChunkScheme::kLz4:
      lz4_->decompress(stored, out, h.size, where);
      return;
    case ChunkScheme::kBg4Lz4:
      scratch_.resize(h.size);
      lz4_->decompress(stored, scratch_.data(), h.size, where);
      bg4_regroup(scratch_, out);
      return;
  }
}

}  // namespace skippy::xet
