#include <filesystem>
#include <iostream>

#include "cli.h"
#include "progress.h"
#include "skippy/error.h"
#include "skippy/hub.h"
#include "skippy/source.h"
#include "skippy/package_writer.h"

namespace skippy::cli {

Command register_write_package(CLI::App& app) {
  auto* cmd = app.add_subcommand("write-package", "Turn a GGUF model into a layer package");
  cmd->footer(
      "Examples:\n"
      "  skippy-model-package write-package ./model.gguf --out-dir model-package/ \\\n"
      "      --model-id org/repo:Q4_K_M --source-revision <commit> --source-file model.gguf\n"
      "  skippy-model-package write-package ./model-00001-of-00003.gguf --out-dir pkg/ ...   (all shards are read)\n"
      "  skippy-model-package write-package org/Model-GGUF:Q4_K_M --out-dir model-package/\n"
      "      (the Hub's GGUF file(s) whose names carry that tag, every shard, fetched into the Hugging Face\n"
      "       cache; --source-revision picks a revision other than main; provenance comes from the Hub)\n"
      "A local source needs its provenance (the spec's rule), all three checked before anything is written:\n"
      "  --model-id ID          the model coordinate the package is named after, org/repo:DISTRIBUTION\n"
      "                         (e.g. Qwen/Qwen3-8B-GGUF:Q4_K_M), not a file name\n"
      "  --source-revision REV  the commit of that repository the file came from\n"
      "  --source-file NAME     the file's path in that repository (the first shard of a split model)\n"
      "A Hub source takes all three from the Hub (only --source-revision may pick the revision).\n"
      "--validate runs validate-package on the result before the manifest is written and records the outcome\n"
      "in the package README; without it the README says how to validate. Rerunning into the directory of an\n"
      "interrupted run finishes the job without --force.\n"
      "Reproducible: the same source and flags give identical fragments; SOURCE_DATE_EPOCH sets created_at.");
  struct Args {
    std::string source, out_dir, model_id, revision, source_file;
    std::vector<std::string> projectors;
    bool force = false, json = false, validate = false, verbose = false;
    unsigned threads = 2;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("source", a->source, "Source .gguf (any shard of a split model) or org/repo:distribution on the Hub")->required();
  cmd->add_option("--out-dir", a->out_dir, "Package directory to create")->required();
  cmd->add_option("--model-id", a->model_id, "Model coordinate, e.g. org/repo:Q4_K_M");
  cmd->add_option("--source-revision", a->revision, "Source repository commit (for a Hub source: the revision to use)");
  cmd->add_option("--source-file", a->source_file, "Source file name in its repository");
  cmd->add_option("--projector", a->projectors, "Multimodal projector GGUF to include (repeatable)");
  cmd->add_flag("--force", a->force, "Replace the package in a non-empty --out-dir");
  cmd->add_flag("--validate", a->validate, "Validate the package against the source before committing its manifest");
  cmd->add_flag("--verbose", a->verbose, "Also say why nothing was declared (generation defaults)");
  cmd->add_option("--threads", a->threads, "Worker threads (default 2)")->check(CLI::Range(1u, 64u));
  cmd->add_flag("--json", a->json, "Print one JSON document on stdout");
  return {cmd, [a]() {
            WritePackageOptions o;
            o.out_dir = a->out_dir;
            Progress download("download");
            const auto src = open_model_source({a->source, a->model_id, a->revision, a->source_file}, default_sources(),
                                               [&](uint64_t d, uint64_t t) { download.update(d, t); });
            o.source = src.local;
            o.provenance = src.provenance;
            for (const auto& p : a->projectors) o.projectors.emplace_back(p);
            o.force = a->force;
            o.threads = a->threads;
            o.validate = a->validate;
            Progress progress("write-package");
            o.on_progress = [&](uint64_t d, uint64_t t) { progress.update(d, t); };
            const auto r = write_package(o);
            if (a->json) {
              print_json({{"package_dir", r.package_dir.string()},
                          {"manifest_sha256", r.manifest_sha256},
                          {"layer_count", r.manifest.layer_count},
                          {"artifact_count", r.artifact_count},
                          {"model_id", r.manifest.model_id},
                          {"validated", r.validated},
                          {"source_bytes_hashed", r.source_bytes_hashed},
                          {"notes", r.notes},
                          {"details", r.details}});
            } else {
              std::cout << "wrote " << r.package_dir.string() << ": " << r.manifest.layer_count << " layers, "
                        << r.artifact_count << " artifacts\n"
                        << "manifest sha256 " << r.manifest_sha256 << "\n"
                        << (r.validated ? "validated against the source: valid\n"
                                        : "not validated; before publishing run: skippy-model-package validate-package " +
                                              a->source + " " + a->out_dir + "\n");
              for (const auto& n : r.notes) std::cout << "note: " << n << "\n";
              if (a->verbose) {
                for (const auto& n : r.details) std::cout << "note: " << n << "\n";
              }
            }
            return kExitOk;
          }};
}

}  // namespace skippy::cli
