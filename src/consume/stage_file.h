// The schema-independent half of materialize (skippy/materialize.h): a GGUF
// laid out by a GgufWriter whose tensors name (source file, offset) pieces,
// streamed into --out or into the stage cache (sidecar, flock, reuse rules).
// Both package schemas feed it the same way: a catalog (schema 1: the
// one the schema 1 reader built of the stage's fragments; schema 2: the package's) and
// the stage's tensors in it (materialize.cpp). Internal to the library.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include <map>
#include <memory>
#include <string_view>
#include <vector>

#include "util/file.h"
#include "gguf/gguf_writer.h"
#include "skippy/materialize.h"
#include "skippy/package_catalog.h"
#include "skippy/verify.h"

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
  // written when `verify`, and in every case before a new cache entry is
  // written: the shared stage cache holds only stages built from verified
  // parts (its entries are reused by every later run of the same manifest,
  // whatever directory holds the parts then).
  bool verify = false;
  std::function<void()> verify_parts;
};

// Writes (or reuses) the file; see materialize_stage's contract.
MaterializeResult write_materialized(const StageFileJob& job, const MaterializeOptions& options);

inline constexpr std::string_view kMaterializedKeyPrefix = "skippy.materialized.";

// Refuses (Error(kInvalidInput)) a target that resolves inside `boundary`:
// a materialized stage is derived cache, never part of the package (`why`
// says so unless given).
void refuse_inside_package(const std::string& ref, const std::filesystem::path& boundary,
                           const std::filesystem::path& target, std::string_view what,
                           std::string_view why = "a materialized stage is derived cache and never goes into the package");

// Writes `w`'s file at `final_path`: staged, checked (size, re-parse), renamed;
// `durable` fsyncs first. With options.hash returns the file's SHA-256, else "".
std::string write_stage_file(const GgufWriter& w, const std::filesystem::path& final_path, bool durable,
                             const MaterializeOptions& options);

// True when `cached` holds exactly what `w` would write now (flat memory).
bool content_matches(const GgufWriter& w, const std::filesystem::path& cached);

// The layout of a materialized stage, whichever the package's schema, from
// its catalog: the carrier's KVs in order, minus the package's bookkeeping
// (schema 1: the fragments' skippy.package.* / skippy.slice.* keys; schema 2:
// the carrier's locator keys and split.*) and earlier skippy.materialized.*
// keys; then the kMaterialized* keys (the layer range when given, the
// manifest's SHA-256, `model_id`, the package id when the catalog has one);
// the carrier's alignment; the catalog tensors `tensors` in that order, each
// with its type and dims and the bytes at its locator in files[artifact].
// Throws Error(kInvalidInput) naming `ref` and the tensor when a locator's
// stored size is not what its type and dims take, or its artifact has no file.
GgufWriter catalog_stage_writer(const PackageCatalog& catalog, const std::vector<size_t>& tensors,
                                const std::map<size_t, std::shared_ptr<const MappedFile>>& files,
                                std::optional<LayerRange> range, std::string_view manifest_sha256,
                                std::string_view model_id, std::string_view ref);

// For materialize's explicit verification: throws Error(kIntegrity) "<ref>:
// the stage's <what>:" and every problem, unless the report verified.
void throw_unless_verified(std::string_view ref, std::string_view what, const VerifyReport& report);

}  // namespace skippy::materialize_detail
