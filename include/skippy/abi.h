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
#include <string>
#include <string_view>

namespace skippy {

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
// loader): skippy/runtime_lines.h has which line does which.
enum class AbiRule { kSameMajorNoNewerMinor, kExact, kProvenance };

struct RuntimeLine;  // skippy/runtime_lines.h

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
// Two rules are in use (skippy/runtime_lines.h has the lines). Exact:
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
//                     skippy/runtime_lines.h).
// Throws Error(kUsage) naming the flag or variable when malformed.
std::optional<RuntimeAbi> runtime_abi_from(const std::optional<std::string>& flag);

}  // namespace skippy
