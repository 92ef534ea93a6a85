// write-package's Hub sources: "org/repo:distribution" names the GGUF
// file(s) of one quantization in a model repository. They are resolved
// through the Hub's repository listing, brought into the Hugging Face cache
// (every shard of a split model) and described with the Hub's own answers:
// repo, commit, file paths, sizes and SHA-256s.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "skippy/hf_ref.h"
#include "skippy/package_writer.h"

namespace skippy {

struct HubModelSource {
  std::filesystem::path local;         // the first shard, in the cache's snapshot directory
  SourceProvenance provenance;         // model_id = the coordinate, revision = the commit
  std::vector<std::string> files;      // repo paths, shard order
  std::vector<std::string> downloaded; // the ones that were not cached
};

// The GGUF files of `distribution` among `paths`: names containing the tag
// (case-insensitive) bounded by '-', '.', '/' or the ends, not projectors
// (mmproj*). Exactly one model must match (one file, or every shard of one
// split model, returned in shard order); otherwise Error(kInvalidInput)
// lists what was found.
std::vector<std::string> match_distribution(const std::vector<std::string>& paths, const ModelCoordinate& coord);

// Resolves and fetches the coordinate's files (HubConfig::from_env()).
HubModelSource fetch_model_source(const ModelCoordinate& coord,
                                  const std::function<void(uint64_t, uint64_t)>& on_progress = {});

}  // namespace skippy
