// For the planners' tests: brute force over every split of L layers into n
// contiguous non-empty ranges, as cuts (cuts[0] = 0, cuts[n] = L), and a
// manifest of given artifact sizes.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "skippy/manifest.h"

namespace skippy::test {

inline void each_split(uint32_t L, uint32_t n, const std::function<void(const std::vector<uint32_t>&)>& f) {
  std::vector<uint32_t> cuts(n + 1, 0);
  cuts[n] = L;
  std::function<void(uint32_t)> rec = [&](uint32_t i) {
    if (i == n) return f(cuts);
    for (uint32_t c = cuts[i - 1] + 1; c + (n - i) <= L; ++c) {
      cuts[i] = c;
      rec(i + 1);
    }
  };
  rec(1);
}

// A manifest whose shared artifacts and layers have these artifact_bytes
// (the fields the planners read), layers 0..N-1 in order.
inline PackageManifest plan_manifest(uint64_t meta, uint64_t emb, uint64_t out, const std::vector<uint64_t>& layers) {
  PackageManifest m;
  m.layer_count = static_cast<uint32_t>(layers.size());
  m.shared.metadata = {"shared/metadata.gguf", 0, 0, meta, ""};
  m.shared.embeddings = {"shared/embeddings.gguf", 1, emb, emb, ""};
  m.shared.output = {"shared/output.gguf", 1, out, out, ""};
  for (size_t i = 0; i < layers.size(); ++i) {
    LayerEntry e;
    e.layer_index = static_cast<uint32_t>(i);
    e.path = "layers/layer-" + std::to_string(i) + ".gguf";
    e.artifact_bytes = layers[i];
    m.layers.push_back(e);
  }
  return m;
}

}  // namespace skippy::test
