#include "publish/package_readme.h"

#include <sstream>

namespace skippy::detail {

std::string package_readme(const PackageManifest& m, const std::string& manifest_sha256,
                           const std::vector<std::string>& notes, const std::optional<ReadmeValidation>& validation) {
  std::ostringstream o;
  const auto& s = m.source_model;
  o << "# " << m.model_id << " — layer package\n\n";
  o << "A layer package (Layer Package Repository spec, schema version " << m.schema_version
    << ", format `" << m.format << "`): one GGUF fragment per transformer layer plus shared metadata, "
    << "embeddings and output, so a serving stage fetches only the layers it owns.\n\n";
  o << "## Source\n\n";
  o << "- Model coordinate: `" << s.canonical_ref << "`\n";
  o << "- Repository: `" << s.repo << "`\n";
  o << "- Revision: `" << s.revision << "`\n";
  if (!s.distribution_id.empty()) o << "- Distribution: `" << s.distribution_id << "`\n";
  o << "- Primary file: `" << s.primary_file << "` (SHA-256 `" << s.sha256 << "`)\n";
  if (s.files.size() > 1 || (s.files.size() == 1 && s.files[0].path != s.primary_file)) {
    o << "- Files:\n";
    for (const auto& f : s.files) {
      o << "  - `" << f.path << "`: "
        << (f.size_bytes ? std::to_string(*f.size_bytes) + " bytes" : std::string("size not recorded")) << ", SHA-256 "
        << (f.sha256 ? "`" + *f.sha256 + "`" : std::string("not recorded")) << "\n";
    }
  }
  o << "\n## Package\n\n";
  o << "- Manifest: `model-package.json`, SHA-256 `" << manifest_sha256 << "`\n";
  o << "- Layers: " << m.layer_count << "\n";
  o << "- Activation width: " << (m.activation_width ? std::to_string(*m.activation_width) : "not declared") << "\n";
  o << "- Skippy ABI version: " << m.skippy_abi_version << "\n";
  if (m.created_at_unix_secs) o << "- Written at (Unix seconds): " << *m.created_at_unix_secs << "\n";
  if (!m.projectors.empty()) {
    o << "- Projectors:\n";
    for (const auto& p : m.projectors) {
      o << "  - `" << p.path << "` (" << p.kind << "): " << p.artifact_bytes << " bytes, SHA-256 `" << p.sha256
        << "`\n";
    }
  }
  o << "\n## Generation defaults\n\n";
  const auto* spec = m.generation && m.generation->speculative_decoding ? &*m.generation->speculative_decoding : nullptr;
  const auto* policy = m.generation && m.generation->policy ? &*m.generation->policy : nullptr;
  if (!m.generation) o << "None declared: the runtime uses its own defaults.\n";
  if (policy && policy->profile) o << "- Execution policy profile: `" << *policy->profile << "`\n";
  if (spec) {
    if (spec->default_strategy) o << "- Default speculative strategy: `" << *spec->default_strategy << "`\n";
    for (const auto& [id, pr] : spec->proposers) {
      o << "- Proposer `" << id << "`: type `" << pr.type << "`";
      if (pr.prediction_depth) o << ", prediction depth " << *pr.prediction_depth;
      if (pr.layer_indices) {
        o << ", layers";
        for (auto l : *pr.layer_indices) o << " " << l;
      }
      o << "\n";
    }
    for (const auto& [id, st] : spec->strategies) {
      o << "- Strategy `" << id << "`: type `" << st.type << "`";
      if (st.proposer) o << ", proposer `" << *st.proposer << "`";
      if (st.prediction_depth) o << ", prediction depth " << *st.prediction_depth;
      if (st.layer_indices) {
        o << ", layers";
        for (auto l : *st.layer_indices) o << " " << l;
      }
      o << "\n";
    }
  }
  if (!notes.empty()) {
    o << "\n## Certification notes\n\n";
    for (const auto& n : notes) o << "- " << n << "\n";
  }
  o << "\n## Validation\n\n";
  const std::string command = "skippy-model-package validate-package " + s.primary_file + " <this package>";
  if (validation) {
    o << "Validated against the source model when it was written (" << validation->tool
      << ", `write-package --validate`): valid, " << validation->artifacts << " artifacts and " << validation->tensors
      << " tensors checked. To repeat it:\n\n";
  } else {
    o << "Not validated by the writer. Before publishing, check it against the source model:\n\n";
  }
  o << "```\n" << command << "\n```\n\n";
  o << "It recomputes the SHA-256 and size of every source file and artifact, checks that every source tensor "
       "appears in exactly one fragment, byte-identical, and compares every fragment's metadata with the source's. "
       "Exit status 0 (`\"valid\": true`) is a pass.\n";
  return o.str();
}

std::string package_readme_v2(const PackageRootV2& root, const std::string& manifest_sha256, bool validated) {
  std::ostringstream o;
  const auto& s = root.source_model;
  o << "# " << root.model_id << " — layer package (schema 2)\n\n";
  o << "A package schema 2 (mesh-llm's \"package v2\", format `" << root.format
    << "`): the metadata carrier `" << s.metadata_artifact_id
    << "` holds the source's metadata and tensor directory with each tensor's location; the payload parts hold "
       "every source tensor exactly once, so a stage fetches only the parts its tensors are in.\n\n";
  o << "## Identity\n\n";
  o << "- Package id: `" << root.package_id << "`\n";
  o << "- Manifest: `model-package.json`, SHA-256 `" << manifest_sha256 << "`\n";
  if (s.repo) o << "- Source repository: `" << *s.repo << "`\n";
  if (s.revision) o << "- Source revision: `" << *s.revision << "`\n";
  if (s.canonical_ref) o << "- Source coordinate: `" << *s.canonical_ref << "`\n";
  if (s.primary_file) o << "- Primary file: `" << *s.primary_file << "` (SHA-256 `" << s.sha256 << "`)\n";
  for (const auto& f : s.files) o << "  - `" << f.path << "`: " << f.byte_size << " bytes, SHA-256 `" << f.sha256 << "`\n";
  o << "- Layers: " << root.layer_count << "\n";
  o << "- Generator: skippy-model-package " << root.generator_version << "\n";
  o << "\n## Native ABI\n\n";
  o << "Native ABI `" << root.native_abi_version
    << "`. mesh-llm's runtime lines judge it by two rules. Exact: upstream "
       "(`crates/skippy-api/src/package.rs@822f7e91`) and the release v0.76.1 admit this package only when "
       "their own skippy ABI is exactly this version. Provenance: the fork's newest loader "
       "(`marlucool/mesh-llm` `package.rs@d39f791d`) records the declared ABI as who wrote the package and "
       "never refuses it. For an exact-rule runtime at another ABI, re-stamp a copy (only "
       "`model-package.json` changes, every artifact stays):\n\n";
  o << "```\nskippy-model-package restamp-package <this package> --native-abi-version X.Y.Z\n```\n";
  o << "\n## Files\n\n| artifact | path | bytes | SHA-256 |\n|---|---|---|---|\n";
  for (const auto& a : root.artifacts) o << "| `" << a.id << "` | `" << a.path << "` | " << a.byte_size << " | `" << a.sha256 << "` |\n";
  for (const auto& sc : root.sidecars) o << "\nSidecar `" << sc.kind << "`: `" << sc.artifact_id << "`.\n";
  if (!root.publisher_metadata.empty()) {
    o << "\n## Publisher metadata\n\n";
    for (const auto& p : root.publisher_metadata) {
      o << "- `" << p.role << "`: `" << p.artifact_id << "` from `" << p.source_repo << "@" << p.source_revision << "/"
        << p.source_path << "`\n";
    }
  }
  if (root.generation) {
    o << "\n## Generation\n\n";
    if (const auto& rd = root.generation->request_defaults) {
      o << "- Request defaults: profiles";
      for (const auto& [name, p] : rd->profiles) o << " `" << name << "`";
      o << " (default `" << rd->selection_default << "`)\n";
    }
    if (const auto& sd = root.generation->speculative_decoding) {
      o << "- Speculative decoding: default strategy `" << sd->default_strategy << "`\n";
    }
  }
  o << "\n## Validation\n\n";
  o << (validated ? "Certified against the source model when it was written (`write-package --validate`). To repeat it:\n\n"
                  : "Not certified by the writer. Check it against the source model:\n\n");
  o << "```\nskippy-model-package validate-package " << s.primary_file.value_or("<source>") << " <this package>\n```\n\n";
  o << "It checks that every source tensor is in the catalog exactly once, byte for byte, every artifact's size "
       "and SHA-256, the source files' digests, and that the carrier's metadata is the source's.\n\n";
  o << kReadmeV2Marker << "\n";
  return o.str();
}

}  // namespace skippy::detail
