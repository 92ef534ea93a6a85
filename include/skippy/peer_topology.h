// The active split topology (docs/CLI.md "Peer identity and topology") and
// what each of its stages may fetch from a peer (spec: "Peer Cache
// Transfer", "Layer Selection"). The server authorizes with
// stage_artifacts(); a client calls the same function to know what it may
// ask for, so both sides agree.
//
// A topology file:
//   {"topology_id": "t-1", "run_id": "r-1",
//    "package_ref": "hf://ns/repo@COMMIT", "manifest_sha256": "MANIFEST_SHA256",
//    "stages": [{"stage_id": "s0", "stage_index": 0, "node_id": "NODE_ID",
//                "layer_start": 0, "layer_end": 3}, ...]}
//
// Thread-safety: plain values and pure functions (load_topology reads a file),
// safe from any thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "skippy/manifest.h"
#include "skippy/package_catalog.h"
#include "skippy/package_layout.h"
#include "skippy/stage.h"
#include "skippy/stage_admission.h"

namespace skippy::peer {

struct TopologyStage {
  std::string stage_id;
  uint32_t stage_index = 0;
  std::string node_id;   // lowercase 64-hex node id (peer_identity.h)
  LayerRange layers;     // half-open, non-empty
  // Package schema 2: the stage admission descriptor that defines this
  // stage (serve-artifacts --admission STAGE_ID=FILE, fetch --peer
  // --admission FILE). Not part of the topology file: each side binds it to
  // the stage by its id. When set, a schema 2 stage's artifacts are the
  // descriptor's (below), whatever `layers` says.
  std::optional<StageAdmission> admission = std::nullopt;
  bool operator==(const TopologyStage&) const = default;
};

struct Topology {
  std::string topology_id;
  std::string run_id;
  std::string package_ref;       // as written
  std::string manifest_sha256;   // lowercase
  std::vector<TopologyStage> stages;

  const TopologyStage* find_stage(std::string_view stage_id) const noexcept;
  bool operator==(const Topology&) const = default;
};

// Parses and checks a topology: the fields above, all required; ids
// non-empty printable text of at most 256 bytes; package_ref an hf://
// reference (eligibility for transfer — a 40-hex commit — is checked by
// whoever serves or fetches, see pinned_commit); manifest_sha256 64 hex
// digits; stage ids and stage indexes distinct; node ids 64 hex digits
// (normalized to lowercase); every range non-empty, and the ranges one
// contiguous run (no layer in two stages, none in no stage between the
// first listed stage's start and the last one's end: refused naming the
// stages; a topology may list only some stages). A duplicate JSON key is refused
// (the manifests' strict JSON rule). Unknown keys are ignored. Throws
// Error(kInvalidInput) "<origin>: <field>: <problem>".
Topology parse_topology(std::string_view json_text, std::string_view origin);
Topology load_topology(const std::filesystem::path& file);

// The text of a topology file: the fields above in that order, one stage per
// line (`plan --topology-out` writes it). What parse_topology would refuse
// is refused here first (Error(kInvalidInput), "topology: <field>:
// <problem>"), so nothing written is unreadable; node ids and the manifest
// digest are written in lowercase.
std::string format_topology(const Topology& topology);

// The commit a package ref pins: hf://ns/repo@<40-hex commit> (or :commit)
// gives the commit; a branch, a tag, a short hash or a local path gives
// nullopt (a name that can move is never eligible for peer transfer).
std::optional<std::string> pinned_commit(std::string_view package_ref);

// One artifact a stage may fetch from a peer.
struct PeerArtifact {
  std::string rel_path;
  PartRole role = PartRole::kMetadata;
  std::optional<uint32_t> layer_index;
  uint64_t bytes = 0;
  std::string sha256;     // as declared in the manifest
  std::string reason;     // why this stage may have it
};

// What a stage may fetch besides model-package.json (always allowed, up to
// kManifestMaxBytes, when its SHA-256 is the topology's):
//   shared/metadata.gguf;
//   shared/embeddings.gguf and every declared projector, when the stage's
//     range starts at layer 0;
//   shared/output.gguf, when the range ends at the manifest's layer_count;
//   shared/embeddings.gguf also when the range ends at layer_count and the
//     output projection is tied to the embeddings (`output_tied`; see
//     output_tie() in stage.h) — the reference implementation never serves
//     it to such a stage, which then always falls back to the Hub;
//   layers/ entries for every layer in the range.
// Entries are in the spec's load order (metadata, embeddings, layers,
// output, projectors), each path once. Layers beyond the manifest's
// layer_count are not listed (the stage cannot load them anyway).
struct StageArtifacts {
  LayerRange range;
  bool owns_input = false;
  bool owns_output = false;
  bool output_tied = false;
  std::vector<PeerArtifact> artifacts;
  const PeerArtifact* find(std::string_view rel_path) const noexcept;
};
StageArtifacts stage_artifacts(const TopologyStage& stage, const PackageManifest& manifest, bool output_tied);

// The same for a package schema 2, from its catalog (built from the
// verified carrier): what a stage may fetch besides model-package.json is
//   the metadata carrier (every stage: it says where everything else is);
//   the payload parts holding the stage's tensors, exactly as the consumer
//     selects them (select_catalog_range over the stage's range, its end
//     clamped to layer_count: blk.N in range, the input embeddings from
//     layer 0, output and output_norm for the final stage and then
//     token_embd.weight when the output is tied to it, the tensors without a
//     layer on every stage);
//   every sidecar (mmproj) when the range starts at layer 0 (as schema 1's
//     projectors).
// Roles are descriptive: kMetadata for the carrier, kProjector for a
// sidecar, kLayer for a payload part (layer_index: a layer artifact's
// layer). Entries: the carrier, the payload parts by part index, the sidecars.
// A stage with an admission descriptor may fetch exactly what the
// descriptor requires (stage_admission_artifacts: the carrier, the
// artifacts holding its resident tensors, its sidecars' artifacts) and
// nothing else (no publisher files; its layer range is not used); the
// descriptor is checked against the catalog first (check_stage_admission:
// Error(kInvalidInput) for another package_id, an unknown tensor or
// sidecar).
StageArtifacts stage_artifacts(const TopologyStage& stage, const PackageCatalog& catalog);

}  // namespace skippy::peer
