// The schema-independent half of materialize (skippy/materialize.h): a GGUF
// laid out by a GgufWriter whose tensors name (source file, offset) pieces,
// streamed into --out or into the stage cache (sidecar, flock, reuse rules).
// Both package schemas feed it: schema 1 from a StageView of its fragments
// (materialize.cpp), schema 2 from the catalog's locators
// (materialize_v2.cpp). Internal to the library.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "gguf/gguf_writer.h"
#include "skippy/materialize.h"

namespace skippy::materialize_detail {

// One materialization, described without its schema.
struct StageFileJob {
  std::string ref;                  // the package as the user named it (messages)
  std::filesystem::path boundary;   // the package directory: nothing is written inside
  std::string manifest_sha256;      // of model-package.json: the cache key and the sidecar
  std::string model_id;
  // The cache entry's range. nullopt (a selection by tensor names) needs
  // options.out: such a file is never cached.
  std::optional<LayerRange> range;
  const GgufWriter* writer = nullptr;  // KVs and tensors, each tensor's bytes at (source, source_offset)
  // Verification (options.verify, or required by the package): true makes
  // a cached file reusable only when its every byte is what would be
  // written now. `verify_parts` checks the sources against the package's
  // digests (throwing Error(kIntegrity)) before anything is reused or
  // written; it is called only when `verify`.
  bool verify = false;
  std::function<void()> verify_parts;
};

// Writes (or reuses) the file; see materialize_stage's contract.
MaterializeResult write_materialized(const StageFileJob& job, const MaterializeOptions& options);

inline constexpr std::string_view kMaterializedKeyPrefix = "skippy.materialized.";

// Refuses (Error(kInvalidInput)) a target that resolves inside `boundary`:
// a materialized stage is derived cache, never part of the package.
void refuse_inside_package(const std::string& ref, const std::filesystem::path& boundary,
                           const std::filesystem::path& target, std::string_view what);

// Writes `w`'s file at `final_path`: staged, checked (size, re-parse), renamed;
// `durable` fsyncs first. With options.hash returns the file's SHA-256, else "".
std::string write_stage_file(const GgufWriter& w, const std::filesystem::path& final_path, bool durable,
                             const MaterializeOptions& options);

// True when `cached` holds exactly what `w` would write now (flat memory).
bool content_matches(const GgufWriter& w, const std::filesystem::path& cached);

// Copies the KVs of a metadata file into `w`, minus `skip(key)` and minus
// earlier skippy.materialized.* keys.
void copy_kvs(GgufWriter& w, const GgufFile& metadata, const std::function<bool(std::string_view)>& skip);

}  // namespace skippy::materialize_detail
