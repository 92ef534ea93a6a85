#include <iostream>
#include <map>

#include "cli.h"
#include "progress.h"
#include "stage_cli.h"
#include "skippy/error.h"
#include "skippy/stage.h"
#include "skippy/verify.h"
#include "util/parallel.h"

namespace skippy::cli {

// verify's --help after its options: examples, then what it does.
constexpr const char* kVerifyHelp =
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
    "  skippy-model-package verify ./schema2-package --layers 0..4 --json";

Command register_verify(CLI::App& app) {
  auto* cmd = app.add_subcommand("verify", "SHA-256 of a package's parts against its manifest, with a cache");
  cmd->footer(kVerifyHelp);
  struct Args {
    std::string ref;
    std::string layers;
    std::string projector;
    bool no_cache = false;
    bool json = false;
    unsigned threads = 0;
    TensorChoice tensors;
  };
  auto a = std::make_shared<Args>();
  path_option(cmd->add_option("package", a->ref, "Package directory or hf://ns/repo[@rev]"))->required();
  cmd->add_option("--layers", a->layers, "Stage layer range START..END (half-open); default: every artifact");
  cmd->add_option("--projector", a->projector, "With --layers: the declared projector the stage uses");
  add_tensor_options(cmd, a->tensors);
  cmd->add_flag("--no-cache", a->no_cache, "Hash everything; neither read nor write verification records");
  cmd->add_option("--threads", a->threads, "Files hashed in parallel (default: one per core, at most 16)")->check(number_in(1u, 64u));
  cmd->add_flag("--json", a->json, "Print one JSON document on stdout");
  add_trust_signer_option(cmd);
  return {cmd, [a]() {
            std::optional<LayerRange> range;
            if (!a->layers.empty()) range = parse_layer_range(a->layers);
            SelectOptions so;
            if (!a->projector.empty()) so.projector_path = a->projector;
            if (!range && !a->projector.empty()) {
              throw skippy::Error(ErrorKind::kUsage, "--projector needs --layers (without a range every projector is verified)");
            }
            const StageChoice choice = stage_choice(range, a->tensors, so, /*artifacts_only=*/true);
            const auto opened = open_for_cli(a->ref);
            check_stage_choice(choice, opened.identity());
            const OpenedCatalog pkg = opened.catalog(catalog_need(choice));
            const auto s = choose_stage(pkg, choice);
            auto parts = s.parts_with_projector();
            // A package of whole parts and a repository package bring and check
            // what the stage reads first (a file rule refuses); a local
            // package's other file rules are problems of the report.
            if (pkg.catalog.selects_whole_parts || pkg.source) provide_parts(pkg, parts);
            VerifyOptions o;
            o.threads = detail::worker_threads(a->threads);
            o.use_cache = !a->no_cache;
            std::optional<Progress> progress;
            progress.emplace("verify");
            o.on_progress = [&](uint64_t d, uint64_t t) { progress->update(d, t); };
            auto r = verify_parts(pkg, parts, o);
            progress.reset();
            std::vector<std::string> notes = s.notes;
            notes.insert(notes.end(), r.notes.begin(), r.notes.end());
            const auto& cat = pkg.catalog;
            std::map<std::string, const StagePart*> by_path;
            for (const auto& p : parts) by_path.emplace(p.rel_path, &p);
            nlohmann::json jparts = nlohmann::json::array();
            for (const auto& vp : r.parts) {
              const StagePart& p = *by_path.at(vp.rel_path);
              nlohmann::json j = !pkg.names_artifacts_by_id
                                     ? nlohmann::json{{"role", part_role_name(vp.role)}}
                                     : nlohmann::json{{"artifact_id", p.artifact_id}, {"kind", catalog_artifact_kind_name(p.kind)}};
              j.update({{"layer_index", vp.layer_index ? nlohmann::json(*vp.layer_index) : nlohmann::json()},
                        {"relative_path", vp.rel_path},
                        {"cache_hit", vp.cache_hit},
                        {"ok", vp.ok}});
              jparts.push_back(std::move(j));
            }
            auto identity = package_identity_json(pkg);
            identity["threads"] = o.threads;
            return print_verify_report(r, a->json, std::move(identity), std::move(jparts), !a->no_cache, pkg.warnings,
                                       notes, range, cat.package_id, pkg.declarer);
          }};
}

}  // namespace skippy::cli
