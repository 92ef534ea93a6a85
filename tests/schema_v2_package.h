// A writer of package schema 2 packages in the reference's layout
// (mesh-llm's skippy-model-package "package v2"), built from its documented
// rules (../shared/docs/PACKAGE-V2.md and the reference's sources it points
// to) and nothing of ours but the GGUF writer and SHA-256:
//   shared/metadata.gguf   the carrier: every source KV but split.*, the
//                          complete tensor directory, no payload, the
//                          skippy.package.* locator keys;
//   shared/common.gguf     every tensor without a layer;
//   layers/layer-NNNNN.gguf one per layer (or -partMM parts);
//   projectors/*.gguf      mmproj sidecars.
// The root is built as JSON here and its package_id computed here, with
// nlohmann's compact dump in the reference's field order: a second route to
// the bytes our reader recomputes. Artifact ids and their order in the
// catalog are deliberately unlike the paths (layer ids rank in reverse
// layer order, the carrier is listed in the middle), so a reader that
// guesses from order or paths fails.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace skippy::test {

struct SchemaV2Locators {
  std::vector<std::string> names;  // carrier directory order
  std::vector<uint32_t> part;
  std::vector<uint64_t> offset;
  std::vector<uint64_t> size;
  std::vector<uint32_t> alignment;
};

struct SchemaV2Options {
  std::string model_id = "org/Model-GGUF:Q8_0";
  std::string repo = "org/Model-GGUF";
  std::string revision = "0123456789abcdef0123456789abcdef01234567";
  uint32_t payload_alignment = 64;      // the payload parts' general.alignment
  bool split_first_layer = false;       // layer 0 as layers/layer-00000-part00/01.gguf
  std::vector<std::filesystem::path> projectors;  // copied as mmproj sidecars
  // Tampering, applied before the carrier is written (the root then lists
  // the tampered carrier's true size and digest, with a correct package_id,
  // so only the carrier rule under test can fire).
  std::function<void(SchemaV2Locators&)> edit_locators;
  uint64_t carrier_trailing_bytes = 0;  // payload bytes after the carrier's data offset
  bool carrier_metadata_only = true;
  uint32_t carrier_locator_schema = 1;
  bool carrier_offsets_as_u32 = false;  // tensor_offset as u32[] instead of u64[]
  // Every tensor of the carrier's directory at data offset 0, as the
  // reference's own test carriers are (a directory, not a layout).
  bool carrier_directory_offsets_zero = false;
  // Applied to the root JSON after package_id was computed (unless
  // recompute_id_after_edit).
  std::function<void(nlohmann::ordered_json&)> edit_root;
  bool recompute_id_after_edit = false;
};

struct SchemaV2Package {
  std::filesystem::path dir;
  nlohmann::ordered_json root;  // as written to model-package.json
  SchemaV2Locators locators;    // as written into the carrier
  // tensor name -> (artifact id, absolute offset, stored bytes)
  struct Where {
    std::string artifact_id;
    uint64_t offset = 0;
    uint64_t size = 0;
  };
  std::map<std::string, Where> tensors;
  std::map<std::string, std::string> artifact_path;  // id -> path
};

// Writes the package for `source` (a single-file .gguf) into `out_dir`.
SchemaV2Package write_schema_v2_package(const std::filesystem::path& source, const std::filesystem::path& out_dir,
                                        const SchemaV2Options& options = {});

// "sha256:" + SHA-256 of the compact JSON of `root` normalized as the
// reference does (package_id "", created_at_unix_secs 0, files by path,
// artifacts by id, sidecars by kind/name/artifact_id), via nlohmann.
std::string schema_v2_package_id(const nlohmann::ordered_json& root);

}  // namespace skippy::test
