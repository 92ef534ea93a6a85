#include "stage_weights.h"

#include <algorithm>
#include <limits>
#include <string>

#include "skippy/error.h"
#include "skippy/manifest.h"
#include "skippy/model_source.h"

namespace skippy::plan_detail {

uint64_t checked_add(uint64_t a, uint64_t b) {
  if (a > std::numeric_limits<uint64_t>::max() - b) throw_invalid("plan: byte counts overflow 64 bits");
  return a + b;
}

uint64_t checked_mul(uint64_t a, uint64_t b) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) throw_invalid("plan: byte counts overflow 64 bits");
  return a * b;
}

void check_stage_count(uint32_t L, uint32_t N) {
  if (N == 0) throw Error(ErrorKind::kUsage, "plan: the number of stages must be at least 1");
  if (L == 0) throw_invalid("plan: the package has no layers");
  if (N > L) {
    throw_invalid("plan: cannot split " + std::to_string(L) + " layers into " + std::to_string(N) +
                  " stages: every stage needs at least one layer (use --stages 1.." + std::to_string(L) + ")");
  }
}

StageWeights stage_weights(const PackageCatalog& cat, bool tied, bool include_projector) {
  const uint32_t L = cat.layer_count;
  StageWeights w;
  w.layers = L;
  w.tied = tied;
  std::vector<uint64_t> layer(L, 0);
  auto add_layer = [&](uint32_t l, uint64_t bytes, const std::string& what) {
    if (l >= L) throw_invalid("plan: " + what + " belongs to layer " + std::to_string(l) + ", past the package's " +
                              std::to_string(L) + " layers");
    layer[l] = checked_add(layer[l], bytes);
  };
  for (const CatalogArtifact& a : cat.artifacts) {
    if (a.role == PartRole::kProjector) w.has_projectors = true;
    if (!a.read_whole || !a.role) continue;
    switch (*a.role) {
      case PartRole::kMetadata:
        w.every_stage = checked_add(w.every_stage, a.bytes);
        break;
      case PartRole::kEmbeddings:
        w.embeddings = checked_add(w.embeddings, a.bytes);
        w.embeddings_label = a.path;
        break;
      case PartRole::kLayer:
        if (!a.layer) throw_invalid("plan: " + a.path + " is a layer part without a layer");
        add_layer(*a.layer, a.bytes, a.path);
        break;
      case PartRole::kOutput:
        w.output = checked_add(w.output, a.bytes);
        break;
      case PartRole::kProjector:
        if (include_projector && !w.projector_artifact && a.sidecar_kind == kProjectorKindMmproj) {
          w.projector_artifact = &a;
          w.projector = a.bytes;
        }
        break;
    }
  }
  for (const CatalogTensor& t : cat.tensors) {
    if (cat.artifact_of(t).read_whole) continue;
    w.extents = true;
    if (t.layer) {
      add_layer(*t.layer, t.stored_bytes, "tensor '" + t.name + "'");
    } else if (t.role == TensorRole::kEmbeddings) {
      w.embeddings = checked_add(w.embeddings, t.stored_bytes);
      w.embeddings_label = "the input embeddings (token_embd.weight)";
    } else if (t.role == TensorRole::kOutput) {
      w.output = checked_add(w.output, t.stored_bytes);
    } else {
      w.every_stage = checked_add(w.every_stage, t.stored_bytes);
    }
  }
  w.prefix.assign(size_t{L} + 1, 0);
  for (uint32_t l = 0; l < L; ++l) w.prefix[l + 1] = checked_add(w.prefix[l], layer[l]);
  // The largest a stage can be (every layer and every shared part) fits 64 bits.
  (void)checked_add(checked_add(checked_add(w.prefix[L], w.every_stage), checked_add(w.embeddings, w.projector)), w.output);
  return w;
}

uint64_t total_bytes(const StageWeights& w, uint32_t N) {
  uint64_t total = w.prefix[w.layers];
  for (uint32_t i = 0; i < N; ++i) total = checked_add(total, w.every_stage);
  total = checked_add(checked_add(total, w.embeddings), checked_add(w.projector, w.output));
  if (w.tied && N > 1) total = checked_add(total, w.embeddings);
  return total;
}

std::string nextn_only_note(const PackageCatalog& cat, uint32_t a, uint32_t b) {
  if (a >= b) return {};
  const auto& mtp = cat.native_mtp_layers;
  for (uint32_t l = a; l < b; ++l) {
    if (!std::binary_search(mtp.begin(), mtp.end(), l)) return {};
  }
  const std::string layers = b - a == 1 ? "layer " + std::to_string(a) : "layers " + std::to_string(a) + ".." + std::to_string(b);
  return "the last stage holds only " + layers + ", the native MTP (NextN) block: legal, but in ordinary decoding "
         "that stage only runs the output head; with one stage fewer, or a last range that also holds ordinary layers, the "
         "last node does real work";
}

}  // namespace skippy::plan_detail
