#include <algorithm>
#include <filesystem>
#include <iostream>

#include "cli.h"
#include "plan_report.h"
#include "schema_v2_cli.h"
#include "skippy/abi.h"
#include "skippy/catalog_stage.h"
#include "skippy/manifest_v2.h"
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


// A projector's own facts (null for a decoder).
nlohmann::json projector_json(const ModelSummary& s) {
  if (!s.projector) return nullptr;
  return {{"projector_type", s.projector->projector_type},
          {"vision_block_count", opt_json(s.projector->vision_block_count)},
          {"audio_block_count", opt_json(s.projector->audio_block_count)}};
}

// `d` is nullopt for a projector: decoding reads none of it.
nlohmann::json summary_json(const std::string& file, const ModelSummary& s, const std::optional<DecodeCost>& d) {
  nlohmann::json layers = nlohmann::json::array();
  for (size_t i = 0; i < s.layers.size(); ++i) {
    layers.push_back({{"layer_index", i}, {"tensor_count", s.layers[i].tensor_count},
                      {"tensor_bytes", s.layers[i].tensor_bytes},
                      {"active_bytes_per_token", d && i < d->layers.size() ? d->layers[i].active_bytes : 0}});
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
      {"active_bytes_per_token", d ? nlohmann::json(d->active_bytes_per_token()) : nlohmann::json(nullptr)},
      {"projector", projector_json(s)},
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

void print_human(const std::string& file, const ModelSummary& s, const std::optional<DecodeCost>& d) {
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
  if (s.projector) {
    auto blocks = [](const char* what, const std::optional<uint64_t>& n) {
      return n ? std::string(", ") + what + " encoder " + std::to_string(*n) + " blocks" : std::string();
    };
    o << "  projector         multimodal (" << (s.projector->projector_type.empty() ? "clip" : s.projector->projector_type)
      << ")" << blocks("vision", s.projector->vision_block_count) << blocks("audio", s.projector->audio_block_count)
      << "\n";
    o << "  read per token    nothing: an encoder run once per image or clip, not a decoder layer\n";
  } else {
    o << "  read per token    " << human_bytes(d->active_bytes_per_token()) << " of " << human_bytes(d->total_bytes())
      << (d->expert_count > 1 ? " (routed experts at " + std::to_string(d->expert_used_count) + "/" +
                                    std::to_string(d->expert_count) + ")"
                              : std::string())
      << (d->nextn_layers ? ", the NextN block not run" : "") << "\n";
  }
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

// What `inspect` says of a package, for both outputs: the JSON document
// (--json) and the rows for people. inspect_package writes the keys and
// rows both schemas have; each schema's own are added in one place (its
// inspect_part below).
struct InspectRow {
  std::string label;  // at most 17 characters: the text starts at column 21
  std::string text;
};
struct InspectReport {
  std::string title;                       // after the ref, in parentheses
  std::string model_id, architecture;
  uint32_t layer_count = 0;
  uint64_t tensor_count = 0, tensor_bytes = 0, artifact_bytes = 0;
  size_t artifacts = 0;
  bool generation = false;
  std::vector<std::string> warnings;
  nlohmann::json doc = nlohmann::json::object();  // the schema's own keys
  // The schema's own rows: before "model", after it, after "layers", the
  // ABI's, and the rest.
  std::vector<InspectRow> head, after_model, after_layers;
  InspectRow abi;
  std::vector<InspectRow> tail;
};

// Schema 1: the manifest and shared/metadata.gguf (metadata-only inspection).
InspectReport inspect_part(const OpenedPackage& pkg, bool json) {
  (void)verify_if_required(pkg, {check_metadata_only(pkg)});  // hf://: verified before it is read
  const auto& m = pkg.manifest;
  InspectReport r;
  // Unknown policy values / an unservable default strategy are never passed over in silence.
  const auto generation = generation_warnings(m.generation);
  for (const auto& w : generation) std::cerr << "warning: " << w << "\n";
  r.warnings = pkg.warnings;  // already on stderr
  r.warnings.insert(r.warnings.end(), generation.begin(), generation.end());
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
    r.warnings.push_back(validation["file"].get<std::string>() + ": describes another manifest (manifest_sha256 " +
                         validation["manifest_sha256"].get<std::string>() + ", this one is " + pkg.manifest_sha256 +
                         "): it is not this package's validation result");
    std::cerr << "warning: " << r.warnings.back() << "\n";
  }
  r.title = "layer package";
  r.model_id = m.model_id;
  r.architecture = std::string(meta.architecture());
  r.layer_count = m.layer_count;
  r.tensor_count = tensor_count;
  r.tensor_bytes = tensor_bytes;
  r.artifact_bytes = artifact_bytes;
  r.artifacts = 3 + m.layers.size() + m.projectors.size();
  r.generation = m.generation.has_value();
  r.doc = {
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
      {"signature", signature},
      {"validation", validation},
  };
  r.after_model.push_back(
      {"source", m.source_model.repo + " @ " + m.source_model.revision + " (" + m.source_model.primary_file + ")"});
  r.after_layers.push_back({"activation width", width.width ? std::to_string(*width.width) +
                                                                  (width.derived ? " (derived: not in the manifest)" : "")
                                                            : std::string("(unknown)")});
  r.abi = {"ABI", m.skippy_abi_version + " (this runtime: " + format_abi_version(kRuntimeAbiVersion) + ", compatible)"};
  for (const auto& p : m.projectors) r.tail.push_back({"projector", p.path + " (" + p.kind + ")"});
  if (!signature["present"].get<bool>()) {
    r.tail.push_back({"signature", "none (unsigned)"});
  } else if (!signature["verifies"].get<bool>()) {
    r.tail.push_back({"signature", "DOES NOT VERIFY: " + signature["error"].get<std::string>()});
  } else {
    r.tail.push_back({"signature", "owner " + signature["owner_id"].get<std::string>() +
                                       (signature["trusted"].get<bool>() ? " (trusted)" : "") + ", signed at " +
                                       detail::utc_iso8601(signature["signed_at_unix_secs"].get<int64_t>()) +
                                       ", certificate until " + signature["certificate_not_after"].get<std::string>() +
                                       (signature["certificate_valid_now"].get<bool>() ? "" : " (NOT valid now)")});
  }
  if (!validation["present"].get<bool>()) {
    r.tail.push_back({"validation.json", "none"});
  } else if (validation.contains("error")) {
    r.tail.push_back({"validation.json", "UNREADABLE: " + validation["error"].get<std::string>()});
  } else {
    r.tail.push_back(
        {"validation.json",
         validation["result"].get<std::string>() + " (" + validation["command"].get<std::string>() + ", " +
             validation["tool"].get<std::string>() + " " + validation["tool_version"].get<std::string>() + ", " +
             std::to_string(validation["checks"].size()) + " checks, " + std::to_string(validation["problems"].size()) +
             " problem(s)), " +
             (validation["matches_manifest"].get<bool>()
                  ? std::string("for this manifest")
                  : "DOES NOT MATCH this manifest (it judged " + validation["manifest_sha256"].get<std::string>() + ")") +
             (validation["covered_by_signature"].get<bool>() ? ", signed" : ", not covered by a signature")});
  }
  if (m.generation && m.generation->speculative_decoding && m.generation->speculative_decoding->default_strategy) {
    r.tail.push_back({"speculative", *m.generation->speculative_decoding->default_strategy});
  }
  if (m.generation && m.generation->policy && m.generation->policy->profile) {
    r.tail.push_back({"policy profile", *m.generation->policy->profile});
  }
  return r;
}

nlohmann::json optional_json(const std::optional<uint32_t>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

// Schema 2: the root and the carrier's catalog.
InspectReport inspect_part(const OpenedCatalog& pkg) {
  const auto& cat = pkg.catalog;
  const auto& root = *cat.root_v2;
  InspectReport r;
  std::vector<uint64_t> counts(cat.artifacts.size(), 0), bytes(cat.artifacts.size(), 0);
  for (const auto& t : cat.tensors) {
    ++counts[t.artifact];
    bytes[t.artifact] = checked_add(bytes[t.artifact], t.stored_bytes, pkg.ref + ": the tensor directory");
    r.tensor_bytes = checked_add(r.tensor_bytes, t.stored_bytes, pkg.ref + ": the tensor directory");
  }
  nlohmann::json artifacts = nlohmann::json::array();
  for (size_t i = 0; i < cat.artifacts.size(); ++i) {
    const auto& a = cat.artifacts[i];
    r.artifact_bytes = checked_add(r.artifact_bytes, a.bytes, pkg.ref + ": artifact_catalog");
    artifacts.push_back({{"id", a.id},
                         {"path", a.path},
                         {"kind", catalog_artifact_kind_name(a.kind)},
                         {"part_index", optional_json(a.part_index)},
                         {"layer_index", optional_json(a.layer)},
                         {"bytes", a.bytes},
                         {"sha256", a.sha256},
                         {"tensor_count", counts[i]},
                         {"tensor_bytes", bytes[i]}});
  }
  nlohmann::json sidecars = nlohmann::json::array();
  for (const auto& sc : root.sidecars) {
    sidecars.push_back({{"kind", sc.kind}, {"artifact_id", sc.artifact_id},
                        {"name", sc.name ? nlohmann::json(*sc.name) : nlohmann::json(nullptr)}});
  }
  const auto& sm = root.source_model;
  auto opt = [](const std::optional<std::string>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  r.title = "layer package, schema 2";
  r.model_id = cat.model_id;
  r.architecture = cat.architecture;
  r.layer_count = cat.layer_count;
  r.tensor_count = cat.tensors.size();
  r.artifacts = cat.artifacts.size();
  r.generation = root.generation.has_value();
  r.warnings = pkg.warnings;
  r.doc = {{"schema_version", cat.schema_version},
           {"package_id", cat.package_id},
           {"format", root.format},
           {"native_abi_version", root.native_abi_version},
           // mesh-llm's rule: admitted only by a runtime at exactly this ABI.
           {"abi", {{"declared", root.native_abi_version}, {"rule", "exact"}, {"writer_default", format_abi_version(kDefaultNativeAbiV2)}}},
           {"generator_version", root.generator_version},
           {"source_model", {{"sha256", sm.sha256}, {"repo", opt(sm.repo)}, {"revision", opt(sm.revision)},
                             {"primary_file", opt(sm.primary_file)}, {"files", sm.files.size()},
                             {"metadata_artifact_id", sm.metadata_artifact_id}}},
           {"artifacts", artifacts},
           {"sidecars", sidecars},
           {"request_defaults", request_defaults_json(root)},
           {"publisher_metadata", root_member_json(root, "publisher_metadata", nlohmann::json::array())},
           {"publisher_defaults", root_member_json(root, "publisher_defaults", nullptr)},
           {"commit", pkg.commit ? nlohmann::json(*pkg.commit) : nlohmann::json()}};
  r.head.push_back({"package id", cat.package_id});
  r.abi = {"native ABI", root.native_abi_version + " (generator " + root.generator_version +
                             "; admitted only by a runtime at exactly this ABI, restamp-package moves it; writers' default " +
                             format_abi_version(kDefaultNativeAbiV2) + ")"};
  for (const auto& sc : root.sidecars) r.tail.push_back({"sidecar", sc.kind + " " + sc.artifact_id});
  for (const auto& l : request_defaults_lines(root)) r.tail.push_back({"request defaults", l});
  for (const auto& p : root.publisher_metadata) {
    const auto* a = cat.find_artifact(p.artifact_id);
    r.tail.push_back({"publisher file", p.role + " " + (a ? a->path : p.artifact_id) + " (" + p.source_repo + "@" +
                                            p.source_revision.substr(0, 7) + " " + p.source_path + ")"});
  }
  if (root.publisher_defaults) {
    for (const auto& [name, d] : {std::pair<const char*, const std::optional<V2DtypeDeclaration>*>{
                                      "compute dtype", &root.publisher_defaults->compute_dtype},
                                  {"KV cache dtype", &root.publisher_defaults->kv_cache_dtype}}) {
      if (*d) r.tail.push_back({"publisher default", std::string(name) + " " + (*d)->dtype + " (" + (*d)->artifact_id + " " + (*d)->json_path + ")"});
    }
  }
  return r;
}

// Metadata-only inspection of a package of either schema: one report, the
// keys and rows both schemas have written here, each schema's own from its
// inspect_part.
int inspect_package(const std::string& ref, bool json) {
  const auto any = open_any_for_cli(ref, false, std::nullopt, /*with_signature=*/true);  // either schema, local or hf://
  const InspectReport r = any.v2 ? inspect_part(*any.v2) : inspect_part(*any.v1, json);
  nlohmann::json j = r.doc;
  j["kind"] = "package";
  j["package"] = any.ref();
  j["model_id"] = r.model_id;
  j["manifest_sha256"] = any.manifest_sha256();
  j["architecture"] = r.architecture;
  j["layer_count"] = r.layer_count;
  j["tensor_count"] = r.tensor_count;
  j["tensor_bytes"] = r.tensor_bytes;
  j["artifact_bytes"] = r.artifact_bytes;
  j["generation"] = r.generation;
  j["warnings"] = r.warnings;
  if (json) {
    print_json(j);
    return kExitOk;
  }
  auto& o = std::cout;
  auto rows = [&](const std::vector<InspectRow>& rs) {
    for (const auto& row : rs) o << "  " << row.label << std::string(18 - std::min<size_t>(row.label.size(), 17), ' ') << row.text << "\n";
  };
  o << any.ref() << " (" << r.title << ")\n";
  rows(r.head);
  rows({{"model", r.model_id}});
  rows(r.after_model);
  rows({{"architecture", r.architecture}, {"layers", std::to_string(r.layer_count)}});
  rows(r.after_layers);
  rows({{"tensors", std::to_string(r.tensor_count) + " (" + human_bytes(r.tensor_bytes) + "), " +
                        human_bytes(r.artifact_bytes) + " in " + std::to_string(r.artifacts) + " artifacts"},
        r.abi});
  rows(r.tail);
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
    const auto decode = model_decode_cost(model);
    if (*json) {
      print_json(summary_json(*file, summary, decode));
    } else {
      print_human(*file, summary, decode);
    }
    return kExitOk;
  }};
}

}  // namespace skippy::cli
