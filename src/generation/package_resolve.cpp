// The policy and speculative commands' work for a package, once, for the CLI
// and the C API alike (skippy/package_generation.h).
#include <iostream>

#include "skippy/model_source.h"
#include "skippy/package_generation.h"

namespace skippy {

PackagePolicy resolve_package_policy(const OpenedPackage& pkg, const PackagePolicyQuery& query,
                                     const std::function<void(const std::string&)>& on_log) {
  PackagePolicy out;
  // Flags first: a backend that is neither a name nor a file needs no package.
  BackendCapabilities backend = backend_by_name_or_file(query.backend);
  out.inputs = package_policy_inputs(pkg);
  PolicyInputs& in = out.inputs;
  in.overrides = query.overrides;
  in.backend = std::move(backend);
  const std::optional<uint64_t> package_top_k = in.request.top_k;
  in.request = query.request;
  if (!in.request.top_k) in.request.top_k = package_top_k;
  const PackageIdentity& id = pkg.identity();
  out.warnings = id.generation_warnings;
  // Without a package policy the built-in one applies: say so.
  if (!id.declares_generation_policy) {
    out.notes.push_back("package schema " + std::to_string(id.schema_version) +
                        " carries no generation.policy: the built-in policy for " + in.architecture + " applies");
  } else if (!in.policy) {
    out.notes.push_back(pkg.ref + " declares no generation.policy: the built-in policy for " + in.architecture + " applies");
  }
  out.decision = resolve_policy(in, [&](const std::string& line) {
    out.log.push_back(line);
    if (on_log) on_log(line);
  });
  auto& doc = out.document;
  doc = policy_decision_json(out.decision);
  doc["package"] = pkg.ref;
  doc["schema_version"] = id.schema_version;
  doc["architecture"] = in.architecture;
  nlohmann::json paths = nlohmann::json::array();
  for (const auto p : in.backend.paths) paths.push_back(execution_path_name(p));
  doc["backend"] = {{"name", in.backend.name}, {"paths", paths}, {"evidence", in.backend.evidence}};
  doc["warnings"] = out.warnings;
  doc["notes"] = out.notes;
  doc["log"] = out.log;
  return out;
}

namespace {

PackageSpeculative resolve_speculative_for(PackageSpeculative out, const SpeculativeSettings& flags,
                                           const OperatorConfig& config, const std::string& model_entry,
                                           const std::string& target, const nlohmann::json& request_defaults) {
  if (!model_entry.empty()) out.model_id = model_entry;
  const SpeculativeSettings* entry = nullptr;
  if (auto it = config.models.find(out.model_id); it != config.models.end()) entry = &it->second;
  out.resolution = resolve_speculative(out.model, layer_settings(flags, entry, config.defaults));
  const auto& r = out.resolution;
  out.warnings.insert(out.warnings.end(), r.warnings.begin(), r.warnings.end());
  out.notes.insert(out.notes.end(), r.notes.begin(), r.notes.end());
  auto& doc = out.document;
  doc = speculative_resolution_json(r);
  doc["notes"] = out.notes;
  doc["target"] = target;
  doc["model"] = out.model_id.empty() ? nlohmann::json() : nlohmann::json(out.model_id);
  // Publisher sampling profiles: beside the plan, not part of it.
  doc["request_defaults"] = request_defaults;
  if (r.refusal) doc["error"] = {{"kind", "refused"}, {"rule", r.refusal->rule}, {"message", r.refusal->message}};
  return out;
}

}  // namespace

PackageSpeculative resolve_package_speculative(const OpenedPackage& pkg, const SpeculativeSettings& flags,
                                               const OperatorConfig& config, const std::string& model_entry) {
  PackageSpeculative out;
  const PackageIdentity& id = pkg.identity();
  out.warnings = generation_warnings(id.generation);
  out.model = package_speculative_model(pkg, &out.notes);
  out.model_id = id.model_id;
  return resolve_speculative_for(std::move(out), flags, config, model_entry, pkg.ref, id.request_defaults_document);
}

PackageSpeculative resolve_gguf_speculative(const std::filesystem::path& gguf, const SpeculativeSettings& flags,
                                            const OperatorConfig& config, const std::string& model_entry) {
  PackageSpeculative out;
  out.model = gguf_speculative_model(ModelSource::open(gguf));
  return resolve_speculative_for(std::move(out), flags, config, model_entry, gguf.string(), nullptr);
}

}  // namespace skippy
