// certify() one artifact at a time, as each is written (publish/certify.h).
#include <fcntl.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "gguf/ggml_types.h"
#include "publish/certify.h"
#include "publish/source_digests.h"
#include "skippy/error.h"
#include "util/file.h"
#include "util/mapped_read.h"
#include "util/sha256.h"

namespace skippy::detail {
namespace {

constexpr size_t kReadBack = 1u << 20;

std::string dims_of(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

}  // namespace

void CertifyAsWritten::check_file(const std::filesystem::path& path, uint64_t bytes, const std::string& sha256) {
  const auto f = MappedFile::open(path);
  if (f->size() != bytes) {
    throw_integrity(path.string() + ": " + std::to_string(f->size()) + " bytes on disk, " + std::to_string(bytes) + " written");
  }
  (void)::posix_fadvise(f->fd(), 0, 0, POSIX_FADV_DONTNEED);  // from the device, not the cache
  Sha256 sha;
  std::vector<uint8_t> buf(kReadBack);
  for (uint64_t pos = 0; pos < bytes;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kReadBack, bytes - pos));
    f->pread_exact(pos, {buf.data(), n});
    sha.update({buf.data(), n});
    pos += n;
  }
  hashed_ += bytes;
  const std::string got = sha.hex_digest();
  if (!sha256_equal(got, sha256)) throw_integrity(path.string() + ": SHA-256 " + got + " read back, " + sha256 + " written");
  checked_[path] = sha256;
}

void CertifyAsWritten::check_part(const std::filesystem::path& path, uint64_t bytes, const std::string& sha256) {
  const auto g = GgufFile::open(path);  // the bounds-checked reader
  const auto& file = *g.file();
  if (file.size() != bytes) {
    throw_integrity(path.string() + ": " + std::to_string(file.size()) + " bytes on disk, " + std::to_string(bytes) + " written");
  }
  struct Compare {
    const GgufTensorInfo* part;
    const SourceTensor* src;
    std::unique_ptr<Sha256> sha;
  };
  std::vector<Compare> compares;
  for (const auto& t : g.tensors()) {
    const SourceTensor* src = model_.find_tensor(t.name);
    const std::string name(t.name);
    if (!src) throw_integrity(path.string() + ": tensor '" + name + "' is not in the source");
    if (t.type != src->info->type) {
      throw_integrity(path.string() + ": tensor '" + name + "': type " + std::string(ggml_type_name(t.type)) + ", the source's " +
                      std::string(ggml_type_name(src->info->type)));
    }
    if (t.ne != src->info->ne) {
      throw_integrity(path.string() + ": tensor '" + name + "': dims " + dims_of(t.ne) + ", the source's " + dims_of(src->info->ne));
    }
    if (t.bytes != src->info->bytes) {
      throw_integrity(path.string() + ": tensor '" + name + "': " + std::to_string(t.bytes) + " bytes, the source's " +
                      std::to_string(src->info->bytes));
    }
    if (!located_.emplace(name, Located{path, t.file_offset, t.bytes}).second) {
      throw_integrity("tensor '" + name + "' appears more than once in the package (again in " + path.string() + ")");
    }
    compares.push_back({&t, src, nullptr});
  }
  std::sort(compares.begin(), compares.end(), [](const Compare& a, const Compare& b) { return a.part->file_offset < b.part->file_offset; });
  (void)::posix_fadvise(file.fd(), 0, 0, POSIX_FADV_DONTNEED);  // from the device, not the cache
  Sha256 sha;
  std::vector<uint8_t> buf(kReadBack);
  size_t first = 0;
  for (uint64_t pos = 0; pos < bytes;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kReadBack, bytes - pos));
    file.pread_exact(pos, {buf.data(), n});
    sha.update({buf.data(), n});
    const uint64_t end = pos + n;
    while (first < compares.size() && compares[first].part->file_offset + compares[first].part->bytes <= pos) ++first;
    for (size_t i = first; i < compares.size() && compares[i].part->file_offset < end; ++i) {
      auto& c = compares[i];
      const uint64_t lo = std::max(pos, c.part->file_offset), hi = std::min(end, c.part->file_offset + c.part->bytes);
      if (lo >= hi) continue;
      const uint8_t* mine = buf.data() + (lo - pos);
      const size_t len = static_cast<size_t>(hi - lo);
      const uint64_t rel = lo - c.part->file_offset;
      const bool last = hi == c.part->file_offset + c.part->bytes;
      const std::string name(c.part->name);
      if (!digests_) {  // the source on disk: the bytes themselves
        const auto src = model_.shards()[c.src->shard].file()->bytes();
        const uint8_t* theirs = src.data() + c.src->info->file_offset + rel;
        bool same = true;
        if (!guarded([&] { same = std::memcmp(mine, theirs, len) == 0; })) {
          throw_integrity(model_.shards()[c.src->shard].name() + ": the file shrank while it was read");
        }
        if (!same) {
          size_t k = 0;
          (void)guarded([&] {
            while (k < len && mine[k] == theirs[k]) ++k;
          });
          throw_integrity(path.string() + ": tensor '" + name + "': byte " + std::to_string(rel + k) +
                          " differs from the source");
        }
        compared_ += len;
        continue;
      }
      if (!c.sha) c.sha = std::make_unique<Sha256>();
      c.sha->update({mine, len});
      compared_ += len;
      if (!last) continue;
      const std::string got = c.sha->hex_digest();
      c.sha.reset();
      const auto want = digests_->tensor_sha256(static_cast<size_t>(c.src - model_.tensors().data()));
      if (!want) throw_integrity(path.string() + ": tensor '" + name + "': its bytes did not all arrive from the source");
      if (!sha256_equal(*want, got)) {
        throw_integrity(path.string() + ": tensor '" + name + "' differs from the source (its bytes hash to " + got +
                        ", the source's to " + *want + ")");
      }
    }
    pos = end;
  }
  hashed_ += bytes;
  const std::string got = sha.hex_digest();
  if (!sha256_equal(got, sha256)) throw_integrity(path.string() + ": SHA-256 " + got + " read back, " + sha256 + " written");
  checked_[path] = sha256;
}

CertOutput CertifyAsWritten::finish(const PackageCatalog& catalog, const std::filesystem::path& package_dir) {
  const CertInput in = cert_input_of(catalog, package_dir, /*hash_artifacts=*/true);
  std::vector<size_t> catalogued;
  (void)check_catalog_structure(in, model_, model_.primary().name(), catalogued);
  // Every payload part was checked as it was written, with the digest the catalog names.
  for (const auto& f : in.files) {
    const auto it = checked_.find(f.path);
    if (it == checked_.end()) throw_integrity(f.label + ": was not checked as it was written");
    if (!sha256_equal(it->second, f.sha256)) {
      throw_integrity(f.label + ": checked with SHA-256 " + it->second + " as it was written, the catalog says " + f.sha256);
    }
  }
  // Each tensor is where the carrier locates it: in a checked part, at the offset and size checked there.
  for (const auto& t : in.tensors) {
    const auto it = located_.find(t.name);
    if (it == located_.end() || it->second.file != in.files[t.file].path || it->second.offset != t.offset ||
        it->second.size != t.size) {
      throw_integrity("tensor '" + t.name + "': the carrier locates it in " + in.files[t.file].label + " at " +
                      std::to_string(t.offset) + " (" + std::to_string(t.size) + " bytes), not where the parts hold it");
    }
  }
  CertOutput out;
  for (size_t i = 0; i < model_.shards().size(); ++i) {
    const auto& shard = model_.shards()[i];
    std::optional<std::string> sha;
    if (digests_) {
      sha = digests_->shard_sha256(i);
      if (!sha) throw_integrity(shard.name() + ": its bytes did not all arrive, so its SHA-256 is unknown");
    } else {
      sha = sha256_file(shard.path());
      hashed_ += shard.file_size();
    }
    out.shard_sha256.push_back(*sha);
    out.shard_bytes.push_back(shard.file_size());
  }
  check_source_identity(in, model_, out.shard_sha256, out.shard_bytes);
  out.tensors = in.tensors.size();
  out.bytes_compared = compared_;
  out.bytes_hashed = hashed_;
  return out;
}

}  // namespace skippy::detail
