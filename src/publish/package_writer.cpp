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
#include "publish/projector_check.h"
#include "publish/source_digests.h"
#include "publish/source_record.h"
#include "publish/validator_internal.h"
#include "util/env.h"
#include "skippy/error.h"
#include "util/file.h"
#include "gguf/gguf_writer.h"
#include "skippy/model_source.h"
#include "skippy/package_catalog.h"
#include "skippy/package_layout.h"
#include "skippy/package_validator.h"
#include "skippy/package_signature.h"
#include "util/sha256.h"
#include "skippy/version.h"
#include "publish/split_stream.h"
#include "publish/writer_internal.h"
#include "util/parallel.h"
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

std::vector<Fragment> plan_fragments(const std::string& source_name, const std::vector<SourceTensor>& tensors,
                                     uint32_t layer_count) {
  std::vector<Fragment> frags;
  frags.push_back({std::string(kMetadataPath), PartRole::kMetadata, 0, {}});
  frags.push_back({std::string(kEmbeddingsPath), PartRole::kEmbeddings, 0, {}});
  frags.push_back({std::string(kOutputPath), PartRole::kOutput, 0, {}});
  for (uint32_t l = 0; l < layer_count; ++l) frags.push_back({layer_artifact_path(l), PartRole::kLayer, l, {}});
  for (const auto& t : tensors) {
    switch (t.placement.role) {
      case TensorRole::kGlobal: frags[0].tensors.push_back(&t); break;
      case TensorRole::kEmbeddings: frags[1].tensors.push_back(&t); break;
      case TensorRole::kOutput: frags[2].tensors.push_back(&t); break;
      case TensorRole::kLayer: frags[3 + t.placement.layer].tensors.push_back(&t); break;
    }
  }
  for (uint32_t l = 0; l < layer_count; ++l) {
    if (frags[3 + l].tensors.empty()) {
      throw_invalid(source_name + ": layer " + std::to_string(l) + " of " + std::to_string(layer_count) +
                    " has no tensors (block_count disagrees with the blk.N tensors)");
    }
  }
  // The spec: a fragment with tensors declares tensor_bytes greater than
  // zero. A fragment whose only tensors have a zero dimension (a converter's
  // placeholder such as __index_timestep_zero__, no bytes) cannot be
  // described: refuse before anything is written. (Schema 2 leaves such
  // placeholders out of the package, as the reference does.)
  for (const auto& f : frags) {
    if (f.tensors.empty()) continue;
    uint64_t bytes = 0;
    std::string names;
    for (const SourceTensor* t : f.tensors) {
      bytes += t->info->bytes;
      names += (names.empty() ? "" : ", ") + std::string(t->info->name);
    }
    if (bytes == 0) {
      throw_invalid(source_name + ": " + f.rel_path + " would hold only tensors without bytes (" + names +
                    ": a zero dimension), which a schema 1 manifest cannot declare (tensor_bytes must be greater "
                    "than zero when tensor_count is not); write it with --schema 2, which leaves such "
                    "placeholders out as the reference writer does");
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

GgufWriter fragment_writer(const GgufFile& primary, const std::vector<std::shared_ptr<const MappedFile>>& files,
                           const Fragment& f, bool drop_default_alignment) {
  GgufWriter w(primary.alignment());
  for (const auto& kv : primary.kvs()) {
    if (drop_default_alignment && kv.key == "general.alignment" && kv.value.as_uint() == kGgufDefaultAlignment) continue;
    // (A schema 2 carrier's locator keys are bookkeeping, not the source's: convert-package --to 1.)
    if (is_carrier_key(kv.key)) continue;
    if (fragment_keeps_kv(f.role, kv.key, primary.architecture())) w.add_kv_borrowed(std::string(kv.key), kv.value);
  }
  w.add_string(std::string(kRoleKey), part_role_name(f.role));
  if (f.role == PartRole::kLayer) {
    w.add_u32(std::string(kLayerStartKey), f.layer);
    w.add_u32(std::string(kLayerEndKey), f.layer + 1);
  }
  for (const auto* t : f.tensors) w.add_tensor(std::string(t->info->name), t->info->type, t->info->ne, files[t->shard], t->info->file_offset);
  return w;
}

detail::StreamOutput stream_output(const Fragment& f, const GgufWriter& w, const fs::path& out_dir) {
  detail::StreamOutput o;
  o.final_path = out_dir / f.rel_path;
  o.header = w.header_bytes();
  o.total_size = w.total_size();
  const uint64_t data = w.data_offset();
  for (size_t i = 0; i < f.tensors.size(); ++i) {
    const auto& wt = w.tensors()[i];
    const auto* st = f.tensors[i];
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

void check_as_written(const WritePackageOptions& opt, PackageCheck& check, const WrittenArtifact& w,
                      const ArtifactEntry& entry, PartRole role, uint32_t layer) {
  if (opt.after_write_before_check) opt.after_write_before_check(w);
  const auto problems = check.check_artifact(entry, role, layer);
  if (problems.empty()) return;
  std::string msg = opt.out_dir.string() + ": validation failed, so no manifest was written (" +
                    std::to_string(problems.size()) + " problem(s) in " + entry.path + ", found before its upload):";
  msg += problem_lines(problems, "validate-package --json");
  throw_integrity(msg);
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

}  // namespace detail

WritePackageResult write_package(const WritePackageOptions& opt) {
  using namespace detail;
  namespace fs = std::filesystem;
  if (opt.schema == 2) return write_package_v2(opt);
  if (opt.schema != 1) throw Error(ErrorKind::kUsage, "--schema " + std::to_string(opt.schema) + ": expected 1 or 2");
  if (opt.provenance.model_id.empty() || opt.provenance.revision.empty() || opt.provenance.primary_file.empty()) {
    throw Error(ErrorKind::kUsage,
                "a local source needs explicit provenance: --model-id, --source-revision and --source-file");
  }
  const auto model = ModelSource::open(opt.source);
  const uint32_t layer_count = model.layer_count();
  const auto generation = detail::infer_generation(model, layer_count);
  auto frags = plan_fragments(model.primary().name(), model.tensors(), layer_count);
  std::vector<std::shared_ptr<const MappedFile>> shard_files;
  for (const auto& s : model.shards()) shard_files.push_back(s.file());

  std::vector<GgufWriter> writers;
  writers.reserve(frags.size());
  for (const auto& f : frags) writers.push_back(fragment_writer(model.primary(), shard_files, f));
  // What it takes to give the source back byte for byte (materialize --as-source).
  const auto record = source_record(model, writers[0].kvs());
  add_source_record(writers[0], record);

  std::vector<PlannedProjector> projectors;
  std::set<std::string> projector_names;
  for (const auto& p : opt.projectors) {
    if (!projector_names.insert(p.filename().string()).second) {
      throw Error(ErrorKind::kUsage, "--projector " + p.string() + ": another --projector has the same file name");
    }
    projectors.push_back(plan_projector(p));
  }

  // Everything the manifest will say is known except the digests: build it
  // with placeholders and check every rule now (model id, provenance, paths,
  // generation), before the output directory is touched — not after hours
  // of writing.
  const std::string placeholder(64, '0');
  PackageManifest m;
  m.model_id = opt.provenance.model_id;
  m.layer_count = layer_count;
  m.activation_width = model.activation_width();
  m.generation = generation.generation;
  m.skippy_abi_version = format_abi_version(kRuntimeAbiVersion);
  m.created_at_unix_secs = resolve_created_at(opt);
  m.source_model = source_identity(opt, model, std::vector<std::string>(model.shards().size(), placeholder));
  auto entry = [&](size_t i, const std::string& sha) {
    ArtifactEntry e;
    e.path = frags[i].rel_path;
    e.tensor_count = frags[i].tensors.size();
    e.tensor_bytes = writers[i].tensor_bytes();
    e.artifact_bytes = writers[i].total_size();
    e.sha256 = sha;
    return e;
  };
  auto fill_artifacts = [&](const std::vector<std::string>& sha) {
    m.shared.metadata = entry(0, sha[0]);
    m.shared.embeddings = entry(1, sha[1]);
    m.shared.output = entry(2, sha[2]);
    m.layers.clear();
    for (uint32_t l = 0; l < layer_count; ++l) {
      LayerEntry le;
      static_cast<ArtifactEntry&>(le) = entry(3 + l, sha[3 + l]);
      le.layer_index = l;
      m.layers.push_back(std::move(le));
    }
  };
  fill_artifacts(std::vector<std::string>(frags.size(), placeholder));
  for (const auto& p : projectors) {
    m.projectors.push_back(p.entry);
    m.projectors.back().sha256 = placeholder;
  }
  (void)serialize_manifest(m);  // throws naming the field that breaks a rule

  std::vector<detail::StreamOutput> outputs;
  outputs.reserve(frags.size());
  for (size_t i = 0; i < frags.size(); ++i) outputs.push_back(stream_output(frags[i], writers[i], opt.out_dir));
  auto so = begin_source_pass(opt, model, outputs, projectors);
  const auto on_bytes = so.on_bytes;
  // --validate where the fragments leave as they are uploaded, or the
  // source is never stored: each one checked on its own, read back from
  // disk, before it goes (validate-package's checks; the source's digests
  // taken from the stream stand in for its bytes).
  std::optional<SourceDigests> digests;
  std::optional<PackageCheck> check;
  if (validates_as_written(opt)) {
    if (opt.stream_read) record_source_digests(so, digests.emplace(model));
    ValidateOptions vo;
    vo.threads = opt.threads;
    check.emplace(opt.out_dir, model, digests ? &*digests : nullptr, vo);
  }
  if (opt.on_artifact) {
    so.on_output_complete = [&](size_t i, const OutputDigest& d) {
      const WrittenArtifact w{frags[i].rel_path, outputs[i].final_path, outputs[i].total_size, d.sha256, d.xet_chunks};
      if (check) check_as_written(opt, *check, w, entry(i, d.sha256), frags[i].role, frags[i].layer);
      opt.on_artifact(w);
    };
  }
  const auto hashes = detail::stream_split(shard_files, outputs, so);
  uint64_t source_hashed = 0;
  for (size_t i = 0; i < model.shards().size(); ++i) {
    if (i >= so.known_shard_sha256.size() || !so.known_shard_sha256[i]) source_hashed += model.shards()[i].file_size();
  }

  m.source_model = source_identity(opt, model, hashes.shard_sha256);
  fill_artifacts(hashes.output_sha256);
  m.projectors.clear();
  for (const auto& p : projectors) {
    if (opt.on_artifact && opt.disk_budget) opt.disk_budget->acquire(p.entry.artifact_bytes);
    m.projectors.push_back(copy_projector(p, opt.out_dir, on_bytes, opt.io_env));
    const auto& e = m.projectors.back();
    const WrittenArtifact w{e.path, opt.out_dir / e.path, e.artifact_bytes, e.sha256, nullptr};
    if (check && opt.on_artifact) check_as_written(opt, *check, w, e, PartRole::kProjector, 0);
    if (opt.on_artifact) opt.on_artifact(w);
  }

  std::optional<detail::ReadmeValidation> validation;
  std::optional<ValidationReport> validation_report;  // kept as validation.json
  if (opt.validate) {
    ValidateOptions vo;
    vo.threads = opt.threads;
    vo.manifest = m;
    uint64_t written = 0;  // what the pass and the copies reported: every byte by now
    for (const auto& sh : model.shards()) written += sh.file_size();
    for (const auto& p : projectors) written += p.entry.artifact_bytes;
    vo.on_progress = [&](uint64_t d, uint64_t t) {
      if (opt.on_progress) opt.on_progress(written + d, written + t);
    };
    // (What was checked as it was written is not read again.)
    const auto report = check ? check->finish(m) : validate_package(opt.source, opt.out_dir, vo);
    if (!report.valid) {
      std::string msg = opt.out_dir.string() + ": validation failed, so no manifest was written (" +
                        std::to_string(report.problems.size()) + " problem(s)):";
      msg += problem_lines(report.problems, "validate-package --json");
      throw_integrity(msg);
    }
    validation = detail::ReadmeValidation{report.artifacts_checked, report.tensors_checked,
                                          "skippy-model-package " + std::string(library_version())};
    validation_report = report;
  }

  const std::string manifest_text = serialize_manifest(m);
  WritePackageResult r;
  r.architecture = std::string(model.architecture());
  r.validated = validation.has_value();
  r.source_bytes_hashed = source_hashed;
  r.package_dir = opt.out_dir;
  r.manifest_sha256 = sha256_hex(manifest_text);
  r.artifact_count = frags.size() + m.projectors.size();
  r.notes = generation.notes;
  if (!record.unrecorded.empty()) {
    r.notes.push_back("the source's layout is not recorded, so materialize --as-source cannot rebuild it from this "
                      "package: " + record.unrecorded);
  }
  r.details = generation.details;
  write_file_atomic(opt.out_dir / std::string(kPackageReadme), detail::package_readme(m, r.manifest_sha256, r.notes, validation),
                    Durability::kDurable, opt.io_env);
  // validation.json names the manifest's digest, so it can land before the manifest does.
  if (validation_report) {
    detail::write_validation_result(opt.out_dir, *validation_report, r.manifest_sha256, "write-package --validate",
                                    std::nullopt, opt.io_env);
  }
  // The manifest goes last: its presence means the package is complete.
  write_file_atomic(opt.out_dir / std::string(kManifestFileName), manifest_text, Durability::kDurable, opt.io_env);
  std::error_code ec;
  fs::remove(opt.out_dir / kInProgressMarker, ec);
  fsync_directory(opt.out_dir, opt.io_env);
  r.manifest = std::move(m);
  return r;
}

}  // namespace skippy
