#include "skippy/package_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <set>

#include "publish/generation_inference.h"
#include "publish/package_readme.h"
#include "skippy/env.h"
#include "skippy/error.h"
#include "skippy/file.h"
#include "skippy/gguf_writer.h"
#include "skippy/model_source.h"
#include "skippy/package_layout.h"
#include "skippy/sha256.h"
#include "publish/split_stream.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;

// Marks a directory whose write-package run has not finished; a rerun may
// clear and redo it without --force.
constexpr std::string_view kInProgressMarker = ".skippy-write-package-in-progress";

struct Fragment {
  std::string rel_path;
  PartRole role;
  uint32_t layer = 0;
  std::vector<const SourceTensor*> tensors;
};

int64_t resolve_created_at(const WritePackageOptions& opt) {
  if (opt.created_at_unix_secs) return *opt.created_at_unix_secs;
  if (auto e = env::source_date_epoch()) return *e;
  return static_cast<int64_t>(std::time(nullptr));
}

bool dir_is_empty(const fs::path& dir) {
  std::error_code ec;
  return fs::directory_iterator(dir, ec) == fs::directory_iterator();
}

// Makes out_dir ready: created, empty, or ours to redo. Removes a previous
// manifest before anything else so no reader trusts it meanwhile.
void prepare_out_dir(const fs::path& dir, bool force) {
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec)) throw_invalid(dir.string() + ": exists and is not a directory");
    const bool resumable = fs::exists(dir / kInProgressMarker, ec);
    if (!dir_is_empty(dir) && !force && !resumable) {
      throw_invalid(dir.string() + ": output directory is not empty (use --force to replace its package)");
    }
    fs::remove(dir / std::string(kManifestFileName), ec);
    fsync_directory(dir);
    for (const char* sub : {"shared", "layers", "projectors"}) fs::remove_all(dir / sub, ec);
    fs::remove(dir / std::string(kPackageReadme), ec);
  } else {
    fs::create_directories(dir, ec);
    if (ec) throw Error(ErrorKind::kIo, dir.string() + ": cannot create: " + ec.message());
  }
  // Probe writability early with the marker itself.
  write_file_atomic(dir / kInProgressMarker, "write-package in progress\n");
  for (const char* sub : {"shared", "layers"}) {
    fs::create_directories(dir / sub, ec);
    if (ec) throw Error(ErrorKind::kIo, (dir / sub).string() + ": cannot create: " + ec.message());
  }
}

std::vector<Fragment> plan_fragments(const ModelSource& model, uint32_t layer_count) {
  std::vector<Fragment> frags;
  frags.push_back({std::string(kMetadataPath), PartRole::kMetadata, 0, {}});
  frags.push_back({std::string(kEmbeddingsPath), PartRole::kEmbeddings, 0, {}});
  frags.push_back({std::string(kOutputPath), PartRole::kOutput, 0, {}});
  for (uint32_t l = 0; l < layer_count; ++l) frags.push_back({layer_artifact_path(l), PartRole::kLayer, l, {}});
  for (const auto& t : model.tensors()) {
    switch (t.placement.role) {
      case TensorRole::kGlobal: frags[0].tensors.push_back(&t); break;
      case TensorRole::kEmbeddings: frags[1].tensors.push_back(&t); break;
      case TensorRole::kOutput: frags[2].tensors.push_back(&t); break;
      case TensorRole::kLayer: frags[3 + t.placement.layer].tensors.push_back(&t); break;
    }
  }
  for (uint32_t l = 0; l < layer_count; ++l) {
    if (frags[3 + l].tensors.empty()) {
      throw_invalid(model.primary().name() + ": layer " + std::to_string(l) + " of " + std::to_string(layer_count) +
                    " has no tensors (block_count disagrees with the blk.N tensors)");
    }
  }
  // Source order inside each fragment: the single pass fills it front to back.
  for (auto& f : frags) {
    std::sort(f.tensors.begin(), f.tensors.end(), [](const SourceTensor* a, const SourceTensor* b) {
      return a->shard != b->shard ? a->shard < b->shard : a->info->file_offset < b->info->file_offset;
    });
  }
  return frags;
}

GgufWriter fragment_writer(const ModelSource& model, const Fragment& f) {
  const auto& primary = model.primary();
  GgufWriter w(primary.alignment());
  for (const auto& kv : primary.kvs()) {
    if (kv.key.starts_with("split.")) continue;
    w.add_kv(std::string(kv.key), kv.value);
  }
  w.add_string(std::string(kRoleKey), part_role_name(f.role));
  if (f.role == PartRole::kLayer) {
    w.add_u32(std::string(kLayerStartKey), f.layer);
    w.add_u32(std::string(kLayerEndKey), f.layer + 1);
  }
  for (const auto* t : f.tensors) w.add_tensor_from(model.shards()[t->shard], *t->info);
  return w;
}

detail::StreamOutput stream_output(const ModelSource& model, const Fragment& f, const GgufWriter& w,
                                   const fs::path& out_dir) {
  detail::StreamOutput o;
  o.final_path = out_dir / f.rel_path;
  o.header = w.header();
  o.total_size = w.total_size();
  const uint64_t data = w.data_offset();
  for (size_t i = 0; i < f.tensors.size(); ++i) {
    const auto& wt = w.tensors()[i];
    const auto* st = f.tensors[i];
    const uint64_t padded = (wt.bytes + w.alignment() - 1) / w.alignment() * w.alignment();
    o.pieces.push_back({st->shard, st->info->file_offset, wt.bytes, data + wt.offset, padded - wt.bytes});
  }
  (void)model;
  return o;
}

// Copies a projector into the package while hashing it; returns its entry.
ProjectorEntry copy_projector(const fs::path& src, const fs::path& out_dir,
                              const std::function<void(uint64_t)>& on_bytes) {
  const auto gguf = GgufFile::open(src);  // must be a valid GGUF
  const std::string rel = std::string(kProjectorsDir) + "/" + src.filename().string();
  check_safe_relative_path(rel, "--projector " + src.string());
  std::error_code ec;
  fs::create_directories(out_dir / kProjectorsDir, ec);
  AtomicFile out(out_dir / rel);
  Sha256 sha;
  constexpr size_t kChunk = 8u << 20;
  std::vector<uint8_t> buf(kChunk);
  const auto& file = *gguf.file();
  for (uint64_t pos = 0; pos < file.size();) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, file.size() - pos));
    file.pread_exact(pos, {buf.data(), n});
    out.write_all({buf.data(), n});
    sha.update({buf.data(), n});
    pos += n;
    if (on_bytes) on_bytes(n);
  }
  ProjectorEntry e;
  e.kind = std::string(kProjectorKindMmproj);
  e.path = rel;
  e.tensor_count = gguf.tensors().size();
  e.tensor_bytes = gguf.tensor_bytes_total();
  e.artifact_bytes = file.size();
  e.sha256 = sha.hex_digest();
  out.commit();
  return e;
}

SourceModel source_identity(const WritePackageOptions& opt, const ModelSource& model,
                            const std::vector<std::string>& shard_sha) {
  const auto& p = opt.provenance;
  SourceModel s;
  std::error_code ec;
  const auto abs = fs::absolute(model.primary().path(), ec);
  if (opt.record_source_path) s.path = (ec ? model.primary().path() : abs).string();
  s.sha256 = shard_sha.front();
  const auto colon = p.model_id.find(':');
  s.repo = !p.repo.empty() ? p.repo : p.model_id.substr(0, colon);
  s.distribution_id = !p.distribution_id.empty() ? p.distribution_id
                      : colon == std::string::npos ? std::string() : p.model_id.substr(colon + 1);
  s.revision = p.revision;
  s.primary_file = p.primary_file;
  s.canonical_ref = p.model_id;
  const auto& shards = model.shards();
  std::vector<std::string> paths = p.file_paths;
  if (paths.empty()) {
    if (shards.size() == 1) {
      paths.push_back(p.primary_file);
    } else {
      const auto dir = fs::path(p.primary_file).parent_path();
      for (const auto& f : shards) paths.push_back((dir / f.path().filename()).generic_string());
    }
  }
  if (paths.size() != shards.size()) {
    throw Error(ErrorKind::kUsage, "provenance names " + std::to_string(paths.size()) + " source files for " +
                                       std::to_string(shards.size()) + " shards");
  }
  for (size_t i = 0; i < shards.size(); ++i) s.files.push_back({paths[i], shards[i].file_size(), shard_sha[i]});
  return s;
}

}  // namespace

WritePackageResult write_package(const WritePackageOptions& opt) {
  if (opt.provenance.model_id.empty() || opt.provenance.revision.empty() || opt.provenance.primary_file.empty()) {
    throw Error(ErrorKind::kUsage,
                "a local source needs explicit provenance: --model-id, --source-revision and --source-file");
  }
  const auto model = ModelSource::open(opt.source);
  const uint32_t layer_count = model.layer_count();
  const auto generation = detail::infer_generation(model, layer_count);
  auto frags = plan_fragments(model, layer_count);

  std::vector<GgufWriter> writers;
  writers.reserve(frags.size());
  for (const auto& f : frags) writers.push_back(fragment_writer(model, f));

  // Everything the manifest will say is known except hashes: check it now,
  // before touching the output directory.
  PackageManifest m;
  m.model_id = opt.provenance.model_id;
  m.layer_count = layer_count;
  m.activation_width = model.activation_width();
  m.generation = generation.generation;
  m.skippy_abi_version = format_abi_version(kRuntimeAbiVersion);
  m.created_at_unix_secs = resolve_created_at(opt);

  prepare_out_dir(opt.out_dir, opt.force);

  uint64_t total = 0, done = 0;
  for (const auto& s : model.shards()) total += s.file_size();
  for (const auto& p : opt.projectors) {
    std::error_code ec;
    total += fs::file_size(p, ec);
  }
  auto on_bytes = [&](uint64_t n) {
    done += n;
    if (opt.on_progress) opt.on_progress(done, total);
  };

  std::vector<detail::StreamOutput> outputs;
  outputs.reserve(frags.size());
  for (size_t i = 0; i < frags.size(); ++i) outputs.push_back(stream_output(model, frags[i], writers[i], opt.out_dir));
  std::vector<std::shared_ptr<const MappedFile>> shard_files;
  for (const auto& s : model.shards()) {
    shard_files.push_back(s.file());
    s.file()->advise_sequential();
  }
  detail::StreamOptions so;
  so.threads = opt.threads;
  so.on_bytes = on_bytes;
  so.before_commit = [&](const detail::StreamResult& r) {
    const auto& expected = opt.provenance.expected_sha256;
    for (size_t i = 0; i < expected.size() && i < r.shard_sha256.size(); ++i) {
      if (!expected[i].empty() && !sha256_equal(expected[i], r.shard_sha256[i])) {
        throw_invalid(model.shards()[i].name() + ": SHA-256 " + r.shard_sha256[i] + " does not match the " +
                      expected[i] + " the source declared");
      }
    }
  };
  if (opt.on_artifact) {
    so.on_output_complete = [&](size_t i, const std::string& sha) {
      opt.on_artifact({frags[i].rel_path, outputs[i].final_path, outputs[i].total_size, sha});
    };
    if (opt.disk_budget) {
      so.threads = std::max(2u, so.threads);  // the reader may wait while another thread finishes a fragment
      so.before_create = [&](uint64_t bytes, uint64_t stuck) { opt.disk_budget->acquire(bytes, stuck); };
    }
  }
  const auto hashes = detail::stream_split(shard_files, outputs, so);

  m.source_model = source_identity(opt, model, hashes.shard_sha256);
  auto entry = [&](size_t i) {
    ArtifactEntry e;
    e.path = frags[i].rel_path;
    e.tensor_count = frags[i].tensors.size();
    e.tensor_bytes = writers[i].tensor_bytes();
    e.artifact_bytes = outputs[i].total_size;
    e.sha256 = hashes.output_sha256[i];
    return e;
  };
  m.shared.metadata = entry(0);
  m.shared.embeddings = entry(1);
  m.shared.output = entry(2);
  for (uint32_t l = 0; l < layer_count; ++l) {
    LayerEntry le;
    static_cast<ArtifactEntry&>(le) = entry(3 + l);
    le.layer_index = l;
    m.layers.push_back(std::move(le));
  }
  std::set<std::string> projector_names;
  for (const auto& p : opt.projectors) {
    if (!projector_names.insert(p.filename().string()).second) {
      throw_invalid(p.string() + ": another --projector has the same file name");
    }
    std::error_code pec;
    if (opt.on_artifact && opt.disk_budget) opt.disk_budget->acquire(fs::file_size(p, pec));
    m.projectors.push_back(copy_projector(p, opt.out_dir, on_bytes));
    const auto& e = m.projectors.back();
    if (opt.on_artifact) opt.on_artifact({e.path, opt.out_dir / e.path, e.artifact_bytes, e.sha256});
  }

  const std::string manifest_text = serialize_manifest(m);  // validates every rule
  WritePackageResult r;
  r.package_dir = opt.out_dir;
  r.manifest_sha256 = sha256_hex(manifest_text);
  r.artifact_count = frags.size() + m.projectors.size();
  r.notes = generation.notes;
  write_file_atomic(opt.out_dir / std::string(kPackageReadme), detail::package_readme(m, r.manifest_sha256, r.notes));
  // The manifest goes last: its presence means the package is complete.
  write_file_atomic(opt.out_dir / std::string(kManifestFileName), manifest_text);
  std::error_code ec;
  fs::remove(opt.out_dir / kInProgressMarker, ec);
  fsync_directory(opt.out_dir);
  r.manifest = std::move(m);
  return r;
}

}  // namespace skippy
