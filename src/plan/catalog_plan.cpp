// The planner's input from a package schema 2 catalog (skippy/plan.h).
#include "skippy/error.h"
#include "skippy/model_source.h"
#include "skippy/plan.h"
#include "skippy/stage.h"
#include "stage_weights.h"

namespace skippy {

CatalogPlanInput plan_input_from_catalog(const PackageCatalog& cat) {
  using plan_detail::checked_add;
  CatalogPlanInput in;
  PackageManifest& m = in.manifest;
  m.model_id = cat.model_id;
  m.layer_count = cat.layer_count;
  m.layers.resize(cat.layer_count);
  for (uint32_t l = 0; l < cat.layer_count; ++l) {
    m.layers[l].layer_index = l;
    m.layers[l].path = "blk." + std::to_string(l) + ".*";
  }
  const CatalogArtifact& carrier = cat.artifacts.at(cat.carrier);
  m.shared.metadata.path = carrier.path;
  m.shared.metadata.artifact_bytes = carrier.bytes;
  m.shared.embeddings.path = "the input embeddings (token_embd.weight)";
  m.shared.output.path = "output and output_norm";
  in.output_tied = cat.find_tensor("output.weight") == nullptr;
  auto add = [](ArtifactEntry& e, const CatalogTensor& t) {
    e.artifact_bytes = checked_add(e.artifact_bytes, t.stored_bytes);
    e.tensor_bytes = checked_add(e.tensor_bytes, t.stored_bytes);
    ++e.tensor_count;
  };
  for (const CatalogTensor& t : cat.tensors) {
    if (t.layer) {
      if (*t.layer >= cat.layer_count) throw_invalid(cat.model_id + ": tensor '" + t.name + "' is past layer_count");
      add(m.layers[*t.layer], t);
      continue;
    }
    switch (classify_tensor(t.name).role) {
      case TensorRole::kEmbeddings:
        add(m.shared.embeddings, t);
        break;
      case TensorRole::kOutput:
        add(m.shared.output, t);
        break;
      case TensorRole::kLayer:
      case TensorRole::kGlobal:
        add(m.shared.metadata, t);
        break;
    }
  }
  for (const CatalogArtifact& a : cat.artifacts) {
    if (a.kind != CatalogArtifactKind::kSidecar || a.sidecar_kind != kProjectorKindMmproj) continue;
    ProjectorEntry p;
    p.kind = a.sidecar_kind;
    p.path = a.path;
    p.artifact_bytes = a.bytes;
    p.sha256 = a.sha256;
    m.projectors.push_back(std::move(p));
  }
  // The reference runtime's width rule, on the carrier's directory.
  if (cat.carrier_file && cat.layer_count > 0) {
    if (const auto w = activation_width_tensor(*cat.carrier_file, 0)) in.activation_width = w->elements;
  }
  return in;
}

}  // namespace skippy
