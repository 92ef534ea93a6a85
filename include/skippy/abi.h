// The skippy runtime ABI a package's fragments target (spec: "skippy_abi_version
// MUST describe the llama/skippy ABI used to write the fragments";
// "Compatibility": runtimes MUST reject incompatible ABI versions).
//
// It is the ABI of mesh-llm's skippy runtime, the one that loads stages on a
// mesh node, not this tool's version: the writer declares it, the consumer
// checks packages against it, and both read it from here.
//
// WHEN THE SKIPPY RUNTIME'S ABI MOVES, change kSkippyRuntimeAbi below (and
// only that): a new minor that still loads these fragments raises the
// minor; a layout this writer no longer produces compatibly raises the
// major. Packages declaring another major, or a newer minor, are refused.
//
// Thread-safety: constants and pure functions, safe from any thread.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace skippy {

struct PackageIdentity;  // skippy/package_catalog.h

struct AbiVersion {
  uint32_t major = 0;
  uint32_t minor = 0;
  uint32_t patch = 0;
  auto operator<=>(const AbiVersion&) const = default;
};

// How a package's runtime ABI is judged (check_runtime_abi): schema 1's
// rule (the runtime's major, a minor no newer than the runtime's); for
// schema 2, exactly the runtime's version (mesh-llm upstream and its
// release) or provenance only, never refused for it (its fork's newest
// loader): the runtime lines below say which line does which.
enum class AbiRule { kSameMajorNoNewerMinor, kExact, kProvenance };

struct RuntimeLine;  // below

// The runtime a command checks packages against: its ABI, the rule it
// applies to a schema 2 root's native_abi_version, and, when it was named
// by a runtime line, that line (whose root-field rules apply too).
struct RuntimeAbi {
  AbiVersion version;
  AbiRule rule = AbiRule::kExact;
  const RuntimeLine* line = nullptr;
};

// The skippy runtime ABI at the revision of mesh-llm this tool speaks
// (its writer declares "0.1.39"; its runtime is ABI 0.1). Written into every
// package; the ABI this consumer accepts is its major and minor.
inline constexpr AbiVersion kSkippyRuntimeAbi{0, 1, 39};
// The name the rest of the code uses for "this runtime's ABI".
inline constexpr AbiVersion kRuntimeAbiVersion = kSkippyRuntimeAbi;

// "MAJOR.MINOR.PATCH": three decimal numbers, each fitting uint32, no sign,
// no leading zeros (except "0"), nothing else. nullopt otherwise.
std::optional<AbiVersion> parse_abi_version(std::string_view text) noexcept;
std::string format_abi_version(AbiVersion v);
// The reference runtime's rule: loadable when the package has the runtime's
// major and a minor no newer than the runtime's; the patch must parse and is
// ignored.
bool abi_compatible(AbiVersion package, AbiVersion runtime) noexcept;

// ------------------------------------------------ package schema 2's ABI
//
// Two rules are in use (the runtime lines below). Exact:
// mesh-llm upstream's loader (identity_from_package_v2,
// crates/skippy-api/src/package.rs@822f7e91) and its release admit a
// schema 2 package only when the root's native_abi_version is exactly their
// own skippy_ffi ABI string ("MAJOR.MINOR.PATCH" of ABI_VERSION_MAJOR,
// _MINOR, _PATCH): "package-v2 native ABI X differs from runtime ABI Y".
// Provenance: the fork's newest loader (package.rs@d39f791d) records the
// declared ABI as who wrote the package and never refuses it. So a schema 2
// package for an exact-rule runtime is written for one ABI; restamp-package
// moves an existing one to another (only the root changes).
//
// The ABI write-package --schema 2 and convert-package --to 2 declare unless
// told otherwise: the fork's (skippy_ffi 0.1.64, its workspace at 0.77.0;
// upstream's roster is at 0.1.57, its release 0.76.1 at 0.1.41).
inline constexpr AbiVersion kDefaultNativeAbiV2{0, 1, 64};

// The native_abi_version a writer puts in a schema 2 root: `requested`
// ("MAJOR.MINOR.PATCH", checked), or kDefaultNativeAbiV2 when empty. Throws
// Error(kUsage) naming --native-abi-version when malformed.
std::string native_abi_version_to_write(std::string_view requested);

// The runtime's own admission rule for a package of `schema_version`
// declaring `package_abi`, at a runtime of ABI `runtime` judging schema 2
// by `rule`:
//   schema 2, kExact: the declared string equals format_abi_version(runtime);
//   schema 2, kProvenance: always (the declared ABI is provenance);
//   schema 1: it parses and abi_compatible(declared, runtime).
// nullopt when admitted, else why not, naming both versions and the rule.
std::optional<std::string> runtime_abi_refusal(uint32_t schema_version, std::string_view package_abi,
                                               AbiVersion runtime, AbiRule rule = AbiRule::kExact);
// The same as a check: throws Error(kInvalidInput) "<package_ref>: <why>;
// <the fix>" where the fix, for schema 2, is the restamp-package command to
// run (on `package_ref` when it is a local directory, else on a local copy
// fetched from it) and, for schema 1, writing the package again for that
// runtime.
void check_runtime_abi(uint32_t schema_version, std::string_view package_abi, AbiVersion runtime,
                       std::string_view package_ref, AbiRule rule = AbiRule::kExact);
// The runtime a command checks packages against: `flag` when given
// (--runtime-abi), else $SKIPPY_RUNTIME_ABI (skippy/env.h), else nullopt (no
// check). Either takes
//   X.Y.Z             that ABI, schema 2 by the exact rule;
//   X.Y.Z:exact       the same;
//   X.Y.Z:provenance  that ABI, a schema 2 root's ABI never refused;
//   LINE              a runtime line's ABI and rule, and its root-field
//                     rules ("upstream", "fork", "release-0.76.1":
//                     the runtime lines below).
// Throws Error(kUsage) naming the flag or variable when malformed.
std::optional<RuntimeAbi> runtime_abi_from(const std::optional<std::string>& flag);

// ----------------------------------------------------------- the runtime lines
// The reference runtime lines a package meets on a mesh, in one table: which
// of them admit a package, and why not.
//
// mesh-llm's runtime is not one program: its upstream repository, the fork
// its newest code lives in, and its last release disagree on what a package
// schema 2 root may hold and on what its native_abi_version means. Each row
// here is one line as its sources show it at one commit (the commits and
// files are in the row, so a row can be checked and moved):
//
//   - the ABI rule: kExact (the loader refuses a package whose
//     native_abi_version is not exactly its own skippy ABI) or kProvenance
//     (the declared ABI records who wrote the package; schema, carrier and
//     artifact checks decide, and the native library's ABI is checked when
//     the runtime loads);
//   - the optional root fields its format crate accepts (serde
//     deny_unknown_fields refuses any other);
//   - the split-certification roster its nodes consult before splitting an
//     architecture (SplitRoster), when it has one.
//
// Every line serves schema 2 only ("split serving requires package schema
// 2"). When a line moves, change its row (and the tests that pin it).
//
// Thread-safety: constants and pure functions; safe from any thread.

// The architectures a line's nodes split without an explicit override
// (their bundled split-certified.json), each pinned to the native recipe it
// was certified with: a node whose build differs from the recipe refuses
// every split.
struct SplitRoster {
  std::string_view source;  // "repo path@commit" of the roster file
  std::string_view llama_upstream_sha;
  std::string_view skippy_abi;
  std::string_view patch_queue_sha256;
  std::span<const std::string_view> architectures;  // sorted
  bool certifies(std::string_view architecture) const;
};

struct RuntimeLine {
  std::string_view id;     // what --runtime-abi takes: "upstream", "fork", "release-0.76.1"
  std::string_view label;  // for people: "upstream 822f7e91"
  std::string_view repo;   // "Mesh-LLM/mesh-llm"
  // The runtime's own skippy ABI, and where it was read ("confirmed" false:
  // inferred, not seen in the line's own ffi constants).
  std::string_view abi;
  std::string_view abi_source;
  bool abi_confirmed = true;
  // How the loader judges a schema 2 root's native_abi_version, and where.
  AbiRule abi_rule = AbiRule::kExact;
  std::string_view abi_rule_source;
  // The optional root fields its format crate accepts.
  bool accepts_publisher_fields = false;  // publisher_metadata, publisher_defaults
  bool accepts_request_defaults = false;  // generation.request_defaults
  std::string_view fields_source;
  const SplitRoster* roster = nullptr;  // null: none known
};

// The table, in a fixed order: upstream, fork, release.
std::span<const RuntimeLine> runtime_lines();
// The row whose id is `id`; null when none.
const RuntimeLine* find_runtime_line(std::string_view id);

// One line's word on one package.
struct RuntimeLineVerdict {
  const RuntimeLine* line = nullptr;
  // Why the line refuses the package ("refuses generation.request_defaults
  // (its format crate denies unknown fields: ...)"); empty: admitted.
  std::vector<std::string> refusals;
  // Whether the first refusal is the ABI's (exact rule, another version).
  bool abi_refused = false;
  // Whether its nodes split the package's architecture (its roster lists
  // it); nullopt: the line has no roster or the architecture is unknown.
  std::optional<bool> splits;
  bool admits() const { return refusals.empty(); }
};

// What `line` says of a package of identity `id` and architecture
// `architecture` ("" when unknown): the schema, the ABI by the line's rule,
// the root fields, the roster.
RuntimeLineVerdict judge_runtime_line(const RuntimeLine& line, const PackageIdentity& id, std::string_view architecture);
// Every line's verdict, in table order.
std::vector<RuntimeLineVerdict> judge_runtime_lines(const PackageIdentity& id, std::string_view architecture);

// [{"line","label","repo","abi","abi_confirmed","abi_rule","abi_rule_source",
//   "fields_source","admits","refusals":[..],"splits","roster_source"}]
nlohmann::json runtime_lines_json(const std::vector<RuntimeLineVerdict>& verdicts);
// One line for people: "fork d39f791d (ABI 0.1.64, provenance): admits; splits llama".
std::string runtime_line_text(const RuntimeLineVerdict& verdict, std::string_view architecture);

// The one warning a writer prints about the package it wrote, nullopt when
// none: the lines that refuse it for what it holds (its schema, its root
// fields), each with its reasons and ABI refusals beside them. An ABI
// refusal alone is no warning (restamp-package moves a package between
// ABIs); a writer says that in its docs.
std::optional<std::string> runtime_lines_warning(const PackageIdentity& id);
// The warning write-package and plan print when a line's nodes refuse to
// split `architecture` (its roster does not list it), nullopt when every
// line with a roster lists it.
std::optional<std::string> split_roster_warning(std::string_view architecture);

// "exact" or "provenance" (the schema 1 rule: "same-major-no-newer-minor").
std::string_view abi_rule_name(AbiRule rule);

}  // namespace skippy
