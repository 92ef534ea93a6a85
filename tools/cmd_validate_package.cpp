#include <iostream>

#include "cli.h"
#include "skippy/package_layout.h"
#include "progress.h"
#include "skippy/source.h"
#include "skippy/hub.h"
#include "util/file.h"
#include "skippy/manifest.h"
#include "skippy/package_generation.h"
#include "skippy/package_signature.h"
#include "skippy/package_validator.h"
#include "skippy/package.h"
#include "skippy/abi.h"
#include "util/sha256.h"
#include "util/parallel.h"

namespace skippy::cli {

// validate-package's flags as parsed.
struct ValidateArgs {
  std::string source, package;
  bool json = false, write_result = false;
  unsigned threads = 0;
};

// Runs validate-package with its parsed flags; the exit code.
int run_validate_package(const ValidateArgs& a) {
  ValidateOptions o;
  o.threads = detail::worker_threads(a.threads);
  o.generation_model_rules = speculative_model_problems;  // one rule with `speculative`
  std::filesystem::path source = a.source;
  std::error_code ec;
  // The two arguments the wrong way round (the package first, the model second).
  if (std::filesystem::is_directory(source, ec) &&
      std::filesystem::exists(source / std::string(kManifestFileName), ec) &&
      !std::filesystem::is_directory(a.package, ec)) {
    throw Error(ErrorKind::kUsage, "validate-package takes the model first, then the package: " + a.source +
                                       " is a package directory and " + a.package +
                                       " is not; did you mean: skippy-model-package validate-package " +
                                       a.package + " " + a.source + "?");
  }
  if (!std::filesystem::exists(source, ec) && looks_like_model_coordinate(a.source)) {
    Progress download("download");
    source = open_model_source({a.source, "", "", ""}, default_sources(),
                               [&](uint64_t d, uint64_t t) { download.update(d, t); })
                 .local;
  }
  Progress progress("validate-package");
  o.on_progress = [&](uint64_t d, uint64_t t) { progress.update(d, t); };
  // The manifest's bytes before validation: validation.json names the file it judged.
  const std::filesystem::path manifest_path = std::filesystem::path(a.package) / std::string(kManifestFileName);
  std::string manifest_sha256;
  if (a.write_result) {
    refuse_hf_cache_snapshot(a.package, "validate-package --write-result");  // before hours of hashing
    manifest_sha256 = sha256_hex(read_small_file(manifest_path, kManifestMaxBytes));
  }
  const auto r = validate_package(source, a.package, o);
  for (const auto& w : r.warnings) std::cerr << "warning: " << w << "\n";
  nlohmann::json written;  // null unless --write-result
  if (a.write_result) {
    if (sha256_hex(read_small_file(manifest_path, kManifestMaxBytes)) != manifest_sha256) {
      throw_integrity(manifest_path.string() + ": changed while it was validated; validation.json not written");
    }
    write_validation_result(a.package, r, manifest_sha256, "validate-package --write-result");
    written = (std::filesystem::path(a.package) / std::string(kValidationFileName)).string();
    std::cerr << "wrote " << written.get<std::string>() << " (result " << (r.valid ? "valid" : "invalid") << ")\n";
    if (std::filesystem::exists(std::filesystem::path(a.package) / std::string(kSignatureFileName))) {
      std::cerr << "warning: " << a.package << " is signed; the signature does not cover this validation.json "
                << "(consumers with trusted signers refuse a changed one): sign it again with sign-package "
                << a.package << " --owner DIR\n";
    }
  }
  // Which of mesh-llm's runtime lines admit it: null when its root cannot be read (the problems say why).
  nlohmann::json lines;
  std::vector<std::string> line_texts;
  try {
    const auto opened = open_local_package(a.package);
    const auto cat = opened.catalog(CatalogNeed::artifacts());
    const auto verdicts = judge_runtime_lines(opened.identity(), cat.catalog.architecture);
    lines = runtime_lines_json(verdicts);
    for (const auto& v : verdicts) line_texts.push_back(runtime_line_text(v, cat.catalog.architecture));
  } catch (const Error&) {
  }
  if (a.json) {
    print_json({{"valid", r.valid},
                {"runtime_lines", lines},
                {"threads", o.threads},
                {"validation_json", written},
                {"problems", r.problems},
                {"wrong_source", r.wrong_source ? nlohmann::json(*r.wrong_source) : nlohmann::json(nullptr)},
                {"warnings", r.warnings},
                {"artifacts_checked", r.artifacts_checked},
                {"tensors_checked", r.tensors_checked},
                {"hashed_bytes", r.bytes_hashed},
                {"schema_version", r.schema_version},
                {"package_id", r.package_id.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.package_id)}});
  } else if (r.valid) {
    std::cout << "valid: " << r.artifacts_checked << " artifacts, " << r.tensors_checked
              << " tensors, " << human_bytes(r.bytes_hashed) << " hashed\n";
    for (const auto& l : line_texts) std::cout << "  runtime line: " << l << "\n";
  } else {
    std::cerr << "invalid: " << r.problems.size() << " problem(s)\n";
    print_problems(r.problems);
  }
  return r.valid ? kExitOk : kExitInvalid;
}

// validate-package's --help after its options: examples, then what it does.
constexpr const char* kValidatePackageHelp =
    "Examples:\n  skippy-model-package validate-package ./model.gguf model-package/ --json\n"
    "  skippy-model-package validate-package org/Model-GGUF:Q4_K_M model-package/\n"
    "A Hub source (ORG/REPO:DIST, as write-package takes it) is resolved through the Hugging Face cache\n"
    "(downloaded and verified when it is not there).\n"
    "Recomputes SHA-256 and size of every source shard and artifact and checks every tensor's placement,\n"
    "type, shape and bytes. Exit 1 lists every problem found; when the source is not the file the package\n"
    "was written from (its SHA-256 is not source_model.sha256), that comes first.\n"
    "A schema 2 package gets the reference's certification: every source tensor exactly once (type, dims,\n"
    "bytes), every artifact's size and SHA-256 (carrier and sidecars included), the source files' digests.\n"
    "--write-result leaves validation.json in the package, valid or not: the tool and version, the\n"
    "manifest's SHA-256, each source file's name and SHA-256, the checks run, the result, the problems and\n"
    "the time (written atomically; publish uploads it; a signature made after it covers it):\n"
    "  skippy-model-package validate-package ./model.gguf model-package/ --write-result\n"
    "  skippy-model-package sign-package model-package/ --owner ~/.skippy/owner   # sign after, to cover it";

Command register_validate_package(CLI::App& app) {
  auto* cmd = app.add_subcommand("validate-package", "Check a package against the model it was written from");
  cmd->footer(kValidatePackageHelp);

  auto a = std::make_shared<ValidateArgs>();
  path_option(cmd->add_option("source", a->source, "Source .gguf (any shard of a split model), or ORG/REPO:DIST"))->required();
  path_option(cmd->add_option("package", a->package, "Package directory (either schema)"))->required();
  cmd->add_option("--threads", a->threads, "Worker threads (default: one per core, at most 16)")->check(number_in(1u, 64u));
  cmd->add_flag("--write-result", a->write_result,
                "Leave validation.json (the machine-readable result, bound to the manifest's SHA-256) in the package");
  cmd->add_flag("--json", a->json, "Print one JSON document on stdout");
  return {cmd, [a]() { return run_validate_package(*a); }};
}

}  // namespace skippy::cli
