// convert-package --to 2 (skippy/package_convert.h): a schema 1 package re-rooted as
// schema 2, its fragments kept as payload parts (no payload byte copied).
#include "skippy/package_convert.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <map>
#include <set>
#include <unordered_map>

#include "publish/package_readme.h"
#include "publish/carrier_writer.h"
#include "publish/certify.h"
#include "publish/publisher_metadata.h"
#include "publish/writer_internal.h"
#include "skippy/abi.h"
#include "util/env.h"
#include "skippy/error.h"
#include "util/file.h"
#include "util/io_env.h"
#include "skippy/manifest.h"
#include "skippy/package_catalog.h"
#include "skippy/package_layout.h"
#include "util/sha256.h"
#include "skippy/version.h"
#include "skippy/package.h"
#include "util/text.h"

namespace skippy {
namespace convert_v2_detail {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Sorts the directory into the order the metadata fragment's record of the
// source gives (kSourceTensorsKey), when it records every tensor of it.
void order_as_source(std::vector<detail::CarrierTensor>& dir, const GgufFile& meta) {
  const auto* kv = meta.find_kv(kSourceTensorsKey);
  const auto names = kv ? kv->value.as_string_array() : std::nullopt;
  if (!names) return;
  std::unordered_map<std::string_view, size_t> rank;
  for (size_t i = 0; i < names->size(); ++i) rank.emplace((*names)[i], i);
  for (const auto& t : dir) {
    if (!rank.contains(t.name)) return;
  }
  // A permutation, then moves (sorting the tensors themselves would
  // instantiate std:: algorithms on an internal type the shared library
  // would export).
  std::vector<size_t> order(dir.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = rank.at(dir[i].name);
  std::vector<size_t> by_rank(dir.size());
  for (size_t i = 0; i < by_rank.size(); ++i) by_rank[i] = i;
  std::sort(by_rank.begin(), by_rank.end(), [&](size_t a, size_t b) { return order[a] < order[b]; });
  std::vector<detail::CarrierTensor> sorted;
  sorted.reserve(dir.size());
  for (const size_t i : by_rank) sorted.push_back(std::move(dir[i]));
  dir = std::move(sorted);
}

// Puts the bytes of `from` at `to` unchanged: a hard link when both are on
// one filesystem, else an in-kernel copy (copy_file_range, pwrite where the
// kernel cannot), fsynced. Returns how.
std::string place_file(const fs::path& from, const fs::path& to, IoEnv* env) {
  std::error_code ec;
  fs::create_directories(to.parent_path(), ec);
  if (::link(from.c_str(), to.c_str()) == 0) return "hard link";
  const int err = errno;
  if (err != EXDEV && err != EPERM && err != EMLINK && err != EOPNOTSUPP) {
    errno = err;
    throw_io(to.string() + ": cannot link to " + from.string());
  }
  const auto src = MappedFile::open(from);
  AtomicFile out(to, Durability::kDurable, env);
  out.preallocate(src->size());
  constexpr uint64_t kChunk = 64u << 20;
  for (uint64_t pos = 0; pos < src->size();) {
    const uint64_t n = std::min(kChunk, src->size() - pos);
    out.copy_range(*src, pos, pos, src->bytes().subspan(static_cast<size_t>(pos), static_cast<size_t>(n)));
    pos += n;
  }
  out.commit(/*sync_directory=*/false);
  return "copy";
}

// Schema 1 generation -> schema 2's (only speculative_decoding has a place).
std::optional<V2Generation> generation_v2(const std::optional<GenerationDefaults>& g, std::vector<std::string>& dropped) {
  if (!g) return std::nullopt;
  if (g->policy) dropped.push_back("generation.policy: schema 2 has no execution policy (the reference's release schema refuses the field)");
  if (g->thresholds) dropped.push_back("generation.thresholds: schema 2 has no resolver thresholds (refused by the reference's schema)");
  for (auto it = g->extra.begin(); it != g->extra.end(); ++it) dropped.push_back("generation." + it.key() + ": not a schema 2 field");
  if (!g->speculative_decoding) return std::nullopt;
  const auto& sd = *g->speculative_decoding;
  auto drop = [&](const std::string& why) -> std::optional<V2Generation> {
    dropped.push_back("generation.speculative_decoding: " + why);
    return std::nullopt;
  };
  if (!sd.default_strategy) return drop("no default strategy, which schema 2 requires");
  if (!sd.extra.empty()) return drop("fields schema 2 does not declare (" + sd.extra.dump() + ")");
  V2SpeculativeDecoding v;
  v.default_strategy = *sd.default_strategy;
  for (const auto& [id, p] : sd.proposers) {
    if (!p.extra.empty()) return drop("proposer " + id + " has fields schema 2 does not declare");
    V2Proposer q;
    q.type = p.type;
    q.prediction_depth = static_cast<uint32_t>(p.prediction_depth.value_or(0));
    if (p.layer_indices) q.layer_indices = *p.layer_indices;
    q.ngram_min = static_cast<uint32_t>(p.ngram_min.value_or(0));
    q.ngram_max = static_cast<uint32_t>(p.ngram_max.value_or(0));
    q.max_proposal_tokens = static_cast<uint32_t>(p.max_proposal_tokens.value_or(0));
    q.history_scope = p.history_scope.value_or("");
    v.proposers[id] = q;
  }
  for (const auto& [id, s] : sd.strategies) {
    if (!s.extra.empty()) return drop("strategy " + id + " has fields schema 2 does not declare");
    if (s.ngram_min || s.ngram_max || s.max_proposal_tokens || s.history_scope) {
      return drop("strategy " + id + " gives N-gram fields inline, which schema 2 strategies do not carry");
    }
    V2Strategy t;
    t.type = s.type;
    t.proposer = s.proposer;
    if (s.prediction_depth) t.prediction_depth = static_cast<uint32_t>(*s.prediction_depth);
    if (s.layer_indices) t.layer_indices = *s.layer_indices;
    t.primary = s.primary.value_or("");
    t.extender = s.extender.value_or("");
    if (s.extension_policy) {
      const auto& e = *s.extension_policy;
      if (!e.max_tokens || !e.extra.empty()) return drop("strategy " + id + ": extension_policy does not fit schema 2's");
      t.extension_policy = V2ExtensionPolicy{static_cast<uint32_t>(*e.max_tokens),
                                             e.initial_tokens ? std::optional<uint32_t>(static_cast<uint32_t>(*e.initial_tokens)) : std::nullopt,
                                             e.tail_backoff_proposals ? std::optional<uint32_t>(static_cast<uint32_t>(*e.tail_backoff_proposals)) : std::nullopt};
    }
    if (s.window_policy) {
      const auto& w = *s.window_policy;
      if (!w.default_mode || !w.initial_window || !w.min_window || !w.max_window || !w.extra.empty()) {
        return drop("strategy " + id + ": window_policy needs default, initial_window, min_window and max_window in schema 2");
      }
      t.window_policy = V2WindowPolicy{*w.default_mode, static_cast<uint32_t>(*w.initial_window),
                                       static_cast<uint32_t>(*w.min_window), static_cast<uint32_t>(*w.max_window),
                                       w.pipeline_depth ? std::optional<uint32_t>(static_cast<uint32_t>(*w.pipeline_depth)) : std::nullopt};
    }
    v.strategies[id] = t;
  }
  V2Generation out;
  out.speculative_decoding = std::move(v);
  return out;
}

struct Payload {
  std::string id, path, from;
  const ArtifactEntry* entry = nullptr;
  std::shared_ptr<const GgufFile> gguf;
  std::optional<uint32_t> layer;
};


// convert-package --to 2, step by step: the schema 1 package checked and
// read, its fragments as payload parts, the carrier's directory, the
// certification against the source, the root, and the staged output
// installed in one rename.
class ConvertToV2 {
 public:
  explicit ConvertToV2(const ConvertToV2Options& options)
      : o(options), native_abi(native_abi_version_to_write(options.native_abi_version)), m(read_input()) {}

  ConvertToV2Result run() {
    check_input();
    plan_parts();
    plan_directory();
    certify();
    const auto t1 = Clock::now();
    build_root();
    stage_and_install();
    r.package_dir = o.out_dir;
    r.package_id = root.package_id;
    r.manifest_sha256 = sha256_hex(root_text);
    r.root = std::move(root);
    r.carrier_root_seconds = seconds_since(t1) + std::chrono::duration<double>(t1 - t0).count() - r.certify_seconds;
    return std::move(r);
  }

 private:
  PackageManifest read_input();
  void check_input();
  void plan_parts();
  void plan_directory();
  void certify();
  void build_root();
  void stage_and_install();
  const fs::path& file_of(const std::string& rel) const { return resolved.at(rel); }

  const ConvertToV2Options& o;
  const Clock::time_point t0 = Clock::now();
  const std::string native_abi;  // a bad flag fails first
  const fs::path mpath = o.package_dir / kManifestFileName;
  const PackageManifest m;
  ConvertToV2Result r;
  std::map<std::string, fs::path> resolved;  // each artifact's file, resolved by the consumers' rule
  std::shared_ptr<const GgufFile> meta;
  std::vector<Payload> parts;
  std::vector<detail::CarrierTensor> dir;
  std::vector<std::string> shard_sha;
  std::vector<uint64_t> shard_bytes;
  PackageRootV2 root;
  std::vector<uint8_t> carrier;
  std::vector<std::pair<const ProjectorEntry*, std::string>> sidecar_files;
  detail::PublisherPlan publisher;
  std::string root_text;
};

PackageManifest ConvertToV2::read_input() {
  if (!o.source && !o.allow_uncertified) {
    throw Error(ErrorKind::kUsage,
                "convert-package --to 2: coverage cannot be certified without --source: a schema 1 package proves only "
                "which tensors its writer selected, and schema 2 claims the package holds every source tensor exactly "
                "once, which (as the reference's design says) may be certified only against the original source's "
                "tensor directories. Pass --source SRC (the model the package was written from), or --uncertified to "
                "write it without that check");
  }
  const std::string text = read_small_file(mpath, kManifestMaxBytes);
  if (package_root_schema(text).schema == kPackageSchemaV2) {
    throw Error(ErrorKind::kUsage, mpath.string() + ": already a schema 2 package");
  }
  return parse_manifest(text, mpath.string());
}

void ConvertToV2::check_input() {
  detail::check_convert_out_dir(o.out_dir, o.force);
  {
    std::error_code ec;
    if (fs::exists(o.package_dir / (std::string(kManifestFileName) + ".sig"), ec)) {
      r.dropped.push_back("model-package.json.sig: it signs the schema 1 manifest; sign the converted package again "
                          "(sign-package) if it is to be signed");
    }
  }
  if (m.generation_problem) r.dropped.push_back("generation (set aside when read: " + *m.generation_problem + ")");
  // Every artifact through the consumers' file rule (all_parts: a safe
  // relative path resolving to a regular file inside the package, of the
  // declared size); what is read, linked or copied is the resolved file,
  // never a symlink.
  {
    const fs::path root_dir = fs::absolute(o.package_dir);
    std::error_code ec;
    const fs::path boundary = local_package_boundary(o.package_dir, ec);
    if (ec) throw Error(ErrorKind::kNotFound, o.package_dir.string() + ": cannot resolve: " + ec.message());
    auto check = [&](const ArtifactEntry& e, PartRole role) {
      resolved[e.path] = check_package_file(root_dir, boundary, e.path, e.artifact_bytes,
                                            manifest_file_names(o.package_dir.string(), e.path, part_role_name(role)));
    };
    check(m.shared.metadata, PartRole::kMetadata);
    check(m.shared.embeddings, PartRole::kEmbeddings);
    check(m.shared.output, PartRole::kOutput);
    for (const auto& l : m.layers) check(l, PartRole::kLayer);
    for (const auto& p : m.projectors) check(p, PartRole::kProjector);
  }
}

void ConvertToV2::plan_parts() {
  // The fragments: each with tensors becomes a payload part, unchanged.
  auto open_fragment = [&](const ArtifactEntry& e) {
    auto g = std::make_shared<const GgufFile>(GgufFile::open(file_of(e.path)));
    if (g->tensors().size() != e.tensor_count) {
      throw_integrity((o.package_dir / e.path).string() + ": holds " + std::to_string(g->tensors().size()) + " tensors, the manifest says " +
                      std::to_string(e.tensor_count));
    }
    return g;
  };
  meta = open_fragment(m.shared.metadata);
  auto add = [&](std::string id, std::string path, const ArtifactEntry& e, std::shared_ptr<const GgufFile> g,
                 std::optional<uint32_t> layer) {
    if (g->tensors().empty()) {
      r.dropped.push_back(e.path + ": holds no tensors, so it is no schema 2 payload part" +
                          std::string(&e == &m.shared.metadata ? " (its KVs are in the carrier)" : ""));
      return;
    }
    parts.push_back({std::move(id), std::move(path), e.path, &e, std::move(g), layer});
  };
  add("common", "shared/common.gguf", m.shared.metadata, meta, std::nullopt);
  add("embeddings", std::string(kEmbeddingsPath), m.shared.embeddings, open_fragment(m.shared.embeddings), std::nullopt);
  add("output", std::string(kOutputPath), m.shared.output, open_fragment(m.shared.output), std::nullopt);
  for (const auto& l : m.layers) {
    add(detail::v2_layer_id(l.layer_index), detail::v2_layer_path(l.layer_index), l, open_fragment(l), l.layer_index);
  }
  if (parts.empty()) throw_invalid(mpath.string() + ": no fragment holds a tensor");
  std::sort(parts.begin(), parts.end(), [](const Payload& a, const Payload& b) { return a.id < b.id; });

}

void ConvertToV2::plan_directory() {
  // The directory: parts by index (id rank), tensors by offset in each.
  std::set<std::string> names;
  for (uint32_t pi = 0; pi < parts.size(); ++pi) {
    const auto& p = parts[pi];
    std::vector<const GgufTensorInfo*> ts;
    for (const auto& t : p.gguf->tensors()) ts.push_back(&t);
    std::sort(ts.begin(), ts.end(), [](auto* a, auto* b) { return a->file_offset < b->file_offset; });
    for (const auto* t : ts) {
      if (catalog_skips_tensor(t->ne)) continue;  // a zero-dimension placeholder: not catalogued
      const std::string name(t->name);
      if (!names.insert(name).second) throw_invalid(mpath.string() + ": tensor '" + name + "' is in more than one fragment");
      if (p.layer && tensor_name_layer(name) != p.layer) {
        throw_invalid(p.from + ": tensor '" + name + "' is not of layer " + std::to_string(*p.layer));
      }
      dir.push_back({name, t->type, t->ne, pi, t->file_offset, t->bytes, p.gguf->alignment()});
    }
  }

  // The source's order where the metadata fragment records it (write-package): a
  // carrier in that order gives a one-file source back (materialize --as-source).
  order_as_source(dir, *meta);

}

void ConvertToV2::certify() {
  // Certification (reads every byte once more: not part of the carrier + root time).
  if (o.source) {
    const auto tc = Clock::now();
    detail::CertInput in;
    for (const auto& p : parts) {
      in.files.push_back({file_of(p.from), p.from, p.entry->artifact_bytes, detail::ascii_lower(p.entry->sha256)});
    }
    for (const auto& t : dir) {
      in.tensors.push_back({t.name, t.type, std::vector<uint64_t>(t.ne.begin(), t.ne.end()), t.part, t.offset, t.size});
    }
    in.kvs = meta.get();
    for (const auto& f : m.source_model.files) in.source_files.push_back({f.path, f.size_bytes, f.sha256});
    in.layer_count = m.layer_count;
    in.hash_files = true;
    const auto out = detail::certify(in, *o.source, o.threads, o.on_progress);
    shard_sha = out.shard_sha256;
    shard_bytes = out.shard_bytes;
    r.certified = true;
    r.tensors_certified = out.tensors;
    r.bytes_compared = out.bytes_compared;
    r.certification = "every one of the " + std::to_string(out.tensors) + " source tensors is in the package exactly once "
                      "with the same type, dims and bytes (" + std::to_string(out.bytes_compared) + " bytes compared); "
                      "the source files and every payload part hash to their digests; the carrier's KVs are the source's";
    r.certify_seconds = seconds_since(tc);
  } else {
    r.certification = "not certified: no --source, so nothing proves the package holds every source tensor (written "
                      "with --uncertified; run convert-package again with --source to certify)";
  }
}

void ConvertToV2::build_root() {
  // The root.
  root.model_id = m.model_id;
  const auto& s = m.source_model;
  root.source_model.sha256 = detail::ascii_lower(s.sha256);
  root.source_model.metadata_artifact_id = "metadata";
  root.source_model.repo = s.repo;
  root.source_model.revision = s.revision;
  root.source_model.primary_file = s.primary_file;
  root.source_model.canonical_ref = s.repo + "@" + s.revision + "/" + s.primary_file;  // the reference's form
  if (!s.distribution_id.empty()) root.source_model.distribution_id = s.distribution_id;
  for (size_t i = 0; i < s.files.size(); ++i) {
    const auto& f = s.files[i];
    V2SourceFile v{f.path, 0, ""};
    if (f.size_bytes) v.byte_size = *f.size_bytes;
    else if (i < shard_bytes.size()) v.byte_size = shard_bytes[i];
    if (f.sha256) v.sha256 = detail::ascii_lower(*f.sha256);
    else if (i < shard_sha.size()) v.sha256 = shard_sha[i];
    if (v.byte_size == 0 || v.sha256.empty()) {
      throw Error(ErrorKind::kUsage, mpath.string() + ": source_model.files[" + std::to_string(i) + "] (" + f.path +
                                         ") records no size or SHA-256, which schema 2 requires: pass --source to compute them");
    }
    root.source_model.files.push_back(std::move(v));
  }
  root.format = "gguf";
  root.layer_count = m.layer_count;
  carrier = detail::carrier_bytes(*meta, static_cast<uint32_t>(parts.size()), dir);
  root.artifacts.push_back({"metadata", std::string(kMetadataPath), carrier.size(),
                            sha256_hex(std::span<const uint8_t>(carrier))});
  for (const auto& p : parts) root.artifacts.push_back({p.id, p.path, p.entry->artifact_bytes, detail::ascii_lower(p.entry->sha256)});
  for (const auto& pr : m.projectors) {
    if (pr.kind != kProjectorKindMmproj) {
      r.dropped.push_back(pr.path + ": projector kind \"" + pr.kind + "\" (schema 2 sidecars are mmproj only)");
      continue;
    }
    char id[32];
    std::snprintf(id, sizeof id, "projector-%05zu", sidecar_files.size());
    root.artifacts.push_back({id, pr.path, pr.artifact_bytes, detail::ascii_lower(pr.sha256)});
    root.sidecars.push_back({std::string(kSidecarKindMmproj), id, std::string(id)});
    sidecar_files.emplace_back(&pr, id);
  }
  root.generation = generation_v2(m.generation, r.dropped);
  if (o.request_defaults) {
    if (!root.generation) root.generation.emplace();
    root.generation->request_defaults = o.request_defaults;
  }
  if (const auto bad = catalog_kv_refusal(*meta)) throw_invalid(o.package_dir.string() + ": " + *bad + " (schema 2 metadata must have a JSON form)");
  publisher = detail::plan_publisher_metadata(o.publisher_metadata, root.source_model.repo,
                                                         root.source_model.revision, *meta);
  for (const auto& f : publisher.files) {
    root.artifacts.push_back(f.artifact);
    root.publisher_metadata.push_back(f.metadata);
  }
  root.publisher_defaults = publisher.defaults;
  root.native_abi_version = native_abi;
  root.generator_version = std::string(library_version());  // bare, as the reference writes its own
  root.created_at_unix_secs = m.created_at_unix_secs ? static_cast<uint64_t>(*m.created_at_unix_secs)
                                                     : static_cast<uint64_t>(env::source_date_epoch().value_or(std::time(nullptr)));
  root.package_id = compute_package_id_v2(root);
  try {
    validate_package_root_v2(root, "converted model-package.json");
  } catch (const Error& e) {
    if (!root.generation || !root.generation->speculative_decoding) throw;
    r.dropped.push_back("generation.speculative_decoding: does not pass schema 2's rules (" + std::string(e.what()) + ")");
    root.generation->speculative_decoding.reset();
    if (!root.generation->request_defaults) root.generation.reset();
    root.package_id = compute_package_id_v2(root);
    validate_package_root_v2(root, "converted model-package.json");
  }
  // Our reader's strict rules, on the carrier as written.
  {
    GgufLimits lim;
    lim.directory_only = true;
    auto parsed = std::make_shared<const GgufFile>(GgufFile::parse(carrier, "shared/metadata.gguf (converted)", lim));
    (void)build_catalog_v2(root, parsed, "converted package");
  }
  root_text = package_root_v2_json(root);

}

void ConvertToV2::stage_and_install() {
  // Stage, place, commit.
  detail::ConvertStaging staging(o.out_dir);
  std::set<fs::path> dirs{staging.path()};
  auto placed = [&](const std::string& id, const std::string& path, const std::string& from, uint64_t bytes,
                    const std::string& sha) {
    const fs::path to = staging.path() / path;
    const std::string how = place_file(file_of(from), to, o.io_env);
    dirs.insert(to.parent_path());
    r.payload_bytes += bytes;
    if (how == "hard link") r.linked_bytes += bytes;
    r.artifacts.push_back({id, path, from, bytes, sha, how});
  };
  r.artifacts.push_back({"metadata", std::string(kMetadataPath), "", carrier.size(), root.artifacts[0].sha256, "written"});
  for (const auto& p : parts) placed(p.id, p.path, p.from, p.entry->artifact_bytes, detail::ascii_lower(p.entry->sha256));
  for (const auto& [pr, id] : sidecar_files) placed(id, pr->path, pr->path, pr->artifact_bytes, detail::ascii_lower(pr->sha256));
  {
    fs::create_directories(staging.path() / "shared");
    AtomicFile cf(staging.path() / kMetadataPath, Durability::kDurable, o.io_env);
    cf.write_all(carrier);
    cf.commit(/*sync_directory=*/false);
    dirs.insert(staging.path() / "shared");
  }
  for (const auto& f : publisher.files) {
    const fs::path to = staging.path() / f.artifact.path;
    fs::create_directories(to.parent_path());
    write_file_atomic(to, f.contents, Durability::kDurable, o.io_env);  // durable: the root written after it names its SHA-256
    dirs.insert(to.parent_path());
    r.artifacts.push_back({f.artifact.id, f.artifact.path, "", f.artifact.byte_size, f.artifact.sha256, "written"});
  }
  // The model card write-package --schema 2 writes, for the same root.
  write_file_atomic(staging.path() / std::string(kPackageReadme), detail::package_readme_v2(root, sha256_hex(root_text), r.certified),
                    Durability::kDurable, o.io_env);
  write_file_atomic(staging.path() / kManifestFileName, root_text, Durability::kDurable, o.io_env);
  for (const auto& d : dirs) fsync_directory(d, o.io_env);
  // The output's own files, by the consumers' rule (each artifact a regular
  // file inside the output, of its size; the root as its strict reader reads
  // it), before the package is installed or called certified.
  {
    std::error_code ec;
    const fs::path boundary = fs::canonical(staging.path(), ec);
    if (ec) throw Error(ErrorKind::kIo, staging.path().string() + ": cannot resolve: " + ec.message());
    const auto staged = parse_package_root_v2(read_small_file(staging.path() / kManifestFileName, kManifestMaxBytes),
                                              (staging.path() / kManifestFileName).string());
    for (const auto& a : staged.artifacts) {
      (void)check_package_file(staging.path(), boundary, a.path, a.byte_size,
                               catalog_file_names(o.out_dir.string() + " (staged)", a.id, a.path));
    }
  }
  detail::install_staged_dir(staging.path(), o.out_dir, o.io_env);
  staging.keep = true;

}

}  // namespace convert_v2_detail

ConvertToV2Result convert_package_to_v2(const ConvertToV2Options& o) {
  return convert_v2_detail::ConvertToV2(o).run();
}

}  // namespace skippy
