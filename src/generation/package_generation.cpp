#include "skippy/package_generation.h"

#include <filesystem>
#include <string_view>

#include "skippy/error.h"
#include "skippy/gguf.h"
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

SpeculativeModel package_speculative_model(const OpenedPackage& pkg, std::vector<std::string>* notes) {
  refuse_set_aside_generation(pkg, "speculative decoding");
  SpeculativeModel model;
  const auto& gen = pkg.manifest.generation;
  if (gen && gen->speculative_decoding) model.package = &*gen->speculative_decoding;
  model.layer_count = pkg.manifest.layer_count;
  std::set<uint32_t> named;
  if (model.package) {
    auto add = [&](const ProposerFields& f) {
      if (f.layer_indices) named.insert(f.layer_indices->begin(), f.layer_indices->end());
    };
    for (const auto& [id, p] : model.package->proposers) add(p);
    for (const auto& [id, s] : model.package->strategies) add(s);
  }
  std::set<uint32_t> found;
  for (const uint32_t l : named) {
    if (l >= pkg.manifest.layers.size()) continue;  // the rules check reports it
    if (pkg.source && !std::filesystem::exists(pkg.root / pkg.manifest.layers[l].path)) {
      if (notes) notes->push_back("layer " + std::to_string(l) + " is not in the cache: NextN tensors not checked");
      return model;  // nextn_layers stays nullopt
    }
    const auto sel = select_stage(pkg, LayerRange{l, l + 1});
    for (const auto& part : sel.parts) {
      if (part.role != PartRole::kLayer) continue;
      (void)verify_if_required(pkg, {part});
      const auto f = GgufFile::open(part.path);
      if (has_nextn([&](const std::string& n) { return f.find_tensor(n) != nullptr; }, l)) found.insert(l);
    }
  }
  model.nextn_layers = std::move(found);
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

}  // namespace skippy
