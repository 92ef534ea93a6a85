// convert-package --to 1 (skippy/package_convert.h): the schema 1 writer's
// fragments, streamed from a schema 2 package's payload parts by locator.
#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "publish/package_readme.h"
#include "publish/split_stream.h"
#include "publish/schema1/layout.h"
#include "publish/writer_internal.h"
#include "skippy/abi.h"
#include "skippy/error.h"
#include "util/file.h"
#include "format/generation_v2.h"
#include "skippy/package_convert.h"

#include "format/schema2/reader.h"
#include "skippy/package_layout.h"
#include "util/sha256.h"

namespace skippy {
namespace convert_v1_detail {

namespace fs = std::filesystem;

// The schema 1 block of the same fields (generation_v1_of: the one mapping
// the consumers use too; a block with no schema 1 meaning is refused).
std::optional<GenerationDefaults> generation_v1(const std::optional<V2Generation>& g, uint32_t layer_count,
                                                const std::string& origin) {
  if (!g || !g->speculative_decoding) return std::nullopt;
  return generation_v1_of(*g, layer_count, origin);
}

// Every artifact through the consumers' file rule (check_package_file: a
// safe relative path resolving to a regular file inside the package, of
// the declared size), by id: what is read is the resolved file.
std::map<std::string, fs::path> resolve_artifacts(const PackageCatalog& cat, const fs::path& package_dir) {
  std::map<std::string, fs::path> resolved;
  const fs::path root_dir = fs::absolute(package_dir);
  std::error_code ec;
  const fs::path boundary = local_package_boundary(package_dir, ec);
  if (ec) throw Error(ErrorKind::kNotFound, package_dir.string() + ": cannot resolve: " + ec.message());
  for (const auto& a : cat.artifacts) {
    resolved[a.id] = check_package_file(root_dir, boundary, a.path, a.bytes, catalog_file_names(package_dir.string(), a.id, a.path));
  }
  return resolved;
}

// The payload parts as the writer's "shards": the pass hashes each one
// whole and checks it against the catalog before any fragment is renamed.
struct PartsAsSource {
  std::vector<std::shared_ptr<const MappedFile>> files;  // by shard
  std::vector<size_t> artifact;                           // each shard's catalog artifact
  std::vector<GgufTensorInfo> infos;
  std::vector<SourceTensor> tensors;  // the catalog's, each in its shard

  PartsAsSource(const PackageCatalog& cat, const std::map<std::string, fs::path>& resolved) {
    std::vector<size_t> file_of(cat.artifacts.size(), SIZE_MAX);
    for (size_t i = 0; i < cat.artifacts.size(); ++i) {
      const auto& a = cat.artifacts[i];
      if (a.kind != CatalogArtifactKind::kPayload) continue;
      auto f = MappedFile::open(resolved.at(a.id));
      if (f->size() != a.bytes) {  // replaced since it was checked
        throw_integrity("artifact " + a.id + " (" + a.path + "): " + std::to_string(f->size()) + " bytes, the catalog says " +
                        std::to_string(a.bytes));
      }
      file_of[i] = files.size();
      files.push_back(std::move(f));
      artifact.push_back(i);
    }
    infos.resize(cat.tensors.size());
    tensors.reserve(cat.tensors.size());
    for (size_t i = 0; i < cat.tensors.size(); ++i) {
      const auto& t = cat.tensors[i];
      auto& info = infos[i];
      info.name = t.name;
      info.type = t.ggml_type;
      for (const auto d : t.dims) info.ne.push_back(static_cast<int64_t>(d));
      info.bytes = t.stored_bytes;
      info.file_offset = t.offset;
      tensors.push_back({&info, file_of.at(t.artifact), classify_tensor(t.name)});
    }
  }
  PartsAsSource(const PartsAsSource&) = delete;  // tensors point into infos
  PartsAsSource& operator=(const PartsAsSource&) = delete;
};

// The schema 1 manifest's identity from the root (every field but the
// artifacts): model, generation, ABI, the source model and its files.
PackageManifest manifest_identity(const PackageRootV2& root, const PackageCatalog& cat, const fs::path& package_dir,
                                  ConvertToV1Result& r) {
  PackageManifest m;
  m.model_id = root.model_id;
  m.layer_count = cat.layer_count;
  m.activation_width = cat.carrier_file->embedding_length();
  m.generation = generation_v1(root.generation, cat.layer_count, "convert-package --to 1: " + package_dir.string());
  if (root.generation && root.generation->request_defaults) {
    r.dropped.push_back("generation.request_defaults: publisher sampling profiles have no schema 1 place");
  }
  m.skippy_abi_version = format_abi_version(kRuntimeAbiVersion);
  m.created_at_unix_secs = static_cast<int64_t>(root.created_at_unix_secs);
  const auto& s = root.source_model;
  auto need = [&](const std::optional<std::string>& v, const char* field) {
    if (!v || v->empty()) throw_invalid(std::string("model-package.json: source_model.") + field + " is absent; schema 1 requires it");
    return *v;
  };
  m.source_model.sha256 = s.sha256;
  m.source_model.repo = need(s.repo, "repo");
  m.source_model.revision = need(s.revision, "revision");
  m.source_model.primary_file = need(s.primary_file, "primary_file");
  m.source_model.canonical_ref = root.model_id;  // what the schema 1 writer records
  m.source_model.distribution_id = s.distribution_id.value_or("");
  // Schema 1 lists the files in shard order; schema 2's order is free (the
  // package_id sorts them by path), and split shard names sort in shard order.
  auto source_files = s.files;
  std::sort(source_files.begin(), source_files.end(), [](const V2SourceFile& a, const V2SourceFile& b) { return a.path < b.path; });
  for (const auto& f : source_files) m.source_model.files.push_back({f.path, f.byte_size, f.sha256});
  return m;
}

// The pass over the payload parts: progress over their bytes, and each
// part's SHA-256 checked against the catalog before any fragment is renamed.
detail::StreamOptions pass_options(const PackageCatalog& cat, const PartsAsSource& parts, const ConvertToV1Options& o) {
  auto done = std::make_shared<uint64_t>(0);
  uint64_t total = 0;
  for (const auto& f : parts.files) total += f->size();
  detail::StreamOptions so;
  so.threads = o.threads;
  so.io_env = o.io_env;
  so.on_bytes = [done, total, &o](uint64_t n) {
    *done += n;
    if (o.on_progress) o.on_progress(*done, total);
  };
  so.before_commit = [&cat, &parts](const detail::StreamResult& res) {
    for (size_t i = 0; i < parts.artifact.size(); ++i) {
      const auto& a = cat.artifacts[parts.artifact[i]];
      if (!sha256_equal(res.shard_sha256[i], a.sha256)) {
        throw_integrity("artifact " + a.id + " (" + a.path + "): SHA-256 " + res.shard_sha256[i] +
                        " differs from the catalog's " + a.sha256);
      }
    }
  };
  return so;
}

// The catalog's mmproj sidecars copied as schema 1 projectors (each checked
// against the catalog's SHA-256); what schema 1 has no place for is listed
// in r.dropped.
std::vector<ProjectorEntry> copy_sidecars(const PackageCatalog& cat, const std::map<std::string, fs::path>& resolved,
                                          const fs::path& out, IoEnv* env, ConvertToV1Result& r) {
  std::vector<ProjectorEntry> projectors;
  std::set<std::string> names;
  for (const auto& a : cat.artifacts) {
    if (a.kind == CatalogArtifactKind::kPublisherMetadata) {
      r.dropped.push_back("publisher metadata " + a.id + " (" + a.path + "): schema 1 has no place for it");
      continue;
    }
    if (a.kind != CatalogArtifactKind::kSidecar) continue;
    if (a.sidecar_kind != kSidecarKindMmproj) {
      r.dropped.push_back("sidecar " + a.id + ": kind " + a.sidecar_kind + " has no schema 1 place");
      continue;
    }
    auto p = detail::plan_projector(resolved.at(a.id));
    if (!names.insert(p.entry.path).second) throw_invalid("sidecar " + a.id + ": another sidecar has the same file name");
    auto e = detail::copy_projector(p, out, {}, env);
    if (!sha256_equal(e.sha256, a.sha256)) throw_integrity("sidecar " + a.id + " (" + a.path + "): SHA-256 differs from the catalog's");
    r.bytes_written += e.artifact_bytes;
    projectors.push_back(std::move(e));
  }
  return projectors;
}

}  // namespace convert_v1_detail

ConvertToV1Result convert_package_to_v1(const OpenedPackage& pkg, const ConvertToV1Options& o) {
  using namespace convert_v1_detail;
  using namespace detail;
  const PackageRootV2* root_of_pkg = schema2::root_of(pkg);
  if (!root_of_pkg) {
    throw Error(ErrorKind::kUsage, pkg.ref + ": already a schema " + std::to_string(pkg.schema_version()) + " package");
  }
  const PackageRootV2& root = *root_of_pkg;
  const PackageCatalog cat = pkg.catalog(CatalogNeed::all()).catalog;
  check_convert_out_dir(o.out_dir, o.force);
  ConvertToV1Result r;
  const auto resolved = resolve_artifacts(cat, o.package_dir);
  const PartsAsSource parts(cat, resolved);
  const auto& files = parts.files;
  const GgufFile& kvs = *cat.carrier_file;
  auto frags = plan_fragments("the schema 2 catalog", parts.tensors, cat.layer_count);
  std::vector<GgufWriter> writers;
  for (const auto& f : frags) writers.push_back(fragment_writer(kvs, files, f, /*drop_default_alignment=*/true));

  ConvertStaging staging(o.out_dir);
  std::error_code ec;
  for (const char* sub : {"shared", "layers"}) {
    fs::create_directories(staging.path() / sub, ec);
    if (ec) throw Error(ErrorKind::kIo, (staging.path() / sub).string() + ": cannot create: " + ec.message());
  }
  std::vector<StreamOutput> outputs;
  for (size_t i = 0; i < frags.size(); ++i) {
    outputs.push_back(stream_output(frags[i].rel_path, frags[i].tensors, writers[i], staging.path()));
  }
  const auto so = pass_options(cat, parts, o);
  const auto hashes = stream_split(files, outputs, so);

  PackageManifest m = manifest_identity(root, cat, o.package_dir, r);
  auto entry = [&](size_t i) {
    ArtifactEntry e;
    e.path = frags[i].rel_path;
    e.tensor_count = frags[i].tensors.size();
    e.tensor_bytes = writers[i].tensor_bytes();
    e.artifact_bytes = writers[i].total_size();
    e.sha256 = hashes.output_sha256[i];
    r.bytes_written += e.artifact_bytes;
    return e;
  };
  m.shared.metadata = entry(0);
  m.shared.embeddings = entry(1);
  m.shared.output = entry(2);
  for (uint32_t l = 0; l < cat.layer_count; ++l) {
    LayerEntry le;
    static_cast<ArtifactEntry&>(le) = entry(3 + l);
    le.layer_index = l;
    m.layers.push_back(std::move(le));
  }
  m.projectors = copy_sidecars(cat, resolved, staging.path(), o.io_env, r);
  const std::string text = serialize_manifest(m);
  r.manifest_sha256 = sha256_hex(text);
  write_file_atomic(staging.path() / std::string(kPackageReadme),
                    package_readme(m, r.manifest_sha256, {"converted from schema 2 package " + root.package_id}, std::nullopt),
                    Durability::kDurable, o.io_env);
  write_file_atomic(staging.path() / std::string(kManifestFileName), text, Durability::kDurable, o.io_env);
  fsync_directory(staging.path(), o.io_env);
  install_staged_dir(staging.path(), o.out_dir, o.io_env);
  staging.keep = true;
  r.package_dir = o.out_dir;
  r.artifact_count = frags.size() + m.projectors.size();
  r.notes.push_back("converted from schema 2 package " + root.package_id + "; fragments rewritten from the payload parts");
  if (kvs.alignment() == kGgufDefaultAlignment && kvs.find_kv("general.alignment")) {
    r.notes.push_back("general.alignment 32 (GGUF's default, which schema 2 carriers always state) left out of the fragments");
  }
  return r;
}

}  // namespace skippy
