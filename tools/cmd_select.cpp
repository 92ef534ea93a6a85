#include <iostream>

#include "cli.h"
#include "skippy/error.h"
#include "stage_cli.h"
#include "skippy/policy.h"
#include "skippy/stage.h"
#include "skippy/verify.h"

namespace skippy::cli {

namespace {

nlohmann::json select_optional(const std::optional<uint32_t>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

// A part as select --json lists it: a package naming artifacts by path
// gives its role, one naming them by id its artifact id, kind and the
// stage's tensors in it.
nlohmann::json part_json(const StagePart& p, bool by_id) {
  nlohmann::json j = {{"layer_index", select_optional(p.layer_index)},
                      {"path", p.path.string()},
                      {"relative_path", p.rel_path},
                      {"bytes", p.bytes},
                      {"sha256", p.sha256},
                      {"reason", p.reason}};
  if (!by_id) {
    j.update({{"role", part_role_label(p)}, {"tensor_count", p.tensor_count}});
  } else {
    j.update({{"artifact_id", p.artifact_id},
              {"kind", catalog_artifact_kind_name(p.kind)},
              {"tensor_count", p.tensors.size()},
              {"tensors", p.tensors}});
  }
  return j;
}

// select --json: the package, the parts (and for a stage of tensors how it
// was chosen, every tensor's locator and its admission message).
nlohmann::json select_json(const CheckedStage& c, const StageChoice& choice, const std::optional<LayerRange>& chosen,
                           const std::vector<std::string>& warnings, const std::string& admission_file) {
  const auto& pkg = c.pkg;
  const auto& cat = pkg.catalog;
  const auto& s = c.stage;
  nlohmann::json jp = nlohmann::json::array();
  for (const auto& p : c.parts) jp.push_back(part_json(p, pkg.names_artifacts_by_id));
  nlohmann::json doc = {{"package", pkg.ref},
                        {"model_id", cat.model_id},
                        {"manifest_sha256", pkg.manifest_sha256},
                        {"layer_count", cat.layer_count},
                        {"parts", jp},
                        {"total_bytes", c.total_bytes},
                        {"verified", c.verified.has_value()},
                        {"notes", s.notes},
                        {"warnings", warnings},
                        {"revision", pin_json(pkg)}};
  if (chosen) {
    doc["layer_start"] = chosen->start;
    doc["layer_end"] = chosen->end;
  }
  doc.update(package_identity_json(pkg));
  if (cat.selects_whole_parts) return doc;
  // A stage of tensors: how it was chosen, every tensor's locator.
  nlohmann::json tensor_list = nlohmann::json::array();
  for (const auto& t : s.tensors) {
    tensor_list.push_back({{"name", t.name}, {"artifact_id", t.artifact_id}, {"offset", t.offset}, {"stored_bytes", t.stored_bytes}});
  }
  // The message nodes exchange: --admission's own when it was one, else every field this
  // package and stage determine (the native planner's fields named as not derived).
  const StageAdmission admission = stage_admission_for(pkg, s, choice);
  std::optional<StageAdmissionMessage> message;
  if (choice.admission) message = read_admission_message(admission_file);
  nlohmann::json underived = nlohmann::json::array();
  if (!message) {
    message = make_stage_admission_message(cat, admission, chosen);
    for (const auto& [field, why] : stage_admission_message_underived()) underived.push_back({{"field", field}, {"why", why}});
  }
  doc.update({{"selected_by", chosen ? "layers" : choice.admission ? "admission" : "tensors"},
              {"stage_admission", nlohmann::json::parse(stage_admission_json(admission))},
              {"stage_admission_message", nlohmann::json::parse(stage_admission_message_json(*message))},
              {"stage_admission_message_underived", underived},
              {"tensors", tensor_list},
              {"signed_by", pkg.signature ? nlohmann::json(pkg.signature->owner_id) : nlohmann::json()}});
  return doc;
}

// select without --json: a headline, then a row per part.
void print_select(const CheckedStage& c, const std::optional<LayerRange>& chosen) {
  const auto& cat = c.pkg.catalog;
  const bool by_id = c.pkg.names_artifacts_by_id;
  const auto& s = c.stage;
  std::cout << cat.model_id << (cat.selects_whole_parts ? "" : " (package schema " + std::to_string(cat.schema_version) + ")")
            << " "
            << (chosen ? "layers " + format_layer_range(*chosen) + " of " + std::to_string(cat.layer_count)
                       : std::to_string(s.tensors.size()) + " named tensors")
            << ": " << counted(c.parts.size(), "part") << (by_id ? ", " + counted(s.tensors.size(), "tensor") : std::string())
            << ", " << human_bytes(c.total_bytes) << "\n";
  std::vector<std::vector<std::string>> rows;
  for (const auto& p : c.parts) {
    std::string what(!by_id ? part_role_label(p) : catalog_artifact_kind_name(p.kind));
    if (p.layer_index) what += " " + std::to_string(*p.layer_index);
    rows.push_back({what, p.rel_path, human_bytes(p.bytes)});
    if (by_id) rows.back().push_back(counted(p.tensors.size(), "tensor"));
  }
  std::cout << aligned_rows(rows, by_id ? std::vector<size_t>{2, 3} : std::vector<size_t>{2});
  for (const auto& n : s.notes) std::cerr << "note: " << n << "\n";
}

}  // namespace

// select's --help after its options: examples, then what it does.
constexpr const char* kSelectHelp =
    "Example:\n  skippy-model-package select ./model-package --layers 0..4 --json\n"
    "Ranges are half-open: 0..4 is layers 0-3. A range starting at 0 owns the input boundary\n"
    "(embeddings); one ending at layer_count owns the output boundary.\n"
    "A package schema 2 (local or hf://) lists the carrier and the parts holding the stage's tensors\n"
    "(parts[] with artifact_id and relative_path, tensors[] with each tensor's locator), or the parts of\n"
    "exactly the tensors named:\n"
    "  skippy-model-package select ./schema2-package --tensors token_embd.weight,blk.0.attn_q.weight --json";

Command register_select(CLI::App& app) {
  auto* cmd = app.add_subcommand("select", "Consumer validation for a stage, then the ordered parts it loads");
  cmd->footer(kSelectHelp);
  struct Args {
    std::string ref, layers, projector;
    bool json = false, single_stage = false;
    TensorChoice tensors;
  };
  auto a = std::make_shared<Args>();
  path_option(cmd->add_option("package", a->ref, "Package directory (or hf://ns/repo[@rev])"))->required();
  cmd->add_option("--layers", a->layers, "Layer range START..END (half-open); required unless --tensors");
  add_tensor_options(cmd, a->tensors);
  cmd->add_option("--projector", a->projector, "Explicit projector path (as declared in the manifest)");
  cmd->add_flag("--single-stage", a->single_stage, "Single-stage serving: the stage gets the default projector");
  cmd->add_flag("--json", a->json, "Print one JSON document on stdout");
  add_trust_signer_option(cmd);
  add_runtime_abi_option(cmd);
  return {cmd, [a]() {
            if (a->layers.empty() && !a->tensors.given()) {
              throw Error(ErrorKind::kUsage, "select: --layers START..END is required (or, for a package whose catalog lists "
                                             "its tensors, --tensors)");
            }
            std::optional<LayerRange> chosen;
            if (!a->layers.empty()) chosen = parse_layer_range(a->layers);
            SelectOptions o;
            if (!a->projector.empty()) o.projector_path = a->projector;
            o.single_stage = a->single_stage;
            const StageChoice choice = stage_choice(chosen, a->tensors, o);
            const auto opened = open_for_cli(a->ref);  // prints the package's warnings
            check_runtime_abi_for_cli(opened);
            check_stage_choice(choice, opened.identity());
            // The package's (unknown projector kinds, a set-aside generation
            // block, a moving branch) and its generation block's, all in the JSON document.
            std::vector<std::string> warnings = opened.warnings;
            for (const auto& w : opened.identity().generation_warnings) {
              std::cerr << "warning: " << w << "\n";
              warnings.push_back(w);
            }
            const CheckedStage c = open_checked_stage(opened, choice);
            if (a->json) {
              print_json(select_json(c, choice, chosen, warnings, a->tensors.admission));
            } else {
              print_select(c, chosen);
            }
            return kExitOk;
          }};
}

}  // namespace skippy::cli
