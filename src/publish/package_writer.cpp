// write-package: one pipeline for every schema. The source is opened, its
// schema's layout (schema_layout.h) plans the files, one streaming pass
// writes and hashes them, the projectors are copied, every artifact is
// announced (and with --validate checked) as it is complete, and the root
// lands last. Here too what the layouts and convert-package share: the
// output directory's preparation, the pass's options, the projectors.
#include "skippy/package_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <functional>
#include <optional>

#include "gguf/gguf_writer.h"
#include "publish/projector_check.h"
#include "publish/schema_layout.h"
#include "publish/source_digests.h"
#include "publish/split_stream.h"
#include "publish/writer_internal.h"
#include "skippy/error.h"
#include "skippy/model_source.h"
#include "skippy/package_layout.h"
#include "skippy/package_signature.h"
#include "skippy/package_validator.h"
#include "util/env.h"
#include "util/file.h"
#include "util/parallel.h"
#include "util/sha256.h"
#include "util/text.h"

namespace skippy {
namespace detail {

namespace fs = std::filesystem;

int64_t resolve_created_at(const WritePackageOptions& opt) {
  if (opt.created_at_unix_secs) return *opt.created_at_unix_secs;
  if (auto e = env::source_date_epoch()) return *e;
  return static_cast<int64_t>(std::time(nullptr));
}

// True when `dir` holds nothing, or only what a killed write-package run
// leaves before its marker exists: hidden temporaries (the marker's own
// included). Such a directory is ours to redo without --force.
bool empty_or_only_leftovers(const fs::path& dir) {
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (!is_temporary_name(it->path().filename().string())) return false;
  }
  return true;
}

// Makes out_dir ready: created, empty, or ours to redo (a run that did not
// finish left its marker). Removes a previous manifest before anything else
// so no reader trusts it meanwhile, and every leftover of an interrupted run
// (staged fragments, README and manifest temporaries) so a finished package
// never keeps one.
void prepare_out_dir(const fs::path& dir, bool force, IoEnv* env) {
  refuse_hf_cache_snapshot(dir, "--out-dir");
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    if (!fs::is_directory(dir, ec)) throw_invalid(dir.string() + ": exists and is not a directory");
    const bool resumable = fs::exists(dir / kInProgressMarker, ec);
    if (!force && !resumable && !empty_or_only_leftovers(dir)) {
      throw_invalid(dir.string() + ": output directory is not empty (use --force to replace its package)");
    }
    fs::remove(dir / std::string(kManifestFileName), ec);
    fsync_directory(dir, env);
    for (const char* sub : {"shared", "layers", "projectors"}) fs::remove_all(dir / sub, ec);
    fs::remove(dir / std::string(kPackageReadme), ec);
    // A previous package's validation result and signature describe its manifest, not the next one.
    fs::remove(dir / std::string(kValidationFileName), ec);
    fs::remove(dir / std::string(kSignatureFileName), ec);
    std::vector<fs::path> leftovers;
    for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
      if (is_temporary_name(it->path().filename().string())) leftovers.push_back(it->path());
    }
    for (const auto& p : leftovers) fs::remove(p, ec);
  } else {
    fs::create_directories(dir, ec);
    if (ec) throw Error(ErrorKind::kIo, dir.string() + ": cannot create: " + ec.message());
  }
  // The marker is created in place (its content does not matter): a kill
  // at any moment leaves either no marker in a directory of leftovers, or
  // the marker; both are redone by the next run.
  {
    Fd marker(::open((dir / kInProgressMarker).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    if (!marker) throw_io((dir / kInProgressMarker).string() + ": cannot create (is the directory writable?)");
  }
  fsync_directory(dir, env);
  for (const char* sub : {"shared", "layers"}) {
    fs::create_directories(dir / sub, ec);
    if (ec) throw Error(ErrorKind::kIo, (dir / sub).string() + ": cannot create: " + ec.message());
  }
}

StreamOutput stream_output(const std::string& rel_path, const std::vector<const SourceTensor*>& tensors,
                           const GgufWriter& w, const fs::path& out_dir) {
  StreamOutput o;
  o.final_path = out_dir / rel_path;
  o.header = w.header_bytes();
  o.total_size = w.total_size();
  const uint64_t data = w.data_offset();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& wt = w.tensors()[i];
    const auto* st = tensors[i];
    const uint64_t padded = (wt.bytes + w.alignment() - 1) / w.alignment() * w.alignment();
    o.pieces.push_back({st->shard, st->info->file_offset, wt.bytes, data + wt.offset, padded - wt.bytes});
  }
  return o;
}

PlannedProjector plan_projector(const fs::path& src) {
  const auto gguf = GgufFile::open(src);  // must be a valid GGUF
  if (!detail::is_projector_gguf(gguf)) {
    throw_invalid("--projector " + src.string() + ": not a projector GGUF (" + detail::describe_projector(gguf) + ")");
  }
  PlannedProjector p;
  p.source = src;
  p.entry.kind = std::string(kProjectorKindMmproj);
  p.entry.path = std::string(kProjectorsDir) + "/" + src.filename().string();
  check_safe_relative_path(p.entry.path, "--projector " + src.string());
  p.entry.tensor_count = gguf.tensors().size();
  p.entry.tensor_bytes = gguf.tensor_bytes_total();
  p.entry.artifact_bytes = gguf.file_size();
  return p;
}

// Copies a planned projector into the package while hashing it.
ProjectorEntry copy_projector(const PlannedProjector& p, const fs::path& out_dir,
                              const std::function<void(uint64_t)>& on_bytes, IoEnv* env) {
  const auto file = MappedFile::open(p.source);
  if (file->size() != p.entry.artifact_bytes) {
    throw_invalid("--projector " + p.source.string() + ": changed while the package was written");
  }
  std::error_code ec;
  fs::create_directories(out_dir / kProjectorsDir, ec);
  AtomicFile out(out_dir / p.entry.path, Durability::kDurable, env);
  Sha256 sha;
  constexpr size_t kCopyChunk = 8u << 20;
  std::vector<uint8_t> buf(kCopyChunk);
  for (uint64_t pos = 0; pos < file->size();) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kCopyChunk, file->size() - pos));
    file->pread_exact(pos, {buf.data(), n});
    out.write_all({buf.data(), n});
    sha.update({buf.data(), n});
    pos += n;
    if (on_bytes) on_bytes(n);
  }
  ProjectorEntry e = p.entry;
  e.sha256 = sha.hex_digest();
  out.commit();
  return e;
}

SourceModel source_identity(const WritePackageOptions& opt, const ModelSource& model,
                            const std::vector<std::string>& shard_sha) {
  const auto& p = opt.provenance;
  SourceModel s;
  // The file's name in its repository: never a local directory of the
  // publisher (private, and it would make the same model written from
  // another folder hash differently).
  s.path = p.primary_file;
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
    } else if (const auto split = parse_split_name(p.primary_file); split && split->count == shards.size()) {
      // --source-file names the first shard in the repository: the others
      // are its siblings, whatever the local copies are called.
      for (uint32_t i = 1; i <= split->count; ++i) paths.push_back(split_path(split->prefix, i, split->count).generic_string());
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

bool validates_as_written(const WritePackageOptions& opt) {
  return opt.validate && (opt.stream_read || (opt.on_artifact && opt.disk_budget));
}

void record_source_digests(StreamOptions& so, SourceDigests& digests) {
  so.read_source = [read = so.read_source, &digests](size_t shard, uint64_t offset, std::span<uint8_t> into) {
    read(shard, offset, into);
    digests.observe(shard, offset, into);
  };
  so.on_shard_hashed = [hashed = so.on_shard_hashed, &digests](size_t shard, const std::string& sha) {
    if (hashed) hashed(shard, sha);
    digests.set_shard_sha256(shard, sha);
  };
}

void check_streamed_write(const WritePackageOptions& opt, const std::vector<StreamOutput>& outputs) {
  if (!opt.stream_read) return;
  if (!opt.disk_budget) return;
  const uint64_t need = peak_open_bytes(outputs);
  const uint64_t held = opt.disk_budget->used();
  if (need + held > opt.disk_budget->limit()) {
    throw Error(ErrorKind::kUsage,
                "--max-disk " + std::to_string(opt.disk_budget->limit()) + " bytes cannot hold this source's layout: " +
                    std::to_string(need) + " bytes of fragments are open at once at its worst point (tensors of a "
                    "fragment spread through the source)" + (held ? " besides " + std::to_string(held) +
                    " bytes of source headers" : std::string()) + "; give at least " + std::to_string(need + held) +
                    " bytes (refused before writing or uploading anything)");
  }
}

StreamOptions begin_source_pass(const WritePackageOptions& opt, const ModelSource& model,
                                const std::vector<StreamOutput>& outputs, const std::vector<PlannedProjector>& projectors) {
  check_streamed_write(opt, outputs);
  prepare_out_dir(opt.out_dir, opt.force, opt.io_env);
  uint64_t projector_bytes = 0;
  for (const auto& p : projectors) projector_bytes += p.entry.artifact_bytes;
  StreamOptions so;
  so.threads = opt.threads;
  so.io_env = opt.io_env;
  so.observe_source = opt.on_source_read;
  so.xet_chunks = opt.xet_chunks && static_cast<bool>(opt.on_artifact);
  // Progress over the source's bytes and the projectors' copies.
  struct Counter {
    uint64_t done = 0, total = 0;
  };
  auto counter = std::make_shared<Counter>();
  for (const auto& s : model.shards()) counter->total += s.file_size();
  counter->total += projector_bytes;
  so.on_bytes = [counter, &opt](uint64_t n) {
    counter->done += n;
    if (opt.on_progress) opt.on_progress(counter->done, counter->total);
  };
  for (const auto& s : model.shards()) s.file()->advise_sequential();
  for (size_t i = 0; i < opt.provenance.shard_verified.size() && i < opt.provenance.expected_sha256.size(); ++i) {
    so.known_shard_sha256.push_back(opt.provenance.shard_verified[i] && is_sha256_hex(opt.provenance.expected_sha256[i])
                                        ? std::optional<std::string>(opt.provenance.expected_sha256[i])
                                        : std::nullopt);
  }
  so.before_commit = [&opt, &model](const StreamResult& r) {
    const auto& expected = opt.provenance.expected_sha256;
    for (size_t i = 0; i < expected.size() && i < r.shard_sha256.size(); ++i) {
      if (!expected[i].empty() && !sha256_equal(expected[i], r.shard_sha256[i])) {
        throw_integrity(model.shards()[i].name() + ": SHA-256 " + r.shard_sha256[i] + " does not match the " +
                        expected[i] + " the source declared");
      }
    }
  };
  if (opt.on_artifact && opt.disk_budget) {
    so.threads = std::max(2u, detail::worker_threads(so.threads));  // the reader may wait while another thread finishes a fragment
    so.before_create = [&opt](uint64_t bytes, uint64_t stuck) { opt.disk_budget->acquire(bytes, stuck); };
    so.on_failure = [&opt] { opt.disk_budget->cancel("the write stopped on an error"); };
  }
  if (!opt.stream_read) return so;
  so.read_source = opt.stream_read;
  so.known_shard_sha256.clear();  // every byte arrives now: every shard is hashed
  so.on_shard_hashed = [&opt, &model](size_t shard, const std::string& sha) {
    const auto& expected = opt.provenance.expected_sha256;
    if (shard >= expected.size() || !is_sha256_hex(expected[shard])) {
      throw_integrity(model.shards()[shard].name() + ": the Hub declares no SHA-256 for this shard, so the streamed "
                      "bytes cannot be checked");
    }
    if (!sha256_equal(expected[shard], sha)) {
      throw_integrity(model.shards()[shard].name() + ": the streamed bytes have SHA-256 " + sha + ", not the " +
                      expected[shard] + " the Hub declares (LFS oid): stopped before the commit");
    }
  };
  return so;
}

// The source bytes the pass hashed itself (not those of shards whose
// SHA-256 was verified before).
uint64_t bytes_hashed_by_pass(const ModelSource& model, const StreamOptions& so) {
  uint64_t n = 0;
  for (size_t i = 0; i < model.shards().size(); ++i) {
    if (i >= so.known_shard_sha256.size() || !so.known_shard_sha256[i]) n += model.shards()[i].file_size();
  }
  return n;
}

// After the pass: the projectors copied (each under the disk budget) and
// the layout's other files written, each announced as soon as it is
// complete (when opt.on_artifact is set).
std::vector<ProjectorEntry> write_after_pass(
    const WritePackageOptions& opt, const SchemaLayout& layout, const std::function<void(uint64_t)>& on_bytes,
    const std::function<void(const WrittenArtifact&, const WrittenFile&)>& announce) {
  std::vector<ProjectorEntry> projectors;
  projectors.reserve(layout.projectors().size());
  for (const auto& p : layout.projectors()) {
    if (opt.on_artifact && opt.disk_budget) opt.disk_budget->acquire(p.entry.artifact_bytes);
    const auto& e = projectors.emplace_back(copy_projector(p, opt.out_dir, on_bytes, opt.io_env));
    if (opt.on_artifact) announce({e.path, opt.out_dir / e.path, e.artifact_bytes, e.sha256, nullptr}, WrittenFile{{}, &e});
  }
  for (const auto& f : layout.other_files()) {
    const fs::path file = opt.out_dir / f.rel_path;
    fs::create_directories(file.parent_path());
    write_file_atomic(file, f.contents, Durability::kDurable, opt.io_env);
    if (opt.on_artifact) announce({f.rel_path, file, f.contents.size(), f.sha256, nullptr}, WrittenFile{});
  }
  return projectors;
}

std::unique_ptr<SchemaLayout> make_schema_layout(const WritePackageOptions& opt) {
  if (opt.schema == 1) return make_schema1_layout(opt);
  if (opt.schema == 2) return make_schema2_layout(opt);
  throw Error(ErrorKind::kUsage, "--schema " + std::to_string(opt.schema) + ": expected 1 or 2");
}

}  // namespace detail

WritePackageResult write_package(const WritePackageOptions& opt) {
  using namespace detail;
  namespace fs = std::filesystem;
  const auto layout = make_schema_layout(opt);
  if (opt.provenance.model_id.empty() || opt.provenance.revision.empty() || opt.provenance.primary_file.empty()) {
    throw Error(ErrorKind::kUsage,
                "a local source needs explicit provenance: --model-id, --source-revision and --source-file");
  }
  layout->check_options();
  const auto model = ModelSource::open(opt.source);
  std::vector<std::shared_ptr<const MappedFile>> shard_files;
  for (const auto& s : model.shards()) shard_files.push_back(s.file());
  layout->plan(model, shard_files);
  auto& outputs = layout->outputs();

  auto so = begin_source_pass(opt, model, outputs, layout->projectors());
  const auto on_bytes = so.on_bytes;
  // --validate where the artifacts leave as they are uploaded, or the source
  // is never stored: each one checked on its own, read back from disk,
  // before it goes (the source's digests taken from the stream stand in for
  // its bytes).
  std::optional<SourceDigests> digests;
  const bool check = validates_as_written(opt);
  if (check) {
    if (opt.stream_read) record_source_digests(so, digests.emplace(model));
    layout->begin_checks(digests ? &*digests : nullptr);
  }
  auto announce = [&](const WrittenArtifact& w, const WrittenFile& what) {
    if (check) {
      if (opt.after_write_before_check) opt.after_write_before_check(w);
      layout->check_written(w, what);
    }
    opt.on_artifact(w);
  };
  const std::optional<size_t> last = layout->announced_last();
  std::optional<WrittenArtifact> held;  // announced from the finisher thread; read after the pass
  if (opt.on_artifact) {
    so.on_output_complete = [&](size_t i, const OutputDigest& d) {
      WrittenArtifact w{layout->rel_path(i), outputs[i].final_path, outputs[i].total_size, d.sha256, d.xet_chunks};
      if (i == last) {
        held = std::move(w);
        return;
      }
      announce(w, WrittenFile{i});
    };
  }
  const auto hashes = stream_split(shard_files, outputs, so);
  const uint64_t source_hashed = bytes_hashed_by_pass(model, so);
  layout->after_pass(hashes);
  const auto projectors = write_after_pass(opt, *layout, on_bytes, announce);
  if (held) announce(*held, WrittenFile{last});
  layout->complete_root(hashes, projectors);

  WritePackageResult r;
  r.architecture = std::string(model.architecture());
  if (opt.validate) {
    layout->validate(hashes);
    r.validated = true;
  }
  const std::string text = layout->root_text();
  r.package_dir = opt.out_dir;
  r.manifest_sha256 = sha256_hex(text);
  r.source_bytes_hashed = source_hashed;
  layout->describe(r);
  layout->write_before_root(r);
  // The root goes last: its presence means the package is complete.
  write_file_atomic(opt.out_dir / std::string(kManifestFileName), text, Durability::kDurable, opt.io_env);
  std::error_code ec;
  fs::remove(opt.out_dir / kInProgressMarker, ec);
  fsync_directory(opt.out_dir, opt.io_env);
  return r;
}

}  // namespace skippy
