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
  TopologyStage* find_stage(std::string_view stage_id) noexcept;
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
// kManifestMaxBytes, when its SHA-256 is the topology's), for a package of
// any schema, from the catalog its reader builds (skippy/package.h:
// CatalogNeed::root_only or artifacts(range); schema 2's from the verified
// carrier):
//   the metadata carrier (schema 1: shared/metadata.gguf): every stage;
//   the parts holding the stage's tensors, exactly as the consumer selects
//     them (select_stage over the stage's range: the layers in range, the
//     input embeddings from layer 0, the output for the final stage and
//     then the token embeddings when the output is tied to them, the
//     tensors without a layer on every stage; schema 1 by whole parts);
//   every projector (schema 1: projectors[]; schema 2: every sidecar) and
//     publisher file when the range starts at layer 0.
// Whether the output is tied is known once the output's tensors are in the
// catalog (schema 2 always; schema 1 once shared/output.gguf's header is
// read, CatalogNeed::artifacts with a final range). A schema 1 catalog without them
// gives a final stage the embeddings as if it were tied and says so
// (output_tie_known false): a client asks for them only when its consumer
// needs them, and the server reads the output before it serves them. (The
// reference implementation never serves the embeddings to a tied final
// stage, which then always falls back to the Hub.)
// The stage's range must be within the package's layers (check_stage_layers).
// Roles are the catalog's (a schema 2 payload part without a layer is listed
// as kLayer); layer_index a layer artifact's layer. Entries in load order:
// the carrier, the payload parts (schema 1: embeddings, layers, output), the
// projectors or sidecars, the publisher files; each path once.
// A stage with an admission descriptor (package schema 2) may fetch exactly
// what the descriptor requires (stage_admission_artifacts: the carrier, the
// artifacts holding its resident tensors, its sidecars' artifacts) and
// nothing else (no publisher files; its layer range is not used); the
// descriptor is checked against the catalog first (check_stage_admission:
// Error(kInvalidInput) for another package_id, an unknown tensor or
// sidecar).
struct StageArtifacts {
  LayerRange range;
  bool owns_input = false;
  bool owns_output = false;
  bool output_tied = false;
  bool output_tie_known = true;
  std::vector<PeerArtifact> artifacts;
  const PeerArtifact* find(std::string_view rel_path) const noexcept;
};
StageArtifacts stage_artifacts(const TopologyStage& stage, const PackageCatalog& catalog);

// A stage defined by its layer range must name only layers the package has
// (a topology that names more is a mistake: its stages would not cover the
// model the package holds). Error(kInvalidInput) "stage <id>: layer range
// A..B is outside the package's N layers (0..N)" otherwise; nothing for a
// stage an admission descriptor defines.
void check_stage_layers(const TopologyStage& stage, uint32_t layer_count);

}  // namespace skippy::peer
