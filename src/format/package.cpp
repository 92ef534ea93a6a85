// One package behind one reader (skippy/package.h): the registry of
// readers, the one place a root's schema is decided, and opening a package
// directory.
#include "skippy/package.h"

#include <mutex>

#include "format/schema1/reader.h"
#include "format/schema2/reader.h"
#include "skippy/error.h"
#include "skippy/gguf.h"
#include "skippy/abi.h"
#include "util/file.h"
#include "util/sha256.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;

std::mutex& registry_mutex() {
  static std::mutex mu;
  return mu;
}

// Registered readers, newest first; the built-in ones follow.
std::vector<PackageReaderFactory>& registered() {
  static std::vector<PackageReaderFactory> readers;
  return readers;
}

}  // namespace

void register_package_reader(PackageReaderFactory factory) {
  std::lock_guard g(registry_mutex());
  registered().insert(registered().begin(), std::move(factory));
}

std::shared_ptr<const PackageReader> open_package_reader(std::string_view text, std::string_view origin) {
  std::vector<PackageReaderFactory> readers;
  {
    std::lock_guard g(registry_mutex());
    readers = registered();
  }
  for (const auto& r : readers) {
    if (auto reader = r.make(text, origin)) return reader;
  }
  const RootSchema schema = package_root_schema(text);
  if (auto why = schema.unsupported()) throw Error(ErrorKind::kInvalidInput, std::string(origin) + ": " + *why);
  if (schema.schema == kPackageSchemaV2) return schema2::make_reader(text, origin);
  // Last: schema 1's parser says what is wrong with a root nobody read.
  return schema1::make_reader(text, origin);
}

RootSchema package_root_schema(std::string_view text) noexcept {
  RootSchema s;
  s.declared = peek_schema_version(text);
  if (s.declared == kPackageSchemaV2) s.schema = kPackageSchemaV2;
  return s;
}

std::optional<std::string> RootSchema::unsupported() const {
  if (!declared || *declared == kManifestSchemaVersion || *declared == kPackageSchemaV2) return std::nullopt;
  return "schema_version: unsupported schema version " + std::to_string(*declared) +
         "; this runtime reads schema_version 1 and 2 and refuses other versions rather than loading them best-effort";
}

SourceLayout PackageReader::source_layout(const PackageCatalog& catalog) const {
  SourceLayout none;
  none.missing = "the source's layout (package schema " + std::to_string(catalog.schema_version) +
                 "'s reader records none of the source file's KV order, tensor order or shard boundaries)";
  return none;
}

OpenedCatalog OpenedPackage::catalog(const CatalogNeed& need) const {
  OpenedCatalog out;
  static_cast<OpenedPlace&>(out) = *this;
  out.catalog = reader->catalog(*this, need);
  return out;
}

OpenedPackage open_package_dir(std::string ref, const fs::path& root, const fs::path& boundary,
                               std::shared_ptr<ArtifactSource> source) {
  OpenedPackage pkg;
  pkg.ref = std::move(ref);
  pkg.root = root;
  pkg.boundary = boundary;
  pkg.source = std::move(source);
  std::error_code ec;
  const fs::path manifest_path = root / std::string(kManifestFileName);
  if (!fs::exists(manifest_path, ec)) {
    if (const auto interrupted = interrupted_write_package(root)) throw_not_found(pkg.ref + ": " + *interrupted);
    throw_not_found(pkg.ref + ": no " + std::string(kManifestFileName) + " (not a layer package)");
  }
  const std::string text = read_small_file(manifest_path, kManifestMaxBytes);
  pkg.manifest_sha256 = sha256_hex(text);
  pkg.reader = open_package_reader(text, manifest_path.string());
  pkg.reader->on_open(pkg);
  return pkg;
}

OpenedPackage open_local_package(const fs::path& dir) {
  const std::string name = dir.string();
  std::error_code ec;
  if (!fs::exists(dir, ec)) throw_not_found(name + ": no such package directory");
  if (!fs::is_directory(dir, ec)) throw_invalid(name + ": not a package directory");
  const fs::path boundary = local_package_boundary(dir, ec);
  if (ec) throw_invalid(name + ": cannot resolve: " + ec.message());
  OpenedPackage pkg = open_package_dir(name, fs::absolute(dir), boundary);
  // A Hugging Face cache snapshot: the cache's rule, as through hf://.
  pkg.always_verify = is_hf_cache_snapshot(dir);
  return pkg;
}

std::optional<WidthTensor> activation_width_tensor(const GgufFile& file, uint32_t layer) {
  const std::string blk = "blk." + std::to_string(layer) + ".";
  // Exact names: blk.N.cross_attn_norm.weight or blk.N.nextn.attn_norm.weight never count.
  for (const std::string& name : {blk + "hc_attn_norm.weight", blk + "attn_norm.weight"}) {
    if (const auto* t = file.find_tensor(name)) {
      uint64_t n = 1;
      for (const int64_t d : t->ne) n *= static_cast<uint64_t>(d);
      return WidthTensor{name, n};
    }
  }
  return std::nullopt;
}

void check_runtime_abi(const PackageIdentity& identity, const RuntimeAbi& runtime, std::string_view package_ref) {
  if (runtime.line != nullptr) {
    const auto verdict = judge_runtime_line(*runtime.line, identity, "");
    if (verdict.abi_refused && verdict.refusals.size() == 1) {
      // Only the ABI: the generic message carries the restamp command.
      check_runtime_abi(identity.schema_version, identity.abi_version, runtime.version, package_ref, runtime.rule);
    }
    if (!verdict.admits()) {
      std::string why;
      for (const auto& r : verdict.refusals) why += (why.empty() ? "" : "; ") + r;
      throw Error(ErrorKind::kInvalidInput, std::string(package_ref) + ": mesh-llm " + std::string(runtime.line->label) +
                                                " " + why + " (" + std::string(runtime.line->fields_source) + ")");
    }
    return;
  }
  check_runtime_abi(identity.schema_version, identity.abi_version, runtime.version, package_ref, runtime.rule);
}

DeclaredWording declared_wording(const OpenedPlace& place) {
  if (place.names_artifacts_by_id) return {"the catalog says", "the catalog says byte_size"};
  return {"manifest says", "manifest says artifact_bytes"};
}

std::string artifact_label(const OpenedPlace& place, std::string_view id, std::string_view rel) {
  if (!place.names_artifacts_by_id) return std::string(rel);
  return "artifact " + std::string(id) + " (" + std::string(rel) + ")";
}

fs::path check_place_file(const OpenedPlace& place, std::string_view id, std::string_view rel, uint64_t bytes,
                          std::string_view sha256, std::string_view what) {
  const auto names = place.names_artifacts_by_id ? catalog_file_names(place.ref, id, rel)
                                                 : manifest_file_names(place.ref, rel, what);
  const fs::path real = check_package_file(place.root, place.boundary, rel, bytes, names);
  check_cached_blob_name(real, place.boundary, sha256, names.label);
  return real;
}

}  // namespace skippy
