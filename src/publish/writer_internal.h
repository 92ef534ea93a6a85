// What write-package's pipeline (package_writer.cpp), its schema layouts
// (schema_layout.h) and convert-package share. Internal to the publish
// library.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "publish/source_digests.h"
#include "publish/split_stream.h"
#include "publish/validator_internal.h"
#include "gguf/gguf_writer.h"
#include "skippy/manifest.h"
#include "skippy/model_source.h"
#include "skippy/package_layout.h"
#include "skippy/package_writer.h"

namespace skippy::detail {

int64_t resolve_created_at(const WritePackageOptions& opt);
// Makes out_dir ready (created, empty, or ours to redo) and leaves the
// in-progress marker. Here and below, `env` is the operation's IoEnv
// (WritePackageOptions::io_env and the convert options': nullptr, the system's).
void prepare_out_dir(const std::filesystem::path& dir, bool force, IoEnv* env);
// A GGUF file of the pass (`w`, holding `tensors` in this order) as an output
// at out_dir/rel_path: each tensor's bytes copied from the source and
// padded to the writer's alignment, hashed front to back as written.
StreamOutput stream_output(const std::string& rel_path, const std::vector<const SourceTensor*>& tensors,
                           const GgufWriter& w, const std::filesystem::path& out_dir);

// A --projector, checked before any work: a projector GGUF, with a safe
// name no other --projector has. Its SHA-256 is computed while it is copied.
struct PlannedProjector {
  std::filesystem::path source;
  ProjectorEntry entry;  // sha256 filled by copy_projector
};
PlannedProjector plan_projector(const std::filesystem::path& src);
ProjectorEntry copy_projector(const PlannedProjector& p, const std::filesystem::path& out_dir,
                              const std::function<void(uint64_t)>& on_bytes, IoEnv* env);

// The schema 1 source identity from the provenance and the shards' digests.
SourceModel source_identity(const WritePackageOptions& opt, const ModelSource& model,
                            const std::vector<std::string>& shard_sha);

// Renames a complete staging directory to `out` (replacing an empty or
// --force'd one), fsyncing the parent (convert_staging.cpp).
void install_staged_dir(const std::filesystem::path& staging, const std::filesystem::path& out, IoEnv* env);
// Refuses an `out` that exists and is not an empty directory (unless force).
void check_convert_out_dir(const std::filesystem::path& out, bool force);

// convert-package's staging directory, temporary_path_for(out) beside the
// output, held under an flock(2) for the run's lifetime. Creating one first
// removes every earlier staging directory of the same output that no live
// run holds (the leftovers of a killed run: nothing else removes them).
// Removed when destroyed unless `keep` (it was renamed into place).
class ConvertStaging {
 public:
  explicit ConvertStaging(const std::filesystem::path& out);
  ~ConvertStaging();
  ConvertStaging(const ConvertStaging&) = delete;
  ConvertStaging& operator=(const ConvertStaging&) = delete;
  const std::filesystem::path& path() const { return path_; }
  bool keep = false;

 private:
  std::filesystem::path path_;
  int lock_fd_ = -1;
};


// --validate with fragments that leave the disk as they are uploaded
// (on_artifact with a disk budget) or a source never stored (stream_read):
// each artifact is then checked on its own as it is written (PackageCheck,
// validator_internal.h), before on_artifact.
bool validates_as_written(const WritePackageOptions& opt);
// Feeds `digests` from the pass: each tensor's SHA-256 from the streamed
// bytes (wrapping so.read_source), each shard's as the pass hashes it.
// `digests` must outlive the pass.
void record_source_digests(StreamOptions& so, SourceDigests& digests);
// A streamed source (opt.stream_read): refuses, before anything is written,
// a disk budget the layout cannot keep (peak_open_bytes plus
// what the budget holds already, the placeholders' headers, over its limit).
// Nothing without stream_read.
void check_streamed_write(const WritePackageOptions& opt, const std::vector<StreamOutput>& outputs);
// Where both writers start their source pass, once the outputs are
// planned: check_streamed_write, the output directory prepared
// (prepare_out_dir), and the pass's options: progress (on_bytes) over the
// source's bytes and the projectors' copies, the shards'
// digests verified before (not hashed again), the source's declared
// SHA-256s checked before any output is renamed, with opt.on_artifact the
// disk budget's wait before each output; with opt.stream_read the pass
// reads the streamed source, every shard hashed from the arriving bytes
// and checked against provenance.expected_sha256 as soon as it ends. The
// caller adds on_output_complete. `opt` and `model` must outlive the pass.
StreamOptions begin_source_pass(const WritePackageOptions& opt, const ModelSource& model,
                                const std::vector<StreamOutput>& outputs, const std::vector<PlannedProjector>& projectors);

}  // namespace skippy::detail
