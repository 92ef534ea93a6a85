// Package schema 2's layout (mesh-llm's package_v2 + part_writer): the
// payload parts, the metadata carrier and the root that names them, for
// write-package's one pipeline (package_writer.cpp); --validate through the
// reference's certification.
#include "publish/schema2/layout.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "publish/carrier_writer.h"
#include "publish/certify.h"
#include "publish/split_stream.h"
#include "publish/schema_layout.h"
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


class Schema2Layout final : public SchemaLayout {
 public:
  explicit Schema2Layout(const WritePackageOptions& opt) : opt_(opt) {}

  void check_options() const override {
    if (opt_.max_artifact_bytes == 0) throw Error(ErrorKind::kUsage, "--max-artifact-bytes must be greater than zero");
  }

  void plan(const ModelSource& model, const std::vector<std::shared_ptr<const MappedFile>>& shards) override {
    model_ = &model;
    const uint32_t layer_count = model.layer_count();
    generation_ = native_mtp_generation(model, layer_count);
    parts_ = plan_parts(model, layer_count, opt_.max_artifact_bytes);
    const bool reference_layout = opt_.layout == V2PartLayout::kReference;
    if (reference_layout) {  // part_writer.rs: a part's tensors in name order
      for (auto& p : parts_) {
        std::sort(p.tensors.begin(), p.tensors.end(), [](auto* a, auto* b) { return a->info->name < b->info->name; });
      }
    }
    // Payload parts (reference part_writer): every source KV but split.*,
    // general.alignment present, the part's tensors at the source alignment.
    const GgufFile& primary = model.primary();
    if (const auto bad = catalog_kv_refusal(primary)) {
      throw_invalid(primary.name() + ": " + *bad +
                    "; package schema 2 carries the source's KVs, which must have a JSON form (the reference's catalog "
                    "refuses anything else)");
    }
    std::vector<GgufWriter> writers;
    for (const auto& p : parts_) {
      GgufWriter w(primary.alignment());
      for (const auto& kv : primary.kvs()) {
        const bool drop = reference_layout ? is_split_bookkeeping_key(kv.key) : kv.key.starts_with("split.");
        if (!drop) w.add_kv_borrowed(std::string(kv.key), kv.value);
      }
      if (!w.has_kv("general.alignment")) w.add_u32("general.alignment", primary.alignment());
      for (const auto* t : p.tensors) {
        w.add_tensor(std::string(t->info->name), t->info->type, t->info->ne, shards[t->shard], t->info->file_offset);
      }
      writers.push_back(std::move(w));
    }
    plan_carrier(primary, writers, reference_layout);
    for (size_t i = 0; i < parts_.size(); ++i) {
      outputs_.push_back(reference_layout ? reference_part_output(parts_[i], writers[i], opt_.out_dir)
                                          : stream_output(parts_[i].path, parts_[i].tensors, writers[i], opt_.out_dir));
    }
    for (size_t i = 0; i < opt_.projectors.size(); ++i) {
      projectors_.push_back(plan_projector(opt_.projectors[i]));
      char name[48];
      std::snprintf(name, sizeof name, "projectors/projector-%05zu.gguf", i);
      projectors_.back().entry.path = name;
    }
    plan_root(model, layer_count);
    // One streaming pass: the parts (planned above), and the carrier as an output without pieces.
    StreamOutput c;
    c.final_path = opt_.out_dir / kMetadataPath;
    c.header = GgufBytes::borrow(carrier_);  // no copy: the carrier outlives the pass
    c.total_size = carrier_.size();
    outputs_.push_back(std::move(c));
  }
  std::vector<StreamOutput>& outputs() override { return outputs_; }
  // The parts, then the carrier.
  const std::string& rel_path(size_t output) const override {
    return output < parts_.size() ? parts_[output].path : carrier_path_;
  }
  const std::vector<PlannedProjector>& projectors() const override { return projectors_; }
  // A streamed write announces the carrier last (after the projectors and
  // publisher files): the package's root artifact leaves only once every
  // part it locates is complete and its source checked.
  std::optional<size_t> announced_last() const override {
    return opt_.stream_read ? std::optional<size_t>(parts_.size()) : std::nullopt;
  }

  void begin_checks(const SourceDigests* digests) override { cert_.emplace(*model_, digests); }
  void check_written(const WrittenArtifact& w, const WrittenFile& what) override {
    try {
      if (what.output && *what.output < parts_.size()) {
        cert_->check_part(w.path, w.size, w.sha256);
      } else {
        cert_->check_file(w.path, w.size, w.sha256);
      }
    } catch (const Error& e) {
      throw_integrity(opt_.out_dir.string() + ": validation failed, so no manifest was written (found in " + w.rel_path +
                      ", before its upload): " + e.what());
    }
  }

  void after_pass(const StreamResult& hashes) override {
    if (!sha256_equal(hashes.output_sha256.back(), carrier_sha_)) throw_integrity("shared/metadata.gguf: written bytes differ");
  }
  std::vector<LayoutFile> other_files() const override {
    std::vector<LayoutFile> files;
    for (const auto& f : publisher_.files) files.push_back({f.artifact.path, f.contents, f.artifact.sha256});
    return files;
  }
  // The root with every digest, then our reader's rules on what was written.
  void complete_root(const StreamResult& hashes, const std::vector<ProjectorEntry>& projectors) override {
    std::vector<std::string> projector_sha;
    for (const auto& e : projectors) projector_sha.push_back(e.sha256);
    fill(source_identity(opt_, *model_, hashes.shard_sha256),
         std::vector<std::string>(hashes.output_sha256.begin(), hashes.output_sha256.end() - 1), projector_sha);
    GgufLimits lim;
    lim.directory_only = true;
    auto parsed = std::make_shared<const GgufFile>(GgufFile::parse(carrier_, "shared/metadata.gguf", lim));
    catalog_ = build_catalog_v2(root_, parsed, opt_.out_dir.string());
  }
  void validate(const StreamResult& hashes) override {
    try {
      if (cert_) {
        if (!opt_.on_artifact) {  // nothing announced (a streamed write kept on disk): every part read back now
          for (size_t i = 0; i < parts_.size(); ++i) {
            cert_->check_part(outputs_[i].final_path, outputs_[i].total_size, hashes.output_sha256[i]);
          }
        }
        (void)cert_->finish(catalog_, opt_.out_dir);  // (each artifact was read back and certified as it was written)
      } else {
        (void)certify_catalog(catalog_, opt_.out_dir, opt_.source, /*hash_artifacts=*/true, opt_.threads);
      }
    } catch (const Error& e) {
      throw_integrity(opt_.out_dir.string() + ": validation failed, so no manifest was written: " + e.what());
    }
  }
  std::string root_text() const override { return package_root_v2_json(root_); }

  void describe(WritePackageResult& r) const override {
    r.schema = 2;
    r.manifest.model_id = root_.model_id;
    r.manifest.layer_count = root_.layer_count;
    r.artifact_count = root_.artifacts.size();
    r.package_id = root_.package_id;
    if (own_carrier_why_) {
      r.notes.push_back("layout reference: the payload parts are the reference writer's, the carrier this tool's: " +
                        *own_carrier_why_);
    }
    if (generation_) r.notes.push_back("generation: native-mtp at layer " + std::to_string(root_.layer_count - 1) +
                                       " (<arch>.nextn_predict_layers = 1 and the blk.N.nextn.* tensors agree)");
    r.native_abi_version = root_.native_abi_version;
  }
  // The model card first (it names the root's digest).
  void write_before_root(const WritePackageResult& r) const override {
    write_file_atomic(opt_.out_dir / "README.md", package_readme_v2(root_, r.manifest_sha256, opt_.validate),
                      Durability::kDurable, opt_.io_env);
  }

 private:
  // The carrier: every source KV and the whole tensor directory, a locator
  // per tensor (part index: the rank of its id among payload ids).
  void plan_carrier(const GgufFile& primary, const std::vector<GgufWriter>& writers, bool reference_layout) {
    std::vector<size_t> by_id(parts_.size());
    for (size_t i = 0; i < by_id.size(); ++i) by_id[i] = i;
    std::sort(by_id.begin(), by_id.end(), [&](size_t a, size_t b) { return parts_[a].id < parts_[b].id; });
    std::vector<uint32_t> part_index(parts_.size());
    for (size_t r = 0; r < by_id.size(); ++r) part_index[by_id[r]] = static_cast<uint32_t>(r);
    std::map<std::string_view, CarrierTensor> where;
    for (size_t i = 0; i < parts_.size(); ++i) {
      for (size_t k = 0; k < parts_[i].tensors.size(); ++k) {
        const auto& wt = writers[i].tensors()[k];
        where[parts_[i].tensors[k]->info->name] = {wt.name, wt.type, wt.ne, part_index[i],
                                                   writers[i].data_offset() + wt.offset, wt.bytes, writers[i].alignment()};
      }
    }
    std::vector<CarrierTensor> dir;  // the source's order
    for (const auto& t : model_->tensors()) {
      if (!catalog_skips_tensor(t.info->ne)) dir.push_back(where.at(t.info->name));
    }
    if (reference_layout) {
      // The reference's directory order: the parts by id, each in its (name) order.
      std::vector<CarrierTensor> ref_dir;
      for (const size_t i : by_id) {
        for (const auto* t : parts_[i].tensors) ref_dir.push_back(where.at(t->info->name));
      }
      own_carrier_why_ = reference_carrier_refusal(primary, ref_dir);
      if (!own_carrier_why_) carrier_ = reference_carrier_bytes(primary, static_cast<uint32_t>(parts_.size()), ref_dir);
    }
    if (carrier_.empty()) carrier_ = carrier_bytes(primary, static_cast<uint32_t>(parts_.size()), dir);
    carrier_sha_ = sha256_hex(std::span<const uint8_t>(carrier_));
  }

  // The root, with placeholder digests, checked before the directory is touched.
  void plan_root(const ModelSource& model, uint32_t layer_count) {
    const std::string placeholder(64, '0');
    root_.model_id = opt_.provenance.model_id;
    const SourceModel s1 = source_identity(opt_, model, std::vector<std::string>(model.shards().size(), placeholder));
    root_.source_model.metadata_artifact_id = "metadata";
    root_.source_model.repo = s1.repo;
    root_.source_model.revision = s1.revision;
    root_.source_model.primary_file = s1.primary_file;
    root_.source_model.canonical_ref = s1.repo + "@" + s1.revision + "/" + s1.primary_file;
    root_.source_model.distribution_id = distribution_of(s1.primary_file);
    root_.format = "gguf";
    root_.layer_count = layer_count;
    root_.generation = generation_;
    if (opt_.request_defaults) {
      if (!root_.generation) root_.generation.emplace();
      root_.generation->request_defaults = opt_.request_defaults;
    }
    publisher_ = plan_publisher_metadata(opt_.publisher_metadata, root_.source_model.repo, root_.source_model.revision,
                                         model.primary());
    root_.publisher_defaults = publisher_.defaults;
    root_.native_abi_version = native_abi_version_to_write(opt_.native_abi_version);
    root_.generator_version = std::string(library_version());  // bare, as the reference writes its own
    root_.created_at_unix_secs = static_cast<uint64_t>(std::max<int64_t>(0, resolve_created_at(opt_)));
    fill(s1, std::vector<std::string>(parts_.size(), placeholder), std::vector<std::string>(projectors_.size(), placeholder));
  }

  void fill(const SourceModel& s, const std::vector<std::string>& part_sha, const std::vector<std::string>& projector_sha) {
    root_.source_model.sha256 = s.sha256;
    root_.source_model.files.clear();
    for (const auto& f : s.files) root_.source_model.files.push_back({f.path, f.size_bytes.value_or(0), f.sha256.value_or("")});
    root_.artifacts.clear();
    root_.sidecars.clear();
    root_.artifacts.push_back({"metadata", std::string(kMetadataPath), carrier_.size(), carrier_sha_});
    for (size_t i = 0; i < parts_.size(); ++i) {
      root_.artifacts.push_back({parts_[i].id, parts_[i].path, outputs_[i].total_size, part_sha[i]});
    }
    for (size_t i = 0; i < projectors_.size(); ++i) {
      const std::string id = fs::path(projectors_[i].entry.path).stem().string();
      root_.artifacts.push_back({id, projectors_[i].entry.path, projectors_[i].entry.artifact_bytes, projector_sha[i]});
      root_.sidecars.push_back({std::string(kSidecarKindMmproj), id, id});
    }
    root_.publisher_metadata.clear();
    for (const auto& f : publisher_.files) {  // after the sidecars, as the reference lists them
      root_.artifacts.push_back(f.artifact);
      root_.publisher_metadata.push_back(f.metadata);
    }
    root_.package_id = compute_package_id_v2(root_);
    validate_package_root_v2(root_, "model-package.json");
  }

  const WritePackageOptions& opt_;
  const ModelSource* model_ = nullptr;
  std::optional<V2Generation> generation_;
  std::vector<Part> parts_;
  std::vector<uint8_t> carrier_;
  std::string carrier_sha_;
  std::optional<std::string> own_carrier_why_;  // the reference layout, but this tool's carrier: why
  std::vector<StreamOutput> outputs_;
  const std::string carrier_path_{kMetadataPath};
  std::vector<PlannedProjector> projectors_;
  PublisherPlan publisher_;
  PackageRootV2 root_;
  PackageCatalog catalog_;
  std::optional<CertifyAsWritten> cert_;
};

}  // namespace writer_v2_detail

std::unique_ptr<SchemaLayout> make_schema2_layout(const WritePackageOptions& opt) {
  return std::make_unique<writer_v2_detail::Schema2Layout>(opt);
}

}  // namespace skippy::detail
