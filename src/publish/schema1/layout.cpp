// Package schema 1's layout (the spec's): the fragments, their headers, and
// the manifest that names them, for write-package's one pipeline
// (package_writer.cpp); --validate through validate-package's checks.
#include "publish/schema1/layout.h"

#include <algorithm>
#include <optional>
#include <set>

#include "publish/generation_inference.h"
#include "publish/package_readme.h"
#include "publish/schema_layout.h"
#include "publish/source_record.h"
#include "publish/validator_internal.h"
#include "skippy/error.h"
#include "skippy/manifest.h"
#include "skippy/package_validator.h"
#include "skippy/version.h"
#include "util/text.h"

namespace skippy::detail {

namespace fs = std::filesystem;

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


namespace {

class Schema1Layout final : public SchemaLayout {
 public:
  explicit Schema1Layout(const WritePackageOptions& opt) : opt_(opt) {}

  void plan(const ModelSource& model, const std::vector<std::shared_ptr<const MappedFile>>& shards) override {
    model_ = &model;
    const uint32_t layer_count = model.layer_count();
    generation_ = infer_generation(model, layer_count);
    frags_ = plan_fragments(model.primary().name(), model.tensors(), layer_count);
    writers_.reserve(frags_.size());
    for (const auto& f : frags_) writers_.push_back(fragment_writer(model.primary(), shards, f));
    // What it takes to give the source back byte for byte (materialize --as-source).
    record_ = source_record(model, writers_[0].kvs());
    add_source_record(writers_[0], record_);

    std::set<std::string> projector_names;
    for (const auto& p : opt_.projectors) {
      if (!projector_names.insert(p.filename().string()).second) {
        throw Error(ErrorKind::kUsage, "--projector " + p.string() + ": another --projector has the same file name");
      }
      projectors_.push_back(plan_projector(p));
    }

    // Everything the manifest will say is known except the digests: build it
    // with placeholders and check every rule now (model id, provenance, paths,
    // generation), before the output directory is touched — not after hours
    // of writing.
    const std::string placeholder(64, '0');
    m_.model_id = opt_.provenance.model_id;
    m_.layer_count = layer_count;
    m_.activation_width = model.activation_width();
    m_.generation = generation_.generation;
    m_.skippy_abi_version = format_abi_version(kRuntimeAbiVersion);
    m_.created_at_unix_secs = resolve_created_at(opt_);
    m_.source_model = source_identity(opt_, model, std::vector<std::string>(model.shards().size(), placeholder));
    fill_artifacts(std::vector<std::string>(frags_.size(), placeholder));
    for (const auto& p : projectors_) {
      m_.projectors.push_back(p.entry);
      m_.projectors.back().sha256 = placeholder;
    }
    (void)serialize_manifest(m_);  // throws naming the field that breaks a rule

    outputs_.reserve(frags_.size());
    for (size_t i = 0; i < frags_.size(); ++i) {
      outputs_.push_back(stream_output(frags_[i].rel_path, frags_[i].tensors, writers_[i], opt_.out_dir));
    }
  }
  std::vector<StreamOutput>& outputs() override { return outputs_; }
  const std::string& rel_path(size_t output) const override { return frags_[output].rel_path; }
  const std::vector<PlannedProjector>& projectors() const override { return projectors_; }

  // Each fragment read back from disk and checked on its own before it goes
  // (validate-package's checks; a streamed source's digests stand in for its bytes).
  void begin_checks(const SourceDigests* digests) override {
    ValidateOptions vo;
    vo.threads = opt_.threads;
    check_.emplace(opt_.out_dir, *model_, digests, vo);
  }
  void check_written(const WrittenArtifact& w, const WrittenFile& what) override {
    const auto problems = what.projector ? check_->check_artifact(*what.projector, PartRole::kProjector, 0)
                                         : check_->check_artifact(entry(*what.output, w.sha256),
                                                                  frags_[*what.output].role, frags_[*what.output].layer);
    if (problems.empty()) return;
    std::string msg = opt_.out_dir.string() + ": validation failed, so no manifest was written (" +
                      std::to_string(problems.size()) + " problem(s) in " + w.rel_path + ", found before its upload):";
    msg += problem_lines(problems, "validate-package --json");
    throw_integrity(msg);
  }

  void complete_root(const StreamResult& hashes, const std::vector<ProjectorEntry>& projectors) override {
    m_.source_model = source_identity(opt_, *model_, hashes.shard_sha256);
    fill_artifacts(hashes.output_sha256);
    m_.projectors = projectors;
  }

  void validate(const StreamResult&) override {
    ValidateOptions vo;
    vo.threads = opt_.threads;
    vo.manifest = m_;
    uint64_t written = 0;  // what the pass and the copies reported: every byte by now
    for (const auto& sh : model_->shards()) written += sh.file_size();
    for (const auto& p : projectors_) written += p.entry.artifact_bytes;
    vo.on_progress = [&](uint64_t d, uint64_t t) {
      if (opt_.on_progress) opt_.on_progress(written + d, written + t);
    };
    // (What was checked as it was written is not read again.)
    const auto report = check_ ? check_->finish(m_) : validate_package(opt_.source, opt_.out_dir, vo);
    if (!report.valid) {
      std::string msg = opt_.out_dir.string() + ": validation failed, so no manifest was written (" +
                        std::to_string(report.problems.size()) + " problem(s)):";
      msg += problem_lines(report.problems, "validate-package --json");
      throw_integrity(msg);
    }
    validation_ = ReadmeValidation{report.artifacts_checked, report.tensors_checked,
                                   "skippy-model-package " + std::string(library_version())};
    report_ = report;
  }

  std::string root_text() const override { return serialize_manifest(m_); }

  void describe(WritePackageResult& r) const override {
    r.artifact_count = frags_.size() + m_.projectors.size();
    r.notes = generation_.notes;
    if (!record_.unrecorded.empty()) {
      r.notes.push_back("the source's layout is not recorded, so materialize --as-source cannot rebuild it from this "
                        "package: " + record_.unrecorded);
    }
    r.details = generation_.details;
    r.manifest = m_;
  }

  void write_before_root(const WritePackageResult& r) const override {
    write_file_atomic(opt_.out_dir / std::string(kPackageReadme), package_readme(m_, r.manifest_sha256, r.notes, validation_),
                      Durability::kDurable, opt_.io_env);
    // validation.json names the manifest's digest, so it can land before the manifest does.
    if (report_) {
      write_validation_result(opt_.out_dir, *report_, r.manifest_sha256, "write-package --validate", std::nullopt,
                              opt_.io_env);
    }
  }

 private:
  ArtifactEntry entry(size_t i, const std::string& sha) const {
    ArtifactEntry e;
    e.path = frags_[i].rel_path;
    e.tensor_count = frags_[i].tensors.size();
    e.tensor_bytes = writers_[i].tensor_bytes();
    e.artifact_bytes = writers_[i].total_size();
    e.sha256 = sha;
    return e;
  }
  void fill_artifacts(const std::vector<std::string>& sha) {
    m_.shared.metadata = entry(0, sha[0]);
    m_.shared.embeddings = entry(1, sha[1]);
    m_.shared.output = entry(2, sha[2]);
    m_.layers.clear();
    for (uint32_t l = 0; l < m_.layer_count; ++l) {
      LayerEntry le;
      static_cast<ArtifactEntry&>(le) = entry(3 + l, sha[3 + l]);
      le.layer_index = l;
      m_.layers.push_back(std::move(le));
    }
  }

  const WritePackageOptions& opt_;
  const ModelSource* model_ = nullptr;
  GenerationInference generation_;
  std::vector<Fragment> frags_;
  std::vector<GgufWriter> writers_;
  SourceRecord record_;
  std::vector<PlannedProjector> projectors_;
  PackageManifest m_;
  std::vector<StreamOutput> outputs_;
  std::optional<PackageCheck> check_;
  std::optional<ReadmeValidation> validation_;
  std::optional<ValidationReport> report_;
};

}  // namespace

std::unique_ptr<SchemaLayout> make_schema1_layout(const WritePackageOptions& opt) {
  return std::make_unique<Schema1Layout>(opt);
}

}  // namespace skippy::detail
