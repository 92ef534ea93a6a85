// What inspect shows of a schema 1 package that only its manifest knows
// (skippy/package.h PackageDescription).
#include "format/schema1/reader.h"

#include "skippy/abi.h"
#include "skippy/error.h"

namespace skippy::schema1 {

PackageDescription describe_manifest(const PackageManifest& m, const OpenedPlace& place, const ActivationWidth& width) {
  PackageDescription r;
  if (!width.note.empty()) r.notes.push_back(width.note);
  // open refused an incompatible ABI; say which runtime ABI accepted it.
  const nlohmann::json abi = {{"declared", m.skippy_abi_version},
                              {"runtime", format_abi_version(kRuntimeAbiVersion)},
                              {"compatible", true},
                              {"rule", "same major, minor <= the runtime's, patch ignored"}};
  uint64_t tensor_count = m.shared.metadata.tensor_count + m.shared.embeddings.tensor_count + m.shared.output.tensor_count;
  const std::string what = place.ref + ": model-package.json";
  uint64_t tensor_bytes = checked_add(checked_add(m.shared.metadata.tensor_bytes, m.shared.embeddings.tensor_bytes, what),
                                      m.shared.output.tensor_bytes, what);
  uint64_t artifact_bytes = checked_add(
      checked_add(m.shared.metadata.artifact_bytes, m.shared.embeddings.artifact_bytes, what), m.shared.output.artifact_bytes, what);
  nlohmann::json layers = nlohmann::json::array();
  for (const auto& l : m.layers) {
    tensor_count += l.tensor_count;
    tensor_bytes = checked_add(tensor_bytes, l.tensor_bytes, what);
    artifact_bytes = checked_add(artifact_bytes, l.artifact_bytes, what);
    layers.push_back({{"layer_index", l.layer_index}, {"tensor_count", l.tensor_count},
                      {"tensor_bytes", l.tensor_bytes}, {"artifact_bytes", l.artifact_bytes}});
  }
  nlohmann::json projectors = nlohmann::json::array();
  for (const auto& p : m.projectors) projectors.push_back({{"kind", p.kind}, {"path", p.path}, {"artifact_bytes", p.artifact_bytes}});
  auto shared = [](const ArtifactEntry& e) {
    return nlohmann::json{{"path", e.path}, {"tensor_count", e.tensor_count}, {"tensor_bytes", e.tensor_bytes},
                          {"artifact_bytes", e.artifact_bytes}};
  };
  r.title = "layer package";
  r.tensor_count = tensor_count;
  r.tensor_bytes = tensor_bytes;
  r.artifact_bytes = artifact_bytes;
  r.artifacts = 3 + m.layers.size() + m.projectors.size();
  r.generation = m.generation.has_value();
  r.reports_trust = true;
  r.fields = {
      {"activation_width", width.width ? nlohmann::json(*width.width) : nlohmann::json(nullptr)},
      {"activation_width_declared", m.activation_width.has_value()},
      {"activation_width_note", width.note.empty() ? nlohmann::json(nullptr) : nlohmann::json(width.note)},
      {"skippy_abi_version", m.skippy_abi_version},
      {"abi", abi},
      {"source_model", {{"repo", m.source_model.repo}, {"revision", m.source_model.revision},
                        {"primary_file", m.source_model.primary_file}, {"files", m.source_model.files.size()}}},
      {"shared", {{"metadata", shared(m.shared.metadata)}, {"embeddings", shared(m.shared.embeddings)},
                  {"output", shared(m.shared.output)}}},
      {"layers", layers},
      {"projectors", projectors},
  };
  r.after_model.push_back(
      {"source", m.source_model.repo + " @ " + m.source_model.revision + " (" + m.source_model.primary_file + ")"});
  r.after_layers.push_back({"activation width", width.width ? std::to_string(*width.width) +
                                                                  (width.derived ? " (derived: not in the manifest)" : "")
                                                            : std::string("(unknown)")});
  r.abi = {"ABI", m.skippy_abi_version + " (this runtime: " + format_abi_version(kRuntimeAbiVersion) + ", compatible)"};
  for (const auto& p : m.projectors) r.tail.push_back({"projector", p.path + " (" + p.kind + ")"});
  if (m.generation && m.generation->speculative_decoding && m.generation->speculative_decoding->default_strategy) {
    r.tail_after_trust.push_back({"speculative", *m.generation->speculative_decoding->default_strategy});
  }
  if (m.generation && m.generation->policy && m.generation->policy->profile) {
    r.tail_after_trust.push_back({"policy profile", *m.generation->policy->profile});
  }
  return r;
}

}  // namespace skippy::schema1
