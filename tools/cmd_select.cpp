#include <iostream>

#include "cli.h"
#include "skippy/error.h"
#include "schema_v2_cli.h"
#include "skippy/policy.h"
#include "skippy/stage.h"
#include "skippy/verify.h"

namespace skippy::cli {

nlohmann::json part_json(const StagePart& p) {
  return {{"role", part_role_name(p.role)},
          {"layer_index", p.layer_index ? nlohmann::json(*p.layer_index) : nlohmann::json(nullptr)},
          {"path", p.path.string()},
          {"relative_path", p.rel_path},
          {"bytes", p.bytes},
          {"tensor_count", p.tensor_count},
          {"sha256", p.sha256},
          {"reason", p.reason}};
}

Command register_select(CLI::App& app) {
  auto* cmd = app.add_subcommand("select", "Consumer validation for a stage, then the ordered parts it loads");
  cmd->footer(
      "Example:\n  skippy-model-package select ./model-package --layers 0..4 --json\n"
      "Ranges are half-open: 0..4 is layers 0-3. A range starting at 0 owns the input boundary\n"
      "(embeddings); one ending at layer_count owns the output boundary.\n"
      "A package schema 2 (local or hf://) lists the carrier and the parts holding the stage's tensors\n"
      "(parts[] with artifact_id and relative_path, tensors[] with each tensor's locator), or the parts of\n"
      "exactly the tensors named:\n"
      "  skippy-model-package select ./v2-package --tensors token_embd.weight,blk.0.attn_q.weight --json");
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
              throw Error(ErrorKind::kUsage, "select: --layers START..END is required (or, for a schema 2 package, --tensors)");
            }
            std::optional<LayerRange> chosen;
            if (!a->layers.empty()) chosen = parse_layer_range(a->layers);
            check_tensor_choice(a->tensors, chosen.has_value(), true);
            const auto any = open_any_for_cli(a->ref);  // prints the package's warnings
            check_runtime_abi_for_cli(any);
            check_tensor_choice(a->tensors, chosen.has_value(), any.v2.has_value());
            if (any.v2) {
              ProjectorChoice projector;
              if (!a->projector.empty()) projector.path = a->projector;
              projector.single_stage = a->single_stage;
              return select_schema_v2(*any.v2, chosen, a->tensors, a->json, projector);
            }
            const auto range = *chosen;
            const OpenedPackage& pkg = *any.v1;
            const auto generation = generation_warnings(pkg.manifest.generation);
            for (const auto& w : generation) std::cerr << "warning: " << w << "\n";
            // The package's (unknown projector kinds, a set-aside generation block, a
            // moving branch) and the generation block's, all in the JSON document.
            std::vector<std::string> warnings = pkg.warnings;
            warnings.insert(warnings.end(), generation.begin(), generation.end());
            SelectOptions o;
            if (!a->projector.empty()) o.projector_path = a->projector;
            o.single_stage = a->single_stage;
            const auto s = select_stage(pkg, range, o);
            std::vector<StagePart> parts = s.parts;
            if (s.projector) parts.push_back(*s.projector);
            // Before a stage may use them: SHA-256 when the package demands it
            // (hf://) or SKIPPY_VERIFY_PACKAGE_SHA is set; throws on mismatch.
            const auto verified = verify_if_required(pkg, parts);
            uint64_t total = 0;
            for (const auto& p : parts) total += p.bytes;
            if (a->json) {
              nlohmann::json jp = nlohmann::json::array();
              for (const auto& p : parts) jp.push_back(part_json(p));
              print_json({{"package", pkg.ref},
                          {"model_id", pkg.manifest.model_id},
                          {"manifest_sha256", pkg.manifest_sha256},
                          {"layer_start", range.start},
                          {"layer_end", range.end},
                          {"layer_count", pkg.manifest.layer_count},
                          {"parts", jp},
                          {"total_bytes", total},
                          {"verified", verified.has_value()},
                          {"notes", s.notes},
                          {"warnings", warnings},
                          {"revision", pin_json(pkg)}});  // #25
            } else {
              std::cout << pkg.manifest.model_id << " layers " << format_layer_range(range) << " of "
                        << pkg.manifest.layer_count << ": " << counted(parts.size(), "part") << ", " << human_bytes(total) << "\n";
              std::vector<std::vector<std::string>> rows;
              for (const auto& p : parts) {
                std::string role(part_role_name(p.role));
                if (p.layer_index) role += " " + std::to_string(*p.layer_index);
                rows.push_back({role, p.rel_path, human_bytes(p.bytes)});
              }
              std::cout << aligned_rows(rows, {2});
              for (const auto& n : s.notes) std::cerr << "note: " << n << "\n";
            }
            return kExitOk;
          }};
}

}  // namespace skippy::cli
