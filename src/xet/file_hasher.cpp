#include "xet/file_hasher.h"

namespace skippy::xet {

FileHasher::FileHasher(ChunkSink on_chunk, bool with_sha256) : on_chunk_(std::move(on_chunk)) {
  if (with_sha256) sha256_.emplace();
  carry_.reserve(kMaxChunkSize);
}

void FileHasher::emit(std::span<const uint8_t> bytes) {
  const ChunkInfo info{offset_, static_cast<uint32_t>(bytes.size()), chunk_hash(bytes)};
  merkle_.add(info.hash, info.length);
  offset_ += info.length;
  if (on_chunk_) on_chunk_(info, bytes);
}

void FileHasher::update(std::span<const uint8_t> data) {
  if (sha256_) sha256_->update(data);
  size_ += data.size();
  while (!data.empty()) {
    const auto cut = chunker_.next_cut(data);
    if (!cut) {
      carry_.insert(carry_.end(), data.begin(), data.end());
      return;
    }
    if (carry_.empty()) {
      emit(data.first(*cut));
    } else {
      carry_.insert(carry_.end(), data.begin(), data.begin() + static_cast<ptrdiff_t>(*cut));
      emit(carry_);
      carry_.clear();
    }
    data = data.subspan(*cut);
  }
}

FileHasher::Result FileHasher::finish() {
  if (chunker_.finish() > 0) {
    emit(carry_);
    carry_.clear();
  }
  Result r;
  r.file_hash = merkle_.file_hash();
  r.size = size_;
  r.chunk_count = merkle_.chunk_count();
  if (sha256_) r.sha256_hex = sha256_->hex_digest();
  return r;
}

HashedBytes hash_bytes(std::span<const uint8_t> data, bool with_sha256) {
  HashedBytes out;
  FileHasher h([&](const ChunkInfo& c, std::span<const uint8_t>) { out.chunks.push_back(c); }, with_sha256);
  h.update(data);
  out.result = h.finish();
  return out;
}

}  // namespace skippy::xet
