// write-package --schema 2: the reference writer's layout (mesh-llm's
// package_v2 + part_writer) from write-package's single streaming pass.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "publish/carrier_writer.h"
#include "publish/certify.h"
#include "publish/split_stream.h"
#include "publish/writer_internal.h"
#include "publish/package_readme.h"
#include "publish/publisher_metadata.h"
#include "skippy/abi.h"
#include "skippy/error.h"
#include "util/file.h"
#include "skippy/manifest_v2.h"
#include "skippy/package_catalog.h"
#include "skippy/package_convert.h"
#include "util/sha256.h"
#include "skippy/version.h"

namespace skippy::detail {
namespace writer_v2_detail {

namespace fs = std::filesystem;

struct Part {
  std::string id, path;
  std::vector<const SourceTensor*> tensors;  // source order (name order in the reference layout)
};

// The reference's budget split (package_v2/layout.rs): names sorted, a new
// part whenever the next tensor would take the current one over the budget.
}  // namespace writer_v2_detail

std::vector<std::vector<const SourceTensor*>> split_v2_group(std::vector<const SourceTensor*> group, uint64_t budget) {
  std::sort(group.begin(), group.end(), [](auto* a, auto* b) { return a->info->name < b->info->name; });
  uint64_t total = 0;
  for (auto* t : group) total += t->info->bytes;
  if (total <= budget) return {group};
  std::vector<std::vector<const SourceTensor*>> parts(1);
  uint64_t cur = 0;
  for (auto* t : group) {
    if (!parts.back().empty() && cur + t->info->bytes > budget) {
      parts.emplace_back();
      cur = 0;
    }
    parts.back().push_back(t);
    cur += t->info->bytes;
  }
  return parts;
}

namespace writer_v2_detail {

std::vector<Part> plan_parts(const ModelSource& model, uint32_t layer_count, uint64_t budget) {
  std::vector<const SourceTensor*> common;
  std::vector<std::vector<const SourceTensor*>> layers(layer_count);
  for (const auto& t : model.tensors()) {
    if (catalog_skips_tensor(t.info->ne)) continue;  // a zero-dimension placeholder: not catalogued
    if (t.placement.role == TensorRole::kLayer) {
      layers.at(t.placement.layer).push_back(&t);
    } else {
      common.push_back(&t);
    }
  }
  std::vector<Part> out;
  auto emit = [&](std::vector<std::vector<const SourceTensor*>> groups, auto id_of, auto path_of) {
    for (size_t i = 0; i < groups.size(); ++i) {
      const int part = groups.size() == 1 ? -1 : static_cast<int>(i);
      Part p{id_of(part), path_of(part), std::move(groups[i])};
      std::sort(p.tensors.begin(), p.tensors.end(), [](auto* a, auto* b) {
        return a->shard != b->shard ? a->shard < b->shard : a->info->file_offset < b->info->file_offset;
      });
      out.push_back(std::move(p));
    }
  };
  if (!common.empty()) {
    auto name = [](int part, const char* pre, const char* post) {
      char buf[64];
      if (part < 0) std::snprintf(buf, sizeof buf, "%scommon%s", pre, post);
      else std::snprintf(buf, sizeof buf, "%scommon-part%02d%s", pre, part, post);
      return std::string(buf);
    };
    emit(split_v2_group(common, budget), [&](int p) { return name(p, "", ""); },
         [&](int p) { return name(p, "shared/", ".gguf"); });
  }
  for (uint32_t l = 0; l < layer_count; ++l) {
    if (layers[l].empty()) {
      throw_invalid(model.primary().name() + ": layer " + std::to_string(l) + " of " + std::to_string(layer_count) +
                    " has no tensors (block_count disagrees with the blk.N tensors)");
    }
    emit(split_v2_group(layers[l], budget), [&](int p) { return v2_layer_id(l, p); },
         [&](int p) { return v2_layer_path(l, p); });
  }
  return out;
}

// The reference's infer_native_mtp_generation: one native-mtp strategy when
// <arch>.nextn_predict_layers is 1 and the blk.N.nextn.* tensors sit exactly
// at the last layer; none when neither says MTP; a refusal when they disagree.
std::optional<V2Generation> native_mtp_generation(const ModelSource& model, uint32_t layer_count) {
  const std::string key = std::string(model.architecture()) + ".nextn_predict_layers";
  const GgufKv* kv = model.primary().find_kv(key);
  const std::optional<uint64_t> depth = kv ? kv->value.as_uint() : std::nullopt;
  if (kv && !depth) throw_invalid(model.primary().name() + ": " + key + " is present but not an unsigned integer");
  std::set<uint32_t> layers;
  for (const auto& t : model.tensors()) {
    const std::string_view n = t.info->name;
    if (n.find(".nextn.") == std::string_view::npos) continue;
    const auto l = tensor_name_layer(n);
    if (!l || !n.substr(n.find('.', 4) + 1).starts_with("nextn.")) {
      throw_invalid(model.primary().name() + ": tensor '" + std::string(n) + "' has no parseable blk.<layer>.nextn. prefix");
    }
    layers.insert(*l);
  }
  if ((!depth || *depth == 0) && layers.empty()) return std::nullopt;
  if (depth && *depth > 1) {
    throw_invalid(model.primary().name() + ": " + key + " = " + std::to_string(*depth) +
                  ": the reference runtime executes depth 1 only, so no correct native-MTP declaration exists");
  }
  if (depth == 1u) {
    if (layers != std::set<uint32_t>{layer_count - 1}) {
      throw_invalid(model.primary().name() + ": " + key + " = 1 but the .nextn. tensors are not exactly at layer " +
                    std::to_string(layer_count - 1));
    }
    V2Strategy s;
    s.type = "native-mtp";
    s.prediction_depth = 1;
    s.layer_indices = {layer_count - 1};
    s.window_policy = V2WindowPolicy{"fixed", 1, 1, 1, std::nullopt};
    V2SpeculativeDecoding sd;
    sd.default_strategy = "mtp";
    sd.strategies["mtp"] = s;
    V2Generation g;
    g.speculative_decoding = sd;
    return g;
  }
  throw_invalid(model.primary().name() + ": .nextn. tensors are present but " + key + " is " + (kv ? "0" : "absent"));
}

// The reference's part_writer.rs drops exactly these from a part's KVs.
bool is_split_bookkeeping_key(std::string_view key) {
  return key == "split.no" || key == "split.count" || key == "split.tensors.count";
}

// A part in the reference's layout (V2PartLayout::kReference): `w` holds the
// tensors in name order at its offsets; the pieces arrive in source order and
// land at those offsets, the file ends right after the last tensor, and it
// is hashed once written (it cannot be hashed front to back in the pass).
StreamOutput reference_part_output(const Part& p, const GgufWriter& w, const fs::path& out_dir) {
  StreamOutput o;
  o.final_path = out_dir / p.path;
  o.header = w.header_bytes();
  o.hash_after_write = true;
  const uint64_t data = w.data_offset();
  o.total_size = data;
  for (size_t k = 0; k < p.tensors.size(); ++k) {
    const auto& wt = w.tensors()[k];
    const auto* st = p.tensors[k];
    o.pieces.push_back({st->shard, st->info->file_offset, wt.bytes, data + wt.offset, 0});
    o.total_size = std::max(o.total_size, data + wt.offset + wt.bytes);
  }
  std::sort(o.pieces.begin(), o.pieces.end(), [](const auto& a, const auto& b) {
    return a.shard != b.shard ? a.shard < b.shard : a.src_offset < b.src_offset;
  });
  return o;
}

// normalize_gguf_distribution_id: the file's stem without a shard suffix.
std::optional<std::string> distribution_of(const std::string& file) {
  std::string stem = fs::path(file).filename().string();
  if (!stem.ends_with(".gguf")) return std::nullopt;
  stem.resize(stem.size() - 5);
  if (const auto split = parse_split_name(fs::path(file).filename().string() )) {
    stem = fs::path(split->prefix).filename().string();
  }
  if (stem.empty()) return std::nullopt;
  return stem;
}

}  // namespace writer_v2_detail

WritePackageResult write_package_v2(const WritePackageOptions& opt) {
  using namespace writer_v2_detail;
  if (opt.provenance.model_id.empty() || opt.provenance.revision.empty() || opt.provenance.primary_file.empty()) {
    throw Error(ErrorKind::kUsage,
                "a local source needs explicit provenance: --model-id, --source-revision and --source-file");
  }
  if (opt.max_artifact_bytes == 0) throw Error(ErrorKind::kUsage, "--max-artifact-bytes must be greater than zero");
  const auto model = ModelSource::open(opt.source);
  const uint32_t layer_count = model.layer_count();
  const auto generation = native_mtp_generation(model, layer_count);
  auto parts = plan_parts(model, layer_count, opt.max_artifact_bytes);
  const bool reference_layout = opt.layout == V2PartLayout::kReference;
  if (reference_layout) {  // part_writer.rs: a part's tensors in name order
    for (auto& p : parts) {
      std::sort(p.tensors.begin(), p.tensors.end(), [](auto* a, auto* b) { return a->info->name < b->info->name; });
    }
  }
  std::vector<std::shared_ptr<const MappedFile>> shard_files;
  for (const auto& s : model.shards()) shard_files.push_back(s.file());

  // Payload parts (reference part_writer): every source KV but split.*,
  // general.alignment present, the part's tensors at the source alignment.
  const GgufFile& primary = model.primary();
  if (const auto bad = catalog_kv_refusal(primary)) {
    throw_invalid(primary.name() + ": " + *bad +
                  "; package schema 2 carries the source's KVs, which must have a JSON form (the reference's catalog "
                  "refuses anything else)");
  }
  std::vector<GgufWriter> writers;
  for (const auto& p : parts) {
    GgufWriter w(primary.alignment());
    for (const auto& kv : primary.kvs()) {
      const bool drop = reference_layout ? is_split_bookkeeping_key(kv.key) : kv.key.starts_with("split.");
      if (!drop) w.add_kv_borrowed(std::string(kv.key), kv.value);
    }
    if (!w.has_kv("general.alignment")) w.add_u32("general.alignment", primary.alignment());
    for (const auto* t : p.tensors) {
      w.add_tensor(std::string(t->info->name), t->info->type, t->info->ne, shard_files[t->shard], t->info->file_offset);
    }
    writers.push_back(std::move(w));
  }
  // Part index: the rank of the id among payload ids.
  std::vector<size_t> by_id(parts.size());
  for (size_t i = 0; i < by_id.size(); ++i) by_id[i] = i;
  std::sort(by_id.begin(), by_id.end(), [&](size_t a, size_t b) { return parts[a].id < parts[b].id; });
  std::vector<uint32_t> part_index(parts.size());
  for (size_t r = 0; r < by_id.size(); ++r) part_index[by_id[r]] = static_cast<uint32_t>(r);
  std::map<std::string_view, CarrierTensor> where;
  for (size_t i = 0; i < parts.size(); ++i) {
    for (size_t k = 0; k < parts[i].tensors.size(); ++k) {
      const auto& wt = writers[i].tensors()[k];
      where[parts[i].tensors[k]->info->name] = {wt.name, wt.type, wt.ne, part_index[i], writers[i].data_offset() + wt.offset,
                                               wt.bytes, writers[i].alignment()};
    }
  }
  std::vector<CarrierTensor> dir;  // the source's order
  for (const auto& t : model.tensors()) {
    if (!catalog_skips_tensor(t.info->ne)) dir.push_back(where.at(t.info->name));
  }
  std::optional<std::string> own_carrier_why;  // the reference layout, but this tool's carrier: why
  std::vector<uint8_t> carrier;
  if (reference_layout) {
    // The reference's directory order: the parts by id, each in its (name) order.
    std::vector<CarrierTensor> ref_dir;
    for (const size_t i : by_id) {
      for (const auto* t : parts[i].tensors) ref_dir.push_back(where.at(t->info->name));
    }
    own_carrier_why = reference_carrier_refusal(primary, ref_dir);
    if (!own_carrier_why) carrier = reference_carrier_bytes(primary, static_cast<uint32_t>(parts.size()), ref_dir);
  }
  if (carrier.empty()) carrier = carrier_bytes(primary, static_cast<uint32_t>(parts.size()), dir);

  std::vector<StreamOutput> outputs;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (reference_layout) {
      outputs.push_back(reference_part_output(parts[i], writers[i], opt.out_dir));
    } else {
      Fragment f{parts[i].path, PartRole::kLayer, 0, parts[i].tensors};
      outputs.push_back(stream_output(f, writers[i], opt.out_dir));
    }
  }

  std::vector<PlannedProjector> projectors;
  for (size_t i = 0; i < opt.projectors.size(); ++i) {
    projectors.push_back(plan_projector(opt.projectors[i]));
    char name[48];
    std::snprintf(name, sizeof name, "projectors/projector-%05zu.gguf", i);
    projectors.back().entry.path = name;
  }

  // The root, with placeholder digests, checked before the directory is touched.
  const std::string placeholder(64, '0');
  PackageRootV2 root;
  root.model_id = opt.provenance.model_id;
  const SourceModel s1 = source_identity(opt, model, std::vector<std::string>(model.shards().size(), placeholder));
  root.source_model.metadata_artifact_id = "metadata";
  root.source_model.repo = s1.repo;
  root.source_model.revision = s1.revision;
  root.source_model.primary_file = s1.primary_file;
  root.source_model.canonical_ref = s1.repo + "@" + s1.revision + "/" + s1.primary_file;
  root.source_model.distribution_id = distribution_of(s1.primary_file);
  root.format = "gguf";
  root.layer_count = layer_count;
  root.generation = generation;
  if (opt.request_defaults) {
    if (!root.generation) root.generation.emplace();
    root.generation->request_defaults = opt.request_defaults;
  }
  const PublisherPlan publisher = plan_publisher_metadata(opt.publisher_metadata, root.source_model.repo,
                                                          root.source_model.revision, primary);
  root.publisher_defaults = publisher.defaults;
  root.native_abi_version = native_abi_version_to_write(opt.native_abi_version);
  root.generator_version = std::string(library_version());  // bare, as the reference writes its own
  root.created_at_unix_secs = static_cast<uint64_t>(std::max<int64_t>(0, resolve_created_at(opt)));
  auto fill = [&](const SourceModel& s, const std::vector<std::string>& part_sha, const std::string& carrier_sha,
                  const std::vector<std::string>& projector_sha) {
    root.source_model.sha256 = s.sha256;
    root.source_model.files.clear();
    for (const auto& f : s.files) root.source_model.files.push_back({f.path, f.size_bytes.value_or(0), f.sha256.value_or("")});
    root.artifacts.clear();
    root.sidecars.clear();
    root.artifacts.push_back({"metadata", std::string(kMetadataPath), carrier.size(), carrier_sha});
    for (size_t i = 0; i < parts.size(); ++i) root.artifacts.push_back({parts[i].id, parts[i].path, outputs[i].total_size, part_sha[i]});
    for (size_t i = 0; i < projectors.size(); ++i) {
      const std::string id = fs::path(projectors[i].entry.path).stem().string();
      root.artifacts.push_back({id, projectors[i].entry.path, projectors[i].entry.artifact_bytes, projector_sha[i]});
      root.sidecars.push_back({std::string(kSidecarKindMmproj), id, id});
    }
    root.publisher_metadata.clear();
    for (const auto& f : publisher.files) {  // after the sidecars, as the reference lists them
      root.artifacts.push_back(f.artifact);
      root.publisher_metadata.push_back(f.metadata);
    }
    root.package_id = compute_package_id_v2(root);
    validate_package_root_v2(root, "model-package.json");
  };
  const std::string carrier_sha = sha256_hex(std::span<const uint8_t>(carrier));
  fill(s1, std::vector<std::string>(parts.size(), placeholder), carrier_sha,
       std::vector<std::string>(projectors.size(), placeholder));

  // One streaming pass: the parts (planned above), and the carrier as an output without pieces.
  {
    StreamOutput c;
    c.final_path = opt.out_dir / kMetadataPath;
    c.header = GgufBytes::borrow(carrier);  // no copy: carrier outlives the pass
    c.total_size = carrier.size();
    outputs.push_back(std::move(c));
  }
  auto so = begin_source_pass(opt, model, outputs, projectors);
  const auto on_bytes = so.on_bytes;
  auto rel_of = [&](size_t i) { return i < parts.size() ? parts[i].path : std::string(kMetadataPath); };
  // --validate where the parts leave as they are uploaded, or the source is
  // never stored: each artifact certified on its own as it is written.
  std::optional<SourceDigests> digests;
  std::optional<CertifyAsWritten> cert;
  if (validates_as_written(opt)) {
    if (opt.stream_read) record_source_digests(so, digests.emplace(model));
    cert.emplace(model, digests ? &*digests : nullptr);
  }
  auto announce = [&](const WrittenArtifact& w, bool payload) {
    if (cert) {
      if (opt.after_write_before_check) opt.after_write_before_check(w);
      try {
        payload ? cert->check_part(w.path, w.size, w.sha256) : cert->check_file(w.path, w.size, w.sha256);
      } catch (const Error& e) {
        throw_integrity(opt.out_dir.string() + ": validation failed, so no manifest was written (found in " + w.rel_path +
                        ", before its upload): " + e.what());
      }
    }
    opt.on_artifact(w);
  };
  // A streamed write announces the carrier last (after the projectors and
  // publisher files): the package's root artifact leaves only once every
  // part it locates is complete and its source checked.
  std::optional<WrittenArtifact> carrier_last;
  if (opt.on_artifact) {
    so.on_output_complete = [&](size_t i, const OutputDigest& d) {
      WrittenArtifact w{rel_of(i), outputs[i].final_path, outputs[i].total_size, d.sha256, d.xet_chunks};
      if (opt.stream_read && i == parts.size()) {
        carrier_last = std::move(w);  // (announced from the finisher thread; read after the pass)
        return;
      }
      announce(w, i < parts.size());
    };
  }
  const auto hashes = stream_split(shard_files, outputs, so);
  uint64_t source_hashed = 0;
  for (size_t i = 0; i < model.shards().size(); ++i) {
    if (i >= so.known_shard_sha256.size() || !so.known_shard_sha256[i]) source_hashed += model.shards()[i].file_size();
  }
  if (!sha256_equal(hashes.output_sha256.back(), carrier_sha)) throw_integrity("shared/metadata.gguf: written bytes differ");
  std::vector<std::string> projector_sha;
  for (const auto& p : projectors) {
    if (opt.on_artifact && opt.disk_budget) opt.disk_budget->acquire(p.entry.artifact_bytes);
    const auto e = copy_projector(p, opt.out_dir, on_bytes, opt.io_env);
    projector_sha.push_back(e.sha256);
    if (opt.on_artifact) announce({e.path, opt.out_dir / e.path, e.artifact_bytes, e.sha256, nullptr}, false);
  }
  for (const auto& f : publisher.files) {
    const fs::path file = opt.out_dir / f.artifact.path;
    fs::create_directories(file.parent_path());
    write_file_atomic(file, f.contents, Durability::kDurable, opt.io_env);
    if (opt.on_artifact) announce({f.artifact.path, file, f.artifact.byte_size, f.artifact.sha256, nullptr}, false);
  }
  if (carrier_last) announce(*carrier_last, false);
  fill(source_identity(opt, model, hashes.shard_sha256),
       std::vector<std::string>(hashes.output_sha256.begin(), hashes.output_sha256.end() - 1), carrier_sha, projector_sha);

  // Our reader's rules on what was written, and with --validate the
  // certification against the source, before the root exists.
  GgufLimits lim;
  lim.directory_only = true;
  auto parsed = std::make_shared<const GgufFile>(GgufFile::parse(carrier, "shared/metadata.gguf", lim));
  const auto catalog = build_catalog_v2(root, parsed, opt.out_dir.string());
  WritePackageResult r;
  r.architecture = std::string(model.architecture());
  if (opt.validate) {
    try {
      if (cert) {
        if (!opt.on_artifact) {  // nothing announced (a streamed write kept on disk): every part read back now
          for (size_t i = 0; i < parts.size(); ++i) {
            cert->check_part(outputs[i].final_path, outputs[i].total_size, hashes.output_sha256[i]);
          }
        }
        (void)cert->finish(catalog, opt.out_dir);  // (each artifact was read back and certified as it was written)
      } else {
        (void)certify_catalog(catalog, opt.out_dir, opt.source, /*hash_artifacts=*/true, opt.threads);
      }
    } catch (const Error& e) {
      throw_integrity(opt.out_dir.string() + ": validation failed, so no manifest was written: " + e.what());
    }
    r.validated = true;
  }
  const std::string text = package_root_v2_json(root);
  // The model card first (it names the root's digest): a crash leaves no root, so a rerun writes both.
  write_file_atomic(opt.out_dir / "README.md", package_readme_v2(root, sha256_hex(text), opt.validate), Durability::kDurable,
                    opt.io_env);
  write_file_atomic(opt.out_dir / std::string(kManifestFileName), text, Durability::kDurable, opt.io_env);
  std::error_code ec;
  fs::remove(opt.out_dir / kInProgressMarker, ec);
  fsync_directory(opt.out_dir, opt.io_env);

  r.schema = 2;
  r.package_dir = opt.out_dir;
  r.manifest_sha256 = sha256_hex(text);
  r.manifest.model_id = root.model_id;
  r.manifest.layer_count = layer_count;
  r.artifact_count = root.artifacts.size();
  r.source_bytes_hashed = source_hashed;
  r.package_id = root.package_id;
  if (own_carrier_why) {
    r.notes.push_back("layout reference: the payload parts are the reference writer's, the carrier this tool's: " +
                      *own_carrier_why);
  }
  if (generation) r.notes.push_back("generation: native-mtp at layer " + std::to_string(layer_count - 1) +
                                    " (<arch>.nextn_predict_layers = 1 and the blk.N.nextn.* tensors agree)");
  r.native_abi_version = root.native_abi_version;
  return r;
}

}  // namespace skippy::detail
