// validate-package's schema 1 step (publish/schema_check.h): every source
// shard and artifact hashed, every source tensor found in exactly one
// fragment, the right one, byte-identical, and the manifest's package-level
// rules; write-package --validate's per-artifact check (PackageCheck,
// validator_internal.h) runs the same Validator.
#include "skippy/package_validator.h"

#include <fcntl.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <optional>
#include <map>

#include "publish/generation_inference.h"
#include "publish/projector_check.h"
#include "publish/source_digests.h"
#include "publish/source_record.h"
#include "publish/validator_internal.h"
#include "publish/schema_check.h"
#include "skippy/error.h"
#include "util/file.h"
#include "gguf/ggml_types.h"
#include "skippy/gguf.h"
#include "skippy/manifest.h"
#include "skippy/model_source.h"
#include "skippy/package_layout.h"
#include "util/sha256.h"
#include "util/mapped_read.h"
#include "util/parallel.h"

namespace skippy {
namespace validator_detail {

namespace fs = std::filesystem;
using detail::describe_projector;
using detail::is_projector_gguf;
constexpr size_t kHashChunk = 8u << 20;
constexpr size_t kRereadChunk = 1u << 20;  // a fragment read back with pread (a streamed source)
constexpr std::string_view kAlignmentKey = "general.alignment";

struct Artifact {
  const ArtifactEntry* entry;
  PartRole role;
  uint32_t layer = 0;
};

std::string expected_path_for(const SourceTensor& t) {
  switch (t.placement.role) {
    case TensorRole::kGlobal: return std::string(kMetadataPath);
    case TensorRole::kEmbeddings: return std::string(kEmbeddingsPath);
    case TensorRole::kOutput: return std::string(kOutputPath);
    case TensorRole::kLayer: return layer_artifact_path(t.placement.layer);
  }
  return {};
}

bool placement_matches(const SourceTensor& t, const Artifact& a) {
  switch (a.role) {
    case PartRole::kMetadata: return t.placement.role == TensorRole::kGlobal;
    case PartRole::kEmbeddings: return t.placement.role == TensorRole::kEmbeddings;
    case PartRole::kOutput: return t.placement.role == TensorRole::kOutput;
    case PartRole::kLayer: return t.placement.role == TensorRole::kLayer && t.placement.layer == a.layer;
    case PartRole::kProjector: return false;
  }
  return false;
}

std::string dims(const std::vector<int64_t>& ne) {
  std::string s = "[";
  for (size_t i = 0; i < ne.size(); ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

bool same_value(const GgufValue& a, const GgufValue& b) {
  return a.type() == b.type() && std::ranges::equal(a.encoded(), b.encoded());
}

std::string describe(const GgufValue& v) {
  std::string s(gguf_type_name(v.type()));
  if (v.is_array()) return s + " of " + std::to_string(v.array_size()) + " " + std::string(gguf_type_name(v.array_type()));
  if (auto t = v.as_string()) return s + " \"" + std::string(t->substr(0, 60)) + (t->size() > 60 ? "...\"" : "\"");
  if (auto u = v.as_uint()) return s + " " + std::to_string(*u);
  if (auto i = v.as_int()) return s + " " + std::to_string(*i);
  if (auto f = v.as_float()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, " %.9g", *f);  // enough digits to tell two f32 apart
    return s + buf;
  }
  if (auto b = v.as_bool()) return s + (*b ? " true" : " false");
  return s;
}

bool is_role_key(std::string_view key) { return key == kRoleKey || key == kLayerStartKey || key == kLayerEndKey; }

class Validator {
 public:
  // `digests`: a source that is not on disk (write-package --stream): the
  // shards' and tensors' SHA-256s stand in for its bytes.
  Validator(const fs::path& pkg, const ModelSource& model, const detail::SourceDigests* digests,
            const ValidateOptions& opt)
      : pkg_(pkg), model_(model), digests_(digests), opt_(opt), seen_(model.tensors().size()) {
    root_ = fs::absolute(pkg);
    std::error_code ec;
    boundary_ = local_package_boundary(pkg, ec);  // unresolvable: every artifact is reported missing
  }

  void problem(std::string s) {
    std::lock_guard g(mu_);
    problems_.push_back(std::move(s));
  }

  void warning(std::string s) {
    std::lock_guard g(mu_);
    warnings_.push_back(std::move(s));
  }

  void progress(uint64_t n) {
    const uint64_t done = done_.fetch_add(n) + n;
    hashed_.fetch_add(n);
    if (opt_.on_progress) {
      std::lock_guard g(mu_);
      opt_.on_progress(done, total_);
    }
  }

  // SHA-256 of a whole file straight from its mapping (no copy into a
  // buffer); nullopt if the file shrank while being read.
  std::optional<std::string> hash_mapped(const MappedFile& file) {
    const auto bytes = file.bytes();
    Sha256 sha;
    for (uint64_t pos = 0; pos < bytes.size(); pos += kHashChunk) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(kHashChunk, bytes.size() - pos));
      detail::prefetch_mapped(bytes, pos + kHashChunk, kHashChunk);
      if (!detail::guarded([&] { sha.update(bytes.subspan(pos, n)); })) return std::nullopt;
      detail::release_mapped(bytes, pos, n);
      progress(n);
    }
    return sha.hex_digest();
  }

  void check_shard(size_t i) {
    const auto& f = model_.shards()[i];
    std::optional<std::string> hashed;
    if (digests_) {
      hashed = digests_->shard_sha256(i);  // hashed as it arrived (and checked against the Hub's)
      if (!hashed) {
        problem(f.name() + ": the source's bytes were not all read, so its SHA-256 is unknown");
        return;
      }
      progress(f.file_size());
    } else {
      hashed = hash_mapped(*f.file());
    }
    if (!hashed) {
      problem(f.name() + ": the file shrank while it was being read (changed by another process?)");
      return;
    }
    const auto& sha = *hashed;
    {
      std::lock_guard g(mu_);
      source_files_[i] = {fs::path(f.name()).filename().string(), f.file_size(), sha};  // a name, not a local path
    }
    if (i < m_->source_model.files.size()) {
      const auto& decl = m_->source_model.files[i];
      const std::string where = "source_model.files[" + std::to_string(i) + "] (" + decl.path + ")";
      if (!decl.size_bytes || !decl.sha256) {
        // The reference writer leaves them null for a local source.
        warning(where + ": " + std::string(!decl.size_bytes ? "size_bytes" : "") +
                (!decl.size_bytes && !decl.sha256 ? " and " : "") + (!decl.sha256 ? "sha256" : "") +
                " not recorded (null); the source has " + std::to_string(f.file_size()) + " bytes, SHA-256 " + sha);
      }
      if (decl.size_bytes && *decl.size_bytes != f.file_size()) {
        problem(where + ": declares " + std::to_string(*decl.size_bytes) + " bytes, " + f.name() + " has " +
                std::to_string(f.file_size()));
      }
      if (decl.sha256 && !sha256_equal(*decl.sha256, sha)) {
        problem(where + ": declares SHA-256 " + *decl.sha256 + ", " + f.name() + " hashes to " + sha);
      }
    }
    if (i == 0 && !sha256_equal(m_->source_model.sha256, sha)) {
      std::lock_guard g(mu_);
      wrong_source_ = "this is not the source the package was written from: " + f.name() + " hashes to " + sha +
                      ", source_model.sha256 declares " + m_->source_model.sha256 + " (" + m_->source_model.repo + "@" +
                      m_->source_model.revision + ", " + m_->source_model.primary_file + ")";
    }
  }

  // A streamed source: one more slice of a fragment's tensor; at its last,
  // the tensor's digest against the one taken from the source's stream.
  void compare_digest(const std::string& path, std::string_view name, const SourceTensor& src,
                      std::unique_ptr<Sha256>& sha, std::span<const uint8_t> slice, bool last) {
    if (!sha) sha = std::make_unique<Sha256>();
    sha->update(slice);
    if (!last) return;
    const std::string got = sha->hex_digest();
    sha.reset();
    const auto want = digests_->tensor_sha256(static_cast<size_t>(&src - model_.tensors().data()));
    if (!want) {
      problem(path + ": tensor '" + std::string(name) + "' cannot be compared: its bytes did not all arrive from the source");
    } else if (!sha256_equal(*want, got)) {
      problem(path + ": tensor '" + std::string(name) + "' differs from the source (its bytes hash to " + got +
              ", the source's to " + *want + ")");
    }
  }

  void check_artifact(const Artifact& a) {
    {
      std::lock_guard g(mu_);
      if (!checked_.emplace(a.entry->path, a.entry->sha256).second) return;  // checked as it was written
    }
    const auto& e = *a.entry;
    // The consumers' file rule (safe path, resolving to a regular file
    // inside the package, of the declared size); then the resolved file.
    fs::path path;
    try {
      path = check_package_file(root_, boundary_, e.path, e.artifact_bytes,
                                manifest_file_names(pkg_.string(), e.path, part_role_name(a.role)));
    } catch (const Error& err) {
      problem(err.what());
      return;
    }
    std::optional<GgufFile> g;
    try {
      g.emplace(GgufFile::open(path));
    } catch (const Error& err) {
      problem(e.path + ": not a valid GGUF: " + err.what());
      const auto sha = sha256_file(path, [&](uint64_t n) { progress(n); });
      if (!sha256_equal(sha, e.sha256)) problem(e.path + ": SHA-256 is " + sha + ", manifest says " + e.sha256);
      return;
    }
    artifacts_.fetch_add(1);
    if (g->file_size() != e.artifact_bytes) {
      problem(e.path + ": " + std::to_string(g->file_size()) + " bytes, manifest says artifact_bytes " +
              std::to_string(e.artifact_bytes));
    }
    if (g->tensors().size() != e.tensor_count) {
      problem(e.path + ": holds " + std::to_string(g->tensors().size()) + " tensors, manifest says tensor_count " +
              std::to_string(e.tensor_count));
    }
    if (g->tensor_bytes_total() != e.tensor_bytes) {
      problem(e.path + ": holds " + std::to_string(g->tensor_bytes_total()) +
              " tensor bytes, manifest says tensor_bytes " + std::to_string(e.tensor_bytes));
    }
    struct Compare {
      const GgufTensorInfo* frag;
      const SourceTensor* src;
      bool reported = false;
    };
    std::vector<Compare> compares;
    if (a.role == PartRole::kProjector) {
      const auto& p = static_cast<const ProjectorEntry&>(e);
      if (p.kind == kProjectorKindMmproj && !is_projector_gguf(*g)) {
        problem(e.path + ": declared as an mmproj projector but is not one (" + describe_projector(*g) + ")");
      }
    } else {
      const bool slice = check_identity(a, *g);
      if (slice) {
        slice_fragments_.fetch_add(1);
        check_slice_kvs(a, *g);
      } else {
        check_kvs(a, *g);
      }
      for (const auto& t : g->tensors()) {
        const SourceTensor* src = model_.find_tensor(t.name);
        if (src == nullptr) {
          problem(e.path + ": tensor '" + std::string(t.name) + "' is not in the source model");
          continue;
        }
        seen_[static_cast<size_t>(src - model_.tensors().data())].fetch_add(1);
        tensors_.fetch_add(1);
        // The reference writer repeats global tensors in every fragment.
        const bool repeated_global = slice && src->placement.role == TensorRole::kGlobal;
        if (!repeated_global && !placement_matches(*src, a)) {
          problem(e.path + ": tensor '" + std::string(t.name) + "' belongs in " + expected_path_for(*src));
        }
        if (t.type != src->info->type) {
          problem(e.path + ": tensor '" + std::string(t.name) + "' has type " + ggml_type_name(t.type) +
                  ", the source has " + ggml_type_name(src->info->type));
          continue;
        }
        if (t.ne != src->info->ne) {
          problem(e.path + ": tensor '" + std::string(t.name) + "' has shape " + dims(t.ne) + ", the source has " +
                  dims(src->info->ne));
          continue;
        }
        compares.push_back({&t, src});
      }
    }
    std::sort(compares.begin(), compares.end(),
              [](const Compare& x, const Compare& y) { return x.frag->file_offset < y.frag->file_offset; });
    // One pass over the artifact: hash it, and compare each tensor's bytes
    // with the source as its chunk goes by.
    // Straight from the mappings of both files: no copies, and resident
    // memory stays flat (each chunk's pages are released once used).
    // A streamed source is not on disk: the fragment is read back from the
    // device (its pages dropped from the cache first), in small chunks, and
    // each tensor's bytes hashed against the digest taken as they arrived.
    const auto& file = *g->file();
    const auto bytes = file.bytes();
    const bool streamed = digests_ != nullptr;
    const size_t step = streamed ? kRereadChunk : kHashChunk;
    std::vector<uint8_t> buf(streamed ? kRereadChunk : 0);
    std::vector<std::unique_ptr<Sha256>> tensor_sha(streamed ? compares.size() : 0);
    if (streamed) (void)::posix_fadvise(file.fd(), 0, 0, POSIX_FADV_DONTNEED);
    Sha256 sha;
    size_t first = 0;
    for (uint64_t pos = 0; pos < file.size();) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(step, file.size() - pos));
      const uint8_t* chunk = bytes.data() + pos;
      if (streamed) {
        file.pread_exact(pos, {buf.data(), n});
        chunk = buf.data();
        sha.update({chunk, n});
      } else {
        detail::prefetch_mapped(bytes, pos + kHashChunk, kHashChunk);
        if (!detail::guarded([&] { sha.update(bytes.subspan(pos, n)); })) {
          problem(e.path + ": the file shrank while it was being read (changed by another process?)");
          return;
        }
      }
      const uint64_t end = pos + n;
      while (first < compares.size() && compares[first].frag->file_offset + compares[first].frag->bytes <= pos) ++first;
      for (size_t i = first; i < compares.size() && compares[i].frag->file_offset < end; ++i) {
        auto& c = compares[i];
        const uint64_t lo = std::max(pos, c.frag->file_offset);
        const uint64_t hi = std::min(end, c.frag->file_offset + c.frag->bytes);
        if (lo >= hi || c.reported) continue;
        const uint64_t rel = lo - c.frag->file_offset;
        if (streamed) {
          compare_digest(e.path, c.frag->name, *c.src, tensor_sha[i], {chunk + (lo - pos), static_cast<size_t>(hi - lo)},
                         hi == c.frag->file_offset + c.frag->bytes);
          continue;
        }
        const auto src_bytes = model_.shards()[c.src->shard].file()->bytes();
        const uint8_t* theirs = src_bytes.data() + c.src->info->file_offset + rel;
        const uint8_t* mine = chunk + (lo - pos);
        const size_t len = static_cast<size_t>(hi - lo);
        size_t k = len;  // first differing byte, len when equal
        bool moved = false;  // differed, then no longer: changed while read
        if (!detail::guarded([&] {
              if (std::memcmp(mine, theirs, len) == 0) return;
              k = 0;
              while (k < len && mine[k] == theirs[k]) ++k;
              moved = k == len;
            })) {
          problem(e.path + ": it or the source shrank while being read (changed by another process?)");
          return;
        }
        if (moved) {
          problem(e.path + ": tensor '" + std::string(c.frag->name) +
                  "' changed while it was being compared (changed by another process?)");
          c.reported = true;
        }
        detail::release_mapped(src_bytes, c.src->info->file_offset + rel, len);
        if (k != len) {
          problem(e.path + ": tensor '" + std::string(c.frag->name) + "' differs from the source at byte " +
                  std::to_string(rel + k) + " of the tensor (file offset " + std::to_string(lo + k) + ")");
          c.reported = true;
        }
      }
      if (!streamed) detail::release_mapped(bytes, pos, n);
      pos = end;
      progress(n);
    }
    const auto digest = sha.hex_digest();
    if (!sha256_equal(digest, e.sha256)) problem(e.path + ": SHA-256 is " + digest + ", manifest says " + e.sha256);
  }

  // Which part the fragment says it is. True for the reference writer's
  // dialect (skippy.slice.* keys), whose identity is checked here; ours is
  // checked key by key in check_kvs.
  bool check_identity(const Artifact& a, const GgufFile& g) {
    const auto& path = a.entry->path;
    FragmentIdentity id;
    try {
      id = read_fragment_identity(g, path);
    } catch (const Error& e) {
      problem(e.what());
      return false;
    }
    if (id.dialect != FragmentDialect::kSlice) return false;
    if (id.role != a.role || (a.role == PartRole::kLayer && id.layer != a.layer)) {
      problem(path + ": KV '" + std::string(kSliceStageIndexKey) + "' names the " +
              std::string(part_role_name(*id.role)) + (id.layer ? " " + std::to_string(*id.layer) : std::string()) +
              " fragment, the manifest lists it as the " + std::string(part_role_name(a.role)) +
              (a.role == PartRole::kLayer ? " " + std::to_string(a.layer) : std::string()));
    }
    return true;
  }

  // The reference writer's fragments carry every source KV (minus split.*)
  // with general.alignment forced to 32, then skippy.slice.*: the same
  // values as the source, nothing the source lacks.
  void check_slice_kvs(const Artifact& a, const GgufFile& g) {
    const auto& path = a.entry->path;
    const auto& src = model_.primary();
    check_source_kvs_present(path, g, [](std::string_view key) {
      return !key.starts_with("split.") && key != kAlignmentKey;
    });
    for (const auto& kv : g.kvs()) {
      if (is_fragment_key(kv.key) || kv.key == kAlignmentKey) continue;
      if (src.find_kv(kv.key) == nullptr) problem(path + ": KV '" + std::string(kv.key) + "' is not in the source");
    }
  }

  // Every source KV `kept` selects is in the fragment with the source's type
  // and value.
  template <class Kept>
  void check_source_kvs_present(const std::string& path, const GgufFile& g, const Kept& kept) {
    for (const auto& kv : model_.primary().kvs()) {
      if (!kept(kv.key)) continue;
      const auto* mine = g.find_kv(kv.key);
      if (mine == nullptr) {
        problem(path + ": KV '" + std::string(kv.key) + "' of the source is missing");
      } else if (!same_value(mine->value, kv.value)) {
        problem(path + ": KV '" + std::string(kv.key) + "' is " + describe(mine->value) + ", the source has " +
                describe(kv.value));
      }
    }
  }

  // The fragment's KVs are exactly the source's that fragment_keeps_kv()
  // keeps for its role (same keys, types and values), plus the role keys.
  void check_kvs(const Artifact& a, const GgufFile& g) {
    const auto& path = a.entry->path;
    const auto& src = model_.primary();
    check_source_kvs_present(path, g, [&](std::string_view key) {
      return fragment_keeps_kv(a.role, key, src.architecture());
    });
    for (const auto& kv : g.kvs()) {
      if (is_role_key(kv.key) || (a.role == PartRole::kMetadata && kv.key.starts_with(kSourceRecordPrefix))) continue;
      const auto* theirs = src.find_kv(kv.key);
      if (theirs == nullptr) {
        problem(path + ": KV '" + std::string(kv.key) + "' is not in the source");
      } else if (!fragment_keeps_kv(a.role, kv.key, src.architecture())) {
        problem(path + ": KV '" + std::string(kv.key) + "' does not belong in a " + std::string(part_role_name(a.role)) +
                " fragment (only shared/metadata.gguf carries it)");
      }
    }
    if (a.role == PartRole::kMetadata) {
      for (auto& p : detail::check_source_record(model_, g, path)) problem(std::move(p));
    }
    const auto role = g.get_string(kRoleKey);
    if (!role) {
      problem(path + ": KV '" + std::string(kRoleKey) + "' is missing");
    } else if (*role != part_role_name(a.role)) {
      problem(path + ": KV '" + std::string(kRoleKey) + "' is \"" + std::string(*role) + "\", expected \"" +
              std::string(part_role_name(a.role)) + "\"");
    }
    for (const auto& [key, want] : {std::pair{kLayerStartKey, uint64_t{a.layer}}, std::pair{kLayerEndKey, uint64_t{a.layer} + 1}}) {
      const auto* kv = g.find_kv(key);
      if (a.role != PartRole::kLayer) {
        if (kv) problem(path + ": KV '" + std::string(key) + "' belongs only in layer fragments");
      } else if (!kv || kv->value.type() != GgufType::kUint32 || kv->value.as_uint() != want) {
        problem(path + ": KV '" + std::string(key) + "' must be u32 " + std::to_string(want) +
                (kv ? ", it is " + describe(kv->value) : std::string(", it is missing")));
      }
    }
  }

  // One artifact now, while it is on disk (write-package --validate, before
  // it is uploaded and deleted); run() then takes its result as it is.
  // Returns the problems it found (calls one at a time).
  std::vector<std::string> check_one(const ArtifactEntry& e, PartRole role, uint32_t layer) {
    size_t before = 0;
    {
      std::lock_guard g(mu_);
      before = problems_.size();
    }
    check_artifact({&e, role, layer});
    std::lock_guard g(mu_);
    return {problems_.begin() + static_cast<std::ptrdiff_t>(before), problems_.end()};
  }

  // Every source shard and every artifact of `m` not checked already, then
  // the package-level rules (each source tensor exactly once).
  ValidationReport run(const PackageManifest& m) {
    m_ = &m;
    std::vector<Artifact> arts;
    arts.push_back({&m.shared.metadata, PartRole::kMetadata});
    arts.push_back({&m.shared.embeddings, PartRole::kEmbeddings});
    arts.push_back({&m.shared.output, PartRole::kOutput});
    for (const auto& l : m.layers) arts.push_back({&l, PartRole::kLayer, l.layer_index});
    for (const auto& p : m.projectors) arts.push_back({&p, PartRole::kProjector});
    for (const auto& a : arts) {
      // Checked as it was written: the digest it was checked against must be the manifest's.
      const auto it = checked_.find(a.entry->path);
      if (it != checked_.end() && !sha256_equal(it->second, a.entry->sha256)) {
        problem(a.entry->path + ": checked with SHA-256 " + it->second + " as it was written, the manifest says " +
                a.entry->sha256);
      }
    }

    std::vector<uint64_t> sizes;
    for (const auto& s : model_.shards()) sizes.push_back(s.file_size());
    for (const auto& a : arts) {
      std::error_code ec;
      const auto sz = fs::file_size(pkg_ / a.entry->path, ec);
      sizes.push_back(ec ? 0 : sz);
    }
    for (auto s : sizes) total_ += s;
    const size_t n_shards = model_.shards().size();
    source_files_.assign(n_shards, {});
    for (size_t i = 0; i < n_shards; ++i) {
      source_files_[i] = {fs::path(model_.shards()[i].name()).filename().string(), model_.shards()[i].file_size(), ""};
    }
    detail::run_jobs_largest_first(sizes, opt_.threads, [&](size_t i) {
      if (i < n_shards) {
        check_shard(i);
      } else {
        check_artifact(arts[i - n_shards]);
      }
    });
    for (size_t i = 0; i < seen_.size(); ++i) {
      const auto& t = model_.tensors()[i];
      const int n = seen_[i].load();
      if (n == 0) {
        problem("tensor '" + std::string(t.info->name) + "' of the source is in no artifact (expected in " +
                expected_path_for(t) + ")");
      } else if (n > 1 && t.placement.role == TensorRole::kGlobal && slice_fragments_.load() > 0) {
        // Every copy was compared with the source above: identical bytes.
        warning("tensor '" + std::string(t.info->name) + "' appears in " + std::to_string(n) +
                " artifacts, identical copies: the spec says exactly one artifact holds each tensor (the reference "
                "writer repeats global tensors; loaders keep the first copy)");
      } else if (n > 1) {
        problem("tensor '" + std::string(t.info->name) + "' of the source appears in " + std::to_string(n) +
                " artifacts");
      }
    }
    if (const uint64_t n = slice_fragments_.load(); n > 0) {
      warning(std::to_string(n) + " fragment(s) use the reference writer's dialect (skippy.slice.* keys, every "
              "source KV in every fragment, general.alignment 32): loadable, but the spec repeats shared metadata "
              "only where a loader needs it");
    }
    ValidationReport r;
    r.problems = std::move(problems_);
    r.warnings = std::move(warnings_);
    r.wrong_source = std::move(wrong_source_);
    r.artifacts_checked = artifacts_.load();
    r.tensors_checked = tensors_.load();
    r.bytes_hashed = hashed_.load();
    r.source_files = std::move(source_files_);
    return r;
  }

 private:
  const fs::path pkg_;
  fs::path root_, boundary_;  // where check_package_file resolves the artifacts
  const PackageManifest* m_ = nullptr;  // run()'s
  const ModelSource& model_;
  const detail::SourceDigests* digests_;
  const ValidateOptions& opt_;
  std::map<std::string, std::string> checked_;  // artifact path -> the SHA-256 it was checked against (under mu_)
  std::vector<std::atomic<int>> seen_;
  std::atomic<uint64_t> slice_fragments_{0};
  std::mutex mu_;
  std::vector<std::string> problems_, warnings_;
  std::vector<ValidationReport::SourceFile> source_files_;
  std::optional<std::string> wrong_source_;
  std::atomic<uint64_t> done_{0}, hashed_{0}, artifacts_{0}, tensors_{0};
  uint64_t total_ = 0;
};

// The package-level verdict once `v` has checked what it could: the
// manifest's structural rules against the source, every shard and artifact
// not checked yet, then the report in validate-package's order.
ValidationReport judge(const PackageManifest& m, const ModelSource& model, const ValidateOptions& opt, Validator& v) {
  std::vector<std::string> structural;
  std::vector<std::string> depth_warnings;
  detail::check_manifest_against_source(m, model, opt, structural, depth_warnings);
  ValidationReport r = v.run(m);
  r.checks = {"manifest_schema",  "generation_block", "generation_evidence", "layer_count", "activation_width",
              "source_files",     "source_sha256",    "artifact_paths",   "artifact_sizes",
              "artifact_sha256",  "tensor_placement", "tensor_type_shape", "tensor_bytes",
              "tensor_coverage"};
  r.problems.insert(r.problems.end(), structural.begin(), structural.end());
  r.warnings.insert(r.warnings.end(), depth_warnings.begin(), depth_warnings.end());
  std::sort(r.problems.begin(), r.problems.end());
  std::sort(r.warnings.begin(), r.warnings.end());
  // The wrong source explains most of the rest: say so first.
  if (r.wrong_source) {
    if (!r.problems.empty()) {
      *r.wrong_source += "; the " + std::to_string(r.problems.size()) +
                         " problem(s) after this one come from comparing the package with another file";
    }
    r.problems.insert(r.problems.begin(), *r.wrong_source);
  }
  r.valid = r.problems.empty();
  return r;
}

}  // namespace validator_detail

namespace detail {

PackageCheck::PackageCheck(const std::filesystem::path& package_dir, const ModelSource& model,
                           const SourceDigests* digests, ValidateOptions options)
    : opt_(std::move(options)),
      model_(model),
      v_(std::make_unique<validator_detail::Validator>(package_dir, model, digests, opt_)) {}

PackageCheck::~PackageCheck() = default;

std::vector<std::string> PackageCheck::check_artifact(const ArtifactEntry& entry, PartRole role, uint32_t layer) {
  return v_->check_one(entry, role, layer);
}

ValidationReport PackageCheck::finish(const PackageManifest& m) { return validator_detail::judge(m, model_, opt_, *v_); }

namespace {

// Schema 1's step of the validation pipeline: the manifest (or the one
// write-package --validate passes before it is committed), every shard and
// artifact through Validator, the package-level rules, problems sorted with
// a wrong source first.
class Schema1Check final : public SchemaCheck {
 public:
  Schema1Check(std::filesystem::path package_dir, RootRead root, const ValidateOptions& opt)
      : dir_(std::move(package_dir)), root_(std::move(root)), opt_(opt) {}

  bool read_root(ValidationReport& r) override {
    if (opt_.manifest) {
      m_ = *opt_.manifest;
      return true;
    }
    const auto path = dir_ / std::string(kManifestFileName);
    if (!root_.text) {
      r.problems.push_back(root_.error);
      r.checks = {"manifest_schema"};
      return false;
    }
    try {
      // A broken generation block is a problem, but the rest is still checked.
      m_ = parse_manifest(*root_.text, path.string(), GenerationProblems::kSetAside);
    } catch (const Error& e) {
      r.problems.push_back(e.what());
      r.checks = {"manifest_schema"};
      return false;
    }
    return true;
  }

  void source_unopened(ValidationReport& r) override { r.checks = {"manifest_schema", "generation_block", "source_open"}; }

  void check_against_source(const std::filesystem::path&, const ModelSource& model, ValidationReport& r) override {
    validator_detail::Validator v(dir_, model, nullptr, opt_);
    r = validator_detail::judge(m_, model, opt_, v);
  }

 private:
  std::filesystem::path dir_;
  RootRead root_;
  const ValidateOptions& opt_;
  PackageManifest m_;
};

}  // namespace

std::unique_ptr<SchemaCheck> make_schema1_check(const std::filesystem::path& package_dir, RootRead root,
                                                const ValidateOptions& opt) {
  return std::make_unique<Schema1Check>(package_dir, std::move(root), opt);
}

}  // namespace detail
}  // namespace skippy
