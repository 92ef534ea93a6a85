// A package catalog: the two tables every package schema describes, in one
// in-memory shape the consumer works from.
//
//   artifacts  id, relative path, bytes, SHA-256, and what the artifact is
//              (the metadata carrier, a payload part, a sidecar);
//   tensors    name, ggml type, dims, and where the bytes are: artifact,
//              absolute offset inside it, stored length, alignment; plus
//              the layer the tensor belongs to.
//
// Two readers build it:
//   - package schema 2 (mesh-llm's "package v2", build_catalog_v2): the root
//     (skippy/manifest_v2.h) and the metadata carrier, a GGUF holding the
//     source's KVs and the complete tensor directory, with per-tensor
//     locators under skippy.package.*;
//   - package schema 1 (build_catalog_v1): the manifest (skippy/manifest.h)
//     and each fragment's GGUF header; shared/metadata.gguf plays the
//     carrier (its KVs are the source's), every fragment's tensors are
//     listed once, where they lie in that fragment.
// The selection, verification and stage view that follow need not know which.
//
// Thread-safety: a PackageCatalog is a plain value: any number of threads may read
// one at once; the readers that build one are reentrant and may run concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "skippy/abi.h"
#include "skippy/gguf.h"
#include "skippy/manifest.h"
#include "skippy/manifest_v2.h"
#include "skippy/model_source.h"
#include "skippy/package_layout.h"

namespace skippy {

// The carrier's keys (reference: crates/skippy-model/src/package_carrier.rs).
inline constexpr std::string_view kCarrierMetadataOnlyKey = "skippy.package.metadata_only";      // bool true
inline constexpr std::string_view kCarrierPartCountKey = "skippy.package.part_count";            // payload parts
inline constexpr std::string_view kCarrierLocatorSchemaKey = "skippy.package.locator_schema";    // 1
inline constexpr std::string_view kCarrierTensorPartKey = "skippy.package.tensor_part";          // u32[]
inline constexpr std::string_view kCarrierTensorOffsetKey = "skippy.package.tensor_offset";      // u64[]
inline constexpr std::string_view kCarrierTensorSizeKey = "skippy.package.tensor_size";          // u64[]
inline constexpr std::string_view kCarrierTensorAlignmentKey = "skippy.package.tensor_alignment";  // u32[]
inline constexpr uint64_t kCarrierLocatorSchema = 1;
// True for the keys above: carrier bookkeeping, not source metadata (a
// materialized stage must not copy them).
bool is_carrier_key(std::string_view key) noexcept;

// kPublisherMetadata: a publisher file (publisher_metadata[]): a package
// file every full transfer carries, never a payload part, never selected
// for a stage's layers.
enum class CatalogArtifactKind { kCarrier, kPayload, kSidecar, kPublisherMetadata };
// carrier, payload, sidecar, publisher_metadata
std::string_view catalog_artifact_kind_name(CatalogArtifactKind k) noexcept;

struct CatalogArtifact {
  std::string id;
  std::string path;     // safe relative path
  uint64_t bytes = 0;
  std::string sha256;   // lowercase hex
  CatalogArtifactKind kind = CatalogArtifactKind::kPayload;
  // Payload parts only: the rank of the id among the payload parts (the
  // index a carrier locator names).
  std::optional<uint32_t> part_index;
  // From the path "layers/layer-NNNNN.gguf" or "layers/layer-NNNNN-partMM.gguf".
  std::optional<uint32_t> layer;
  // Sidecars only: kind ("mmproj") and optional name.
  std::string sidecar_kind;
  std::optional<std::string> sidecar_name;
  // The part it plays in a stage: schema 1, the manifest's (metadata,
  // embeddings, layer, output, projector); schema 2, kMetadata for the
  // carrier, kLayer for a layer artifact, kProjector for a sidecar and
  // nullopt for a payload part without a layer (shared/common.gguf).
  std::optional<PartRole> role;
  // The tensors the package declares in it (schema 1: the manifest's
  // tensor_count; schema 2: the catalog's tensors stored in it).
  uint64_t tensor_count = 0;
  // False when the artifact's header was not read (schema 1, built from
  // part of the fragments): its tensors are not in the catalog.
  bool tensors_listed = true;
  // Publisher metadata only: its role (model_config, ...).
  std::string publisher_role;
  // Its file was read to build the catalog (a fragment's header, the
  // carrier): what it says must be verified before it is trusted where the
  // package requires verification (unless hashed_on_read).
  bool read_for_catalog = false;
  // Its SHA-256 was checked when the catalog was built (a schema 2
  // carrier: the locators are only as good as it is), so a stage's
  // verification need not hash it again.
  bool hashed_on_read = false;
  // Only its first bytes were read (CatalogNeed::headers(): the file is not
  // here, and a prefix cannot be checked against its SHA-256): its tensors
  // are listed for counting and sizing, never for loading.
  bool header_only = false;
  // How a stage reads it. True: whole (schema 1's fragments, each a GGUF a
  // runtime loads whole; the carrier; sidecars): a stage that reads any of
  // it reads all its bytes. False: by extents (schema 2's payload parts): a
  // stage reads only its tensors' bytes.
  bool read_whole = true;
};

struct CatalogTensor {
  std::string name;
  uint32_t ggml_type = 0;
  std::vector<uint64_t> dims;   // ne[0] first
  size_t artifact = 0;          // index into PackageCatalog::artifacts (a payload part)
  uint64_t offset = 0;          // absolute, inside the artifact
  uint64_t stored_bytes = 0;    // no padding (Q8_0 of 32 elements: 34)
  uint64_t alignment = 0;       // a power of two; offset is a multiple
  // The layer: N of a "blk.N." name (which, for a tensor in a layer
  // artifact, equals the artifact's layer); nullopt for tensors without one.
  std::optional<uint32_t> layer;
  // What the tensor is for a stage, by its name (classify_tensor):
  // embeddings, layer, output, or a global every stage reads.
  TensorRole role = TensorRole::kGlobal;
  // The id of the tensor whose bytes this one shares, when its reader's
  // format declares aliases (the reference's TensorStorage::Alias; neither
  // built-in schema has any: a carrier's tensors each own their extent).
  // The consumer binds tensors by exact id and never selects, admits or
  // materializes an alias, as the reference's materialization_tensors
  // refuses one ("alias materialization is unsupported").
  std::optional<std::string> alias_of;
};

// What a package is, whichever its schema: one shape its reader fills from
// the root (skippy/package.h), the same for every consumer.
struct PackageIdentity {
  uint32_t schema_version = 0;
  // The package's own id: schema 2's package_id (a digest of its root);
  // empty for a schema without one.
  std::string package_id;
  std::string model_id;
  uint32_t layer_count = 0;
  // The runtime ABI the package declares (schema 1's skippy_abi_version,
  // schema 2's native_abi_version), the field that declares it and its rule
  // (schema 2's: kExact, the rule of most lines; a runtime line or
  // --runtime-abi X.Y.Z:provenance may judge it by kProvenance instead).
  std::string abi_version;
  std::string abi_field = "skippy_abi_version";
  AbiRule abi_rule = AbiRule::kSameMajorNoNewerMinor;
  // The source model (schema 2's optional strings empty when absent; its
  // files' sizes in SourceFile::size_bytes).
  SourceModel source_model;
  // The width a stage boundary carries, when the package declares it
  // (schema 1's activation_width; schema 2 declares none, a reader derives
  // it from the directory: skippy/stage.h activation_width_tensor).
  std::optional<uint64_t> activation_width;
  // The package's generation defaults in one model (schema 1's; schema 2's
  // speculative_decoding read as it), or why they were set aside (the
  // package still serves layers; what resolves generation refuses, naming
  // it), or why they cannot be read as that model.
  std::optional<GenerationDefaults> generation;
  // Malformed, set aside by the reader: the package still serves layers;
  // policy, speculative decoding and publishing refuse, naming it.
  std::optional<std::string> generation_problem;
  // Well-formed for its schema but without a meaning in the one model (a
  // schema 2 block schema 1's rules refuse): speculative decoding refuses.
  std::optional<std::string> generation_untranslatable;
  // The layers the package's generation defaults name as its native MTP
  // (NextN) block: every native-mtp proposer's and strategy's
  // layer_indices, ascending, each once.
  std::vector<uint32_t> native_mtp_layers;
  // What the package's generation block deserves a warning for
  // (generation_warnings), where its schema's consumers warn about it.
  std::vector<std::string> generation_warnings;
  // Whether the package's schema can declare generation.policy and
  // thresholds at all (schema 2 cannot: the reference refuses them).
  bool declares_generation_policy = true;
  // Package-level request defaults (schema 2's root; none in schema 1), as
  // parsed and as the root's own JSON holds them (null when absent), and the
  // publisher files and their typed defaults.
  std::optional<V2RequestDefaults> request_defaults;
  nlohmann::json request_defaults_document;
  std::vector<V2PublisherMetadata> publisher_metadata;
  std::optional<V2PublisherDefaults> publisher_defaults;
  // The sidecars a root declares with their names (kind, name, artifact:
  // schema 2's; schema 1's projectors are its catalog's sidecar artifacts).
  std::vector<V2Sidecar> sidecars;
  // How the package's stages are chosen: whole parts by their role (the
  // spec's rule for fragments), or each tensor by its name.
  bool selects_whole_parts = false;
  // The consumer checks every declared sidecar's file when a stage is
  // selected (the spec's rule for schema 1's projectors).
  bool checks_declared_sidecars = false;
};

struct PackageCatalog : PackageIdentity {
  std::string architecture;             // general.architecture
  std::vector<CatalogArtifact> artifacts;  // in the order the root lists them
  size_t carrier = 0;                   // index of the metadata carrier
  std::vector<CatalogTensor> tensors;   // in the carrier's directory order
  // The carrier itself (its KVs, the source's; its directory), for a
  // writer or a stage view that needs more than the tables.
  std::shared_ptr<const GgufFile> carrier_file;
  // The package's own bookkeeping keys in the carrier (its reader's), never
  // copied into a materialized stage; null: none.
  bool (*bookkeeping_key)(std::string_view key) = nullptr;
  // Schema 1: each artifact's fragment as add_fragment_v1 read it (null
  // for an artifact whose header was not read), parallel to `artifacts`.
  std::vector<std::shared_ptr<const GgufFile>> fragment_files;
  // Identical copies of a global tensor (the reference writer repeats
  // rope_freqs and other extras in every fragment) folded into the first
  // (schema 1).
  size_t merged_duplicates = 0;

  const CatalogTensor* find_tensor(std::string_view name) const noexcept;
  const CatalogArtifact* find_artifact(std::string_view id) const noexcept;
  const CatalogArtifact& artifact_of(const CatalogTensor& t) const { return artifacts.at(t.artifact); }

  // Name and id indexes (filled by the builders).
  std::unordered_map<std::string, size_t> tensor_index;
  std::unordered_map<std::string, size_t> artifact_index;
};

// The reference's catalog skips a tensor with a zero dimension (no elements,
// no bytes: a converter's placeholder such as `__index_timestep_zero__` with
// dims [0]): it is not catalogued, so it is in no payload part, no carrier
// directory the writers make, no locator array, and certification does not
// expect it. True for such dims.
bool catalog_skips_tensor(std::span<const int64_t> ne) noexcept;

// "blk.N." at the start of a tensor name -> N (decimal, no sign, no leading
// zeros but "0"); nullopt otherwise.
std::optional<uint32_t> tensor_name_layer(std::string_view name) noexcept;
// "layers/layer-NNNNN.gguf" / "layers/layer-NNNNN-partMM.gguf" -> NNNNN
// (decimal digits; MM decimal digits); nullopt for any other path.
std::optional<uint32_t> artifact_path_layer(std::string_view path) noexcept;

// The reference runtime's rule for a width a package does not declare,
// applied to the fragment (or carrier directory) holding layer `layer`: the
// element count of blk.<layer>.hc_attn_norm.weight (hyper-connected models)
// if it has it, else of blk.<layer>.attn_norm.weight. Names match exactly
// (blk.0.cross_attn_norm.weight does not count). nullopt when neither is
// there. The one implementation of the rule (the readers, plan, inspect and
// the C API use it).
struct WidthTensor {
  std::string name;
  uint64_t elements = 0;
};
std::optional<WidthTensor> activation_width_tensor(const GgufFile& file, uint32_t layer);

// Builds the catalog of a schema 2 package from its validated root and its
// carrier, opened with GgufLimits::directory_only (the caller checked the
// carrier file's size and SHA-256 against the root). Rules, each refusal an
// Error(kInvalidInput) "<origin>: <what>: <problem>" naming the key or the
// tensor:
//   - the carrier has no payload: its length equals its data offset;
//   - skippy.package.metadata_only is bool true, locator_schema is 1 and
//     part_count equals the number of payload parts (catalog artifacts that
//     are neither the carrier nor a sidecar; there is at least one);
//   - the directory's tensors with a zero dimension are skipped
//     (catalog_skips_tensor), as the reference's catalog reader skips them;
//     tensors of up to 8 dimensions are read (kGgufDirectoryMaxDims);
//   - the four locator arrays have the contract's types (tensor_part and
//     tensor_alignment u32[], tensor_offset and tensor_size u64[]), one entry
//     per catalogued tensor, in directory order;
//   - per tensor: the part index names a payload part; the alignment is a
//     power of two and divides the offset; the stored size is > 0 and equals
//     the bytes its ggml type and dims take; offset + size lies inside the
//     artifact (its catalog byte_size);
//   - no two extents in one artifact overlap;
//   - a tensor's "blk.N." layer is < layer_count, and a tensor stored in a
//     layer artifact belongs to that artifact's layer; a layer artifact's
//     layer is < layer_count;
//   - general.architecture is present.
// The reference's catalog rule for metadata: a float KV (f32 or f64, scalar
// or array element) that is NaN or infinite has no JSON form, so the
// reference refuses the model. The first such key and why, or nullopt. The
// carrier reader (build_catalog_v2) and the schema 2 writers refuse it.
std::optional<std::string> non_finite_float_kv(const GgufFile& f);
// Every KV rule of the reference's catalog reader (gguf_catalog.rs): a
// non-finite float (non_finite_float_kv), an array of arrays ("nested GGUF
// metadata arrays are unsupported"), a string value, scalar or array
// element, that is not UTF-8. (Duplicate keys, non-UTF-8 keys and tensor
// names, and bool values other than 0/1 the GGUF reader refuses already.)
// The first such key and why, or nullopt. The carrier reader
// (build_catalog_v2) and the schema 2 writers refuse it.
std::optional<std::string> catalog_kv_refusal(const GgufFile& f);

PackageCatalog build_catalog_v2(const PackageRootV2& root, std::shared_ptr<const GgufFile> carrier,
                                std::string_view origin);
// The artifacts of a validated schema 2 root, before the carrier is read:
// kinds, roles, path layers, part indexes (payload parts ranked by id),
// sidecar kinds and publisher roles, root_v2 set; no tensors (every
// artifact has tensors_listed false). build_catalog_v2 starts from it, with
// the same refusals for the artifacts (a layer artifact past layer_count, no
// payload part, a repeated id). Enough for what needs the package's files
// and not their tensors (a peer serving the carrier, preverify).
PackageCatalog catalog_artifacts_v2(const PackageRootV2& root, std::string_view origin);

// ------------------------------------------------------- package schema 1

// The artifacts of a schema 1 manifest, in the order a stage loads them:
// shared/metadata.gguf (kind kCarrier: the source's KVs), then the payload
// parts shared/embeddings.gguf, layers/* by index and shared/output.gguf
// (part_index in that order), then the projectors (kind kSidecar,
// sidecar_kind the projector's kind, kept as written). An artifact's id is
// its relative path (schema 1 has no ids); role, layer and tensor_count are
// the manifest's. No tensors yet: every artifact has tensors_listed false
// until add_fragment_v1 reads its header. package_id is empty.
PackageCatalog catalog_artifacts_v1(const PackageManifest& manifest);

// Adds the tensors of the fragment `fragment` (its GGUF, opened by the
// caller after the spec's file rules) as those of artifact `artifact` (a
// model part, not a projector). Call it in load order: the first copy of a
// tensor is the one the catalog keeps. Checks what a loader relies on, each
// refusal an Error(kInvalidInput) "<rel path>: <problem>":
//   - the fragment holds the tensor count the manifest declares;
//   - its own role keys (skippy.package.role, .layer_start, or the
//     reference writer's skippy.slice.*), when present, agree with the part
//     it is listed as;
//   - no tensor name is listed twice, except a global tensor (rope_freqs,
//     ...) repeated with identical type, dims and bytes: one tensor, the
//     first copy (merged_duplicates counts the others); differing copies are
//     "tensor 'X' appears in both A (role) and B (role) ...";
//   - every fragment has the alignment of the first one read.
// Once the fragments are read: a layer fragment's tensors are each blk.N.*
// of its own layer N (or a repeated global); Error(kInvalidInput) "<rel
// path>: tensor 'X' does not belong to layer N" otherwise. Nothing for
// another part or one whose header was not read. (Whether a layer fragment
// may be empty is a stage's question: StageView.)
void check_layer_fragment_v1(const PackageCatalog& catalog, size_t artifact);
// For the metadata part it also sets carrier_file and architecture.
// With `header_only`, `fragment` is the file's first bytes parsed with
// GgufLimits::directory_only: each tensor must lie within the artifact's
// declared size, a repeated global is compared by type, dims and size (its
// bytes are not here), and the artifact is marked header_only.
void add_fragment_v1(PackageCatalog& catalog, size_t artifact, std::shared_ptr<const GgufFile> fragment,
                     bool header_only = false);

// The whole schema 1 reader: catalog_artifacts_v1, add_fragment_v1 for
// every model part whose header `fragments` holds (keyed by relative path;
// a part without one keeps tensors_listed false), check_layer_fragment_v1.
PackageCatalog build_catalog_v1(const PackageManifest& manifest,
                                const std::unordered_map<std::string, std::shared_ptr<const GgufFile>>& fragments);

}  // namespace skippy
