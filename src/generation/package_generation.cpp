#include "skippy/package_generation.h"

#include <filesystem>
#include <string_view>

#include "skippy/error.h"
#include "format/generation_v2.h"
#include "skippy/gguf.h"
#include "skippy/package_catalog.h"
#include "skippy/verify.h"

namespace skippy {
namespace {

// The tensors that make blk.N a native MTP / NextN prediction layer.
constexpr std::string_view kNextnTensors[] = {"nextn.eh_proj.weight", "nextn.enorm.weight", "nextn.hnorm.weight"};

template <class Find>
bool has_nextn(const Find& find_tensor, uint32_t layer) {
  for (const auto s : kNextnTensors) {
    if (!find_tensor("blk." + std::to_string(layer) + "." + std::string(s))) return false;
  }
  return true;
}

// The named layers (< layer_count) that hold the NextN tensors, from a
// catalog of either schema (schema 1: the layers' fragments read into it).
std::set<uint32_t> nextn_layers_of(const PackageCatalog& cat, const std::set<uint32_t>& named) {
  std::set<uint32_t> found;
  for (const uint32_t l : named) {
    if (l >= cat.layer_count) continue;  // the rules check reports it
    if (has_nextn([&](const std::string& n) { return cat.find_tensor(n) != nullptr; }, l)) found.insert(l);
  }
  return found;
}

// A generation block set aside as malformed: nothing may be resolved from it
// (the spec: policy values are never reinterpreted; a broken block is not
// an absent one).
void refuse_set_aside_generation(const OpenedPackage& pkg, std::string_view what) {
  if (const auto& problem = pkg.manifest.generation_problem) {
    throw_invalid(pkg.ref + ": cannot resolve " + std::string(what) + ": the manifest's generation block is malformed (" +
                  *problem + ")");
  }
}

}  // namespace

PolicyInputs package_policy_inputs(const OpenedPackage& pkg) {
  refuse_set_aside_generation(pkg, "a generation policy");
  PolicyInputs in;
  (void)verify_if_required(pkg, {check_metadata_only(pkg)});
  const auto meta = GgufFile::open(pkg.root / pkg.manifest.shared.metadata.path);
  in.architecture = std::string(meta.architecture());
  if (auto k = meta.get_uint(in.architecture + ".attention.indexer.top_k")) in.request.top_k = *k;
  if (const auto& gen = pkg.manifest.generation) {
    in.policy = gen->policy;
    in.thresholds = gen->thresholds;
  }
  return in;
}

namespace package_generation_detail {

// The layers the package's native-mtp proposers and strategies name.
std::set<uint32_t> named_layers(const SpeculativeDecoding& spec) {
  std::set<uint32_t> named;
  auto add = [&](const ProposerFields& f) {
    if (f.layer_indices) named.insert(f.layer_indices->begin(), f.layer_indices->end());
  };
  for (const auto& [id, p] : spec.proposers) add(p);
  for (const auto& [id, s] : spec.strategies) add(s);
  return named;
}

}  // namespace package_generation_detail

SpeculativeModel package_speculative_model(const OpenedPackage& pkg, std::vector<std::string>* notes) {
  refuse_set_aside_generation(pkg, "speculative decoding");
  SpeculativeModel model;
  const auto& gen = pkg.manifest.generation;
  if (gen && gen->speculative_decoding) model.package = &*gen->speculative_decoding;
  model.layer_count = pkg.manifest.layer_count;
  std::set<uint32_t> named;
  if (model.package) named = package_generation_detail::named_layers(*model.package);
  // The named layers' fragments, read into the package's catalog.
  std::unordered_map<std::string, std::shared_ptr<const GgufFile>> headers;
  for (const uint32_t l : named) {
    if (l >= pkg.manifest.layers.size()) continue;  // the rules check reports it
    if (pkg.source && !std::filesystem::exists(pkg.root / pkg.manifest.layers[l].path)) {
      if (notes) {
        notes->push_back("layer " + std::to_string(l) + " is not in the cache: NextN tensors not checked (rule "
                         "layer_indices_hold_nextn not applied; fetch the layer to apply it)");
      }
      return model;  // nextn_layers stays nullopt
    }
    const LayerRange range{l, l + 1};
    const auto opened = open_catalog_v1(pkg, range);
    for (const auto& part : open_stage(opened, range).parts) {
      if (part.role != PartRole::kLayer) continue;
      (void)verify_if_required(pkg, {part});
      headers[part.rel_path] = std::make_shared<const GgufFile>(GgufFile::open(part.path));
    }
  }
  model.nextn_layers = nextn_layers_of(build_catalog_v1(pkg.manifest, headers), named);
  return model;
}

std::optional<GenerationDefaults> package_generation(const OpenedCatalog& pkg) {
  const auto& root = pkg.catalog.root_v2;
  if (!root || !root->generation) return std::nullopt;
  return generation_v1_of(*root->generation, pkg.catalog.layer_count,
                          (pkg.root / std::string(kManifestFileName)).string());
}

PolicyInputs package_policy_inputs(const OpenedCatalog& pkg) {
  PolicyInputs in;
  in.architecture = pkg.catalog.architecture;
  if (pkg.catalog.carrier_file) {
    if (auto k = pkg.catalog.carrier_file->get_uint(in.architecture + ".attention.indexer.top_k")) in.request.top_k = *k;
  }
  return in;  // schema 2 has no generation.policy or thresholds
}

SpeculativeModel package_speculative_model(const OpenedCatalog& pkg, const std::optional<GenerationDefaults>& generation) {
  SpeculativeModel model;
  if (generation && generation->speculative_decoding) model.package = &*generation->speculative_decoding;
  model.layer_count = pkg.catalog.layer_count;
  // The carrier's directory names every tensor (checked against the root's
  // digest when the package was opened): no payload is read.
  model.nextn_layers = model.package ? nextn_layers_of(pkg.catalog, package_generation_detail::named_layers(*model.package))
                                     : std::set<uint32_t>{};
  return model;
}

SpeculativeModel gguf_speculative_model(const ModelSource& src) {
  SpeculativeModel model;
  model.direct_gguf = true;
  model.layer_count = src.layer_count();
  std::set<uint32_t> nextn;
  for (uint32_t l = 0; l < model.layer_count; ++l) {
    if (has_nextn([&](const std::string& n) { return src.find_tensor(n) != nullptr; }, l)) nextn.insert(l);
  }
  model.nextn_layers = std::move(nextn);
  return model;
}

void speculative_model_problems(const GenerationDefaults& generation, const ModelSource& model,
                                std::vector<std::string>& problems, std::vector<std::string>& warnings) {
  if (!generation.speculative_decoding) return;
  const auto nextn = gguf_speculative_model(model).nextn_layers;
  for (const auto& p : check_speculative_rules(*generation.speculative_decoding, nextn)) {
    (p.warning_only ? warnings : problems).push_back(p.problem.message + " (rule " + p.problem.rule + ")");
  }
}

}  // namespace skippy
