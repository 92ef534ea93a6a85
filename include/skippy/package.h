// A package of any schema, as one thing: where its files are (a place),
// what it is (one normalized identity), and its catalog of artifacts and
// tensors, built by the reader of its schema for exactly what a caller
// asks (no flag that makes a partial catalog look whole).
//
//   model-package.json ──> open_package_reader (the one place a schema is
//                          recognised: each registered reader is asked in
//                          turn whether the root is its schema)
//                      ──> PackageReader: identity() and
//                          catalog(place, CatalogNeed) ──> OpenedCatalog
//                          ──> the consumer (select, verify, materialize,
//                              plan, the peer's stage sets, the C API)
//
// Two readers are built in: package schema 1 (src/format/schema1/, the
// spec's manifest and each fragment's GGUF header) and package schema 2
// (src/format/schema2/, mesh-llm's root and its metadata carrier). A third
// schema is a third reader registered with register_package_reader: nothing
// after the reader learns it.
//
// Thread-safety: a PackageReader is immutable once made (catalog() may run
// on many threads at once); OpenedPackage and OpenedCatalog are plain
// values; register_package_reader may be called at any time, from any thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "skippy/manifest.h"
#include "skippy/manifest_v2.h"
#include "skippy/package_catalog.h"
#include "skippy/package_layout.h"
#include "skippy/package_signature.h"

namespace skippy {

// Where the artifacts of a package that are not on disk yet come from (the
// source layer's cache and remotes). The readers, provide_parts and
// check_metadata_only ask it for exactly the entries they are about to
// check, in one batch, before checking them; it places each at root/<path>
// or throws. Thread-safe.
class ArtifactSource {
 public:
  virtual ~ArtifactSource() = default;
  virtual void provide(const std::vector<const ArtifactEntry*>& entries) = 0;
  // Relative paths brought in by this object (in the order they finished).
  virtual std::vector<std::string> fetched() const = 0;
  // Where each path provided so far came from: "cache", or the name of the
  // remote that delivered it ("peer", "hub").
  virtual std::map<std::string, std::string> origins() const = 0;
  // True when `rel_path` was downloaded by this object and its SHA-256
  // matched the package's digest while it was written (no need to hash it again).
  virtual bool verified_while_fetching(const std::string& rel_path) const = 0;
  // Decisions worth telling a person: a remote that could not deliver a
  // file, and why, before the next one was asked.
  virtual std::vector<std::string> notes() const = 0;
  // The first `length` bytes of an entry that is not on disk (its GGUF
  // header), read without bringing the file, or nullopt when this source
  // cannot (then the caller brings the file). Bytes that are not the whole
  // file cannot be checked against the entry's SHA-256: for counting and
  // sizing tensors (a plan), never for loading them.
  virtual std::optional<std::vector<uint8_t>> head(const ArtifactEntry& entry, uint64_t length) {
    (void)entry;
    (void)length;
    return std::nullopt;
  }
};

// Where an opened package is, whichever its schema (every source fills it
// the same way): its files, how its reference resolved, and what brings the
// files not on disk yet.
struct OpenedPlace {
  std::string ref;                  // as the user wrote it
  std::filesystem::path root;       // the directory holding model-package.json
  std::filesystem::path boundary;   // resolved files must stay inside (canonical)
  bool always_verify = false;       // SHA-256 on every resolution (hf:// packages, cache snapshots, trusted signers)
  std::string manifest_sha256;      // of model-package.json as read
  std::optional<std::string> commit;        // the commit a revision resolved to, for repository packages
  std::shared_ptr<ArtifactSource> source;   // brings missing artifacts; null when every file is on disk (local dirs)
  std::vector<std::string> warnings;        // worth telling a person (moving branch, ...)
  // hf://: what the revision was: "commit", "tag", "branch", or "ref" (a name
  // no remote could classify, e.g. offline); empty for a local directory.
  std::string revision_kind;
  std::optional<PackageSignature> signature;  // checked against trusted signers (none configured: not read)
  // How the package's documents name an artifact in messages (from its
  // reader): with ids ("artifact <id> (<path>)") or by path, and who
  // declares sizes and digests ("the manifest", "the catalog").
  bool names_artifacts_by_id = false;
  std::string declarer = "manifest";
};

// A place and the catalog its reader built: what the consumer works from.
struct OpenedCatalog : OpenedPlace {
  PackageCatalog catalog;
};

// What a caller needs the catalog to list. Artifacts are always listed,
// with the package's identity; tensors as asked:
//   kRootOnly   none, and no file brought or read: the artifacts as the
//               root lists them (a peer deciding what it may serve);
//   kArtifacts  none, except what a stage of `range` needs to be chosen
//               (a reader that chooses whole parts reads the output's
//               header when the range owns the output, to learn whether it
//               is tied to the embeddings): verify, fetch, a peer's stage;
//   kStage      the tensors of every artifact a stage of `range` reads
//               (select, materialize), `range` required;
//   kLayers     the tensors of the artifacts holding these layers (and
//               no other's: the speculative NextN check);
//   kAll        every artifact's tensors (a stage chosen by tensor names,
//               the speculative NextN check);
//   kHeaders    every artifact's tensors, as counts and sizes only (a plan
//               by memory or time, inspect's bytes per token): a reader of
//               whole parts may read an absent part's header alone through
//               the source (ArtifactSource::head; CatalogArtifact::header_only)
//               instead of bringing the file.
// A catalog built for less than kAll says so (PackageCatalog::complete), and
// the consumer refuses to select from what was not read.
struct CatalogNeed {
  enum class Tensors { kRootOnly, kArtifacts, kStage, kLayers, kAll, kHeaders };
  Tensors tensors = Tensors::kArtifacts;
  std::optional<LayerRange> range;
  std::vector<uint32_t> layers;  // kLayers: the tensors of these layers' artifacts
  static CatalogNeed root_only() { return {Tensors::kRootOnly, std::nullopt, {}}; }
  static CatalogNeed artifacts(std::optional<LayerRange> r = std::nullopt) { return {Tensors::kArtifacts, r, {}}; }
  static CatalogNeed stage(LayerRange r) { return {Tensors::kStage, r, {}}; }
  static CatalogNeed of_layers(std::vector<uint32_t> l) { return {Tensors::kLayers, std::nullopt, std::move(l)}; }
  static CatalogNeed all() { return {Tensors::kAll, std::nullopt, {}}; }
  static CatalogNeed headers() { return {Tensors::kHeaders, std::nullopt, {}}; }
};

// The hidden width a stage boundary carries (activation_width()), and how
// it was found: `derived` when the root declares none and it was read from
// a tensor; `note` says how, or why it is unknown (empty when declared).
struct ActivationWidth {
  std::optional<uint64_t> width;
  bool derived = false;
  std::string note;
};

// What inspect shows of a package that only its schema knows, written by
// its reader: the title, the counts, its own JSON members, and its own rows
// for people (label, text), placed before the model's row, after it, after
// the layer count, the ABI's, and the rest (before and after the signature
// and validation rows, for a schema that reports them).
struct PackageDescription {
  struct Row {
    std::string label;  // at most 17 characters
    std::string text;
  };
  std::string title;
  uint64_t tensor_count = 0, tensor_bytes = 0, artifact_bytes = 0;
  size_t artifacts = 0;
  bool generation = false;  // the root declares a generation block
  nlohmann::json fields = nlohmann::json::object();
  std::vector<Row> head, after_model, after_layers;
  Row abi;
  std::vector<Row> tail, tail_after_trust;
  // Whether inspect reports the signature sidecar and validation.json.
  bool reports_trust = false;
  // What to tell a person on stderr (a derived activation width).
  std::vector<std::string> notes;
};

// One line per request-defaults profile (a root's generation.request_defaults
// as its JSON holds them: PackageIdentity::request_defaults_document), for
// people: "recommended (default): temperature 0.6, top_p 0.9
// (meta-llama/Llama-3.2-1B-Instruct@9213176 generation_config.json)".
std::vector<std::string> request_defaults_lines(const nlohmann::json& request_defaults);

// The source model's file(s), as far as a package records them: what
// materialize_source (skippy/materialize.h) needs to lay each file out again
// byte for byte. Built by a reader from a catalog it built for
// CatalogNeed::all(); its KV pointers point into that catalog's carrier_file
// (keep the catalog alive).
struct SourceLayout {
  struct File {
    // The file's KVs, in order: these of the carrier (the primary file's:
    // the source's; a later shard's: none), then the split keys, each with
    // gguf_split_kv's value for this file (skippy/package_layout.h).
    std::vector<const GgufKv*> kvs;
    std::vector<std::string> split_keys;
    uint32_t alignment = 32;
    // Its tensors in its directory order (indexes into PackageCatalog::tensors),
    // their data contiguous at `alignment`, zero-padded.
    std::vector<size_t> tensors;
  };
  std::vector<File> files;  // one per source_model.files entry, in its order
  // The primary file's last KV is one the package's writer adds when the
  // source lacks it (schema 2's general.alignment): the size the package
  // records for the file decides whether the source had it.
  bool last_kv_maybe_added = false;
  // What the layout takes on trust because the package does not record it
  // (for the message when the rebuilt SHA-256 differs); empty: nothing.
  std::string assumed;
  // Non-empty when the package cannot give the source back: what it does
  // not record (then `files` is empty).
  std::string missing;
};

// One schema's reader of a package, made from the root's text by
// open_package_reader. Immutable.
class PackageReader {
 public:
  virtual ~PackageReader() = default;
  // The identity the root declares (no artifact read).
  virtual const PackageIdentity& identity() const = 0;
  // The catalog `need` asks for, with the identity: the reader brings
  // exactly the files it must read through place.source (none for
  // kArtifacts, but a final stage's output header where the reader needs
  // it), each through the spec's file rule, and reads their headers.
  // Throws the source's, the file rule's and the reader's errors, naming
  // the package and the artifact.
  virtual PackageCatalog catalog(const OpenedPlace& place, const CatalogNeed& need) const = 0;
  // The consumer's checks of a place before a stage starts that only this
  // schema has (schema 1: the metadata fragment and every declared
  // projector are files of their declared sizes). Default: none.
  virtual void check_place(const OpenedPlace& place) const { (void)place; }
  // Called once when a package is opened: fills in how the place names
  // artifacts and the warnings the root deserves, and refuses (throws
  // Error(kInvalidInput)) what this runtime cannot load at all.
  virtual void on_open(OpenedPlace& place) const { (void)place; }
  // The width a stage boundary carries: declared by the root, else derived
  // by the reader from what is on disk or in `catalog` (a catalog it built;
  // nothing is fetched for this), with a note saying how, or why it stays
  // unknown.
  virtual ActivationWidth activation_width(const OpenedPlace& place, const PackageCatalog* catalog) const = 0;
  // What inspect shows that only this schema knows, from the root and
  // `catalog` (a catalog this reader built for CatalogNeed::artifacts).
  virtual PackageDescription describe(const OpenedPlace& place, const PackageCatalog& catalog) const = 0;
  // The source's file layout from `catalog` (a catalog this reader built
  // for CatalogNeed::all()). Default: none recorded (`missing` says so).
  virtual SourceLayout source_layout(const PackageCatalog& catalog) const;
};

// A reader for one schema: makes a reader from a root's text when the text
// is its schema (nullptr otherwise: another reader is asked); throws
// Error(kInvalidInput) naming `origin` when the text is its schema but
// breaks its rules.
struct PackageReaderFactory {
  std::string name;  // "package schema 1", ... (messages)
  std::function<std::shared_ptr<const PackageReader>(std::string_view text, std::string_view origin)> make;
};

// Adds a reader, asked before the built-in ones (a newer schema first).
void register_package_reader(PackageReaderFactory factory);

// The one place a package's schema is decided: the registered readers are
// asked in turn, then the built-in reader package_root_schema names (schema
// 1 last, whose parser says what is wrong with a root no reader
// recognises). Throws Error(kInvalidInput) naming `origin`.
std::shared_ptr<const PackageReader> open_package_reader(std::string_view text, std::string_view origin);

// Which built-in reader reads a root's text: the rule open_package_reader
// applies after the registered readers, and the one the commands that treat
// one schema's root themselves (validate-package, convert-package,
// restamp-package) ask. Never throws.
struct RootSchema {
  uint32_t schema = 1;                // 2 when the text declares schema_version 2, else 1
  std::optional<uint32_t> declared;   // the schema_version it declares (messages), if it is a JSON object with one
  // A declared schema_version no built-in reader reads (neither 1 nor 2):
  // the problem, naming the field, else nullopt.
  std::optional<std::string> unsupported() const;
};
RootSchema package_root_schema(std::string_view text) noexcept;

// An opened package: its place and its reader.
struct OpenedPackage : OpenedPlace {
  std::shared_ptr<const PackageReader> reader;

  const PackageIdentity& identity() const { return reader->identity(); }
  uint32_t schema_version() const { return reader->identity().schema_version; }
  // The place and the catalog its reader builds for `need`.
  OpenedCatalog catalog(const CatalogNeed& need) const;
};

// Opens the package whose model-package.json is in `root`: reads the root
// (capped at kManifestMaxBytes), makes its reader (open_package_reader) and
// fills the place. `boundary` is where artifact files must resolve;
// `source` brings what is not on disk (null: everything is). Throws
// Error(kNotFound) without a manifest (or after an interrupted
// write-package, saying so), the reader's Error(kInvalidInput) otherwise.
OpenedPackage open_package_dir(std::string ref, const std::filesystem::path& root, const std::filesystem::path& boundary,
                               std::shared_ptr<ArtifactSource> source = nullptr);

// A local package directory, read in place (root and boundary are the
// directory; a Hugging Face cache snapshot gets the cache's boundary and
// rules). Throws Error(kNotFound / kInvalidInput) naming `dir`.
OpenedPackage open_local_package(const std::filesystem::path& dir);

// check_runtime_abi (skippy/abi.h) for a package: the ABI its identity
// declares, judged by schema 1's rule or, for schema 2, by `runtime`'s rule;
// a runtime named by its line (skippy/abi.h) applies that line's
// whole word (schema, ABI, root fields). Throws Error(kInvalidInput)
// "<package_ref>: <line> refuses ...; <the fix>".
void check_runtime_abi(const PackageIdentity& identity, const RuntimeAbi& runtime, std::string_view package_ref);

// How messages word what a place's documents declare of an artifact: its
// digest ("manifest says", "the catalog says") and its size ("manifest says
// artifact_bytes", "the catalog says byte_size"), and a part's name (its
// path, or "artifact <id> (<path>)").
struct DeclaredWording {
  std::string digest, size;
};
DeclaredWording declared_wording(const OpenedPlace& place);
std::string artifact_label(const OpenedPlace& place, std::string_view id, std::string_view rel);

// The file rule for one artifact of a place, worded as the place names its
// artifacts ("<ref>: <path>" and "manifest says artifact_bytes", or
// "<ref>: artifact <id> (<path>)" and "the catalog says byte_size"); a file
// that is a cache blob named by another digest is refused too
// (check_cached_blob_name). Returns the resolved path; throws
// Error(kInvalidInput) (kIntegrity for the blob name). `what` names the
// artifact's role for a place that names artifacts by path.
std::filesystem::path check_place_file(const OpenedPlace& place, std::string_view id, std::string_view rel,
                                       uint64_t bytes, std::string_view sha256, std::string_view what);

}  // namespace skippy
