#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>

#include "publish/certify.h"
#include "util/file.h"
#include "skippy/error.h"
#include "gguf/ggml_types.h"
#include "skippy/model_source.h"
#include "skippy/package_catalog.h"
#include "skippy/package_convert.h"
#include "skippy/package_layout.h"
#include "util/sha256.h"
#include "util/mapped_read.h"
#include "util/parallel.h"

namespace skippy {
namespace certify_detail {

namespace fs = std::filesystem;

std::string dims_text(const std::vector<uint64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

constexpr uint64_t kChunk = 8u << 20;

// Hashes [from, to) of a mapping into `sha`, in chunks, releasing pages behind.
void hash_range(const MappedFile& f, uint64_t from, uint64_t to, Sha256& sha, const std::function<void(uint64_t)>& done) {
  const auto bytes = f.bytes();
  for (uint64_t pos = from; pos < to;) {
    const uint64_t n = std::min(kChunk, to - pos);
    detail::prefetch_mapped(bytes, pos + n, kChunk);
    if (!detail::guarded([&] { sha.update({bytes.data() + pos, static_cast<size_t>(n)}); })) {
      throw_integrity(f.path().string() + ": the file shrank while it was read");
    }
    detail::release_mapped(bytes, pos, n);
    pos += n;
    done(n);
  }
}

}  // namespace certify_detail

namespace detail {

// Everything certify() checks without the bytes: every catalogued source
// tensor in the package exactly once with its type, dims and size, nothing
// else there, the layer count, the carrier's KVs, the number of source
// files. Returns, per source tensor, its index in in.tensors (for those
// `catalogued` lists).
std::vector<size_t> check_catalog_structure(const CertInput& in, const ModelSource& model, const std::string& src_name,
                                            std::vector<size_t>& catalogued) {
  using namespace certify_detail;
  // Tensor coverage: every source tensor exactly once, same type and dims.
  std::unordered_map<std::string, size_t> by_name;
  for (size_t i = 0; i < in.tensors.size(); ++i) {
    if (!by_name.emplace(in.tensors[i].name, i).second) {
      throw_integrity("tensor '" + in.tensors[i].name + "' appears more than once in the package");
    }
  }
  // The source tensors a catalog holds: all but zero-dimension placeholders
  // (catalog_skips_tensor), as the reference's source inventory skips them.
  catalogued.clear();
  for (size_t i = 0; i < model.tensors().size(); ++i) {
    if (!catalog_skips_tensor(model.tensors()[i].info->ne)) catalogued.push_back(i);
  }
  std::vector<size_t> match(model.tensors().size());
  for (const size_t i : catalogued) {
    const auto& st = model.tensors()[i];
    const std::string name(st.info->name);
    const auto it = by_name.find(name);
    if (it == by_name.end()) throw_integrity("tensor '" + name + "' of the source " + src_name + " is not in the package");
    const auto& pt = in.tensors[it->second];
    std::vector<uint64_t> sd(st.info->ne.begin(), st.info->ne.end());
    if (pt.type != st.info->type) {
      throw_integrity("tensor '" + name + "': type " + std::string(ggml_type_name(pt.type)) + " in the package, " +
                      std::string(ggml_type_name(st.info->type)) + " in the source " + src_name);
    }
    if (pt.dims != sd) {
      throw_integrity("tensor '" + name + "': dims " + dims_text(pt.dims) + " in the package, " + dims_text(sd) +
                      " in the source " + src_name);
    }
    if (pt.size != st.info->bytes) {
      throw_integrity("tensor '" + name + "': " + std::to_string(pt.size) + " stored bytes in the package, " +
                      std::to_string(st.info->bytes) + " in the source " + src_name);
    }
    match[i] = it->second;
  }
  if (catalogued.size() != in.tensors.size()) {
    std::vector<char> used(in.tensors.size(), 0);
    for (const size_t i : catalogued) used[match[i]] = 1;
    for (size_t i = 0; i < used.size(); ++i) {
      if (!used[i]) throw_integrity("tensor '" + in.tensors[i].name + "' of the package is not in the source " + src_name);
    }
  }
  if (model.layer_count() != in.layer_count) {
    throw_integrity("layer_count " + std::to_string(in.layer_count) + " of the package differs from the source's " +
                    std::to_string(model.layer_count()));
  }
  // The carrier's KVs are the source's (split.* aside; general.alignment added when absent).
  if (in.kvs) {
    const GgufFile& src = model.primary();
    size_t expected = 0;
    for (const auto& kv : src.kvs()) {
      if (kv.key.starts_with("split.")) continue;
      ++expected;
      const GgufKv* c = in.kvs->find_kv(kv.key);
      if (!c) throw_integrity("KV " + std::string(kv.key) + " of the source is not in the package's metadata");
      if (c->value.type() != kv.value.type() || c->value.encoded().size() != kv.value.encoded().size() ||
          !std::equal(c->value.encoded().begin(), c->value.encoded().end(), kv.value.encoded().begin())) {
        throw_integrity("KV " + std::string(kv.key) + ": the package's value differs from the source's");
      }
    }
    for (const auto& kv : in.kvs->kvs()) {
      if (is_carrier_key(kv.key) || is_fragment_key(kv.key) || src.find_kv(kv.key)) continue;
      if (kv.key == "general.alignment" && !src.find_kv(kv.key)) continue;
      throw_integrity("KV " + std::string(kv.key) + " of the package's metadata is not in the source " + src_name);
    }
    (void)expected;
  }
  if (!in.source_files.empty() && in.source_files.size() != model.shards().size()) {
    throw_integrity("the package names " + std::to_string(in.source_files.size()) + " source files, the source " +
                    src_name + " has " + std::to_string(model.shards().size()));
  }
  return match;
}

// The source files the root names (in.source_files) are these shards, of
// these sizes and digests (matched by file name when every name matches,
// else by order).
void check_source_identity(const CertInput& in, const ModelSource& model, const std::vector<std::string>& sha,
                           const std::vector<uint64_t>& bytes) {
  namespace fs = std::filesystem;
  // Source identity: the files the root names are these.
  // Root files match shards by file name when every name matches, else by order.
  std::vector<size_t> shard_of(in.source_files.size());
  bool by_name_ok = true;
  for (size_t i = 0; i < in.source_files.size(); ++i) {
    const std::string base = fs::path(in.source_files[i].path).filename().string();
    shard_of[i] = SIZE_MAX;
    for (size_t j = 0; j < model.shards().size(); ++j) {
      if (model.shards()[j].path().filename().string() == base) shard_of[i] = j;
    }
    by_name_ok &= shard_of[i] != SIZE_MAX;
  }
  for (size_t i = 0; i < in.source_files.size(); ++i) {
    if (!by_name_ok) shard_of[i] = i;
  }
  for (size_t k = 0; k < in.source_files.size(); ++k) {
    const auto& e = in.source_files[k];
    const size_t i = shard_of[k];
    if (e.bytes && *e.bytes != bytes[i]) {
      throw_integrity("source file " + e.path + ": " + std::to_string(*e.bytes) + " bytes in the package's source_model, " +
                      std::to_string(bytes[i]) + " in " + model.shards()[i].name());
    }
    if (e.sha256 && !sha256_equal(*e.sha256, sha[i])) {
      throw_integrity("source file " + e.path + ": SHA-256 " + *e.sha256 + " in the package's source_model, but " +
                      model.shards()[i].name() + " hashes to " + sha[i] +
                      " (not the source the package was written from)");
    }
  }
}

CertOutput certify(const CertInput& in, const std::filesystem::path& source, unsigned threads,
                   const std::function<void(uint64_t, uint64_t)>& on_progress) {
  using namespace certify_detail;
  namespace fs = std::filesystem;
  const auto model = ModelSource::open(source);
  const std::string src_name = source.filename().string();
  std::vector<size_t> catalogued;
  const std::vector<size_t> match = check_catalog_structure(in, model, src_name, catalogued);

  // Bytes: one job per source shard (hash it; compare every tensor it holds
  // with the package's bytes at the locator), one per package file (hash).
  std::vector<std::shared_ptr<const MappedFile>> pkg_files;
  for (const auto& f : in.files) {
    auto mf = MappedFile::open(f.path);
    if (mf->size() != f.bytes) {
      throw_integrity(f.label + ": " + std::to_string(mf->size()) + " bytes, the catalog says " + std::to_string(f.bytes));
    }
    pkg_files.push_back(std::move(mf));
  }
  const size_t n_shards = model.shards().size();
  std::vector<std::vector<size_t>> per_shard(n_shards);  // source tensor indexes by offset
  for (const size_t i : catalogued) per_shard[model.tensors()[i].shard].push_back(i);
  for (auto& v : per_shard) {
    std::sort(v.begin(), v.end(), [&](size_t a, size_t b) {
      return model.tensors()[a].info->file_offset < model.tensors()[b].info->file_offset;
    });
  }
  std::vector<uint64_t> sizes;
  uint64_t total = 0;
  for (const auto& s : model.shards()) sizes.push_back(s.file_size());
  for (const auto& f : in.files) sizes.push_back(in.hash_files ? f.bytes : 0);
  for (auto s : sizes) total += s;
  std::atomic<uint64_t> done{0}, compared{0}, hashed{0};
  std::mutex progress_mu;
  auto progress = [&](uint64_t n) {
    const uint64_t d = done.fetch_add(n) + n;
    if (on_progress) {
      std::lock_guard g(progress_mu);
      on_progress(d, total);
    }
  };
  CertOutput out;
  out.shard_sha256.resize(n_shards);
  out.shard_bytes.resize(n_shards);
  detail::run_jobs_largest_first(sizes, threads, [&](size_t job) {
    if (job >= n_shards) {
      const size_t f = job - n_shards;
      if (!in.hash_files) return;
      Sha256 sha;
      hash_range(*pkg_files[f], 0, pkg_files[f]->size(), sha, progress);
      hashed += pkg_files[f]->size();
      const std::string got = sha.hex_digest();
      if (!sha256_equal(got, in.files[f].sha256)) {
        throw_integrity(in.files[f].label + ": SHA-256 " + got + " differs from the catalog's " + in.files[f].sha256);
      }
      return;
    }
    const auto& shard = model.shards()[job];
    const auto file = shard.file();
    const auto sbytes = file->bytes();
    Sha256 sha;
    uint64_t pos = 0;
    for (const size_t ti : per_shard[job]) {
      const auto& st = model.tensors()[ti];
      const auto& pt = in.tensors[match[ti]];
      const uint64_t start = st.info->file_offset;
      if (start < pos) throw_invalid(shard.name() + ": tensor '" + pt.name + "' overlaps the tensor before it");
      hash_range(*file, pos, start, sha, progress);
      const auto& pf = *pkg_files[pt.file];
      if (pt.offset > pf.size() || pt.size > pf.size() - pt.offset) {
        throw_integrity("tensor '" + pt.name + "': extent runs past the end of " + in.files[pt.file].label);
      }
      const auto pbytes = pf.bytes();
      for (uint64_t k = 0; k < pt.size;) {
        const uint64_t n = std::min(kChunk, pt.size - k);
        detail::prefetch_mapped(sbytes, start + k + n, kChunk);
        bool same = true;
        const bool ok = detail::guarded([&] {
          sha.update({sbytes.data() + start + k, static_cast<size_t>(n)});
          same = std::memcmp(sbytes.data() + start + k, pbytes.data() + pt.offset + k, static_cast<size_t>(n)) == 0;
        });
        if (!ok) throw_integrity(shard.name() + " or " + in.files[pt.file].label + ": the file shrank while it was read");
        if (!same) {
          uint64_t at = 0;
          (void)detail::guarded([&] {
            while (at < n && sbytes[start + k + at] == pbytes[pt.offset + k + at]) ++at;
          });
          throw_integrity("tensor '" + pt.name + "': byte " + std::to_string(k + at) + " differs from the source " +
                          shard.name() + " (package " + in.files[pt.file].label + ", offset " +
                          std::to_string(pt.offset + k + at) + ")");
        }
        detail::release_mapped(sbytes, start + k, n);
        detail::release_mapped(pbytes, pt.offset + k, n);
        k += n;
        compared += n;
        progress(n);
      }
      pos = start + pt.size;
    }
    hash_range(*file, pos, file->size(), sha, progress);
    out.shard_sha256[job] = sha.hex_digest();
    out.shard_bytes[job] = file->size();
    hashed += file->size();
  });
  check_source_identity(in, model, out.shard_sha256, out.shard_bytes);
  out.tensors = in.tensors.size();
  out.bytes_compared = compared.load();
  out.bytes_hashed = hashed.load();
  return out;
}

}  // namespace detail

namespace detail {

CertInput cert_input_of(const PackageCatalog& catalog, const std::filesystem::path& package_dir, bool hash_artifacts) {
  CertInput in;
  std::vector<size_t> file_of(catalog.artifacts.size(), SIZE_MAX);
  for (size_t i = 0; i < catalog.artifacts.size(); ++i) {
    const auto& a = catalog.artifacts[i];
    if (a.kind != CatalogArtifactKind::kPayload) continue;
    file_of[i] = in.files.size();
    in.files.push_back({package_dir / a.path, "artifact " + a.id + " (" + a.path + ")", a.bytes, a.sha256});
  }
  for (const auto& t : catalog.tensors) {
    in.tensors.push_back({t.name, t.ggml_type, t.dims, file_of.at(t.artifact), t.offset, t.stored_bytes});
  }
  in.kvs = catalog.carrier_file.get();
  // The source files the package records with their sizes and digests.
  for (const auto& f : catalog.source_model.files) {
    if (f.size_bytes && f.sha256) in.source_files.push_back({f.path, *f.size_bytes, *f.sha256});
  }
  in.layer_count = catalog.layer_count;
  in.hash_files = hash_artifacts;
  return in;
}

}  // namespace detail

CertifyResult certify_catalog(const PackageCatalog& catalog, const std::filesystem::path& package_dir,
                              const std::filesystem::path& source, bool hash_artifacts, unsigned threads,
                              const std::function<void(uint64_t, uint64_t)>& on_progress) {
  const auto in = detail::cert_input_of(catalog, package_dir, hash_artifacts);
  const auto out = detail::certify(in, source, threads, on_progress);
  return {out.tensors, out.bytes_compared, out.bytes_hashed, out.shard_sha256, out.shard_bytes};
}

}  // namespace skippy
