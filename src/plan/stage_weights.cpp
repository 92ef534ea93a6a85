#include "stage_weights.h"

#include <limits>
#include <set>
#include <string>

#include "skippy/error.h"

namespace skippy::plan_detail {

uint64_t checked_add(uint64_t a, uint64_t b) {
  if (a > std::numeric_limits<uint64_t>::max() - b) throw_invalid("plan: byte counts overflow 64 bits");
  return a + b;
}

uint64_t checked_mul(uint64_t a, uint64_t b) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) throw_invalid("plan: byte counts overflow 64 bits");
  return a * b;
}

StageWeights stage_weights(const PackageManifest& m, uint32_t N, bool tied, bool include_projector) {
  const uint32_t L = m.layer_count;
  if (N == 0) throw Error(ErrorKind::kUsage, "plan: the number of stages must be at least 1");
  if (L == 0) throw_invalid("plan: the package has no layers");
  if (N > L) {
    throw_invalid("plan: cannot split " + std::to_string(L) + " layers into " + std::to_string(N) +
                  " stages: every stage needs at least one layer (use --stages 1.." + std::to_string(L) + ")");
  }
  if (m.layers.size() != L) {
    throw_invalid("plan: the manifest declares " + std::to_string(L) + " layers but lists " +
                  std::to_string(m.layers.size()));
  }
  StageWeights w;
  w.layers = L;
  w.stages = N;
  w.tied = tied;
  if (include_projector) {
    for (const auto& p : m.projectors) {
      if (p.kind == kProjectorKindMmproj) {
        w.projector = &p;
        break;
      }
    }
  }
  w.prefix.assign(size_t{L} + 1, 0);
  for (uint32_t l = 0; l < L; ++l) {
    if (m.layers[l].layer_index != l) {
      throw_invalid("plan: layers[" + std::to_string(l) + "] has layer_index " +
                    std::to_string(m.layers[l].layer_index) + " (layers must be 0.." + std::to_string(L) + " in order)");
    }
    w.prefix[l + 1] = checked_add(w.prefix[l], m.layers[l].artifact_bytes);
  }
  w.fixed.assign(N, m.shared.metadata.artifact_bytes);
  w.fixed[0] = checked_add(w.fixed[0], m.shared.embeddings.artifact_bytes);
  if (w.projector) w.fixed[0] = checked_add(w.fixed[0], w.projector->artifact_bytes);
  w.fixed[N - 1] = checked_add(w.fixed[N - 1], m.shared.output.artifact_bytes);
  if (tied && N > 1) w.fixed[N - 1] = checked_add(w.fixed[N - 1], m.shared.embeddings.artifact_bytes);
  // Every stage's bytes, and their sum, must fit 64 bits: check the total once.
  w.total = w.prefix[L];
  for (uint64_t f : w.fixed) w.total = checked_add(w.total, f);
  return w;
}

std::string nextn_only_note(const PackageManifest& m, uint32_t a, uint32_t b) {
  if (!m.generation || !m.generation->speculative_decoding) return {};
  std::set<uint32_t> mtp;
  auto take = [&](const std::string& type, const ProposerFields& f) {
    if (type == "native-mtp" && f.layer_indices) mtp.insert(f.layer_indices->begin(), f.layer_indices->end());
  };
  for (const auto& [id, p] : m.generation->speculative_decoding->proposers) take(p.type, p);
  for (const auto& [id, s] : m.generation->speculative_decoding->strategies) take(s.type, s);
  for (uint32_t l = a; l < b; ++l) {
    if (!mtp.contains(l)) return {};
  }
  if (a >= b) return {};
  const std::string layers = b - a == 1 ? "layer " + std::to_string(a) : "layers " + std::to_string(a) + ".." + std::to_string(b);
  return "the last stage holds only " + layers + ", the native MTP (NextN) block: legal, but in ordinary decoding "
         "that stage only runs the output head; with one stage fewer, or a last range that also holds ordinary layers, the "
         "last node does real work";
}

}  // namespace skippy::plan_detail
