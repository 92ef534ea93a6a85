#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "cli.h"
#include "progress.h"
#include "skippy/abi.h"
#include "format/json_output.h"
#include "util/env.h"
#include "util/file.h"
#include "skippy/source.h"
#include "skippy/hub.h"
#include "skippy/package.h"
#include "util/byte_size.h"
#include "util/text.h"

namespace skippy::cli {

void print_json(const nlohmann::json& doc) { std::cout << json_output(doc, 2) << "\n"; }

std::string aligned_rows(const std::vector<std::vector<std::string>>& rows, const std::vector<size_t>& right_aligned) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line = " ";
    for (size_t c = 0; c < row.size(); ++c) {
      const std::string pad(width[c] - row[c].size(), ' ');
      const bool right = std::find(right_aligned.begin(), right_aligned.end(), c) != right_aligned.end();
      line += " " + (right ? pad + row[c] : row[c] + (c + 1 < row.size() ? pad : std::string())) + " ";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

bool stderr_is_tty() { return ::isatty(2) == 1; }

int exit_code_for(ErrorKind kind) noexcept { return kind == ErrorKind::kUsage ? kExitUsage : kExitInvalid; }

int report_error(ErrorKind kind, const std::string& message, bool json) {
  std::cerr << "error: " << message << "\n";
  if (json) print_json({{"error", {{"kind", std::string(error_kind_name(kind))}, {"message", message}}}});
  return exit_code_for(kind);
}

namespace {
std::vector<std::string>& trust_signer_flags() {
  static std::vector<std::string> flags;  // one command runs per process
  return flags;
}
}  // namespace

void add_trust_signer_option(CLI::App* cmd) {
  path_option(cmd->add_option("--trust-signer", trust_signer_flags(),
                  "An owner certificate (owner.crt) the package must be signed by (repeatable; adds to "
                  "SKIPPY_TRUSTED_SIGNERS): an unsigned package, a signature that does not verify or another "
                  "signer is refused"));
}

std::vector<std::filesystem::path> trusted_signers_for_cli() {
  auto out = env::trusted_signers();
  for (const auto& f : trust_signer_flags()) out.emplace_back(f);
  return out;
}

namespace {
std::optional<std::string>& runtime_abi_flag() {
  static std::optional<std::string> flag;  // one command runs per process
  return flag;
}
}  // namespace

void add_runtime_abi_option(CLI::App* cmd) {
  cmd->add_option("--runtime-abi", runtime_abi_flag(),
                  "The runtime the package is for, refused unless it would admit it: MAJOR.MINOR.PATCH[:RULE], "
                  "schema 2 judged by RULE, exact (the default: mesh-llm upstream's and its release's rule) or "
                  "provenance (its fork's: the declared ABI is never refused), schema 1 by its own rule (same major, "
                  "minor not newer); or a runtime line, upstream, fork or release-0.76.1, which brings its ABI, its "
                  "rule and the root fields it accepts (inspect lists them). Default: $SKIPPY_RUNTIME_ABI, else no "
                  "check");
}

CLI::Option* add_native_abi_option(CLI::App* cmd, std::string& target, const std::string& schema_note) {
  return cmd->add_option("--native-abi-version", target,
                         schema_note + "The schema 2 root's native_abi_version: mesh-llm upstream (822f7e91) and its "
                         "release admit the package only at exactly this skippy ABI, its fork (d39f791d) records it as "
                         "provenance (default " + format_abi_version(kDefaultNativeAbiV2) +
                         ", the fork's ABI; restamp-package changes it later)");
}

CLI::Option* add_generation_defaults_option(CLI::App* cmd, std::string& target, const std::string& schema_note) {
  return path_option(cmd->add_option(
      "--generation-defaults", target,
      schema_note + "A JSON file of generation.request_defaults (publisher sampling profiles: selection, profiles with "
                    "their provenance), checked by the reader's rules and written into the root"));
}

CLI::Option* add_publisher_metadata_option(CLI::App* cmd, std::vector<std::string>& target, const std::string& schema_note) {
  return path_option(cmd->add_option(
      "--publisher-metadata", target,
      schema_note + "A publisher file of the source repository at its revision (repeatable): config.json, "
                    "generation_config.json, tokenizer_config.json, chat_template.jinja or hf_quant_config.json (the "
                    "role is the name), copied to metadata/ as publisher_metadata; the compute and KV-cache dtypes "
                    "it declares become publisher_defaults"));
}

std::optional<V2RequestDefaults> read_generation_defaults(const std::string& path) {
  if (path.empty()) return std::nullopt;
  return parse_request_defaults_v2(read_small_file(path, kManifestMaxBytes), path);
}

void check_runtime_abi_for_cli(const OpenedPackage& pkg) {
  const auto runtime = runtime_abi_from(runtime_abi_flag());
  if (!runtime) return;
  check_runtime_abi(pkg.identity(), *runtime, pkg.ref);
}

std::string package_architecture(const std::filesystem::path& dir) {
  try {
    std::string arch = open_local_package(dir).catalog(CatalogNeed::artifacts()).catalog.architecture;
    // Schema 1's catalog of artifacts reads no header: its metadata fragment says it.
    if (arch.empty() && std::filesystem::is_regular_file(dir / std::string(kMetadataPath))) {
      arch = std::string(GgufFile::open(dir / std::string(kMetadataPath)).architecture());
    }
    return arch;
  } catch (const Error&) {
    return "";
  }
}

std::vector<std::string> warn_runtime_lines(const std::filesystem::path& package_dir, std::string_view architecture,
                                            bool content_only) {
  std::vector<std::string> out;
  const auto root = package_dir / std::string(kManifestFileName);
  const auto identity = open_package_reader(read_small_file(root, kManifestMaxBytes), root.string())->identity();
  if (!(content_only && identity.schema_version != 2)) {
    if (auto w = runtime_lines_warning(identity)) out.push_back(std::move(*w));
  }
  if (auto w = split_roster_warning(architecture)) out.push_back(std::move(*w));
  for (const auto& w : out) std::cerr << "warning: " << w << "\n";
  return out;
}

namespace {
// open_for_cli's options and sources.
struct CliOpen {
  OpenOptions options;
  Sources sources;
};
CliOpen cli_open(bool refresh_revision, const std::optional<Sources>& sources, bool with_signature) {
  CliOpen o;
  o.options.refresh_revision = refresh_revision;
  o.options.with_signature = with_signature;
  auto progress = std::make_shared<Progress>("download");
  o.options.on_progress = [progress](uint64_t done, uint64_t total) { progress->update(done, total); };
  o.sources = sources ? *sources : default_sources();
  o.sources.trusted_signers = trusted_signers_for_cli();
  return o;
}
void tell_opened(const std::string& ref, const std::optional<PackageSignature>& signature,
                 const std::vector<std::string>& warnings) {
  if (signature) {
    std::cerr << "note: " << ref << " is signed by trusted owner " << signature->owner_id << " (signed at "
              << detail::utc_iso8601(signature->signed_at_unix_secs) << ")\n";
  }
  for (const auto& w : warnings) std::cerr << "warning: " << w << "\n";
}
}  // namespace

OpenedPackage open_for_cli(const std::string& ref, bool refresh_revision, const std::optional<Sources>& sources,
                           bool with_signature) {
  const CliOpen o = cli_open(refresh_revision, sources, with_signature);
  auto pkg = open_package(ref, o.sources, o.options);
  tell_opened(ref, pkg.signature, pkg.warnings);
  return pkg;
}

nlohmann::json pin_json(const std::string& ref, const std::optional<std::string>& commit, const std::string& revision_kind) {
  if (!commit || !is_hf_ref(ref)) return nullptr;
  const bool moving = revision_kind == "branch" || revision_kind == "ref";
  return {{"revision_kind", revision_kind},
          {"moving", moving},
          {"pin", "hf://" + parse_hf_ref(ref).repo_id + "@" + *commit}};
}
nlohmann::json pin_json(const OpenedPlace& pkg) { return pin_json(pkg.ref, pkg.commit, pkg.revision_kind); }

std::string reported_package_id(const OpenedPlace& place, const PackageIdentity& id) {
  return id.package_id.empty() ? "sha256:" + place.manifest_sha256 : id.package_id;
}

nlohmann::json package_id_json(const OpenedPlace& place, const PackageIdentity& id) {
  return {{"schema_version", id.schema_version}, {"package_id", reported_package_id(place, id)}};
}

nlohmann::json package_identity_json(const OpenedCatalog& pkg) {
  nlohmann::json j = {{"package", pkg.ref}, {"manifest_sha256", pkg.manifest_sha256}};
  j.update(package_id_json(pkg, pkg.catalog));
  if (!pkg.catalog.package_id.empty()) j["commit"] = pkg.commit ? nlohmann::json(*pkg.commit) : nlohmann::json();
  return j;
}

CLI::Option* path_option(CLI::Option* opt) {
  return opt->transform(CLI::Validator(
      [](std::string& value) -> std::string {
        if (!value.empty() && value.find("://") == std::string::npos) value = clean_path(value).string();
        return {};
      },
      "", "path"));
}

std::chrono::milliseconds seconds_to_ms(double s) {
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(s * 1000.0)));
}

void print_problems(const std::vector<std::string>& problems) {
  if (!problems.empty()) std::cerr << detail::problem_lines(problems, "--json").substr(1) << "\n";
}

uint64_t size_flag(const std::string& flag, const std::string& text, uint64_t min) {
  uint64_t v = 0;
  try {
    v = parse_byte_size(text);
  } catch (const Error& e) {
    throw Error(ErrorKind::kUsage, flag + ": " + e.what());
  }
  if (v < min) throw Error(ErrorKind::kUsage, flag + " " + text + ": must be at least " + std::to_string(min) + " bytes");
  return v;
}

int print_verify_report(const VerifyReport& r, bool json, nlohmann::json identity, nlohmann::json parts, bool cache,
                        const std::vector<std::string>& warnings, const std::vector<std::string>& notes,
                        const std::optional<LayerRange>& range, const std::string& of, const std::string& declared_by) {
  if (json) {
    nlohmann::json doc = std::move(identity);
    doc.update({{"verified", r.verified},
                {"artifacts", r.artifacts},
                {"hashed_bytes", r.hashed_bytes},
                {"cache_hits", r.cache_hits},
                {"cache", cache},
                {"parts", std::move(parts)},
                {"problems", r.problems},
                {"warnings", warnings},
                {"notes", notes}});
    if (range) {
      doc["layer_start"] = range->start;
      doc["layer_end"] = range->end;
    }
    print_json(doc);
  } else {
    for (const auto& n : notes) std::cerr << "note: " << n << "\n";
    if (r.verified) {
      std::cout << "verified: " << (of.empty() ? counted(r.artifacts, "artifact") : std::to_string(r.artifacts)) << (of.empty() ? std::string() : " of " + of)
                << (range ? " for layers " + format_layer_range(*range) : std::string()) << ", "
                << human_bytes(r.hashed_bytes) << " hashed, " << r.cache_hits << " from the cache\n";
    }
  }
  if (!r.verified) {
    std::cerr << "not verified: " << r.problems.size() << " of " << counted(r.artifacts, "artifact")
              << (r.problems.size() == 1 ? " does" : " do") << " not match the "
              << declared_by << "\n";
    print_problems(r.problems);
  }
  return r.verified ? kExitOk : kExitInvalid;
}

}  // namespace skippy::cli
