// The provenance of a model read from the Hub (ORG/REPO:DIST at a commit):
// what write-package records for a cached source (model_source_ref.cpp)
// and for a streamed one (hub/hub_stream.cpp) alike. Internal.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "skippy/source.h"
#include "skippy/package_writer.h"

namespace skippy::detail {

// `files`: the distribution's shards in order (the first is the primary);
// `expected_sha256`: the Hub's SHA-256 of each ("" when it declares none).
// No shard counts as verified yet.
SourceProvenance hub_source_provenance(const ModelCoordinate& coord, const std::string& commit,
                                       const std::vector<std::string>& files, std::vector<std::string> expected_sha256);

// The publisher files write-package --hub-publisher-metadata takes from the
// source repository's top level (the reference's roles), each at most
// kPublisherFileMaxBytes.
inline constexpr std::array<std::string_view, 5> kHubPublisherFiles = {
    "config.json", "generation_config.json", "tokenizer_config.json", "chat_template.jinja", "hf_quant_config.json"};
inline constexpr uint64_t kPublisherFileMaxBytes = uint64_t{16} << 20;

}  // namespace skippy::detail
