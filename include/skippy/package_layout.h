// Where things live in a layer package (spec: "Repository Layout"), the
// GGUF keys that name a fragment's role, and the layer ranges stages own
// (spec: "Layer Selection").
//
// Thread-safety: plain values and functions without shared state, safe from
// any thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace skippy {

class GgufFile;
enum class GgufType : uint32_t;  // skippy/gguf.h

// The manifest file name is kManifestFileName (manifest.h).
inline constexpr std::string_view kPackageReadme = "README.md";
inline constexpr std::string_view kMetadataPath = "shared/metadata.gguf";
inline constexpr std::string_view kEmbeddingsPath = "shared/embeddings.gguf";
inline constexpr std::string_view kOutputPath = "shared/output.gguf";
inline constexpr std::string_view kLayersDir = "layers";
inline constexpr std::string_view kProjectorsDir = "projectors";

// Marks a directory whose write-package run has not finished; a rerun may
// clear and redo it without --force.
inline constexpr std::string_view kInProgressMarker = ".skippy-write-package-in-progress";

// For a directory without a manifest that an interrupted write-package left
// (its marker, or its staged files): "an interrupted write-package left N
// partial files (X bytes); rerun it to finish, or delete the directory".
// nullopt for any other directory.
std::optional<std::string> interrupted_write_package(const std::filesystem::path& dir);

// "layers/layer-00007.gguf" (five digits, wider only past 99999 layers).
std::string layer_artifact_path(uint32_t layer_index);

// Parts of a package, in the order a stage loads them.
enum class PartRole { kMetadata, kEmbeddings, kLayer, kOutput, kProjector };
std::string_view part_role_name(PartRole r) noexcept;

// Which of the source's KVs a fragment carries (spec: "Shared metadata and
// tokenizer values may be repeated only where the GGUF writer requires them
// to keep each fragment loadable"):
//   shared/metadata.gguf      every source KV but split.*, tokenizer included:
//                             the KV set a stage loads (a runtime takes KVs
//                             from its first part) and materialize writes;
//   embeddings, output, layers  general.architecture, general.alignment and
//                             the architecture's own "<arch>." hyper-parameters:
//                             what a reader of that fragment's tensors needs
//                             (the alignment to find them, the architecture and
//                             its shapes to interpret them); never tokenizer.*
//                             or the rest of general.*.
// Every fragment then ends with the role keys below.
bool fragment_keeps_kv(PartRole role, std::string_view key, std::string_view architecture) noexcept;

// Keys every fragment carries besides the source's own metadata.
inline constexpr std::string_view kRoleKey = "skippy.package.role";            // string
inline constexpr std::string_view kLayerStartKey = "skippy.package.layer_start";  // u32
inline constexpr std::string_view kLayerEndKey = "skippy.package.layer_end";      // u32, exclusive

// The reference (mesh-llm) writer's fragment keys, read in place of ours:
// stage_index 0 metadata, 1 embeddings, 2 output, 1000 + i layer i.
inline constexpr std::string_view kSliceStageIndexKey = "skippy.slice.stage_index";                // i32
inline constexpr std::string_view kSliceLayerStartKey = "skippy.slice.layer_start";                // i32
inline constexpr std::string_view kSliceLayerEndKey = "skippy.slice.layer_end";                    // i32
inline constexpr std::string_view kSliceIncludeEmbeddingsKey = "skippy.slice.include_embeddings";  // bool
inline constexpr std::string_view kSliceIncludeOutputKey = "skippy.slice.include_output";          // bool
inline constexpr uint32_t kSliceLayerStageBase = 1000;

// A key either dialect adds to a fragment (skippy.package.*, skippy.slice.*):
// not source metadata, never copied into a materialized stage.
bool is_fragment_key(std::string_view key) noexcept;

// What shared/metadata.gguf records of the source file(s) beyond their KVs,
// so that `materialize --as-source` can rebuild them byte for byte
// (skippy/materialize.h: materialize_source). write-package records it when
// it has checked that each source file's header is exactly what a GGUF v3
// writer lays out for the file's KVs and tensors (contiguous tensor data at
// the file's alignment, the split.* keys as gguf-split writes them); else it
// records why not (kSourceUnrecordedKey) and nothing else. Fragment keys:
// never in a materialized stage, dropped from a schema 2 carrier.
inline constexpr std::string_view kSourceRecordPrefix = "skippy.package.source.";
// string[]: every source tensor, in the source's order (the first file's
// directory, then the next file's, ...).
inline constexpr std::string_view kSourceTensorsKey = "skippy.package.source.tensors";
// u32[]: how many of those tensors each source file holds, in the order of
// source_model.files (the shard boundaries; one entry for one file).
inline constexpr std::string_view kSourceFileTensorsKey = "skippy.package.source.file_tensors";
// string[]: the split.* keys each shard of a split source ends with, in
// their order (none for one file); their values are gguf_split_kv's.
inline constexpr std::string_view kSourceSplitKeysKey = "skippy.package.source.split_keys";
// string: why the source's layout is not recorded (then no other key is).
inline constexpr std::string_view kSourceUnrecordedKey = "skippy.package.source.unrecorded";

// The value gguf-split (llama.cpp) gives split key `key` in shard `no`
// (0-based) of `count` files holding `tensors` tensors in all: split.no u16
// `no`, split.count u16 `count`, split.tensors.count i32 `tensors`, as the
// value's encoding without its type tag; nullopt for another key, or a value
// its type cannot hold.
struct GgufSplitKv {
  GgufType type;
  std::vector<uint8_t> encoded;
};
std::optional<GgufSplitKv> gguf_split_kv(std::string_view key, uint32_t no, uint32_t count, uint64_t tensors);

// Which part a fragment says it is, from its keys in either dialect.
enum class FragmentDialect { kUnmarked, kPackage, kSlice };
struct FragmentIdentity {
  FragmentDialect dialect = FragmentDialect::kUnmarked;
  std::optional<PartRole> role;    // nullopt when unmarked
  std::optional<uint32_t> layer;   // the layer of a layer fragment
};
// Throws Error(kInvalidInput) "<name>: <key> ..." when the keys are
// malformed (wrong type, unknown role) or contradict each other.
FragmentIdentity read_fragment_identity(const GgufFile& f, std::string_view name);

// A half-open layer range START..END, as the CLI writes it ("0..4" is layers
// 0, 1, 2, 3). A stage whose range starts at 0 owns the input boundary; one
// whose range ends at layer_count owns the output boundary.
struct LayerRange {
  uint32_t start = 0;
  uint32_t end = 0;
  bool empty() const noexcept { return end <= start; }
  uint32_t size() const noexcept { return empty() ? 0 : end - start; }
  bool operator==(const LayerRange&) const = default;
};
// "A..B" with decimal A, B. Throws Error(kUsage) on anything else (B < A
// and an empty A..A included: a range given by a user is a usage error).
LayerRange parse_layer_range(std::string_view text);
std::string format_layer_range(LayerRange r);

// A stage's range against a model of `layer_count` layers: non-empty and
// within 0..layer_count. Throws Error(kInvalidInput) "<who>: layer range
// A..B is empty" / "... is outside the package's N layers (0..N)".
void check_stage_range(std::string_view who, LayerRange range, uint32_t layer_count);

// The spec's layer-selection rule ("Layer Selection"), the one both package
// schemas apply (schema 1 to whole parts by their role, schema 2 to each
// tensor by its name): why a stage of `range` reads something of
// `role` (kLayer: of layer `layer`), or nullopt when it does not.
//   layer N            when N is in range;
//   input embeddings   when the range starts at 0, or when it ends at
//                      layer_count and `tied_output` (the output projection
//                      is the token embeddings: no output.weight);
//   output             when the range ends at layer_count;
//   anything else      on every stage.
enum class TensorRole;  // skippy/model_source.h
std::optional<std::string_view> stage_reads(TensorRole role, uint32_t layer, LayerRange range, uint32_t layer_count,
                                            bool tied_output) noexcept;



// The spec's file rule for one artifact of a package on disk, the one every
// command that reads package files goes through (select, verify,
// materialize, publish, validate-package, convert-package; both schemas): a
// safe relative path resolving (through any symlinks) to a regular file
// strictly inside `boundary` (canonical), of the declared size. Returns the
// resolved path; throws Error(kInvalidInput) "<label>: <problem>".
struct PackageFileNames {
  std::string label;         // "<ref>: <path>", or "<ref>: artifact <id> (<path>)"
  std::string unsafe;        // the whole message for an unsafe path
  std::string missing_note;  // after "missing"
  std::string declared;      // "manifest says artifact_bytes", "the catalog says byte_size"
};
std::filesystem::path check_package_file(const std::filesystem::path& root, const std::filesystem::path& boundary,
                                         std::string_view rel, uint64_t declared_bytes, const PackageFileNames& names);
// The `boundary` for a package directory on disk: the directory itself
// (canonical), or, when it is a snapshot in a Hugging Face cache
// (.../models--NS--REPO/snapshots/REV, whose files are symlinks into the
// repository's blobs/), that repository's cache folder. Sets `ec` and
// returns an empty path when the directory cannot be resolved.
std::filesystem::path local_package_boundary(const std::filesystem::path& dir, std::error_code& ec);
// A package directory that is a snapshot of a Hugging Face cache
// repository (or a path inside one: .../models--NS--REPO/snapshots/REV/...)
// is read as the cache is read through hf://: every artifact SHA-256-checked
// before use, and a file whose blob is named by another digest refused at
// once (check_cached_blob_name). Nothing writes into one: the blobs are
// shared by every hf:// reader of the cache.
bool is_hf_cache_snapshot(const std::filesystem::path& dir) noexcept;
// Throws Error(kUsage) naming `dir`, the cache and `what` (the command or
// flag that would write) when `dir` is, or lies inside, such a snapshot,
// with the advice to copy it first.
void refuse_hf_cache_snapshot(const std::filesystem::path& dir, std::string_view what);
// `real` (a package file resolved through its links) is a cache blob named
// by a SHA-256 (a Hub LFS file): that name must be `declared_sha256`, the
// digest the package declares for the file; Error(kIntegrity) "<label>: ..."
// otherwise. Nothing for any other file.
void check_cached_blob_name(const std::filesystem::path& real, const std::filesystem::path& boundary,
                            std::string_view declared_sha256, std::string_view label);
// The names of a schema 1 artifact (`role`: "layer", "projector", ...) and of a schema 2 catalog artifact.
PackageFileNames manifest_file_names(std::string_view ref, std::string_view rel, std::string_view role);
PackageFileNames catalog_file_names(std::string_view ref, std::string_view id, std::string_view rel);

}  // namespace skippy
