#include <iostream>

#include "cli.h"
#include "progress.h"
#include "schema_v2_cli.h"
#include "skippy/error.h"
#include "skippy/stage.h"
#include "skippy/verify.h"

namespace skippy::cli {

Command register_verify(CLI::App& app) {
  auto* cmd = app.add_subcommand("verify", "SHA-256 of a package's parts against its manifest, with a cache");
  cmd->footer(
      "Examples:\n"
      "  skippy-model-package verify model-package/                 # every artifact\n"
      "  skippy-model-package verify model-package/ --layers 0..2 --json\n"
      "With --layers, checks what that stage loads (metadata, the layers, embeddings/output at the\n"
      "boundaries, and the projector it would use); without, every artifact including projectors.\n"
      "Files verified before and unchanged since (same inode, size, mtime and ctime) are not hashed\n"
      "again: records live in $SKIPPY_CACHE_DIR/verified (else $XDG_CACHE_HOME/skippy/verified, else\n"
      "~/.cache/skippy/verified) and hold no paths. --no-cache hashes everything. Exit 1 lists every\n"
      "artifact whose SHA-256 or size does not match.\n"
      "A package schema 2 (local or hf://): the carrier and the parts of the stage (or of --tensors, or\n"
      "every artifact), against the root's artifact_catalog, through the same records:\n"
      "  skippy-model-package verify ./v2-package --layers 0..4 --json");
  struct Args {
    std::string ref;
    std::string layers;
    std::string projector;
    bool no_cache = false;
    bool json = false;
    unsigned threads = 2;
    TensorChoice tensors;
  };
  auto a = std::make_shared<Args>();
  path_option(cmd->add_option("package", a->ref, "Package directory or hf://ns/repo[@rev]"))->required();
  cmd->add_option("--layers", a->layers, "Stage layer range START..END (half-open); default: every artifact");
  cmd->add_option("--projector", a->projector, "With --layers: the declared projector the stage uses");
  add_tensor_options(cmd, a->tensors);
  cmd->add_flag("--no-cache", a->no_cache, "Hash everything; neither read nor write verification records");
  cmd->add_option("--threads", a->threads, "Files hashed in parallel (default 2)")->check(number_in(1u, 64u));
  cmd->add_flag("--json", a->json, "Print one JSON document on stdout");
  add_trust_signer_option(cmd);
  return {cmd, [a]() {
            std::optional<LayerRange> range;
            if (!a->layers.empty()) range = parse_layer_range(a->layers);
            check_tensor_choice(a->tensors, range.has_value(), true);
            const auto any = open_any_for_cli(a->ref);
            check_tensor_choice(a->tensors, range.has_value(), any.v2.has_value());
            if (any.v2) {
              VerifyV2Args v2{a->threads, a->no_cache, a->json, {}};
              if (!a->projector.empty()) v2.projector.path = a->projector;
              return verify_schema_v2(*any.v2, range, a->tensors, v2);
            }
            const OpenedPackage& pkg = *any.v1;
            if (!range && !a->projector.empty()) {
              throw skippy::Error(ErrorKind::kUsage, "--projector needs --layers (without a range every projector is verified)");
            }
            SelectOptions so;
            if (!a->projector.empty()) so.projector_path = a->projector;
            auto [parts, notes] = parts_for(pkg, range, so);
            VerifyOptions o;
            o.threads = a->threads;
            o.use_cache = !a->no_cache;
            std::optional<Progress> progress;
            progress.emplace("verify");
            o.on_progress = [&](uint64_t d, uint64_t t) { progress->update(d, t); };
            auto r = verify_parts(pkg, parts, o);
            progress.reset();
            notes.insert(notes.end(), r.notes.begin(), r.notes.end());
            nlohmann::json jparts = nlohmann::json::array();
            for (const auto& vp : r.parts) {
              jparts.push_back({{"role", part_role_name(vp.role)},
                                {"layer_index", vp.layer_index ? nlohmann::json(*vp.layer_index) : nlohmann::json()},
                                {"relative_path", vp.rel_path},
                                {"cache_hit", vp.cache_hit},
                                {"ok", vp.ok}});
            }
            return print_verify_report(r, a->json, {{"package", pkg.ref}, {"manifest_sha256", pkg.manifest_sha256}},
                                       std::move(jparts), !a->no_cache, pkg.warnings, notes, range, "", "manifest");
          }};
}

}  // namespace skippy::cli
