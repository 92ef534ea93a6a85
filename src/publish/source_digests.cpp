#include "publish/source_digests.h"

#include <algorithm>

namespace skippy::detail {

SourceDigests::SourceDigests(const ModelSource& model)
    : model_(model),
      by_shard_(model.shards().size()),
      cursor_(model.shards().size(), 0),
      open_(model.tensors().size()),
      tensor_sha_(model.tensors().size()),
      shard_sha_(model.shards().size()) {
  const auto& ts = model.tensors();
  for (size_t i = 0; i < ts.size(); ++i) {
    if (ts[i].info->bytes == 0) {
      tensor_sha_[i] = sha256_hex(std::string_view());  // no byte will come
    } else {
      by_shard_[ts[i].shard].push_back(i);
    }
  }
  for (auto& v : by_shard_) {
    std::sort(v.begin(), v.end(), [&](size_t a, size_t b) { return ts[a].info->file_offset < ts[b].info->file_offset; });
  }
}

void SourceDigests::observe(size_t shard, uint64_t offset, std::span<const uint8_t> bytes) {
  if (shard >= by_shard_.size()) return;
  const auto& order = by_shard_[shard];
  const uint64_t end = offset + bytes.size();
  size_t& cur = cursor_[shard];
  for (size_t k = cur; k < order.size(); ++k) {
    const size_t i = order[k];
    const auto& info = *model_.tensors()[i].info;
    const uint64_t t0 = info.file_offset, t1 = info.file_offset + info.bytes;
    if (t0 >= end) break;
    const uint64_t lo = std::max(t0, offset), hi = std::min(t1, end);
    if (lo >= hi) continue;  // ended before these bytes (skipped: never complete)
    if (!open_[i]) {
      if (lo != t0) continue;  // its first bytes went by unseen: no digest (the check reports it)
      open_[i] = std::make_unique<Sha256>();
    }
    open_[i]->update(bytes.subspan(static_cast<size_t>(lo - offset), static_cast<size_t>(hi - lo)));
    if (hi == t1) {
      std::string hex = open_[i]->hex_digest();
      open_[i].reset();
      std::lock_guard g(mu_);
      tensor_sha_[i] = std::move(hex);
    }
  }
  // Tensors wholly before `end` are done with (complete, or missed).
  while (cur < order.size()) {
    const auto& info = *model_.tensors()[order[cur]].info;
    if (info.file_offset + info.bytes > end) break;
    ++cur;
  }
}

void SourceDigests::set_shard_sha256(size_t shard, const std::string& sha256) {
  std::lock_guard g(mu_);
  if (shard < shard_sha_.size()) shard_sha_[shard] = sha256;
}

std::optional<std::string> SourceDigests::tensor_sha256(size_t index) const {
  std::lock_guard g(mu_);
  return index < tensor_sha_.size() ? tensor_sha_[index] : std::nullopt;
}

std::optional<std::string> SourceDigests::shard_sha256(size_t shard) const {
  std::lock_guard g(mu_);
  return shard < shard_sha_.size() ? shard_sha_[shard] : std::nullopt;
}

}  // namespace skippy::detail
