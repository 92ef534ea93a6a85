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

}  // namespace skippy
