// The consumer side of a layer package (spec: "Layer Selection", "Consumer
// Validation", "Compatibility"): open a package reference, validate it for a
// stage's layer range, and list the parts that stage loads.
//
// Every artifact source (a local directory today; the Hugging Face cache, a
// peer or the Hub next) resolves to an OpenedPackage — a directory plus the
// boundary its files must stay inside — and then goes through the same
// validation and selection here.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "skippy/manifest.h"
#include "skippy/package_layout.h"

namespace skippy {

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
// included; an empty A..A parses and is refused by selection).
LayerRange parse_layer_range(std::string_view text);
std::string format_layer_range(LayerRange r);

// Where the artifacts of a package that are not on disk yet come from (the
// Hub, a peer). select_stage / all_parts / check_metadata_only ask it for
// exactly the entries they are about to check, in one batch, before
// checking them; it places each at root/<path>.
class ArtifactSource {
 public:
  virtual ~ArtifactSource() = default;
  virtual void provide(const std::vector<const ArtifactEntry*>& entries) = 0;
  // Relative paths brought in by this object (in the order they finished).
  virtual std::vector<std::string> fetched() const = 0;
  // True when `rel_path` was downloaded by this object and its SHA-256
  // matched the manifest while it was written (no need to hash it again).
  virtual bool verified_while_fetching(const std::string& rel_path) const = 0;
  virtual std::string name() const = 0;  // "hub", "peer"
};

struct OpenedPackage {
  std::string ref;                  // as the user wrote it
  std::filesystem::path root;       // the directory holding model-package.json
  std::filesystem::path boundary;   // resolved files must stay inside (canonical)
  bool always_verify = false;       // hf:// packages: SHA-256 on every resolution
  PackageManifest manifest;
  std::string manifest_sha256;      // of the manifest bytes as read
  std::optional<std::string> commit;        // hf://: the commit the revision resolved to
  std::shared_ptr<ArtifactSource> source;   // hf://: fetches missing artifacts; null for local dirs
  std::vector<std::string> warnings;        // worth telling a person (moving branch, ...)
};

struct OpenOptions {
  // Download progress (bytes done, bytes to fetch) for hf:// packages.
  std::function<void(uint64_t, uint64_t)> on_progress;
  // hf:// with a branch or tag: ask the Hub what it names now instead of
  // answering from refs/ in the cache (no effect offline or for a commit).
  bool refresh_revision = false;
};

// Resolves `ref` and validates the manifest: schema version 1, format, ABI
// compatibility with this runtime, identity fields. Throws
// Error(kInvalidInput / kNotFound) naming the ref.
//   - a local package directory is read in place;
//   - hf://ns/repo[@rev|:rev] resolves the revision to a commit (cache
//     first: a commit or a cached ref needs no network), brings
//     model-package.json into the Hugging Face cache and returns its
//     snapshot directory, with an ArtifactSource that fetches only the
//     artifacts a selection asks for; always_verify is set.
OpenedPackage open_package(std::string_view ref, const OpenOptions& options = {});

// Reads and validates the manifest in `root` (open_package's second half,
// shared by every source). `boundary` is where artifact files must resolve.
OpenedPackage open_package_dir(std::string ref, const std::filesystem::path& root, const std::filesystem::path& boundary);


struct StagePart {
  PartRole role;
  std::optional<uint32_t> layer_index;  // for layers
  std::string rel_path;                 // as declared in the manifest
  std::filesystem::path path;           // absolute path to read
  uint64_t bytes = 0;                   // artifact_bytes (checked against the file)
  uint64_t tensor_count = 0;
  std::string sha256;                   // declared
  std::string reason;                   // why the stage needs it
};

// Metadata-only inspection (inventory, identity, prepare): the manifest and
// shared/metadata.gguf (safe path, regular file inside the boundary, size,
// a parseable GGUF). Needs no layer range. Returns the metadata part (to
// verify before trusting what it says: see verify_if_required).
StagePart check_metadata_only(const OpenedPackage& pkg);

// Whether the model's output projection is tied to its token embeddings
// (shared/output.gguf has no output.weight), so a final stage also loads
// shared/embeddings.gguf. Fetches and checks only the output artifact.
struct OutputTie {
  bool tied = false;
  StagePart output;
};
OutputTie output_tie(const OpenedPackage& pkg);

struct SelectOptions {
  // An explicit projector for this stage: a path declared in the manifest's
  // projectors[]. Wins over the default choice.
  std::optional<std::string> projector_path;
  // Treat the stage as single-stage serving (gets the default projector even
  // when its range does not start at 0).
  bool single_stage = false;
};

struct StageSelection {
  LayerRange range;
  // In load order: metadata, embeddings (range starts at 0, or the output is
  // tied to the embeddings), layers start..end-1, output (range ends at
  // layer_count).
  std::vector<StagePart> parts;
  std::optional<StagePart> projector;  // the projector this stage uses, if any
  std::vector<std::string> notes;      // decisions worth logging (tied output, projector choice)
};

// Consumer validation for a stage, then selection (spec order). Checks: the
// range is non-empty and within layer_count; every selected artifact and
// every declared projector has a safe relative path that resolves (through
// symlinks) to a regular file inside the package boundary, whose size equals
// artifact_bytes. Does not hash (see verify). Throws Error(kInvalidInput)
// with one message per rule, naming the artifact and the problem.
StageSelection select_stage(const OpenedPackage& pkg, LayerRange range, const SelectOptions& options = {});

// Every artifact of the package (shared, all layers, projectors), with the
// same file checks: what `verify` checks when given no range.
std::vector<StagePart> all_parts(const OpenedPackage& pkg);

}  // namespace skippy
