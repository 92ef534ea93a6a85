// Opening a schema 2 package and selecting stages from its catalog (see
// skippy/stage.h).
#include "skippy/stage.h"

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
#include "format/verification_cache.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;



// The NextN/MTP block: the layers holding a blk.N.nextn.* tensor, where the
// trunk ends when they are the model's last layers (llama.cpp's n_layer() is
// block_count - nextn_predict_layers), and whether the block embeds with the
// model's token_embd (no blk.N.nextn.embed_tokens of its own).
struct NextnBlock {
  std::set<uint32_t> layers;
  uint32_t trunk_end = 0;
  bool embeds_with_token_embd = false;
};

NextnBlock nextn_block(const PackageCatalog& cat) {
  NextnBlock b;
  std::set<uint32_t> own_embeddings;
  for (const auto& t : cat.tensors) {
    if (!t.layer) continue;
    const std::string prefix = "blk." + std::to_string(*t.layer) + ".nextn.";
    if (!t.name.starts_with(prefix)) continue;
    b.layers.insert(*t.layer);
    if (t.name == prefix + "embed_tokens.weight") own_embeddings.insert(*t.layer);
  }
  b.trunk_end = cat.layer_count;
  if (b.layers.empty()) return b;
  // Only a block at the end has a trunk before it.
  const auto n = static_cast<uint32_t>(b.layers.size());
  if (n < cat.layer_count && *b.layers.begin() == cat.layer_count - n && *b.layers.rbegin() == cat.layer_count - 1) {
    b.trunk_end = cat.layer_count - n;
  }
  b.embeds_with_token_embd = own_embeddings.size() != b.layers.size();
  return b;
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
  p.hashed_on_read = a.hashed_on_read;
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
    if (t.alias_of) {
      throw_invalid(cat.model_id + ": tensor '" + t.name + "' (" + reason + ") aliases '" + *t.alias_of +
                    "', and alias materialization is unsupported (a stage binds tensors by exact id, each owning its "
                    "bytes)");
    }
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

namespace {

// The rule for a package of whole parts: by their role, in load order (the
// spec's Layer Selection for fragments), each with every tensor the catalog
// lists in it. The metadata, the embeddings when the range starts at 0 or reads
// a tied output, the range's layers, the output when it ends at layer_count.
StageSelection select_whole_parts(const PackageCatalog& cat, LayerRange range, const std::string& who, bool artifacts_only) {
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
      throw Error(ErrorKind::kUsage, who + ": " + a.path + "'s tensors are not in the catalog (CatalogNeed::stage lists them)");
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
    for (const auto& a : cat.artifacts) {
      if (a.role != PartRole::kEmbeddings) continue;
      s.notes.push_back("final stage also loads " + a.path +
                        ": the model's output projection is tied to its token embeddings");
    }
  }
  return s;
}

}  // namespace

StageSelection select_stage(const PackageCatalog& cat, LayerRange range, bool artifacts_only) {
  const std::string who = cat.model_id.empty() ? std::string("package") : cat.model_id;
  check_stage_range(who, range, cat.layer_count);
  if (cat.selects_whole_parts) return select_whole_parts(cat, range, who, artifacts_only);
  const bool tied = cat.find_tensor("output.weight") == nullptr;
  const NextnBlock block = nextn_block(cat);
  // The terminal stage: its range ends at layer_count, or at the trunk, where
  // the reference's newest planner ends it (its native ranges cover the layers
  // before the NextN block). Either way it holds the output and the block.
  const bool terminal = range.end == cat.layer_count || (!block.layers.empty() && range.end == block.trunk_end);
  const LayerRange reads_as = terminal ? LayerRange{range.start, cat.layer_count} : range;
  std::vector<std::pair<size_t, std::string>> chosen;
  bool tied_embeddings = false;
  bool mtp_embeddings = false;
  for (size_t i = 0; i < cat.tensors.size(); ++i) {
    const CatalogTensor& t = cat.tensors[i];
    if (t.layer && block.layers.contains(*t.layer)) {
      // Resident on the terminal stage whether or not it drafts: the
      // reference adds every parameter its MTP graph reaches to that stage.
      if (terminal) chosen.emplace_back(i, "the NextN/MTP block: the terminal stage holds it");
      continue;
    }
    // A blk.N name always has t.layer; the tied output reads only token_embd.weight.
    const TensorRole role = t.layer ? TensorRole::kLayer : classify_tensor(t.name).role;
    const bool owns_input = range.start == 0;
    auto why = stage_reads(role, t.layer.value_or(0), reads_as, cat.layer_count, tied && t.name == "token_embd.weight");
    if (!why && terminal && block.embeds_with_token_embd && t.name == "token_embd.weight") {
      why = "the NextN/MTP block embeds the drafted token with the model's token embeddings";
      mtp_embeddings = true;
    }
    if (!why) continue;
    chosen.emplace_back(i, std::string(*why));
    if (role == TensorRole::kEmbeddings && !owns_input && !mtp_embeddings) tied_embeddings = true;
  }
  StageSelection s = assemble_stage(cat, chosen);
  s.range = range;
  if (tied_embeddings) {
    s.notes.push_back("final stage also reads token_embd.weight: the model's output projection is tied to its token "
                      "embeddings");
  }
  if (mtp_embeddings) {
    s.notes.push_back("terminal stage also reads token_embd.weight: its NextN/MTP block has no nextn.embed_tokens and "
                      "embeds the drafted token with the model's");
  }
  if (!block.layers.empty() && range.end == block.trunk_end && range.end != cat.layer_count) {
    s.notes.push_back("the range ends at the trunk (layer " + std::to_string(block.trunk_end) +
                      "): the terminal stage, holding the NextN/MTP block's layers as the reference's planner does");
  }
  if (!block.layers.empty() && range.start >= block.trunk_end && block.trunk_end != cat.layer_count) {
    s.notes.push_back("the range holds only the NextN/MTP block: the reference's newest planner ends the terminal stage "
                      "at the trunk (layer " + std::to_string(block.trunk_end) + ") and plans no stage past it");
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
  if (cat.checks_declared_sidecars) {
    // The declared projectors: safe paths, and (when on disk, as every one
    // is in a local package) regular files of the declared size.
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
  for (size_t k = 0; k < names.size(); ++k) {
    const auto& n = names[k];
    // Bound by exact id (a tensor's id is its name): nothing is trimmed or guessed.
    if (n.empty()) throw_invalid(cat.model_id + ": tensor id at index " + std::to_string(k) + " is empty");
    if (!seen.insert(n).second) throw_invalid(cat.model_id + ": tensor '" + n + "' is named more than once");
    const auto it = cat.tensor_index.find(n);
    if (it == cat.tensor_index.end()) {
      throw_invalid(cat.model_id + ": tensor '" + n + "' is not in the package's catalog (unknown tensor id: ids are "
                    "exact, and no name selects another tensor)");
    }
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
    if (p.kind != CatalogArtifactKind::kSidecar) continue;
    for (const auto& s : cat.sidecars) {
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

namespace skippy {

CatalogNeed catalog_need(const StageChoice& choice) {
  if (choice.range) return choice.artifacts_only ? CatalogNeed::artifacts(choice.range) : CatalogNeed::stage(*choice.range);
  if (!choice.tensor_names.empty() || choice.admission) return CatalogNeed::all();
  return CatalogNeed::artifacts();
}

void check_stage_choice(const StageChoice& choice, const PackageIdentity& package) {
  const bool by_tensors = !choice.tensor_names.empty() || choice.admission.has_value();
  if (choice.range && by_tensors) {
    throw Error(ErrorKind::kUsage, "--tensors / --tensors-file / --admission and --layers choose a stage two ways: give one");
  }
  if (!choice.tensor_names.empty() && choice.admission) {
    throw Error(ErrorKind::kUsage, "--admission and --tensors / --tensors-file choose a stage two ways: give one");
  }
  if (!choice.range && (choice.options.projector_path || choice.options.single_stage)) {
    throw Error(ErrorKind::kUsage, "--projector and --single-stage need --layers (an --admission descriptor names its "
                                   "sidecars itself)");
  }
  if (by_tensors && package.selects_whole_parts) {
    throw Error(ErrorKind::kUsage, "--tensors / --tensors-file / --admission select tensors from a package's catalog; "
                                   "this package (schema " + std::to_string(package.schema_version) +
                                       ") chooses its stages' parts by layer range (use --layers)");
  }
  // A descriptor for another package is refused on the root's word, before
  // any artifact (the carrier included) is brought.
  if (choice.admission && choice.admission->package_id != package.package_id) {
    throw Error(ErrorKind::kInvalidInput,
                choice.admission_origin + ": package_id: stage admission package id \"" + choice.admission->package_id +
                    "\" does not match the package's \"" + package.package_id + "\" (a descriptor for another package)");
  }
}

StageSelection choose_stage(const OpenedCatalog& pkg, const StageChoice& choice) {
  check_stage_choice(choice, pkg.catalog);
  if (choice.range) {
    StageSelection s = select_stage(pkg.catalog, *choice.range, choice.artifacts_only);
    s.projector = select_projector(pkg, *choice.range, choice.options);
    return s;
  }
  if (choice.admission) return select_stage_admission(pkg.catalog, *choice.admission, choice.admission_origin);
  if (!choice.tensor_names.empty()) return select_stage_tensors(pkg.catalog, choice.tensor_names);
  StageSelection s;
  s.parts = all_parts(pkg.catalog);
  return s;
}

}  // namespace skippy
