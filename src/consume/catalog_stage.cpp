// Opening a schema 2 package and selecting stages from its catalog (see
// skippy/catalog_stage.h).
#include "skippy/catalog_stage.h"

#include <algorithm>
#include <map>
#include <set>

#include "skippy/error.h"
#include "util/file.h"
#include "skippy/manifest.h"
#include "skippy/model_source.h"
#include "skippy/stage_admission.h"
#include "util/sha256.h"
#include "consume/projector_rule.h"
#include "consume/verification_cache.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;


fs::path check_catalog_file(const std::string& ref, const fs::path& root, const fs::path& boundary,
                            const std::string& id, const std::string& rel, uint64_t bytes) {
  return check_package_file(root, boundary, rel, bytes, catalog_file_names(ref, id, rel));
}

// The layers of the NextN/MTP block: those holding a blk.N.nextn.* tensor.
std::set<uint32_t> nextn_block_layers(const PackageCatalog& cat) {
  std::set<uint32_t> out;
  for (const auto& t : cat.tensors) {
    if (!t.layer) continue;
    const std::string prefix = "blk." + std::to_string(*t.layer) + ".nextn.";
    if (t.name.starts_with(prefix)) out.insert(*t.layer);
  }
  return out;
}

enum class StageNeed { kNo, kEveryStage, kInput, kOutput, kTiedOutput, kLayer };

// A catalog artifact as a stage part (no tensors, no file yet).
StagePart part_of(const CatalogArtifact& a, std::string reason) {
  StagePart p;
  p.artifact_id = a.id;
  p.rel_path = a.path;
  p.kind = a.kind;
  p.role = a.role;
  p.layer_index = a.layer;
  p.bytes = a.bytes;
  p.tensor_count = a.tensor_count;
  p.sha256 = a.sha256;
  p.reason = std::move(reason);
  return p;
}

// Builds the stage's parts from the tensors it reads (with the reason each
// tensor was chosen, the first one per artifact naming the part's reason).
StageSelection assemble_stage(const PackageCatalog& cat, const std::vector<std::pair<size_t, std::string>>& chosen) {
  StageSelection s;
  const auto& carrier = cat.artifacts.at(cat.carrier);
  s.parts.push_back(part_of(carrier, "every stage reads the metadata carrier (KVs and the tensor directory)"));
  std::map<uint32_t, StagePart> by_part;
  for (const auto& [ti, reason] : chosen) {
    const CatalogTensor& t = cat.tensors[ti];
    const CatalogArtifact& a = cat.artifact_of(t);
    s.tensors.push_back({t.name, a.id, t.offset, t.stored_bytes});
    if (t.artifact == cat.carrier) {  // schema 1: shared/metadata.gguf holds the global tensors
      s.parts.front().tensors.push_back(t.name);
      continue;
    }
    auto [it, fresh] = by_part.try_emplace(a.part_index.value_or(0));
    if (fresh) it->second = part_of(a, reason);
    it->second.tensors.push_back(t.name);
  }
  for (auto& [index, part] : by_part) s.parts.push_back(std::move(part));
  return s;
}

}  // namespace

OpenedCatalog open_catalog_dir(std::string ref, const fs::path& root, const fs::path& boundary,
                               std::shared_ptr<ArtifactSource> source) {
  OpenedCatalog pkg;
  pkg.schema_version = kPackageSchemaV2;
  pkg.ref = std::move(ref);
  pkg.root = root;
  pkg.boundary = boundary;
  pkg.source = std::move(source);
  std::error_code ec;
  const fs::path manifest_path = pkg.root / std::string(kManifestFileName);
  if (!fs::exists(manifest_path, ec)) throw_not_found(pkg.ref + ": no " + std::string(kManifestFileName));
  const std::string text = read_small_file(manifest_path, kManifestMaxBytes);
  pkg.manifest_sha256 = sha256_hex(text);
  const PackageRootV2 root_v2 = parse_package_root_v2(text, manifest_path.string());

  const V2Artifact* carrier = nullptr;
  for (const auto& a : root_v2.artifacts) {
    if (a.id == root_v2.source_model.metadata_artifact_id) carrier = &a;
  }
  // parse_package_root_v2 guarantees the carrier is catalogued.
  if (carrier->byte_size > kCarrierMaxBytes) {
    throw_invalid(pkg.ref + ": metadata carrier " + carrier->id + " (" + carrier->path + ") is catalogued at " +
                  std::to_string(carrier->byte_size) + " bytes, over the " + std::to_string(kCarrierMaxBytes) +
                  "-byte cap for a carrier (refused before it is fetched or read)");
  }
  if (pkg.source) {
    if (!is_safe_relative_path(carrier->path)) {
      throw_invalid(pkg.ref + ": artifact " + carrier->id + " (" + carrier->path + "): not a safe relative path");
    }
    ArtifactEntry e;
    e.path = carrier->path;
    e.artifact_bytes = carrier->byte_size;
    e.sha256 = carrier->sha256;
    try {
      pkg.source->provide({&e});
    } catch (const Error& err) {
      throw err.with_context(pkg.ref + ": metadata carrier " + carrier->id + " (" + carrier->path + ")");
    }
  }
  const fs::path real = check_catalog_file(pkg.ref, pkg.root, pkg.boundary, carrier->id, carrier->path, carrier->byte_size);
  if (!pkg.source || !pkg.source->verified_while_fetching(carrier->path)) {
    // Through the verification cache: a repeat open of the same carrier file
    // (same identity and metadata) is not hashed again.
    const std::string digest =
        detail::sha256_file_cached(pkg.manifest_sha256, real, carrier->path, carrier->sha256, carrier->byte_size);
    if (digest != carrier->sha256) {
      throw_integrity(pkg.ref + ": artifact " + carrier->id + " (" + carrier->path + "): SHA-256 " + digest +
                      " differs from the catalog's " + carrier->sha256 + " (the metadata carrier is not the one the "
                      "package_id commits to)" +
                      (pkg.source ? "; the cached copy is damaged: remove " + real.string() + " and fetch again" : ""));
    }
  }
  GgufLimits limits;
  limits.directory_only = true;
  std::shared_ptr<const GgufFile> file;
  try {
    file = std::make_shared<const GgufFile>(GgufFile::open(real, limits));
  } catch (const Error& e) {
    throw e.with_context(pkg.ref + ": metadata carrier " + carrier->path);
  }
  pkg.catalog = build_catalog_v2(root_v2, std::move(file), pkg.ref + ": " + carrier->path);
  return pkg;
}

OpenedCatalog open_local_catalog_v2(const fs::path& dir) {
  const std::string ref = dir.string();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw_not_found(ref + ": no such package directory");
  const fs::path boundary = local_package_boundary(dir, ec);
  if (ec) throw_invalid(ref + ": cannot resolve: " + ec.message());
  OpenedCatalog pkg = open_catalog_dir(ref, fs::absolute(dir), boundary);
  pkg.always_verify = is_hf_cache_snapshot(dir);  // the cache's rule, as through hf://
  return pkg;
}

namespace {

// Reads the headers of these model parts (catalog indexes, in load order)
// into the catalog, bringing them through pkg.source in one batch first.
void read_fragments_v1(const OpenedPackage& pkg, PackageCatalog& cat, const std::vector<const ArtifactEntry*>& model,
                       const std::vector<size_t>& which) {
  if (pkg.source && !which.empty()) {
    std::vector<const ArtifactEntry*> want;
    for (const size_t i : which) {
      if (!is_safe_relative_path(model.at(i)->path)) {
        throw_invalid(pkg.ref + ": artifact path \"" + model.at(i)->path + "\" is not a safe relative path");
      }
      want.push_back(model.at(i));
    }
    pkg.source->provide(want);
  }
  for (const size_t i : which) {
    const CatalogArtifact& a = cat.artifacts[i];
    const fs::path real = check_artifact_file(pkg, *model.at(i), part_role_name(a.role.value_or(PartRole::kMetadata)));
    try {
      add_fragment_v1(cat, i, std::make_shared<const GgufFile>(GgufFile::open(real)));
    } catch (const Error& err) {
      throw err.with_context(pkg.ref);
    }
  }
}

// Whether a stage of `range` reads the schema 1 part `a` (the tied output's
// embeddings aside: known once the output part is read).
bool stage_reads_part_v1(const CatalogArtifact& a, LayerRange range, uint32_t layer_count) {
  switch (a.role.value_or(PartRole::kMetadata)) {
    case PartRole::kMetadata: return true;
    case PartRole::kEmbeddings: return range.start == 0;
    case PartRole::kLayer: return a.layer && *a.layer >= range.start && *a.layer < range.end;
    case PartRole::kOutput: return range.end == layer_count;
    case PartRole::kProjector: return false;
  }
  return false;
}

}  // namespace

PackageCatalog read_catalog_v1(const OpenedPackage& pkg, std::optional<LayerRange> range) {
  const auto& m = pkg.manifest;
  if (range) check_stage_range(pkg.ref, *range, m.layer_count);
  std::vector<const ArtifactEntry*> model = {&m.shared.metadata, &m.shared.embeddings};
  for (const auto& l : m.layers) model.push_back(&l);
  model.push_back(&m.shared.output);
  PackageCatalog cat = catalog_artifacts_v1(m);  // lists the model parts in `model`'s order, then the projectors
  std::vector<size_t> which;
  for (size_t i = 0; i < cat.artifacts.size(); ++i) {
    const CatalogArtifact& a = cat.artifacts[i];
    if (a.kind == CatalogArtifactKind::kSidecar) continue;
    if (!range || stage_reads_part_v1(a, *range, m.layer_count)) which.push_back(i);
  }
  read_fragments_v1(pkg, cat, model, which);
  if (range && range->end == m.layer_count && range->start != 0 && cat.find_tensor("output.weight") == nullptr) {
    // A tied output projection reads the token embeddings (whole part, as select_stage loads it).
    std::vector<size_t> embeddings;
    for (size_t i = 0; i < cat.artifacts.size(); ++i) {
      if (cat.artifacts[i].role == PartRole::kEmbeddings) embeddings.push_back(i);
    }
    // Load order keeps the first copy of a repeated global: rebuild with the embeddings in place.
    PackageCatalog again = catalog_artifacts_v1(m);
    which.insert(which.begin() + 1, embeddings.begin(), embeddings.end());
    read_fragments_v1(pkg, again, model, which);
    cat = std::move(again);
  }
  try {
    for (size_t i = 0; i < cat.artifacts.size(); ++i) check_layer_fragment_v1(cat, i);
  } catch (const Error& err) {
    throw err.with_context(pkg.ref);
  }
  return cat;
}

OpenedCatalog list_catalog_v1(const OpenedPackage& pkg, std::optional<LayerRange> range) {
  OpenedCatalog out;
  static_cast<OpenedPlace&>(out) = pkg;
  out.catalog = catalog_artifacts_v1(pkg.manifest);
  if (range) {
    check_stage_range(pkg.ref, *range, pkg.manifest.layer_count);
    if (range->end == pkg.manifest.layer_count) {
      // Whether the output is tied (a final stage then loads the embeddings).
      const auto& m = pkg.manifest;
      std::vector<const ArtifactEntry*> model = {&m.shared.metadata, &m.shared.embeddings};
      for (const auto& l : m.layers) model.push_back(&l);
      model.push_back(&m.shared.output);
      read_fragments_v1(pkg, out.catalog, model, {model.size() - 1});
    }
  }
  return out;
}

OpenedCatalog open_catalog_v1(const OpenedPackage& pkg, std::optional<LayerRange> range) {
  OpenedCatalog out;
  static_cast<OpenedPlace&>(out) = pkg;
  out.catalog = read_catalog_v1(pkg, range);
  return out;
}

namespace {

// Schema 1's rule: whole parts by their role, in load order (the spec's
// Layer Selection for fragments), each with every tensor the catalog lists
// in it. The metadata, the embeddings when the range starts at 0 or reads
// a tied output, the range's layers, the output when it ends at layer_count.
StageSelection select_parts_v1(const PackageCatalog& cat, LayerRange range, const std::string& who, bool artifacts_only) {
  const PackageManifest& m = *cat.manifest_v1;
  const auto reads = [&](TensorRole role, uint32_t layer, bool tied) {
    return stage_reads(role, layer, range, cat.layer_count, tied);
  };
  const bool owns_input = reads(TensorRole::kEmbeddings, 0, false).has_value();
  const bool owns_output = reads(TensorRole::kOutput, 0, false).has_value();
  // A tied output projection (no output.weight) reads the token embeddings.
  const bool tied = owns_output && cat.find_tensor("output.weight") == nullptr;
  std::vector<std::pair<size_t, std::string>> picked;  // artifact, reason
  for (size_t i = 0; i < cat.artifacts.size(); ++i) {
    const CatalogArtifact& a = cat.artifacts[i];
    std::optional<std::string_view> why;
    switch (a.role.value_or(PartRole::kProjector)) {
      case PartRole::kMetadata: why = "every stage loads the metadata"; break;
      case PartRole::kEmbeddings: why = reads(TensorRole::kEmbeddings, 0, tied); break;
      case PartRole::kLayer: why = a.layer ? reads(TensorRole::kLayer, *a.layer, false) : std::nullopt; break;
      case PartRole::kOutput: why = reads(TensorRole::kOutput, 0, false); break;
      case PartRole::kProjector: break;
    }
    if (why) picked.emplace_back(i, std::string(*why));
  }
  for (uint32_t l = range.start; l < range.end; ++l) {
    size_t found = 0;
    for (const auto& [i, why] : picked) found += cat.artifacts[i].role == PartRole::kLayer && cat.artifacts[i].layer == l;
    if (found != 1) throw_invalid(who + ": layer " + std::to_string(l) + " is missing or duplicated");
  }
  StageSelection s;
  s.range = range;
  std::map<size_t, size_t> slot;  // artifact -> index in s.parts
  for (const auto& [i, why] : picked) {
    const CatalogArtifact& a = cat.artifacts[i];
    if (!a.tensors_listed && (!artifacts_only || a.role == PartRole::kOutput)) {
      throw Error(ErrorKind::kUsage, who + ": " + a.path + "'s tensors are not in the catalog (read_catalog_v1 lists them)");
    }
    slot[i] = s.parts.size();
    s.parts.push_back(part_of(a, why));
  }
  for (const auto& t : cat.tensors) {
    const auto it = slot.find(t.artifact);
    if (it == slot.end()) continue;
    s.parts[it->second].tensors.push_back(t.name);
    s.tensors.push_back({t.name, cat.artifacts[t.artifact].id, t.offset, t.stored_bytes});
  }
  if (tied && !owns_input) {
    s.notes.push_back("final stage also loads " + m.shared.embeddings.path +
                      ": the model's output projection is tied to its token embeddings");
  }
  return s;
}

}  // namespace

StageSelection select_stage(const PackageCatalog& cat, LayerRange range, bool artifacts_only) {
  const std::string who = cat.model_id.empty() ? std::string("package") : cat.model_id;
  check_stage_range(who, range, cat.layer_count);
  if (cat.manifest_v1) return select_parts_v1(cat, range, who, artifacts_only);
  const bool tied = cat.find_tensor("output.weight") == nullptr;
  const std::set<uint32_t> nextn = nextn_block_layers(cat);
  const bool owns_output = range.end == cat.layer_count;
  std::vector<std::pair<size_t, std::string>> chosen;
  bool tied_embeddings = false;
  for (size_t i = 0; i < cat.tensors.size(); ++i) {
    const CatalogTensor& t = cat.tensors[i];
    if (t.layer && nextn.contains(*t.layer)) {
      // The reference's runtime loads the NextN/MTP block (load_mtp) only
      // on the stage that owns the output: whichever ranges hold its layers.
      if (owns_output) chosen.emplace_back(i, "the NextN/MTP block: only the final stage holds it");
      continue;
    }
    // A blk.N name always has t.layer; the tied output reads only token_embd.weight.
    const TensorRole role = t.layer ? TensorRole::kLayer : classify_tensor(t.name).role;
    const bool owns_input = range.start == 0;
    const auto why = stage_reads(role, t.layer.value_or(0), range, cat.layer_count,
                                 tied && t.name == "token_embd.weight");
    if (!why) continue;
    chosen.emplace_back(i, std::string(*why));
    if (role == TensorRole::kEmbeddings && !owns_input) tied_embeddings = true;
  }
  StageSelection s = assemble_stage(cat, chosen);
  s.range = range;
  if (tied_embeddings) {
    s.notes.push_back("final stage also reads token_embd.weight: the model's output projection is tied to its token "
                      "embeddings");
  }
  return s;
}

std::optional<StagePart> select_projector(const OpenedCatalog& pkg, LayerRange range, const SelectOptions& options) {
  const PackageCatalog& cat = pkg.catalog;
  std::vector<const CatalogArtifact*> sidecars;
  std::vector<consume_detail::DeclaredProjector> declared;
  for (const auto& a : cat.artifacts) {
    if (a.kind != CatalogArtifactKind::kSidecar) continue;
    sidecars.push_back(&a);
    declared.push_back({a.path, a.sidecar_kind});
  }
  const auto pick = consume_detail::pick_projector(declared, options.projector_path,
                                                   range.start == 0 || options.single_stage, pkg.ref);
  if (cat.manifest_v1) {
    // Schema 1's declared projectors: safe paths, and (when on disk, as
    // every one is in a local package) regular files of the declared size.
    // A remote package's projectors that no stage asked for stay on the
    // Hub: only their paths are checked until one is fetched.
    for (const auto* a : sidecars) {
      std::error_code ec;
      if (pkg.source && is_safe_relative_path(a->path) && !fs::exists(fs::symlink_status(pkg.root / a->path, ec))) {
        continue;
      }
      (void)check_part(pkg, part_of(*a, ""));
    }
  }
  if (!pick) return std::nullopt;
  StagePart part = part_of(*sidecars[pick->index], pick->reason);
  part.role = PartRole::kProjector;
  return part;
}

StageSelection open_stage(const OpenedCatalog& pkg, LayerRange range, const SelectOptions& options) {
  StageSelection s = select_stage(pkg.catalog, range);
  s.projector = select_projector(pkg, range, options);
  std::vector<StagePart> all = s.parts_with_projector();
  provide_parts(pkg, all);  // one batch
  for (size_t i = 0; i < s.parts.size(); ++i) s.parts[i].path = all[i].path;
  if (s.projector) s.projector->path = all.back().path;
  return s;
}

StageSelection select_stage_tensors(const PackageCatalog& cat, const std::vector<std::string>& names) {
  std::set<std::string> seen;
  std::set<size_t> wanted;
  for (const auto& n : names) {
    if (!seen.insert(n).second) throw_invalid(cat.model_id + ": tensor '" + n + "' is named more than once");
    const auto it = cat.tensor_index.find(n);
    if (it == cat.tensor_index.end()) throw_invalid(cat.model_id + ": tensor '" + n + "' is not in the package's catalog");
    wanted.insert(it->second);
  }
  std::vector<std::pair<size_t, std::string>> chosen;
  for (const size_t i : wanted) chosen.emplace_back(i, "holds a requested tensor");
  return assemble_stage(cat, chosen);
}

StageSelection select_stage_admission(const PackageCatalog& cat, const StageAdmission& admission, std::string_view origin) {
  check_stage_admission(admission, cat, origin);
  StageSelection s = select_stage_tensors(cat, admission.resident_tensor_ids);
  for (const auto& sc : admission.sidecars) {
    for (const auto& a : cat.artifacts) {
      if (a.kind != CatalogArtifactKind::kSidecar || a.id != sc.artifact_id) continue;
      s.parts.push_back(part_of(a, "a sidecar the admission names (" + sc.kind + ")"));
    }
  }
  return s;
}

StageAdmission stage_admission_of(const PackageCatalog& cat, const StageSelection& stage) {
  std::vector<std::string> names;
  names.reserve(stage.tensors.size());
  for (const auto& t : stage.tensors) names.push_back(t.name);
  // The sidecars the stage loads: its projector and those among its parts,
  // as the root declares them.
  std::vector<V2Sidecar> sidecars;
  for (const auto& p : stage.parts_with_projector()) {
    if (p.kind != CatalogArtifactKind::kSidecar || !cat.root_v2) continue;
    for (const auto& s : cat.root_v2->sidecars) {
      if (s.artifact_id == p.artifact_id) sidecars.push_back(s);
    }
  }
  return make_stage_admission(cat, std::move(names), std::move(sidecars));
}

std::vector<StagePart> all_parts(const PackageCatalog& cat) {
  std::vector<std::vector<std::string>> tensors(cat.artifacts.size());
  for (const auto& t : cat.tensors) tensors[t.artifact].push_back(t.name);
  auto part = [&](size_t i, std::string reason) {
    StagePart p = part_of(cat.artifacts[i], std::move(reason));
    p.tensors = tensors[i];
    return p;
  };
  std::vector<StagePart> out;
  out.push_back(part(cat.carrier, "the metadata carrier"));
  std::map<uint32_t, size_t> payload;
  for (size_t i = 0; i < cat.artifacts.size(); ++i) {
    if (cat.artifacts[i].kind == CatalogArtifactKind::kPayload) payload.emplace(cat.artifacts[i].part_index.value_or(0), i);
  }
  for (const auto& [index, i] : payload) out.push_back(part(i, "a payload part"));
  for (size_t i = 0; i < cat.artifacts.size(); ++i) {
    if (cat.artifacts[i].kind == CatalogArtifactKind::kSidecar) out.push_back(part(i, "a sidecar (" + cat.artifacts[i].sidecar_kind + ")"));
  }
  for (size_t i = 0; i < cat.artifacts.size(); ++i) {
    if (cat.artifacts[i].kind == CatalogArtifactKind::kPublisherMetadata) {
      out.push_back(part(i, "publisher metadata (" + cat.artifacts[i].publisher_role + ")"));
    }
  }
  return out;
}


}  // namespace skippy
