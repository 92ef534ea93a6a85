// Helpers shared by the schema 1 manifest tests (manifest_parse_test.cpp,
// manifest_generation_test.cpp, manifest_serialize_test.cpp): the smallest
// valid manifest, the spec's own examples, and the refusal checks.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "skippy/manifest.h"

// The manifest tests live in this namespace (not in an anonymous one) so that
// they share these helpers and nothing else in the test binary sees them.
namespace skippy::manifest_tests {

using json = nlohmann::json;

inline constexpr std::string_view kOrigin = "model-package.json";

// 64 copies of `c`: a digest-shaped string.
std::string hex(char c);
// An artifact entry holding `tensors` tensors.
json artifact(const std::string& path, uint64_t tensors);
// Layer `index`'s entry, and entries for layers 0..count-1.
json layer(uint32_t index);
json layers(uint32_t count);
// The smallest valid manifest: `layer_count` layers, no optional fields.
json minimal(uint32_t layer_count = 3);

// The strict reading: every rule refused (generation included).
PackageManifest parse(const json& j);
// The manifest must be refused with a message "model-package.json: <needle>...".
void expect_refused_text(const std::string& text, const std::string& needle);
void expect_refused(const json& j, const std::string& needle);
// serialize_manifest must refuse `m` with a message containing `needle`.
void expect_serialize_refused(const PackageManifest& m, const std::string& needle);

// "Manifest Schema" minimal shape, verbatim but for the placeholders.
extern const char* const kSpecMinimalShape;
// "Speculative Decoding": proposers plus a composite strategy, verbatim.
extern const char* const kSpecProposersExample;

std::string replace_all(std::string s, const std::string& from, const std::string& to);
// The spec's minimal shape with its placeholders filled and, because the
// example lists only layer 0 of 94, every layer present.
json spec_example();
// A manifest using every generation field the spec names, plus unknown
// fields at every generation level (which must survive a round trip).
json full_generation_example();

// minimal(layer_count) with `sd` as generation.speculative_decoding.
json with_speculation(const json& sd, uint32_t layer_count = 48);
json mtp_proposer();
json cache_proposer();
json suffix_proposer();
inline const std::string kSd = "generation.speculative_decoding.";

}  // namespace skippy::manifest_tests
