// Shared plumbing for the skippy-model-package subcommands: each command
// registers its flags and returns the function that runs it.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>
#include <functional>
#include <sstream>
#include <nlohmann/json.hpp>
#include <string>

#include "skippy/error.h"
#include "skippy/manifest_v2.h"
#include "skippy/package.h"
#include "skippy/package_signature.h"
#include "skippy/source.h"
#include "skippy/stage.h"
#include "skippy/verify.h"
#include "util/text.h"

namespace skippy::cli {

using Runner = std::function<int()>;

// A registered subcommand and the function that runs it once parsed.
struct Command {
  CLI::App* app;
  Runner run;
};

// Exit codes (docs/CLI.md): 0 success, 1 invalid input / failed check, 2 usage.
inline constexpr int kExitOk = 0;
inline constexpr int kExitInvalid = 1;
inline constexpr int kExitUsage = 2;
// The one mapping from error kinds to exit codes: usage errors exit 2, every
// other failure (invalid input, a failed check, not found, offline, refused,
// integrity, transport, I/O) exits 1.
int exit_code_for(ErrorKind kind) noexcept;

// Reports a failure: "error: <message>" on stderr and, when the command was
// run with --json, {"error": {"kind": "<kind>", "message": "<message>"}} on
// stdout. Returns the exit code.
int report_error(ErrorKind kind, const std::string& message, bool json);

// Prints one JSON document on stdout.
void print_json(const nlohmann::json& doc);
// Human-readable byte counts: "5.17 MiB"; a count and its noun: "1 stage".
using detail::counted;
using detail::human_bytes;
// Rows of cells as an aligned table, each row indented by two spaces and
// ending in a newline: columns two spaces apart, padded to their widest cell,
// left-aligned except those whose index is in `right_aligned` (sizes, counts).
std::string aligned_rows(const std::vector<std::vector<std::string>>& rows, const std::vector<size_t>& right_aligned = {});
// True when stderr is a terminal (progress bars only then).
bool stderr_is_tty();

// For an hf:// package, {"revision_kind", "moving", "pin": "hf://ns/repo@<commit>"}
// (moving: a branch, or a name no remote could classify; production should
// pin the commit); null for a local directory.
nlohmann::json pin_json(const OpenedPlace& pkg);
// The keys a consuming command's JSON names a package by: package and
// manifest_sha256, and, for a package with an id, schema_version,
// package_id and commit.
nlohmann::json package_identity_json(const OpenedCatalog& pkg);
// A package's id as every command reports it: the root's package_id, or,
// for a schema without one (schema 1), "sha256:" and the manifest's
// SHA-256 (what caches key the package by). With schema_version: the
// {"schema_version", "package_id"} pair every consuming command's JSON has.
std::string reported_package_id(const OpenedPlace& place, const PackageIdentity& id);
nlohmann::json package_id_json(const OpenedPlace& place, const PackageIdentity& id);
// open_package for the commands, with default_sources() (the Hugging Face
// cache, then the Hub) unless `sources` is given: a download progress
// display (terminal only), and the package's warnings on stderr.
// `with_signature`: bring an hf:// package's signature sidecar (and the
// validation.json it covers) even without trusted signers (inspect).
OpenedPackage open_for_cli(const std::string& ref, bool refresh_revision = false,
                           const std::optional<Sources>& sources = std::nullopt, bool with_signature = false);

// --trust-signer CERT (repeatable) on a command that opens packages: owner
// certificates a package must be signed by, added by open_for_cli to
// SKIPPY_TRUSTED_SIGNERS's (skippy/package_signature.h).
void add_trust_signer_option(CLI::App* cmd);
// Every trusted signer of this run: SKIPPY_TRUSTED_SIGNERS, then the flags.
std::vector<std::filesystem::path> trusted_signers_for_cli();

// --runtime-abi X.Y.Z on a command that hands a package to a runtime
// (select, fetch, materialize): the runtime's ABI, else $SKIPPY_RUNTIME_ABI.
// check_runtime_abi_for_cli(pkg) then applies the runtime's own admission
// rule (skippy/abi.h: check_runtime_abi) when either is set, and does
// nothing when neither is. Call it right after opening, before any payload.
void add_runtime_abi_option(CLI::App* cmd);
// --native-abi-version X.Y.Z on a command that writes a schema 2 root
// (write-package --schema 2, convert-package --to 2, restamp-package), with
// its rule and default (skippy/abi.h: kDefaultNativeAbiV2) in its help.
// `schema_note` says when it applies ("" when always). Returns the option.
CLI::Option* add_native_abi_option(CLI::App* cmd, std::string& target, const std::string& schema_note);
void check_runtime_abi_for_cli(const OpenedPackage& pkg);
// What a writer (write-package, convert-package) says on stderr about the
// package it wrote in `package_dir`, once each: the mesh-llm runtime lines
// that refuse it for what it holds (skippy/abi.h
// runtime_lines_warning; `content_only`: only when one refuses a root field,
// not for the schema alone) and, for `architecture`, the rosters whose nodes
// do not split it. Returns them.
// The general.architecture of the package in `dir` (its carrier's); "" when
// it cannot be read.
std::string package_architecture(const std::filesystem::path& dir);
std::vector<std::string> warn_runtime_lines(const std::filesystem::path& package_dir, std::string_view architecture,
                                            bool content_only);
// --generation-defaults FILE (write-package --schema 2, convert-package --to
// 2): the option, and the file read as generation.request_defaults
// (parse_request_defaults_v2); nullopt for "".
CLI::Option* add_generation_defaults_option(CLI::App* cmd, std::string& target, const std::string& schema_note);
std::optional<V2RequestDefaults> read_generation_defaults(const std::string& path);
// --publisher-metadata FILE (repeatable; the same commands): a publisher
// file of the source repository, its role from its name.
CLI::Option* add_publisher_metadata_option(CLI::App* cmd, std::vector<std::string>& target, const std::string& schema_note);

// A numeric option's check: the value must parse as T and lie in [lo, hi];
// otherwise "--flag: must be a number from lo to hi, not "two"" (CLI11's
// Range alone calls a word "not in range").
template <typename T>
CLI::Validator number_in(T lo, T hi) {
  auto text = [](T v) {
    std::ostringstream o;
    o << v;
    return o.str();
  };
  const std::string range = text(lo) + " to " + text(hi);
  return CLI::Validator(
      [lo, hi, range](std::string& value) -> std::string {
        T v{};
        if (!CLI::detail::lexical_cast(value, v)) return "must be a number from " + range + ", not \"" + value + "\"";
        if (v < lo || v > hi) return "must be from " + range + ", not " + value;
        return {};
      },
      "NUMBER in " + range);
}

// Every path flag and path argument goes through this: the path as the user
// meant it (skippy::clean_path: "pkg/", "pkg/." and "x/../pkg" are "pkg"),
// so a trailing slash or a "."/".." component works in every command. A
// value with "://" (an hf:// reference) is left alone. Returns `opt`.
CLI::Option* path_option(CLI::Option* opt);

// A --*-timeout in seconds (fractions allowed), rounded to milliseconds.
std::chrono::milliseconds seconds_to_ms(double s);
// A size or rate flag's value, read by the one size parser (parse_byte_size:
// 500M, 1.5GiB, 8GB, 123456; rates in bytes per second): every size flag takes
// the same forms. A usage error names the flag; `min` is the least accepted.
uint64_t size_flag(const std::string& flag, const std::string& text, uint64_t min = 0);

Command register_inspect(CLI::App& app);
Command register_write_package(CLI::App& app);
Command register_validate_package(CLI::App& app);
Command register_select(CLI::App& app);
Command register_plan(CLI::App& app);
Command register_verify(CLI::App& app);
Command register_materialize(CLI::App& app);
Command register_fetch(CLI::App& app);
Command register_policy(CLI::App& app);
Command register_speculative(CLI::App& app);
Command register_publish(CLI::App& app);
Command register_identity(CLI::App& app);
Command register_serve_artifacts(CLI::App& app);
Command register_sign_package(CLI::App& app);
Command register_convert_package(CLI::App& app);
Command register_restamp_package(CLI::App& app);
Command register_catalog_entry(CLI::App& app);
// The JSON of a signature just made (sign-package, write-package --sign, publish --sign).
nlohmann::json signature_result_json(const std::filesystem::path& dir, const PackageSignature& s);

// A report's problems on stderr, two spaces in: the first few in full, then
// how many more (a wrong source or a damaged package can have one per tensor,
// thousands on a real model); --json always lists every one.
void print_problems(const std::vector<std::string>& problems);

// verify's report, for either schema: with `json`, `identity` (the
// package's own keys) plus verified, artifacts, hashed_bytes, cache_hits,
// cache, parts, problems, warnings, notes and the range; else a line on
// stdout (`of` names the package, may be empty), the notes, and the problems
// against `declared_by` ("manifest", "catalog") on stderr. Returns the exit code.
int print_verify_report(const VerifyReport& r, bool json, nlohmann::json identity, nlohmann::json parts, bool cache,
                        const std::vector<std::string>& warnings, const std::vector<std::string>& notes,
                        const std::optional<LayerRange>& range, const std::string& of, const std::string& declared_by);

}  // namespace skippy::cli
