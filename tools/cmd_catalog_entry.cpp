// catalog-entry: the package's entry in mesh-llm's package catalog
// (skippy/hub_publish.h: merge_catalog_entry, propose_catalog_entry).
#include <fstream>
#include <iostream>

#include "cli.h"
#include "skippy/source.h"
#include "skippy/hub_publish.h"
#include "util/file.h"

namespace skippy::cli {
namespace {

struct CatalogArgs {
  std::string package, repo, out, dataset = "meshllm/catalog";
  bool propose = false, direct = false, json = false;
};

// What the entry says, from the package's identity and where it is published.
CatalogEntryRequest catalog_request(const CatalogArgs& a) {
  const OpenedPackage pkg = open_for_cli(a.package);
  const OpenedCatalog cat = pkg.catalog(CatalogNeed::artifacts());
  const PackageIdentity& id = cat.catalog;
  CatalogEntryRequest r;
  r.source_repo = id.source_model.repo;
  r.source_file = id.source_model.primary_file.empty() && !id.source_model.files.empty() ? id.source_model.files.front().path
                                                                                          : id.source_model.primary_file;
  r.source_revision = id.source_model.revision;
  r.model_id = id.model_id;
  r.layer_count = id.layer_count;
  uint64_t total = 0;
  for (const auto& art : cat.catalog.artifacts) total += art.bytes;
  r.total_bytes = total;
  if (!a.repo.empty()) {
    r.package_repo = a.repo;
  } else if (is_hf_ref(a.package)) {
    r.package_repo = parse_hf_ref(a.package).repo_id;
    if (pkg.commit) r.package_revision = *pkg.commit;
  } else {
    throw Error(ErrorKind::kUsage, "catalog-entry " + a.package +
                                       ": a local package needs --repo NS/NAME, the Hub repository it is published to");
  }
  if (r.source_repo.empty()) {
    throw Error(ErrorKind::kInvalidInput,
                a.package + ": the package names no source repository (source_model.repo); the catalog files a package "
                            "under its source's");
  }
  return r;
}

// DIR/entries/<org>/<name>.json, merged into what is there, written atomically.
std::filesystem::path write_entry_file(const CatalogArgs& a, const CatalogEntryRequest& r, std::string* content, bool* existed) {
  const std::filesystem::path file = std::filesystem::path(a.out) / catalog_entry_path(r.source_repo);
  std::optional<std::string> existing;
  *existed = std::filesystem::exists(file);
  if (*existed) existing = read_small_file(file, size_t{16} << 20);
  *content = merge_catalog_entry(existing, r, file.string());
  std::filesystem::create_directories(file.parent_path());
  AtomicFile af(file);
  af.write_all({reinterpret_cast<const uint8_t*>(content->data()), content->size()});
  af.commit();
  return file;
}

}  // namespace

// catalog-entry's --help after its options: examples, then what it does.
constexpr const char* kCatalogEntryHelp =
    "Examples:\n"
    "  skippy-model-package catalog-entry ./model-package --repo me/tiny-layers --out ./catalog\n"
    "  skippy-model-package catalog-entry hf://meshllm/Model-layers --propose\n"
    "Nodes find a package by model name (org/repo:QUANT) only through mesh-llm's catalog, the Hub dataset\n"
    "meshllm/catalog: one file per source repository, entries/<org>/<name>.json, whose variant for the\n"
    "source file lists the layer packages made from it. This writes the entry as mesh-llm's own publisher\n"
    "does (a variant per source file; this package's line replaces an older one of the same repository;\n"
    "everything else in the file is kept), checked by mesh-llm's catalog reader's rules. Without --out or\n"
    "--propose it prints the entry. --propose reads the dataset's current entry and opens a pull request\n"
    "with the merged one (nodes read main: the package is found once it is merged); needs HF_TOKEN.";

Command register_catalog_entry(CLI::App& app) {
  auto* cmd = app.add_subcommand("catalog-entry",
                                 "The package's entry in mesh-llm's package catalog (the dataset nodes find packages in)");
  cmd->footer(kCatalogEntryHelp);
  auto a = std::make_shared<CatalogArgs>();
  path_option(cmd->add_option("package", a->package, "Package directory or hf://ns/repo[@rev]"))->required();
  cmd->add_option("--repo", a->repo,
                  "The Hub repository the package is published to, NS/NAME (or NS/NAME@REVISION to pin one); "
                  "default: the hf:// package's own");
  path_option(cmd->add_option("--out", a->out, "Write DIR/entries/<org>/<name>.json (merged into the file there)"));
  cmd->add_flag("--propose", a->propose, "Open a pull request with the merged entry on the catalog dataset");
  cmd->add_option("--dataset", a->dataset, "The catalog dataset for --propose (default meshllm/catalog)");
  cmd->add_flag("--direct", a->direct, "With --propose: commit to the dataset's main instead of a pull request");
  cmd->add_flag("--json", a->json, "Print one JSON document on stdout");
  return {cmd, [a]() {
            if (a->direct && !a->propose) throw Error(ErrorKind::kUsage, "--direct goes with --propose");
            const CatalogEntryRequest r = catalog_request(*a);
            nlohmann::json out = {{"package", a->package},
                                  {"path", catalog_entry_path(r.source_repo)},
                                  {"variant", catalog_variant_key(r.source_file)},
                                  {"package_repo", r.package_repo},
                                  {"written", nullptr},
                                  {"pull_request_url", nullptr},
                                  {"commit", nullptr}};
            std::string content;
            bool existed = false;
            if (!a->out.empty()) {
              const auto file = write_entry_file(*a, r, &content, &existed);
              out["written"] = file.string();
              if (!a->json) std::cerr << (existed ? "updated " : "wrote ") << file.string() << "\n";
            }
            if (a->propose) {
              const auto p = propose_catalog_entry(HubConfig::from_env(), a->dataset, r, !a->direct);
              content = p.content;
              existed = p.existed;
              out["commit"] = p.commit;
              if (!p.pull_request_url.empty()) out["pull_request_url"] = p.pull_request_url;
              if (!a->json) {
                std::cerr << (p.pull_request_url.empty() ? "committed " + p.path + " to hf://datasets/" + a->dataset
                                                         : "opened " + p.pull_request_url + " (" + p.path + ")")
                          << "\n";
              }
            }
            if (content.empty()) content = merge_catalog_entry(std::nullopt, r, a->package);
            out["existed"] = existed;
            out["entry"] = nlohmann::json::parse(content);
            if (a->json) {
              print_json(out);
            } else if (a->out.empty() && !a->propose) {
              std::cout << content;
            }
            return kExitOk;
          }};
}

}  // namespace skippy::cli
