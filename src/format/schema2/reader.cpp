// Package schema 2's reader (see reader.h): the root lists the artifacts;
// the carrier, brought first and checked (size and SHA-256: the package_id
// commits to its digest, and the locators are only as good as the carrier),
// gives every tensor and where it lies.
#include "format/schema2/reader.h"

#include <set>

#include "format/generation_v2.h"
#include "format/verification_cache.h"
#include "skippy/error.h"
#include "skippy/gguf.h"
#include "skippy/package_catalog.h"
#include "util/file.h"

namespace skippy::schema2 {
namespace {

namespace fs = std::filesystem;

class Reader final : public PackageReader {
 public:
  Reader(PackageRootV2 root, std::string origin) : root_(std::move(root)), id_(identity_of(root_, origin)) {}

  const PackageIdentity& identity() const override { return id_; }
  const PackageRootV2& root() const { return root_; }

  void on_open(OpenedPlace& place) const override {
    place.names_artifacts_by_id = true;
    place.declarer = "catalog";
  }

  PackageCatalog catalog(const OpenedPlace& place, const CatalogNeed& need) const override {
    const std::string origin = (place.root / std::string(kManifestFileName)).string();
    if (need.tensors == CatalogNeed::Tensors::kRootOnly) return catalog_artifacts_v2(root_, origin);
    if (need.range) check_stage_range(place.ref, *need.range, root_.layer_count);
    // Every other need reads the carrier: it holds the whole directory.
    PackageCatalog cat = build_catalog_v2(root_, open_carrier(place), place.ref + ": " + carrier().path);
    cat.artifacts.at(cat.carrier).read_for_catalog = true;
    cat.artifacts.at(cat.carrier).hashed_on_read = true;  // open_carrier checked its SHA-256
    return cat;
  }

  ActivationWidth activation_width(const OpenedPlace& place, const PackageCatalog* catalog) const override {
    (void)place;
    if (catalog && catalog->carrier_file && root_.layer_count > 0) {
      if (const auto w = activation_width_tensor(*catalog->carrier_file, 0)) {
        return {w->elements, true,
                "package schema 2: the activation width " + std::to_string(w->elements) +
                    " is the element count of blk.0's attn_norm in the carrier's directory"};
      }
    }
    return {std::nullopt, false, ""};
  }

  PackageDescription describe(const OpenedPlace& place, const PackageCatalog& catalog) const override {
    return describe_root(root_, place, catalog);
  }

  SourceLayout source_layout(const PackageCatalog& catalog) const override { return source_layout_v2(root_, catalog); }

 private:
  const V2Artifact& carrier() const {
    for (const auto& a : root_.artifacts) {
      if (a.id == root_.source_model.metadata_artifact_id) return a;
    }
    throw_invalid("the root names no metadata carrier");  // (parse_package_root_v2 guarantees it)
  }

  // The carrier brought through the place's source, checked and opened as a
  // directory-only GGUF.
  std::shared_ptr<const GgufFile> open_carrier(const OpenedPlace& place) const {
    const V2Artifact& c = carrier();
    if (c.byte_size > kCarrierMaxBytes) {
      throw_invalid(place.ref + ": metadata carrier " + c.id + " (" + c.path + ") is catalogued at " +
                    std::to_string(c.byte_size) + " bytes, over the " + std::to_string(kCarrierMaxBytes) +
                    "-byte cap for a carrier (refused before it is fetched or read)");
    }
    if (place.source) {
      if (!is_safe_relative_path(c.path)) {
        throw_invalid(place.ref + ": artifact " + c.id + " (" + c.path + "): not a safe relative path");
      }
      ArtifactEntry e;
      e.path = c.path;
      e.artifact_bytes = c.byte_size;
      e.sha256 = c.sha256;
      try {
        place.source->provide({&e});
      } catch (const Error& err) {
        throw err.with_context(place.ref + ": metadata carrier " + c.id + " (" + c.path + ")");
      }
    }
    const fs::path real = check_place_file(place, c.id, c.path, c.byte_size, c.sha256, "metadata");
    if (!place.source || !place.source->verified_while_fetching(c.path)) {
      // Through the verification cache: a repeat open of the same carrier
      // file (same identity and metadata) is not hashed again.
      const std::string digest = detail::sha256_file_cached(place.manifest_sha256, real, c.path, c.sha256, c.byte_size);
      if (digest != c.sha256) {
        throw_integrity(place.ref + ": artifact " + c.id + " (" + c.path + "): SHA-256 " + digest +
                        " differs from the catalog's " + c.sha256 +
                        " (the metadata carrier is not the one the package_id commits to)" +
                        (place.source ? "; the cached copy is damaged: remove " + real.string() + " and fetch again" : ""));
      }
    }
    GgufLimits limits;
    limits.directory_only = true;
    try {
      return std::make_shared<const GgufFile>(GgufFile::open(real, limits));
    } catch (const Error& e) {
      throw e.with_context(place.ref + ": metadata carrier " + c.path);
    }
  }

  PackageRootV2 root_;
  PackageIdentity id_;
};

}  // namespace

PackageIdentity identity_of(const PackageRootV2& root, std::string_view origin) {
  PackageIdentity id;
  id.schema_version = root.schema_version;
  id.package_id = root.package_id;
  id.model_id = root.model_id;
  id.layer_count = root.layer_count;
  id.abi_version = root.native_abi_version;
  id.abi_field = "native_abi_version";
  id.abi_rule = AbiRule::kExact;
  const auto& s = root.source_model;
  id.source_model.sha256 = s.sha256;
  id.source_model.repo = s.repo.value_or("");
  id.source_model.revision = s.revision.value_or("");
  id.source_model.primary_file = s.primary_file.value_or("");
  id.source_model.canonical_ref = s.canonical_ref.value_or("");
  id.source_model.distribution_id = s.distribution_id.value_or("");
  for (const auto& f : s.files) id.source_model.files.push_back({f.path, f.byte_size, f.sha256});
  if (root.generation) {
    try {
      id.generation = generation_v1_of(*root.generation, root.layer_count, origin);
    } catch (const Error& e) {
      id.generation_untranslatable = e.what();
    }
    id.request_defaults = root.generation->request_defaults;
    if (id.request_defaults) {
      id.request_defaults_document = nlohmann::json::parse(package_root_v2_json(root))["generation"]["request_defaults"];
    }
    if (const auto& sd = root.generation->speculative_decoding) {
      std::set<uint32_t> mtp;
      for (const auto& [pid, p] : sd->proposers) {
        if (p.type == "native-mtp") mtp.insert(p.layer_indices.begin(), p.layer_indices.end());
      }
      for (const auto& [sid, st] : sd->strategies) {
        if (st.type == "native-mtp") mtp.insert(st.layer_indices.begin(), st.layer_indices.end());
      }
      id.native_mtp_layers.assign(mtp.begin(), mtp.end());
    }
  }
  id.publisher_metadata = root.publisher_metadata;
  id.publisher_defaults = root.publisher_defaults;
  id.sidecars = root.sidecars;
  id.selects_whole_parts = false;
  id.checks_declared_sidecars = false;
  id.declares_generation_policy = false;
  return id;
}

std::shared_ptr<const PackageReader> make_reader(std::string_view text, std::string_view origin) {
  return std::make_shared<const Reader>(parse_package_root_v2(text, origin), std::string(origin));
}

const PackageRootV2* root_of(const PackageReader& reader) noexcept {
  const auto* r = dynamic_cast<const Reader*>(&reader);
  return r ? &r->root() : nullptr;
}

const PackageRootV2* root_of(const OpenedPackage& pkg) noexcept { return pkg.reader ? root_of(*pkg.reader) : nullptr; }

}  // namespace skippy::schema2
