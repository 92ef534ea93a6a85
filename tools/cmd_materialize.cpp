#include <iostream>

#include "cli.h"
#include "progress.h"
#include "stage_cli.h"
#include "skippy/error.h"
#include "skippy/stage.h"
#include "skippy/materialize.h"

namespace skippy::cli {
namespace {

// --as-source: the source model's file(s) again, byte for byte.
int materialize_as_source(const std::string& ref, const std::string& out, bool verify, bool json) {
  const auto opened = open_for_cli(ref);  // a local directory or hf://, any schema
  check_runtime_abi_for_cli(opened);
  Progress progress("materialize");
  SourceRebuildOptions o;
  o.out = out;
  o.verify = verify;
  o.on_progress = [&](uint64_t d, uint64_t t) { progress.update(d, t); };
  const auto files = materialize_source(opened, o);
  uint64_t bytes = 0;
  for (const auto& f : files) bytes += f.bytes;
  if (json) {
    nlohmann::json jf = nlohmann::json::array();
    for (const auto& f : files) {
      jf.push_back({{"path", f.path.string()}, {"source_path", f.source_path}, {"bytes", f.bytes}, {"sha256", f.sha256}});
    }
    nlohmann::json doc = {{"files", jf}, {"bytes", bytes}, {"verified", true},
                          {"manifest_sha256", opened.manifest_sha256}, {"warnings", opened.warnings}};
    doc.update(package_id_json(opened, opened.identity()));
    print_json(doc);
  } else {
    for (const auto& f : files) std::cout << f.path.string() << "\n";
    std::cerr << "rebuilt the source: " << files.size() << " file" << (files.size() == 1 ? "" : "s") << ", "
              << human_bytes(bytes) << ", each the size and SHA-256 the package records (source_model.files)\n";
  }
  return kExitOk;
}

struct MaterializeArgs {
  std::string ref, layers, out, cache_dir, admission;
  std::vector<std::string> tensors;
  bool json = false, list = false, prune = false, verify = false, sha256 = false, as_source = false;
};

// --list: the stage cache's entries.
int list_cache(const MaterializeArgs& a, const std::filesystem::path& cache_dir) {
  if (!a.ref.empty()) throw Error(ErrorKind::kUsage, "--list takes no package");
  const auto entries = list_stage_cache(cache_dir);
  if (a.json) {
    nlohmann::json je = nlohmann::json::array();
    for (const auto& e : entries) {
      je.push_back({{"name", e.name},
                    {"path", e.path.string()},
                    {"layer_start", e.range.start},
                    {"layer_end", e.range.end},
                    {"size", e.size},
                    {"model_id", e.model_id},
                    {"manifest_sha256", e.manifest_sha256},
                    {"tensor_count", e.tensor_count},
                    {"sha256", e.sha256.empty() ? nlohmann::json(nullptr) : nlohmann::json(e.sha256)},
                    {"complete", e.complete}});
    }
    print_json({{"cache_dir", cache_dir.string()}, {"entries", je}});
  } else {
    uint64_t total = 0;
    for (const auto& e : entries) {
      total += e.size;
      std::cout << e.name << "  layers " << format_layer_range(e.range) << "  " << human_bytes(e.size)
                << "  " << (e.model_id.empty() ? "?" : e.model_id)
                << (e.complete ? "" : "  (incomplete)") << "\n";
    }
    std::cerr << entries.size() << " entr" << (entries.size() == 1 ? "y" : "ies") << ", "
              << human_bytes(total) << " in " << cache_dir.string() << "\n";
  }
  return kExitOk;
}

// --prune: the stage cache's entries removed (one package's, when given).
int prune_cache(const MaterializeArgs& a, const std::filesystem::path& cache_dir) {
  std::optional<std::string> manifest;
  if (!a.ref.empty()) {
    manifest = open_for_cli(a.ref).manifest_sha256;
  }
  const auto r = prune_stage_cache(cache_dir, manifest);
  if (a.json) {
    print_json({{"cache_dir", cache_dir.string()},
                {"removed", r.removed},
                {"busy", r.busy},
                {"freed_bytes", r.freed_bytes}});
  } else {
    std::cout << "removed " << r.removed.size() << " entr" << (r.removed.size() == 1 ? "y" : "ies")
              << ", freed " << human_bytes(r.freed_bytes) << "\n";
    for (const auto& b : r.busy) std::cerr << "skipped " << b << ": being built by another process\n";
  }
  return kExitOk;
}

// The stage's projectors (sidecars), taken out of its parts: they are never
// merged, but brought, checked and loaded from the package.
std::vector<StagePart> take_sidecars(StageSelection& stage) {
  std::vector<StagePart> sidecars;
  if (stage.projector) sidecars.push_back(*stage.projector);
  for (const auto& p : stage.parts) {
    if (p.kind == CatalogArtifactKind::kSidecar) sidecars.push_back(p);
  }
  std::erase_if(stage.parts, [](const StagePart& p) { return p.kind == CatalogArtifactKind::kSidecar; });
  stage.projector.reset();
  return sidecars;
}

// A stage (a layer range, named tensors or an admission descriptor) as one GGUF.
int materialize_one_stage(const MaterializeArgs& a, const std::filesystem::path& cache_dir) {
  if (a.ref.empty()) throw Error(ErrorKind::kUsage, "materialize needs a package (or --list / --prune)");
  if (!a.admission.empty() && (!a.tensors.empty() || !a.layers.empty())) {
    throw Error(ErrorKind::kUsage, "give --admission, --layers or --tensors, one of them");
  }
  if (!a.admission.empty() && a.out.empty()) {
    throw Error(ErrorKind::kUsage, "--admission needs --out FILE (such a file is never cached)");
  }
  if (!a.tensors.empty()) {
    if (!a.layers.empty()) throw Error(ErrorKind::kUsage, "give --layers or --tensors, not both");
    if (a.out.empty()) throw Error(ErrorKind::kUsage, "--tensors needs --out FILE (such a file is never cached)");
  } else if (a.layers.empty() && a.admission.empty()) {
    throw Error(ErrorKind::kUsage, "materialize needs --layers START..END");
  }
  const bool by_names = !a.tensors.empty() || !a.admission.empty();
  const auto range = by_names ? LayerRange{} : parse_layer_range(a.layers);
  MaterializeOptions o;
  if (!a.out.empty()) o.out = a.out;
  if (!a.cache_dir.empty()) o.cache_dir = cache_dir;
  o.verify = a.verify;
  o.hash = a.sha256;
  StageChoice choice;
  if (!by_names) choice.range = range;
  choice.tensor_names = a.tensors;
  if (!a.admission.empty()) {
    choice.admission = read_admission_file(a.admission);
    choice.admission_origin = "--admission " + a.admission;
  }
  const auto opened = open_for_cli(a.ref);  // a local directory or hf://, any schema
  check_runtime_abi_for_cli(opened);
  check_stage_choice(choice, opened.identity());
  const std::optional<LayerRange> chosen = choice.range;
  const OpenedCatalog pkg = opened.catalog(catalog_need(choice));
  const bool by_id = pkg.names_artifacts_by_id;
  // The projectors (sidecars) the stage loads are never merged:
  // brought, checked, and named so they are loaded from the package.
  // A range's is chosen as select chooses it; an --admission
  // descriptor names its own.
  StageSelection stage = choose_stage(pkg, choice);
  std::vector<StagePart> sidecars = take_sidecars(stage);
  provide_parts(pkg, sidecars);
  (void)verify_if_required(pkg, sidecars);
  nlohmann::json sidecar_json = nlohmann::json::array();
  for (const auto& p : sidecars) sidecar_json.push_back(p.path.string());
  Progress progress("materialize");
  o.on_progress = [&](uint64_t d, uint64_t t) { progress.update(d, t); };
  const auto r = materialize_stage(pkg, stage, o);
  const std::string what =
      chosen ? "layers " + format_layer_range(range) : std::to_string(stage.tensors.size()) + " named tensors";
  if (a.json) {
    nlohmann::json doc = {{"path", r.path.string()},
                          {"tensor_count", r.tensor_count},
                          {"reused", r.reused},
                          {"cached", r.cached},
                          {"bytes", r.bytes},
                          {"sha256", r.sha256.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.sha256)},
                          {"layer_start", chosen ? nlohmann::json(range.start) : nlohmann::json(nullptr)},
                          {"layer_end", chosen ? nlohmann::json(range.end) : nlohmann::json(nullptr)},
                          {"manifest_sha256", pkg.manifest_sha256},
                          {"projector", sidecars.empty() ? nlohmann::json(nullptr)
                                                         : nlohmann::json(sidecars.front().path.string())},
                          {"sidecars", sidecar_json},
                          {"warnings", pkg.warnings},
                          {"notes", stage.notes}};
    doc.update(package_id_json(pkg, pkg.catalog));
    print_json(doc);
  } else {
    std::cout << r.path.string() << "\n";
    std::cerr << (r.reused ? "reused " : "materialized ") << what
              << (pkg.catalog.selects_whole_parts ? "" : " (package schema " + std::to_string(pkg.catalog.schema_version) + ")")
              << ": "
              << r.tensor_count << " tensors, " << human_bytes(r.bytes) << "\n";
    for (const auto& p : sidecars) {
      std::cerr << "note: the " << (!by_id ? "projector " : "sidecar ") << p.rel_path
                << " is not merged; load it from the package\n";
    }
    for (const auto& n : stage.notes) std::cerr << "note: " << n << "\n";
  }
  return kExitOk;
}

}  // namespace

// materialize's --help after its options: examples, then what it does.
constexpr const char* kMaterializeHelp =
    "Examples:\n"
    "  skippy-model-package materialize model-package/ --layers 0..4 --json\n"
    "  skippy-model-package materialize model-package/ --layers 0..4 --out stage0.gguf\n"
    "  skippy-model-package materialize --list --json\n"
    "  skippy-model-package materialize --prune model-package/ --json\n"
    "Writes the stage's parts (metadata, embeddings at the input boundary or for a tied output,\n"
    "layers START..END-1, output at the output boundary) as one GGUF. Loading the parts directly is\n"
    "the normal path; this file is derived cache and never part of a package (it is never written\n"
    "inside the package directory). The projector is not merged.\n"
    "The cache lives in $SKIPPY_CACHE_DIR/stages (else $XDG_CACHE_HOME/skippy/stages, else\n"
    "~/.cache/skippy/stages), one entry per package and range: <manifest sha256[:16]>-L<start>-<end>.gguf\n"
    "with a .json sidecar. A valid entry is reused (\"reused\": true); concurrent runs for the same\n"
    "stage build it once. --verify (or SKIPPY_VERIFY_PACKAGE_SHA=1, or an hf:// package) verifies the\n"
    "parts against the manifest and compares a cached file byte for byte with them before reuse.\n"
    "--out FILE writes exactly that file instead, outside the cache: staged under a hidden name and\n"
    "renamed (never seen partial), not fsynced, like cp. Cache entries are fsynced.\n"
    "A package schema 2 directory works the same way: the carrier's KVs (minus its skippy.package.*\n"
    "keys) and the stage's tensors read at their locators, byte-identical to the source. For a runtime\n"
    "that derives its stage from its own graph, --tensors NAME,... --out FILE writes exactly those\n"
    "tensors of a schema 2 package (never cached):\n"
    "  skippy-model-package materialize pkg-schema2/ --tensors token_embd.weight,blk.0.attn_q.weight --out t.gguf\n"
    "--list shows the cache's entries; --prune removes them (only the given package's, with a\n"
    "package), skipping entries being built. Prints the file's path on stdout (without --json).\n"
    "--as-source --out DIR|FILE rebuilds the source model's file(s) the package was written from,\n"
    "byte for byte (what gguf-split --merge users expect: the original bytes, no skippy.* keys):\n"
    "  skippy-model-package materialize model-package/ --as-source --out restored.gguf --json\n"
    "Each file is checked against the size and SHA-256 the package records (source_model.files),\n"
    "written under a hidden name and renamed only when its SHA-256 matches. A split source's shards\n"
    "go into --out DIR (made when missing), each under its source name. A package that does not\n"
    "record what a file needs (a schema 2 package of a split source, a package written by another\n"
    "writer) is refused before anything is written, saying what is missing.";

Command register_materialize(CLI::App& app) {
  auto* cmd = app.add_subcommand("materialize", "A single per-stage GGUF (derived cache), the source model's file(s) again (--as-source), or list/prune that cache");
  cmd->footer(kMaterializeHelp);
  auto a = std::make_shared<MaterializeArgs>();
  path_option(cmd->add_option("package", a->ref, "Package directory (or hf://ns/repo[@rev])"));
  cmd->add_option("--layers", a->layers, "Layer range START..END (half-open)");
  path_option(cmd->add_option("--out", a->out, "Write this file instead of the cache entry (--as-source: the file, or a directory for the source's files)"));
  cmd->add_option("--tensors", a->tensors, "Package schema 2: exactly these tensors (NAME,NAME,...); needs --out")
      ->delimiter(',');
  path_option(cmd->add_option("--admission", a->admission,
                              "Package schema 2: the stage this stage admission descriptor (JSON) defines: its "
                              "tensors, for this package_id only; needs --out"));
  path_option(cmd->add_option("--cache-dir", a->cache_dir, "Stage cache directory (default: see below)"));
  cmd->add_flag("--verify", a->verify,
                "Verify the parts' SHA-256 against the manifest; compare a cached file byte for byte before reuse");
  cmd->add_flag("--sha256", a->sha256, "Also compute the file's SHA-256 (slower: hashes every byte)");
  cmd->add_flag("--as-source", a->as_source,
                "Rebuild the source model's file(s) byte for byte into --out (a file, or a directory for a split "
                "source), checked against the SHA-256 the package records");
  cmd->add_flag("--list", a->list, "List the stage cache's entries");
  cmd->add_flag("--prune", a->prune, "Remove stage cache entries (only this package's when one is given)");
  cmd->add_flag("--json", a->json, "Print one JSON document on stdout");
  add_trust_signer_option(cmd);
  add_runtime_abi_option(cmd);
  return {cmd, [a]() {
            const std::filesystem::path cache_dir =
                a->cache_dir.empty() ? default_stage_cache_dir() : std::filesystem::path(a->cache_dir);
            if (a->list && a->prune) throw Error(ErrorKind::kUsage, "--list and --prune do not go together");
            if (a->as_source) {
              if (a->list || a->prune || !a->layers.empty() || !a->tensors.empty() || !a->admission.empty() ||
                  !a->cache_dir.empty() || a->sha256) {
                throw Error(ErrorKind::kUsage, "--as-source takes no --layers, --tensors, --admission, --list, --prune, "
                                               "--cache-dir or --sha256 (it rebuilds the whole source and always "
                                               "checks its SHA-256)");
              }
              if (a->ref.empty()) throw Error(ErrorKind::kUsage, "materialize --as-source needs a package");
              if (a->out.empty()) throw Error(ErrorKind::kUsage, "--as-source needs --out DIR or --out FILE");
              return materialize_as_source(a->ref, a->out, a->verify, a->json);
            }
            if ((a->list || a->prune) &&
                (!a->layers.empty() || !a->out.empty() || a->verify || a->sha256 || !a->tensors.empty())) {
              throw Error(ErrorKind::kUsage, "--list/--prune take no --layers, --tensors, --out, --verify or --sha256");
            }
            if (a->list) return list_cache(*a, cache_dir);
            if (a->prune) return prune_cache(*a, cache_dir);
            return materialize_one_stage(*a, cache_dir);
          }};
}

}  // namespace skippy::cli
