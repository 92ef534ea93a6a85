#include "skippy/stage.h"

#include <algorithm>
#include <charconv>

#include "skippy/error.h"
#include "util/file.h"
#include "skippy/gguf.h"
#include "skippy/model_source.h"
#include "util/sha256.h"
#include "consume/projector_rule.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(const OpenedPackage& pkg, const std::string& what) { throw_invalid(pkg.ref + ": " + what); }


StagePart make_part(const OpenedPackage& pkg, const ArtifactEntry& e, PartRole role, std::optional<uint32_t> layer,
                    std::string reason) {
  StagePart part;
  part.role = role;
  part.layer_index = layer;
  part.rel_path = e.path;
  part.path = check_artifact_file(pkg, e, part_role_name(role));
  part.bytes = e.artifact_bytes;
  part.tensor_count = e.tensor_count;
  part.sha256 = e.sha256;
  part.reason = std::move(reason);
  return part;
}

// Declared projectors: safe paths, and (when on disk, as every one is in a
// local package) regular files of the declared size. A remote package's
// projectors that no stage asked for stay on the Hub: only their paths are
// checked until one is fetched.
void check_projectors(const OpenedPackage& pkg) {
  for (const auto& p : pkg.manifest.projectors) {
    std::error_code ec;
    if (pkg.source && is_safe_relative_path(p.path) && !fs::exists(fs::symlink_status(pkg.root / p.path, ec))) continue;
    check_artifact_file(pkg, p, "projector");
  }
}

// Asks the package's artifact source (if any) for these entries, once each.
void provide(const OpenedPackage& pkg, std::vector<const ArtifactEntry*> entries) {
  if (!pkg.source || entries.empty()) return;
  for (const auto* e : entries) {
    if (!is_safe_relative_path(e->path)) fail(pkg, "artifact path \"" + e->path + "\" is not a safe relative path");
  }
  std::sort(entries.begin(), entries.end());
  entries.erase(std::unique(entries.begin(), entries.end()), entries.end());
  pkg.source->provide(entries);
}

}  // namespace

fs::path check_artifact_file(const OpenedPackage& pkg, const ArtifactEntry& e, std::string_view what) {
  return check_package_file(pkg.root, pkg.boundary, e.path, e.artifact_bytes, manifest_file_names(pkg.ref, e.path, what));
}


OpenedPackage open_local_package(const fs::path& root) {
  const std::string name = root.string();
  std::error_code ec;
  if (!fs::exists(root, ec)) throw_not_found(name + ": no such package directory");
  if (!fs::is_directory(root, ec)) throw_invalid(name + ": not a package directory");
  const fs::path boundary = fs::canonical(root, ec);
  if (ec) throw_invalid(name + ": cannot resolve: " + ec.message());
  return open_package_dir(name, fs::absolute(root), boundary);
}

OpenedPackage open_package_dir(std::string ref, const fs::path& root, const fs::path& boundary) {
  OpenedPackage pkg;
  pkg.ref = std::move(ref);
  pkg.root = root;
  pkg.boundary = boundary;
  std::error_code ec;
  const fs::path manifest_path = root / std::string(kManifestFileName);
  if (!fs::exists(manifest_path, ec)) {
    if (const auto interrupted = interrupted_write_package(root)) throw_not_found(pkg.ref + ": " + *interrupted);
    throw_not_found(pkg.ref + ": no " + std::string(kManifestFileName) + " (not a layer package)");
  }
  const std::string text = read_small_file(manifest_path, kManifestMaxBytes);
  pkg.manifest = parse_manifest(text, manifest_path.string(), GenerationProblems::kSetAside);
  pkg.manifest_sha256 = sha256_hex(text);
  if (pkg.manifest.generation_problem) {
    pkg.warnings.push_back(*pkg.manifest.generation_problem +
                           "; the generation block is ignored (it is policy, not tensor layout): layers are "
                           "selected, verified and materialized as usual, while policy and speculative refuse");
  }
  for (size_t i = 0; i < pkg.manifest.projectors.size(); ++i) {
    const auto& p = pkg.manifest.projectors[i];
    if (!is_known_projector_kind(p.kind)) {
      pkg.warnings.push_back("projectors[" + std::to_string(i) + "] (" + p.path + "): kind \"" + p.kind +
                             "\" is not supported by this runtime, so no stage uses it (text stages are served; "
                             "stage 0 gets the first mmproj, if any); a stage that asks for it is refused");
    }
  }
  const auto abi = parse_abi_version(pkg.manifest.skippy_abi_version);
  if (!abi || !abi_compatible(*abi, kRuntimeAbiVersion)) {
    throw_invalid(manifest_path.string() + ": skippy_abi_version " + pkg.manifest.skippy_abi_version +
                  " is not compatible with this runtime's ABI " + format_abi_version(kRuntimeAbiVersion) +
                  " (needs major " + std::to_string(kRuntimeAbiVersion.major) + " and minor <= " +
                  std::to_string(kRuntimeAbiVersion.minor) + "); refusing to load it");
  }
  return pkg;
}

StagePart check_metadata_only(const OpenedPackage& pkg) {
  provide(pkg, {&pkg.manifest.shared.metadata});
  auto part = make_part(pkg, pkg.manifest.shared.metadata, PartRole::kMetadata, std::nullopt, "metadata");
  try {
    (void)GgufFile::open(part.path);
  } catch (const Error& e) {
    throw e.with_context(pkg.ref + ": " + part.rel_path);
  }
  return part;
}

OutputTie output_tie(const OpenedPackage& pkg) {
  const auto& m = pkg.manifest;
  provide(pkg, {&m.shared.output});
  OutputTie t{false, make_part(pkg, m.shared.output, PartRole::kOutput, std::nullopt,
                               std::string(*stage_reads(TensorRole::kOutput, 0, {0, m.layer_count}, m.layer_count, false)))};
  try {
    // A tied output projection (no output.weight) reads the token embeddings.
    t.tied = GgufFile::open(t.output.path).find_tensor("output.weight") == nullptr;
  } catch (const Error& e) {
    throw e.with_context(pkg.ref + ": " + m.shared.output.path);
  }
  return t;
}

std::optional<WidthTensor> activation_width_tensor(const GgufFile& layer_fragment, uint32_t layer) {
  const std::string blk = "blk." + std::to_string(layer) + ".";
  // Exact names: blk.N.cross_attn_norm.weight or blk.N.nextn.attn_norm.weight never count.
  for (const std::string& name : {blk + "hc_attn_norm.weight", blk + "attn_norm.weight"}) {
    if (const auto* t = layer_fragment.find_tensor(name)) {
      uint64_t n = 1;
      for (const int64_t d : t->ne) n *= static_cast<uint64_t>(d);
      return WidthTensor{name, n};
    }
  }
  return std::nullopt;
}

ActivationWidth activation_width_of(const OpenedPackage& pkg) {
  const auto& m = pkg.manifest;
  if (m.activation_width) return {m.activation_width, false, ""};
  const std::string missing = "the manifest has no activation_width";
  if (m.layers.empty()) return {std::nullopt, false, missing + " and no layers: the activation width is unknown"};
  const auto& first = m.layers.front();
  std::error_code ec;
  if (!is_safe_relative_path(first.path) || !fs::exists(pkg.root / first.path, ec)) {
    return {std::nullopt, false,
            missing + " and " + first.path + " is not on disk to read it from: the activation width is unknown"};
  }
  try {
    const auto part = make_part(pkg, first, PartRole::kLayer, first.layer_index, "activation width");
    const auto g = GgufFile::open(part.path);
    if (const auto t = activation_width_tensor(g, first.layer_index)) {
      return {t->elements, true,
              missing + "; using " + std::to_string(t->elements) + ", the element count of " + t->name + " in " +
                  first.path + " (the reference runtime's fallback)"};
    }
    const std::string blk = "blk." + std::to_string(first.layer_index) + ".";
    return {std::nullopt, false,
            missing + " and " + first.path + " has neither " + blk + "hc_attn_norm.weight nor " + blk +
                "attn_norm.weight: the activation width is unknown"};
  } catch (const Error& e) {
    return {std::nullopt, false, missing + " and " + first.path + " cannot be read (" + e.what() + ")"};
  }
}

StageSelection select_stage(const OpenedPackage& pkg, LayerRange range, const SelectOptions& options) {
  const auto& m = pkg.manifest;
  check_stage_range(pkg.ref, range, m.layer_count);
  // parse_manifest guarantees exactly one entry per index, sorted; check the
  // ones we use anyway, so a hand-built manifest cannot slip through.
  for (uint32_t l = range.start; l < range.end; ++l) {
    if (l >= m.layers.size() || m.layers[l].layer_index != l) fail(pkg, "layer " + std::to_string(l) + " is missing or duplicated");
  }
  StageSelection s;
  s.range = range;
  // The spec's rule (stage_reads), applied to whole parts by their role.
  const auto reads = [&](TensorRole role, bool tied) { return stage_reads(role, 0, range, m.layer_count, tied); };
  const bool owns_input = reads(TensorRole::kEmbeddings, false).has_value();
  const bool owns_output = reads(TensorRole::kOutput, false).has_value();
  // The projector this stage uses (a manifest decision, no files needed).
  const ProjectorEntry* projector = nullptr;
  std::string projector_reason;
  {
    std::vector<consume_detail::DeclaredProjector> declared;
    for (const auto& p : m.projectors) declared.push_back({p.path, p.kind});
    if (auto pick = consume_detail::pick_projector(declared, options.projector_path, owns_input || options.single_stage,
                                                   pkg.ref)) {
      projector = &m.projectors[pick->index];
      projector_reason = std::move(pick->reason);
    }
  }
  // Everything this stage reads, in one batch (a remote source fetches them
  // together); the tied-embeddings case is only known once output is here.
  {
    std::vector<const ArtifactEntry*> wanted = {&m.shared.metadata};
    if (owns_input) wanted.push_back(&m.shared.embeddings);
    for (uint32_t l = range.start; l < range.end; ++l) wanted.push_back(&m.layers[l]);
    if (owns_output) wanted.push_back(&m.shared.output);
    if (projector) wanted.push_back(projector);
    provide(pkg, wanted);
  }
  s.parts.push_back(make_part(pkg, m.shared.metadata, PartRole::kMetadata, std::nullopt, "every stage loads the metadata"));
  std::optional<OutputTie> tie;
  if (owns_output) tie = output_tie(pkg);
  const bool tied = tie && tie->tied;
  if (const auto why = reads(TensorRole::kEmbeddings, tied)) {
    if (!owns_input) {
      provide(pkg, {&m.shared.embeddings});
      s.notes.push_back("final stage also loads " + m.shared.embeddings.path +
                        ": the model's output projection is tied to its token embeddings");
    }
    s.parts.push_back(make_part(pkg, m.shared.embeddings, PartRole::kEmbeddings, std::nullopt, std::string(*why)));
  }
  for (uint32_t l = range.start; l < range.end; ++l) {
    const auto why = stage_reads(TensorRole::kLayer, l, range, m.layer_count, false);
    s.parts.push_back(make_part(pkg, m.layers[l], PartRole::kLayer, l, std::string(why.value_or(""))));
  }
  if (tie) s.parts.push_back(tie->output);
  check_projectors(pkg);
  if (projector) s.projector = make_part(pkg, *projector, PartRole::kProjector, std::nullopt, projector_reason);
  return s;
}

std::vector<StagePart> all_parts(const OpenedPackage& pkg) {
  const auto& m = pkg.manifest;
  {
    std::vector<const ArtifactEntry*> wanted = {&m.shared.metadata, &m.shared.embeddings};
    for (const auto& l : m.layers) wanted.push_back(&l);
    wanted.push_back(&m.shared.output);
    for (const auto& p : m.projectors) wanted.push_back(&p);
    provide(pkg, wanted);
  }
  std::vector<StagePart> parts;
  parts.push_back(make_part(pkg, m.shared.metadata, PartRole::kMetadata, std::nullopt, "metadata"));
  parts.push_back(make_part(pkg, m.shared.embeddings, PartRole::kEmbeddings, std::nullopt, "embeddings"));
  for (const auto& l : m.layers) parts.push_back(make_part(pkg, l, PartRole::kLayer, l.layer_index, "layer"));
  parts.push_back(make_part(pkg, m.shared.output, PartRole::kOutput, std::nullopt, "output"));
  for (const auto& p : m.projectors) parts.push_back(make_part(pkg, p, PartRole::kProjector, std::nullopt, "projector"));
  return parts;
}

}  // namespace skippy
