// write-package is one pipeline (package_writer.cpp: the source opened, one
// streaming pass, the projectors copied, every artifact announced and
// checked as it is written, the root written last). What a package schema
// decides is asked of its layout: what files the pass writes, with which
// headers, which root names them, and how --validate certifies them.
// Schema 1: schema1/layout.cpp; schema 2: schema2/layout.cpp. A third
// schema is a third layout, and make_schema_layout the one place that
// learns it. Internal to the publish library.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "publish/split_stream.h"
#include "publish/writer_internal.h"
#include "skippy/package_writer.h"

namespace skippy::detail {

class SourceDigests;

// One artifact complete on disk, as the layout's check sees it: an output of
// the pass (its index), a copied projector, or another file of the layout.
struct WrittenFile {
  std::optional<size_t> output;
  const ProjectorEntry* projector = nullptr;
};

// A small file the layout writes after the pass (schema 2's publisher
// metadata), announced like every artifact.
struct LayoutFile {
  std::string rel_path;
  std::string contents;
  std::string sha256;
};

class SchemaLayout {
 public:
  virtual ~SchemaLayout() = default;

  // Refuses the options this schema cannot write, before the source opens.
  virtual void check_options() const {}
  // Plans every file from the source (`shards`: its files, by shard) and
  // checks the root it will write with placeholder digests: a rule it
  // breaks throws here, naming it, before anything is written.
  virtual void plan(const ModelSource& model, const std::vector<std::shared_ptr<const MappedFile>>& shards) = 0;
  // The pass's outputs, in order, and each one's path in the package.
  virtual std::vector<StreamOutput>& outputs() = 0;
  virtual const std::string& rel_path(size_t output) const = 0;
  virtual const std::vector<PlannedProjector>& projectors() const = 0;
  // The output announced after every other artifact, when an upload must
  // not see it before the rest (schema 2's carrier of a streamed source).
  virtual std::optional<size_t> announced_last() const { return std::nullopt; }

  // --validate while writing (validates_as_written): the check of each
  // artifact as it is complete on disk; `digests` stand in for a streamed
  // source's bytes (nullptr: the source is on disk).
  virtual void begin_checks(const SourceDigests* digests) = 0;
  // Throws Error(kIntegrity) ("validation failed, so no manifest was
  // written ...") naming the artifact and its problems.
  virtual void check_written(const WrittenArtifact& w, const WrittenFile& what) = 0;

  // After the pass: what the layout can check of its own outputs.
  virtual void after_pass(const StreamResult& hashes) { (void)hashes; }
  // Written after the projectors, each announced.
  virtual std::vector<LayoutFile> other_files() const { return {}; }
  // The root with every digest (the pass's, the shards', the projectors'
  // copies), checked by the schema's rules.
  virtual void complete_root(const StreamResult& hashes, const std::vector<ProjectorEntry>& projectors) = 0;
  // --validate: the package certified against its source (what was checked
  // as it was written is not read again); throws Error(kIntegrity).
  virtual void validate(const StreamResult& hashes) = 0;
  virtual std::string root_text() const = 0;
  // What the result says for this schema (ids, notes, artifact count).
  virtual void describe(WritePackageResult& r) const = 0;
  // The files that describe the root, written before it (README,
  // validation.json): a crash leaves no root, so a rerun writes all.
  virtual void write_before_root(const WritePackageResult& r) const = 0;
};

// The layout of opt.schema; throws Error(kUsage) for a schema no layout writes.
std::unique_ptr<SchemaLayout> make_schema_layout(const WritePackageOptions& opt);
std::unique_ptr<SchemaLayout> make_schema1_layout(const WritePackageOptions& opt);
std::unique_ptr<SchemaLayout> make_schema2_layout(const WritePackageOptions& opt);

}  // namespace skippy::detail
