#include "skippy/package_generation.h"

#include <filesystem>
#include <string_view>

#include "skippy/error.h"
#include "skippy/gguf.h"
#include "skippy/package_catalog.h"
#include "skippy/stage.h"
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

// A generation block set aside as malformed, or one the package's schema
// holds that has no meaning in the one model: nothing may be resolved from
// it (the spec: policy values are never reinterpreted; a broken block is
// not an absent one).
void refuse_set_aside_generation(const OpenedPackage& pkg, std::string_view what) {
  if (const auto& problem = pkg.identity().generation_problem) {
    throw_invalid(pkg.ref + ": cannot resolve " + std::string(what) + ": the manifest's generation block is malformed (" +
                  *problem + ")");
  }
}

// A block the one model cannot read (a schema 2 block schema 1's rules
// refuse): it is refused, not reinterpreted.
void refuse_untranslatable_generation(const OpenedPackage& pkg) {
  if (const auto& problem = pkg.identity().generation_untranslatable) throw_invalid(*problem);
}

}  // namespace

PolicyInputs package_policy_inputs(const OpenedPackage& pkg) {
  refuse_set_aside_generation(pkg, "a generation policy");
  PolicyInputs in;
  const auto meta = package_metadata(pkg.catalog(CatalogNeed::artifacts()));
  in.architecture = std::string(meta->architecture());
  if (auto k = meta->get_uint(in.architecture + ".attention.indexer.top_k")) in.request.top_k = *k;
  if (const auto& gen = pkg.identity().generation) {
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
  refuse_untranslatable_generation(pkg);
  SpeculativeModel model;
  const auto& gen = pkg.identity().generation;
  if (gen && gen->speculative_decoding) model.package = &*gen->speculative_decoding;
  model.layer_count = pkg.identity().layer_count;
  std::set<uint32_t> named;
  if (model.package) named = package_generation_detail::named_layers(*model.package);
  std::vector<uint32_t> layers;
  for (const uint32_t l : named) {
    if (l < model.layer_count) layers.push_back(l);  // (the rules check reports the others)
  }
  // The named layers' tensors, never downloaded for this: a layer whose
  // file the reader would read and that is not in the cache leaves the
  // check undone, with a note.
  if (pkg.source) {
    for (const auto& a : pkg.reader->catalog(pkg, CatalogNeed::root_only()).artifacts) {
      if (a.role != PartRole::kLayer || !a.layer || !a.read_whole || !named.contains(*a.layer)) continue;
      if (std::filesystem::exists(pkg.root / a.path)) continue;
      if (notes) {
        notes->push_back("layer " + std::to_string(*a.layer) + " is not in the cache: NextN tensors not checked (rule "
                         "layer_indices_hold_nextn not applied; fetch the layer to apply it)");
      }
      return model;  // nextn_layers stays nullopt
    }
  }
  const OpenedCatalog opened = pkg.catalog(CatalogNeed::of_layers(layers));
  (void)verify_catalog_reads(opened);
  model.nextn_layers = nextn_layers_of(opened.catalog, named);
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
