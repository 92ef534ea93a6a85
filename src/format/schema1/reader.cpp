// Package schema 1's reader (see reader.h): the manifest is the root; the
// catalog lists the manifest's artifacts and, as a caller needs them, the
// tensors of the fragments it reads (brought through the place's source,
// each through the spec's file rule).
#include "format/schema1/reader.h"

#include <algorithm>
#include <map>
#include <set>

#include "skippy/error.h"
#include "skippy/gguf.h"
#include "skippy/package_catalog.h"
#include "util/parallel.h"

namespace skippy::schema1 {
namespace {

namespace fs = std::filesystem;

// Headers read at once through a source (ranged requests).
constexpr unsigned kHeaderReadsAtOnce = 8;

// Whether a stage of `range` reads the part `a` (the tied output's
// embeddings aside: known once the output part is read).
bool stage_reads_part(const CatalogArtifact& a, LayerRange range, uint32_t layer_count) {
  switch (a.role.value_or(PartRole::kMetadata)) {
    case PartRole::kMetadata: return true;
    case PartRole::kEmbeddings: return range.start == 0;
    case PartRole::kLayer: return a.layer && *a.layer >= range.start && *a.layer < range.end;
    case PartRole::kOutput: return range.end == layer_count;
    case PartRole::kProjector: return false;
  }
  return false;
}

class Reader final : public PackageReader {
 public:
  explicit Reader(PackageManifest m) : m_(std::move(m)), id_(identity_of(m_)) {}

  const PackageIdentity& identity() const override { return id_; }
  const PackageManifest& manifest() const { return m_; }

  void on_open(OpenedPlace& place) const override {
    place.names_artifacts_by_id = false;
    place.declarer = "manifest";
    if (m_.generation_problem) {
      place.warnings.push_back(*m_.generation_problem +
                               "; the generation block is ignored (it is policy, not tensor layout): layers are "
                               "selected, verified and materialized as usual, while policy and speculative refuse");
    }
    for (size_t i = 0; i < m_.projectors.size(); ++i) {
      const auto& p = m_.projectors[i];
      if (!is_known_projector_kind(p.kind)) {
        place.warnings.push_back("projectors[" + std::to_string(i) + "] (" + p.path + "): kind \"" + p.kind +
                                 "\" is not supported by this runtime, so no stage uses it (text stages are served; "
                                 "stage 0 gets the first mmproj, if any); a stage that asks for it is refused");
      }
    }
    const auto abi = parse_abi_version(m_.skippy_abi_version);
    if (!abi || !abi_compatible(*abi, kRuntimeAbiVersion)) {
      throw_invalid((place.root / std::string(kManifestFileName)).string() + ": skippy_abi_version " +
                    m_.skippy_abi_version + " is not compatible with this runtime's ABI " +
                    format_abi_version(kRuntimeAbiVersion) + " (needs major " + std::to_string(kRuntimeAbiVersion.major) +
                    " and minor <= " + std::to_string(kRuntimeAbiVersion.minor) + "); refusing to load it");
    }
  }

  PackageCatalog catalog(const OpenedPlace& place, const CatalogNeed& need) const override {
    if (need.range) check_stage_range(place.ref, *need.range, m_.layer_count);
    switch (need.tensors) {
      case CatalogNeed::Tensors::kRootOnly: return catalog_artifacts_v1(m_);
      case CatalogNeed::Tensors::kArtifacts: return listing(place, need.range);
      case CatalogNeed::Tensors::kStage:
        if (!need.range) throw Error(ErrorKind::kUsage, place.ref + ": a stage's catalog needs its layer range");
        return read(place, need.range);
      case CatalogNeed::Tensors::kLayers: {
        PackageCatalog cat = catalog_artifacts_v1(m_);
        std::vector<size_t> which;
        for (size_t i = 0; i < cat.artifacts.size(); ++i) {
          const auto& a = cat.artifacts[i];
          if (a.role == PartRole::kLayer && a.layer &&
              std::find(need.layers.begin(), need.layers.end(), *a.layer) != need.layers.end()) {
            which.push_back(i);
          }
        }
        read_fragments(place, cat, which);
        return cat;
      }
      case CatalogNeed::Tensors::kAll: return read(place, std::nullopt);
      case CatalogNeed::Tensors::kHeaders: return read(place, std::nullopt, /*headers=*/true);
    }
    return catalog_artifacts_v1(m_);
  }

  ActivationWidth activation_width(const OpenedPlace& place, const PackageCatalog*) const override {
    if (m_.activation_width) return {m_.activation_width, false, ""};
    const std::string missing = "the manifest has no activation_width";
    if (m_.layers.empty()) return {std::nullopt, false, missing + " and no layers: the activation width is unknown"};
    const auto& first = m_.layers.front();
    std::error_code ec;
    if (!is_safe_relative_path(first.path) || !fs::exists(place.root / first.path, ec)) {
      return {std::nullopt, false,
              missing + " and " + first.path + " is not on disk to read it from: the activation width is unknown"};
    }
    try {
      const auto real = check_place_file(place, first.path, first.path, first.artifact_bytes, first.sha256, "layer");
      const auto g = GgufFile::open(real);
      if (const auto t = activation_width_tensor(g, first.layer_index)) {
        return {t->elements, true,
                missing + "; using " + std::to_string(t->elements) + ", the element count of " + t->name + " in " +
                    first.path + " (the reference runtime's fallback)"};
      }
      const std::string blk = "blk." + std::to_string(first.layer_index) + ".";
      return {std::nullopt, false,
              missing + " and " + first.path + " has neither " + blk + "hc_attn_norm.weight nor " + blk +
                  "attn_norm.weight: the activation width is unknown"};
    } catch (const Error& e) {
      return {std::nullopt, false, missing + " and " + first.path + " cannot be read (" + e.what() + ")"};
    }
  }

  PackageDescription describe(const OpenedPlace& place, const PackageCatalog& catalog) const override {
    return describe_manifest(m_, place, activation_width(place, &catalog));
  }

  SourceLayout source_layout(const PackageCatalog& catalog) const override { return source_layout_v1(m_, catalog); }

 private:
  // The model parts in load order: metadata, embeddings, layers, output.
  std::vector<const ArtifactEntry*> model_parts() const {
    std::vector<const ArtifactEntry*> model = {&m_.shared.metadata, &m_.shared.embeddings};
    for (const auto& l : m_.layers) model.push_back(&l);
    model.push_back(&m_.shared.output);
    return model;
  }

  // Reads the headers of these model parts (catalog indexes, in load order)
  // into the catalog, bringing them through place.source in one batch first.
  // With `headers`, a payload part the place lacks is read as its first
  // bytes through the source instead (when the source can), not brought.
  void read_fragments(const OpenedPlace& place, PackageCatalog& cat, const std::vector<size_t>& which,
                      bool headers = false) const {
    const auto model = model_parts();
    std::map<size_t, std::shared_ptr<const GgufFile>> heads;
    if (place.source && !which.empty()) {
      std::vector<size_t> absent;  // payload parts read as their headers
      for (const size_t i : which) {
        if (!is_safe_relative_path(model.at(i)->path)) {
          throw_invalid(place.ref + ": artifact path \"" + model.at(i)->path + "\" is not a safe relative path");
        }
        std::error_code ec;
        if (headers && cat.artifacts[i].kind == CatalogArtifactKind::kPayload && !fs::exists(place.root / model.at(i)->path, ec)) {
          absent.push_back(i);
        }
      }
      // Several at once: each is a round trip or two, and a model has hundreds.
      std::vector<std::shared_ptr<const GgufFile>> got(absent.size());
      detail::run_jobs_largest_first(std::vector<uint64_t>(absent.size(), 1), kHeaderReadsAtOnce,
                                     [&](size_t j) { got[j] = read_head(place, *model.at(absent[j])); });
      for (size_t j = 0; j < absent.size(); ++j) {
        if (got[j]) heads.emplace(absent[j], std::move(got[j]));
      }
      std::vector<const ArtifactEntry*> want;
      for (const size_t i : which) {
        if (!heads.contains(i)) want.push_back(model.at(i));
      }
      place.source->provide(want);
    }
    for (const size_t i : which) {
      if (const auto h = heads.find(i); h != heads.end()) {
        try {
          add_fragment_v1(cat, i, h->second, /*header_only=*/true);
        } catch (const Error& err) {
          throw err.with_context(place.ref);
        }
        continue;
      }
      const CatalogArtifact& a = cat.artifacts[i];
      const ArtifactEntry& e = *model.at(i);
      const fs::path real =
          check_place_file(place, e.path, e.path, e.artifact_bytes, e.sha256, part_role_name(a.role.value_or(PartRole::kMetadata)));
      try {
        add_fragment_v1(cat, i, std::make_shared<const GgufFile>(GgufFile::open(real)));
      } catch (const Error& err) {
        throw err.with_context(place.ref);
      }
    }
  }

  // The GGUF header of `e` from its first bytes through place.source,
  // growing the prefix until the header parses (64 KiB, then x4, up to the
  // file or 64 MiB); nullopt when the source cannot read part of a file.
  static std::shared_ptr<const GgufFile> read_head(const OpenedPlace& place, const ArtifactEntry& e) {
    constexpr uint64_t kFirst = uint64_t{64} << 10, kMax = uint64_t{64} << 20;
    uint64_t want = std::min(e.artifact_bytes, kFirst);
    for (;;) {
      auto bytes = place.source->head(e, want);
      if (!bytes) return nullptr;
      // The first 8 bytes decide whether this is a GGUF at all: no growing for a file that is not one.
      static constexpr uint8_t kMagic[4] = {'G', 'G', 'U', 'F'};
      if (bytes->size() < 8 || !std::equal(kMagic, kMagic + 4, bytes->begin())) {
        throw_invalid(place.ref + ": " + e.path + ": its first bytes are not a GGUF header");
      }
      struct Held {
        std::vector<uint8_t> bytes;
        std::optional<GgufFile> file;
      };
      auto held = std::make_shared<Held>();
      held->bytes = std::move(*bytes);
      try {
        GgufLimits lim;
        lim.directory_only = true;  // the tensors' bytes are not here
        held->file.emplace(GgufFile::parse(held->bytes, e.path, lim));
        return std::shared_ptr<const GgufFile>(held, &*held->file);
      } catch (const Error& err) {
        if (want >= e.artifact_bytes || want >= kMax) {
          throw Error(ErrorKind::kInvalidInput, place.ref + ": " + e.path + ": no GGUF header in its first " +
                                                    std::to_string(want) + " bytes: " + err.what());
        }
        want = std::min({e.artifact_bytes, want * 4, kMax});
      }
    }
  }

  // The fragments a stage of `range` reads (every fragment without one).
  PackageCatalog read(const OpenedPlace& place, std::optional<LayerRange> range, bool headers = false) const {
    PackageCatalog cat = catalog_artifacts_v1(m_);  // the model parts in load order, then the projectors
    std::vector<size_t> which;
    for (size_t i = 0; i < cat.artifacts.size(); ++i) {
      const CatalogArtifact& a = cat.artifacts[i];
      if (a.kind == CatalogArtifactKind::kSidecar) continue;
      if (!range || stage_reads_part(a, *range, m_.layer_count)) which.push_back(i);
    }
    read_fragments(place, cat, which, headers);
    if (range && range->end == m_.layer_count && range->start != 0 && cat.find_tensor("output.weight") == nullptr) {
      // A tied output projection reads the token embeddings (whole part, as select_stage loads it).
      std::vector<size_t> embeddings;
      for (size_t i = 0; i < cat.artifacts.size(); ++i) {
        if (cat.artifacts[i].role == PartRole::kEmbeddings) embeddings.push_back(i);
      }
      // Load order keeps the first copy of a repeated global: rebuild with the embeddings in place.
      PackageCatalog again = catalog_artifacts_v1(m_);
      which.insert(which.begin() + 1, embeddings.begin(), embeddings.end());
      read_fragments(place, again, which);
      cat = std::move(again);
    }
    try {
      for (size_t i = 0; i < cat.artifacts.size(); ++i) check_layer_fragment_v1(cat, i);
    } catch (const Error& err) {
      throw err.with_context(place.ref);
    }
    return cat;
  }

  // The artifacts; for a range that owns the output, its header too
  // (whether the output is tied: a final stage then loads the embeddings).
  PackageCatalog listing(const OpenedPlace& place, std::optional<LayerRange> range) const {
    PackageCatalog cat = catalog_artifacts_v1(m_);
    if (range && range->end == m_.layer_count) read_fragments(place, cat, {model_parts().size() - 1});
    return cat;
  }

  PackageManifest m_;
  PackageIdentity id_;
};

}  // namespace

PackageIdentity identity_of(const PackageManifest& m) {
  PackageIdentity id;
  id.schema_version = m.schema_version;
  id.model_id = m.model_id;
  id.layer_count = m.layer_count;
  id.abi_version = m.skippy_abi_version;
  id.abi_field = "skippy_abi_version";
  id.abi_rule = AbiRule::kSameMajorNoNewerMinor;
  id.source_model = m.source_model;
  id.activation_width = m.activation_width;
  id.generation = m.generation;
  id.generation_problem = m.generation_problem;
  id.generation_warnings = generation_warnings(m.generation);
  if (m.generation && m.generation->speculative_decoding) {
    std::set<uint32_t> mtp;
    auto take = [&](const std::string& type, const ProposerFields& f) {
      if (type == "native-mtp" && f.layer_indices) mtp.insert(f.layer_indices->begin(), f.layer_indices->end());
    };
    for (const auto& [pid, p] : m.generation->speculative_decoding->proposers) take(p.type, p);
    for (const auto& [sid, s] : m.generation->speculative_decoding->strategies) take(s.type, s);
    id.native_mtp_layers.assign(mtp.begin(), mtp.end());
  }
  id.selects_whole_parts = true;
  id.checks_declared_sidecars = true;
  return id;
}

std::shared_ptr<const PackageReader> make_reader(std::string_view text, std::string_view origin) {
  return std::make_shared<const Reader>(parse_manifest(text, origin, GenerationProblems::kSetAside));
}

const PackageManifest* manifest_of(const PackageReader& reader) noexcept {
  const auto* r = dynamic_cast<const Reader*>(&reader);
  return r ? &r->manifest() : nullptr;
}

const PackageManifest* manifest_of(const OpenedPackage& pkg) noexcept {
  return pkg.reader ? manifest_of(*pkg.reader) : nullptr;
}

}  // namespace skippy::schema1
