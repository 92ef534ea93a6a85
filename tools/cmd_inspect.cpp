#include <filesystem>
#include <iostream>

#include "cli.h"
#include "schema_v2_cli.h"
#include "skippy/abi.h"
#include "skippy/decode_cost.h"
#include "skippy/gguf.h"
#include "skippy/hf_ref.h"
#include "skippy/model_source.h"
#include "skippy/package_signature.h"
#include "skippy/policy.h"
#include "skippy/stage.h"
#include "skippy/validation_result.h"
#include "skippy/verify.h"

namespace skippy::cli {
namespace {

nlohmann::json totals_json(const RoleTotals& t) {
  return {{"tensor_count", t.tensor_count}, {"tensor_bytes", t.tensor_bytes}};
}

// What one decoded token reads of the model (skippy/decode_cost.h).
DecodeCost decode_cost_of(const ModelSource& model) {
  std::vector<DecodeTensor> tensors;
  for (const auto& shard : model.shards()) {
    auto t = decode_tensors_of(shard);
    tensors.insert(tensors.end(), std::make_move_iterator(t.begin()), std::make_move_iterator(t.end()));
  }
  return read_decode_cost(model.primary(), tensors, model.layer_count(), model.primary().name());
}

nlohmann::json summary_json(const std::string& file, const ModelSummary& s, const DecodeCost& d) {
  nlohmann::json layers = nlohmann::json::array();
  for (size_t i = 0; i < s.layers.size(); ++i) {
    layers.push_back({{"layer_index", i}, {"tensor_count", s.layers[i].tensor_count},
                      {"tensor_bytes", s.layers[i].tensor_bytes},
                      {"active_bytes_per_token", i < d.layers.size() ? d.layers[i].active_bytes : 0}});
  }
  nlohmann::json types = nlohmann::json::object();
  for (const auto& [name, t] : s.by_type) types[name] = totals_json(t);
  nlohmann::json j = {
      {"kind", "gguf"},
      {"file", file},
      {"architecture", s.architecture},
      {"layer_count", s.layer_count},
      {"activation_width", s.activation_width ? nlohmann::json(*s.activation_width) : nlohmann::json(nullptr)},
      {"tensor_count", s.tensor_count},
      {"tensor_bytes", s.tensor_bytes},
      {"active_bytes_per_token", d.active_bytes_per_token()},
      {"file_bytes", s.file_bytes},
      {"gguf_version", s.gguf_version},
      {"alignment", s.alignment},
      {"roles",
       {{"embeddings", totals_json(s.embeddings)},
        {"output", totals_json(s.output)},
        {"globals", totals_json(s.globals)},
        {"layers", layers}}},
      {"quantization_types", types},
      {"experts", s.expert_count ? nlohmann::json{{"count", *s.expert_count},
                                                  {"used_per_token", s.expert_used_count ? nlohmann::json(*s.expert_used_count) : nlohmann::json()},
                                                  {"shared", s.expert_shared_count ? nlohmann::json(*s.expert_shared_count) : nlohmann::json()}}
                                 : nlohmann::json()},
  };
  if (!s.shards.empty()) j["shards"] = s.shards;
  return j;
}

void print_human(const std::string& file, const ModelSummary& s, const DecodeCost& d) {
  auto& o = std::cout;
  o << file << "\n";
  o << "  architecture      " << (s.architecture.empty() ? "(none)" : s.architecture) << "\n";
  o << "  layers            " << s.layer_count << "\n";
  o << "  activation width  " << (s.activation_width ? std::to_string(*s.activation_width) : "(unknown)") << "\n";
  if (s.expert_count) {
    o << "  experts           " << *s.expert_count << " per MoE layer";
    if (s.expert_used_count) o << ", " << *s.expert_used_count << " used per token";
    if (s.expert_shared_count) o << ", " << *s.expert_shared_count << " shared";
    o << "\n";
  }
  o << "  tensors           " << s.tensor_count << " (" << human_bytes(s.tensor_bytes) << ")\n";
  o << "  read per token    " << human_bytes(d.active_bytes_per_token()) << " of " << human_bytes(d.total_bytes())
    << (d.expert_count > 1 ? " (routed experts at " + std::to_string(d.expert_used_count) + "/" +
                                 std::to_string(d.expert_count) + ")"
                           : std::string())
    << (d.nextn_layers ? ", the NextN block not run" : "") << "\n";
  o << "  GGUF              v" << s.gguf_version << ", alignment " << s.alignment << ", "
    << human_bytes(s.file_bytes) << " on disk\n";
  if (!s.shards.empty()) {
    o << "  shards            " << s.shards.size() << "\n";
    for (const auto& sh : s.shards) o << "    " << sh << "\n";
  }
  auto row = [&](const std::string& name, const RoleTotals& t) {
    char buf[128];
    std::snprintf(buf, sizeof buf, "    %-14s %6llu tensors  %12s\n", name.c_str(),
                  static_cast<unsigned long long>(t.tensor_count), human_bytes(t.tensor_bytes).c_str());
    o << buf;
  };
  o << "  by role\n";
  row("embeddings", s.embeddings);
  for (size_t i = 0; i < s.layers.size(); ++i) row("layer " + std::to_string(i), s.layers[i]);
  row("output", s.output);
  row("other globals", s.globals);
  o << "  by type\n";
  for (const auto& [name, t] : s.by_type) row(name, t);
}

bool is_package_ref(const std::string& arg) {
  return is_hf_ref(arg) || std::filesystem::is_directory(arg);
}

// Whether the package carries a signature sidecar, who signed, and whether
// it verifies over the bytes on disk (without trusted signers it is not
// required: this only reports).
nlohmann::json signature_json(const OpenedPackage& pkg) {
  try {
    const auto sig = pkg.signature ? pkg.signature : read_package_signature(pkg.root);
    if (!sig) return {{"present", false}};
    return {{"present", true},
            {"verifies", true},
            {"trusted", pkg.signature.has_value()},
            {"owner_id", sig->owner_id},
            {"owner_subject", sig->owner_subject},
            {"signed_at_unix_secs", sig->signed_at_unix_secs},
            {"certificate_not_after", sig->not_after},
            {"certificate_valid_now", sig->certificate_valid_now},
            {"validation_sha256", sig->validation_sha256 ? nlohmann::json(*sig->validation_sha256) : nlohmann::json()}};
  } catch (const Error& e) {
    return {{"present", true}, {"verifies", false}, {"trusted", false}, {"error", e.what()}};
  }
}

// #25: validation.json, judged against the manifest's bytes as read (and
// whether the signature covers these bytes).
nlohmann::json validation_json(const OpenedPackage& pkg, const nlohmann::json& signature) {
  const auto v = read_validation_result(pkg.root, pkg.manifest_sha256);
  if (!v) return {{"present", false}};
  if (v->unreadable) return {{"present", true}, {"file", v->file.string()}, {"sha256", v->sha256}, {"error", *v->unreadable}};
  nlohmann::json sources = nlohmann::json::array();
  for (const auto& f : v->source_files) sources.push_back({{"name", f.name}, {"size", f.size}, {"sha256", f.sha256}});
  const bool covered = signature.value("verifies", false) && signature.contains("validation_sha256") &&
                       signature["validation_sha256"] == v->sha256;
  return {{"present", true},
          {"file", v->file.string()},
          {"sha256", v->sha256},
          {"result", v->result},
          {"manifest_sha256", v->manifest_sha256},
          {"matches_manifest", v->matches_manifest},
          {"tool", v->tool},
          {"tool_version", v->tool_version},
          {"command", v->command},
          {"validated_at_unix_secs", v->validated_at_unix_secs},
          {"source_files", sources},
          {"checks", v->checks},
          {"problems", v->problems},
          {"covered_by_signature", covered}};
}

// Metadata-only inspection of a package: the manifest and shared/metadata.gguf.
int inspect_package(const std::string& ref, bool json) {
  const auto any = open_any_for_cli(ref, false, std::nullopt, /*with_signature=*/true);  // either schema, local or hf://
  if (any.v2) return inspect_schema_v2(*any.v2, json);
  const OpenedPackage& pkg = *any.v1;
  (void)verify_if_required(pkg, {check_metadata_only(pkg)});  // hf://: verified before it is read
  const auto& m = pkg.manifest;
  // Unknown policy values / an unservable default strategy are never passed over in silence.
  const auto generation = generation_warnings(m.generation);
  for (const auto& w : generation) std::cerr << "warning: " << w << "\n";
  std::vector<std::string> warnings = pkg.warnings;  // already on stderr
  warnings.insert(warnings.end(), generation.begin(), generation.end());
  const auto meta = GgufFile::open(pkg.root / m.shared.metadata.path);
  const auto width = activation_width_of(pkg);
  if (!width.note.empty() && !json) std::cerr << "note: " << width.note << "\n";
  // open_package refused an incompatible ABI; say which runtime ABI accepted it.
  const nlohmann::json abi = {{"declared", m.skippy_abi_version},
                              {"runtime", format_abi_version(kRuntimeAbiVersion)},
                              {"compatible", true},
                              {"rule", "same major, minor <= the runtime's, patch ignored"}};
  uint64_t tensor_count = m.shared.metadata.tensor_count + m.shared.embeddings.tensor_count + m.shared.output.tensor_count;
  const std::string what = pkg.ref + ": model-package.json";
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
  const nlohmann::json signature = signature_json(pkg);
  const nlohmann::json validation = validation_json(pkg, signature);
  if (validation.value("matches_manifest", true) == false) {
    warnings.push_back(validation["file"].get<std::string>() + ": describes another manifest (manifest_sha256 " +
                       validation["manifest_sha256"].get<std::string>() + ", this one is " + pkg.manifest_sha256 +
                       "): it is not this package's validation result");
    std::cerr << "warning: " << warnings.back() << "\n";
  }
  const nlohmann::json j = {
      {"kind", "package"},
      {"package", pkg.ref},
      {"model_id", m.model_id},
      {"manifest_sha256", pkg.manifest_sha256},
      {"architecture", std::string(meta.architecture())},
      {"layer_count", m.layer_count},
      {"activation_width", width.width ? nlohmann::json(*width.width) : nlohmann::json(nullptr)},
      {"activation_width_declared", m.activation_width.has_value()},
      {"activation_width_note", width.note.empty() ? nlohmann::json(nullptr) : nlohmann::json(width.note)},
      {"tensor_count", tensor_count},
      {"tensor_bytes", tensor_bytes},
      {"artifact_bytes", artifact_bytes},
      {"skippy_abi_version", m.skippy_abi_version},
      {"abi", abi},
      {"source_model", {{"repo", m.source_model.repo}, {"revision", m.source_model.revision},
                        {"primary_file", m.source_model.primary_file}, {"files", m.source_model.files.size()}}},
      {"shared", {{"metadata", shared(m.shared.metadata)}, {"embeddings", shared(m.shared.embeddings)},
                  {"output", shared(m.shared.output)}}},
      {"layers", layers},
      {"projectors", projectors},
      {"generation", m.generation.has_value()},
      {"signature", signature},
      {"validation", validation},
      {"warnings", warnings},
  };
  if (json) {
    print_json(j);
    return kExitOk;
  }
  auto& o = std::cout;
  o << pkg.ref << " (layer package)\n";
  o << "  model             " << m.model_id << "\n";
  o << "  source            " << m.source_model.repo << " @ " << m.source_model.revision << " ("
    << m.source_model.primary_file << ")\n";
  o << "  architecture      " << meta.architecture() << "\n";
  o << "  layers            " << m.layer_count << "\n";
  o << "  activation width  "
    << (width.width ? std::to_string(*width.width) + (width.derived ? " (derived: not in the manifest)" : "")
                    : std::string("(unknown)"))
    << "\n";
  o << "  tensors           " << tensor_count << " (" << human_bytes(tensor_bytes) << "), "
    << human_bytes(artifact_bytes) << " in " << (3 + m.layers.size() + m.projectors.size()) << " artifacts\n";
  o << "  ABI               " << m.skippy_abi_version << " (this runtime: " << format_abi_version(kRuntimeAbiVersion)
    << ", compatible)\n";
  for (const auto& p : m.projectors) o << "  projector         " << p.path << " (" << p.kind << ")\n";
  const auto& sig = j["signature"];
  if (!sig["present"].get<bool>()) {
    o << "  signature         none (unsigned)\n";
  } else if (!sig["verifies"].get<bool>()) {
    o << "  signature         DOES NOT VERIFY: " << sig["error"].get<std::string>() << "\n";
  } else {
    o << "  signature         owner " << sig["owner_id"].get<std::string>() << (sig["trusted"].get<bool>() ? " (trusted)" : "")
      << ", signed at " << detail::utc_iso8601(sig["signed_at_unix_secs"].get<int64_t>()) << ", certificate until "
      << sig["certificate_not_after"].get<std::string>() << (sig["certificate_valid_now"].get<bool>() ? "" : " (NOT valid now)")
      << "\n";
  }
  const auto& val = j["validation"];
  if (!val["present"].get<bool>()) {
    o << "  validation.json   none\n";
  } else if (val.contains("error")) {
    o << "  validation.json   UNREADABLE: " << val["error"].get<std::string>() << "\n";
  } else {
    o << "  validation.json   " << val["result"].get<std::string>() << " (" << val["command"].get<std::string>() << ", "
      << val["tool"].get<std::string>() << " " << val["tool_version"].get<std::string>() << ", "
      << val["checks"].size() << " checks, " << val["problems"].size() << " problem(s)), "
      << (val["matches_manifest"].get<bool>() ? "for this manifest"
                                               : "DOES NOT MATCH this manifest (it judged " +
                                                     val["manifest_sha256"].get<std::string>() + ")")
      << (val["covered_by_signature"].get<bool>() ? ", signed" : ", not covered by a signature") << "\n";
  }
  if (m.generation && m.generation->speculative_decoding && m.generation->speculative_decoding->default_strategy) {
    o << "  speculative       " << *m.generation->speculative_decoding->default_strategy << "\n";
  }
  if (m.generation && m.generation->policy && m.generation->policy->profile) {
    o << "  policy profile    " << *m.generation->policy->profile << "\n";
  }
  return kExitOk;
}

}  // namespace

Command register_inspect(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "What a GGUF model or a layer package holds");
  cmd->footer(
      "Examples:\n  skippy-model-package inspect model-00001-of-00003.gguf --json\n"
      "  skippy-model-package inspect ./model-package\n"
      "Given any shard of a split model, reports the whole model. Given a package, validates only the\n"
      "manifest and shared/metadata.gguf (metadata-only inspection; no layer range needed).");
  auto file = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  path_option(cmd->add_option("target", *file, "GGUF file (any shard of a split model) or package directory"))->required();
  cmd->add_flag("--json", *json, "Print one JSON document on stdout");
  add_trust_signer_option(cmd);
  return {cmd, [file, json]() {
    if (is_package_ref(*file)) return inspect_package(*file, *json);
    const auto model = ModelSource::open(*file);
    const auto summary = summarize(model);
    const auto decode = decode_cost_of(model);
    if (*json) {
      print_json(summary_json(*file, summary, decode));
    } else {
      print_human(*file, summary, decode);
    }
    return kExitOk;
  }};
}

}  // namespace skippy::cli
