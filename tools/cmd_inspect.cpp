#include <algorithm>
#include <filesystem>
#include <iostream>

#include "cli.h"
#include "plan_report.h"
#include "stage_cli.h"
#include "skippy/abi.h"
#include "skippy/stage.h"
#include "skippy/plan.h"
#include "skippy/gguf.h"
#include "skippy/source.h"
#include "skippy/materialize.h"
#include "skippy/model_source.h"
#include "skippy/package_signature.h"
#include "skippy/policy.h"
#include "skippy/package_validator.h"
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

// What a stage file written by materialize says of itself (its
// skippy.materialized.* keys); nullopt for any other GGUF.
struct MaterializedStage {
  std::optional<LayerRange> range;  // absent: a whole-model materialization
  std::string model_id, manifest_sha256, package_id;
};

std::optional<MaterializedStage> materialized_stage(const ModelSource& model) {
  const GgufFile& f = model.shards().front();
  const auto manifest = f.get_string(kMaterializedManifestKey);
  if (!manifest) return std::nullopt;
  MaterializedStage m;
  m.manifest_sha256 = std::string(*manifest);
  m.model_id = std::string(f.get_string(kMaterializedModelIdKey).value_or(""));
  m.package_id = std::string(f.get_string(kMaterializedPackageIdKey).value_or(""));
  const auto start = f.get_uint(kMaterializedLayerStartKey), end = f.get_uint(kMaterializedLayerEndKey);
  if (start && end && *start < *end && *end <= UINT32_MAX) {
    m.range = LayerRange{static_cast<uint32_t>(*start), static_cast<uint32_t>(*end)};
  }
  return m;
}

nlohmann::json stage_json(const std::optional<MaterializedStage>& m) {
  if (!m) return nullptr;
  return {{"layer_start", m->range ? nlohmann::json(m->range->start) : nlohmann::json()},
          {"layer_end", m->range ? nlohmann::json(m->range->end) : nlohmann::json()},
          {"model_id", m->model_id},
          {"manifest_sha256", m->manifest_sha256},
          {"package_id", m->package_id.empty() ? nlohmann::json() : nlohmann::json(m->package_id)}};
}

// "2.38 MiB of 2.38 MiB (routed experts at 2/8)": what one decoded token reads.
std::string per_token_text(const DecodeCost& d) {
  return human_bytes(d.active_bytes_per_token()) + " of " + human_bytes(d.total_bytes()) +
         (d.expert_count > 1
              ? " (routed experts at " + std::to_string(d.expert_used_count) + "/" + std::to_string(d.expert_count) + ")"
              : std::string()) +
         (d.nextn_layers ? ", the NextN block not run" : "");
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

void print_human(const std::string& file, const ModelSummary& s, const std::optional<DecodeCost>& d,
                 const std::optional<MaterializedStage>& stage) {
  auto& o = std::cout;
  o << file << "\n";
  if (stage) {
    o << "  stage             " << (stage->range ? "layers " + format_layer_range(*stage->range) : std::string("every layer"))
      << " of " << stage->model_id << ", materialized from the package with manifest SHA-256 "
      << stage->manifest_sha256 << (stage->package_id.empty() ? "" : " (package_id " + stage->package_id + ")")
      << "\n";
  }
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
    o << "  read per token    " << per_token_text(*d) << "\n";
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
  // A stage lists its own layers; the others are in other stages' files.
  const bool only_stage = stage && stage->range && stage->range->end <= s.layers.size();
  for (size_t i = 0; i < s.layers.size(); ++i) {
    if (only_stage && (i < stage->range->start || i >= stage->range->end)) continue;
    row("layer " + std::to_string(i), s.layers[i]);
  }
  if (only_stage && stage->range->end - stage->range->start < s.layers.size()) {
    o << "    (layers outside " << format_layer_range(*stage->range) << " are in other stages)\n";
  }
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

// validation.json, judged against the manifest's bytes as read (and
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

using InspectRow = PackageDescription::Row;

// The signature and validation.json rows of a package that reports them.
void trust_rows(const nlohmann::json& signature, const nlohmann::json& validation, std::vector<InspectRow>& tail) {
  if (!signature["present"].get<bool>()) {
    tail.push_back({"signature", "none (unsigned)"});
  } else if (!signature["verifies"].get<bool>()) {
    tail.push_back({"signature", "DOES NOT VERIFY: " + signature["error"].get<std::string>()});
  } else {
    tail.push_back({"signature", "owner " + signature["owner_id"].get<std::string>() +
                                     (signature["trusted"].get<bool>() ? " (trusted)" : "") + ", signed at " +
                                     detail::utc_iso8601(signature["signed_at_unix_secs"].get<int64_t>()) +
                                     ", certificate until " + signature["certificate_not_after"].get<std::string>() +
                                     (signature["certificate_valid_now"].get<bool>() ? "" : " (NOT valid now)")});
  }
  if (!validation["present"].get<bool>()) {
    tail.push_back({"validation.json", "none"});
  } else if (validation.contains("error")) {
    tail.push_back({"validation.json", "UNREADABLE: " + validation["error"].get<std::string>()});
  } else {
    tail.push_back(
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
}

// Metadata-only inspection of a package of any schema: one report, the keys
// and rows every package has written here, its schema's own from its
// reader (PackageDescription).
int inspect_package(const std::string& ref, bool json) {
  const auto opened = open_for_cli(ref, false, std::nullopt, /*with_signature=*/true);  // any schema, local or hf://
  const OpenedCatalog pkg = opened.catalog(CatalogNeed::artifacts());
  const auto meta = package_metadata(pkg);  // hf://: verified before it is read
  const PackageIdentity& id = opened.identity();
  // Unknown policy values / an unservable default strategy are never passed over in silence.
  for (const auto& w : id.generation_warnings) std::cerr << "warning: " << w << "\n";
  std::vector<std::string> warnings = pkg.warnings;  // already on stderr
  warnings.insert(warnings.end(), id.generation_warnings.begin(), id.generation_warnings.end());
  PackageDescription r = opened.reader->describe(pkg, pkg.catalog);
  if (!json) {
    for (const auto& n : r.notes) std::cerr << "note: " << n << "\n";
  }
  nlohmann::json j = r.fields;
  std::vector<InspectRow> tail = r.tail;
  if (r.reports_trust) {
    const nlohmann::json signature = signature_json(opened);
    const nlohmann::json validation = validation_json(opened, signature);
    if (validation.value("matches_manifest", true) == false) {
      warnings.push_back(validation["file"].get<std::string>() + ": describes another manifest (manifest_sha256 " +
                         validation["manifest_sha256"].get<std::string>() + ", this one is " + pkg.manifest_sha256 +
                         "): it is not this package's validation result");
      std::cerr << "warning: " << warnings.back() << "\n";
    }
    j["signature"] = signature;
    j["validation"] = validation;
    trust_rows(signature, validation, tail);
  }
  tail.insert(tail.end(), r.tail_after_trust.begin(), r.tail_after_trust.end());
  j["kind"] = "package";
  j["package"] = pkg.ref;
  j["model_id"] = id.model_id;
  j["manifest_sha256"] = pkg.manifest_sha256;
  j.update(package_id_json(pkg, id));
  j["architecture"] = std::string(meta->architecture());
  j["layer_count"] = id.layer_count;
  j["tensor_count"] = r.tensor_count;
  j["tensor_bytes"] = r.tensor_bytes;
  j["artifact_bytes"] = r.artifact_bytes;
  j["generation"] = r.generation;
  // What one decoded token reads, as inspect MODEL.gguf says it: tensor
  // sizes from the parts' headers (an hf:// package reads an absent part's
  // first bytes, not the part). Unknown, with the reason, when they cannot
  // be read (offline, say).
  std::optional<DecodeCost> cost;
  std::string no_cost;
  try {
    cost = package_decode_cost(plan_package(opened, PlanReads{.stages = 1, .metadata = true, .tensors = true}));
  } catch (const Error& e) {
    no_cost = e.what();
  }
  j["active_bytes_per_token"] = cost ? nlohmann::json(cost->active_bytes_per_token()) : nlohmann::json(nullptr);
  tail.push_back({"read per token", cost ? per_token_text(*cost) : "unknown (" + no_cost + ")"});
  // Which of mesh-llm's runtime lines admit the package, and which split its architecture.
  const std::string arch(meta->architecture());
  const auto verdicts = judge_runtime_lines(id, arch);
  j["runtime_lines"] = runtime_lines_json(verdicts);
  // (A roster that does not list the architecture is said per line here; writers and plan warn about it.)
  for (const auto& v : verdicts) tail.push_back({"runtime line", runtime_line_text(v, arch)});
  j["warnings"] = warnings;
  if (json) {
    print_json(j);
    return kExitOk;
  }
  auto& o = std::cout;
  auto rows = [&](const std::vector<InspectRow>& rs) {
    for (const auto& row : rs) o << "  " << row.label << std::string(18 - std::min<size_t>(row.label.size(), 17), ' ') << row.text << "\n";
  };
  o << pkg.ref << " (" << r.title << ")\n";
  rows(r.head);
  rows({{"model", id.model_id}});
  rows(r.after_model);
  rows({{"architecture", std::string(meta->architecture())}, {"layers", std::to_string(id.layer_count)}});
  rows(r.after_layers);
  rows({{"tensors", std::to_string(r.tensor_count) + " (" + human_bytes(r.tensor_bytes) + "), " +
                        human_bytes(r.artifact_bytes) + " in " + std::to_string(r.artifacts) + " artifacts"},
        r.abi});
  rows(tail);
  return kExitOk;
}

}  // namespace

// inspect's --help after its options: examples, then what it does.
constexpr const char* kInspectHelp =
    "Examples:\n  skippy-model-package inspect model-00001-of-00003.gguf --json\n"
    "  skippy-model-package inspect ./model-package\n"
    "Given any shard of a split model, reports the whole model. Given a package, validates only the\n"
    "manifest and shared/metadata.gguf (metadata-only inspection; no layer range needed).";

Command register_inspect(CLI::App& app) {
  auto* cmd = app.add_subcommand("inspect", "What a GGUF model or a layer package holds");
  cmd->footer(kInspectHelp);
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
    const auto stage = materialized_stage(model);
    if (*json) {
      auto j = summary_json(*file, summary, decode);
      j["materialized_stage"] = stage_json(stage);
      print_json(j);
    } else {
      print_human(*file, summary, decode, stage);
    }
    return kExitOk;
  }};
}

}  // namespace skippy::cli
