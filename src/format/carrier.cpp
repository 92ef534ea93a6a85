// package schema 2: the metadata carrier's locators -> a PackageCatalog
// (see skippy/package_catalog.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <string>

#include "skippy/error.h"
#include "gguf/ggml_types.h"
#include "skippy/package_catalog.h"
#include "format/schema2/reader.h"

namespace skippy {
namespace {

[[noreturn]] void carrier_fail(std::string_view origin, const std::string& what) {
  throw_invalid(std::string(origin) + ": " + what);
}

std::optional<uint32_t> catalog_decimal_u32(std::string_view s, bool allow_leading_zeros) {
  if (s.empty() || s.size() > 10) return std::nullopt;
  if (!allow_leading_zeros && s.size() > 1 && s[0] == '0') return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  if (v > UINT32_MAX) return std::nullopt;
  return static_cast<uint32_t>(v);
}

// A locator array: exactly the element type the contract names (u32 for
// parts and alignments, u64 for offsets and sizes), one entry per tensor.
std::vector<uint64_t> carrier_locator_array(const GgufFile& f, std::string_view key, GgufType element, size_t tensors,
                                            std::string_view origin) {
  const GgufKv* kv = f.find_kv(key);
  const std::string k(key);
  const std::string want = std::string(gguf_type_name(element)) + "[]";
  if (kv == nullptr) carrier_fail(origin, "metadata carrier is missing the locator array " + k + " (" + want + ")");
  if (!kv->value.is_array() || kv->value.array_type() != element) {
    const std::string found = kv->value.is_array() ? std::string(gguf_type_name(kv->value.array_type())) + "[]"
                                                   : std::string(gguf_type_name(kv->value.type()));
    carrier_fail(origin, k + ": must be " + want + ", found " + found);
  }
  const uint64_t n = kv->value.array_size();
  if (n != tensors) {
    carrier_fail(origin, k + ": holds " + std::to_string(n) + " entries for " + std::to_string(tensors) +
                             " tensors in the carrier's directory (one per tensor, in directory order)");
  }
  const size_t width = gguf_scalar_size(element);
  const auto enc = kv->value.encoded();  // element type (4), count (8), elements
  std::vector<uint64_t> out(static_cast<size_t>(n));
  for (size_t i = 0; i < out.size(); ++i) {
    uint64_t u = 0;
    std::memcpy(&u, enc.data() + 12 + i * width, width);  // little-endian, as the GGUF reader requires
    out[i] = u;
  }
  return out;
}

uint64_t carrier_uint(const GgufFile& f, std::string_view key, std::string_view origin) {
  const GgufKv* kv = f.find_kv(key);
  if (kv == nullptr) carrier_fail(origin, "metadata carrier is missing " + std::string(key));
  const auto v = kv->value.as_uint();
  if (!v) {
    carrier_fail(origin, std::string(key) + ": must be an unsigned integer, found " +
                             std::string(gguf_type_name(kv->value.type())));
  }
  return *v;
}

}  // namespace

bool is_carrier_key(std::string_view key) noexcept {
  return key == kCarrierMetadataOnlyKey || key == kCarrierPartCountKey || key == kCarrierLocatorSchemaKey ||
         key == kCarrierTensorPartKey || key == kCarrierTensorOffsetKey || key == kCarrierTensorSizeKey ||
         key == kCarrierTensorAlignmentKey;
}

std::string_view catalog_artifact_kind_name(CatalogArtifactKind k) noexcept {
  switch (k) {
    case CatalogArtifactKind::kCarrier: return "carrier";
    case CatalogArtifactKind::kPayload: return "payload";
    case CatalogArtifactKind::kSidecar: return "sidecar";
    case CatalogArtifactKind::kPublisherMetadata: return "publisher_metadata";
  }
  return "?";
}

const CatalogTensor* PackageCatalog::find_tensor(std::string_view name) const noexcept {
  const auto it = tensor_index.find(std::string(name));
  return it == tensor_index.end() ? nullptr : &tensors[it->second];
}

const CatalogArtifact* PackageCatalog::find_artifact(std::string_view id) const noexcept {
  const auto it = artifact_index.find(std::string(id));
  return it == artifact_index.end() ? nullptr : &artifacts[it->second];
}

std::optional<uint32_t> tensor_name_layer(std::string_view name) noexcept {
  if (!name.starts_with("blk.")) return std::nullopt;
  const std::string_view rest = name.substr(4);
  const size_t dot = rest.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  return catalog_decimal_u32(rest.substr(0, dot), /*allow_leading_zeros=*/false);
}

std::optional<uint32_t> artifact_path_layer(std::string_view path) noexcept {
  constexpr std::string_view kPrefix = "layers/layer-";
  constexpr std::string_view kSuffix = ".gguf";
  if (!path.starts_with(kPrefix) || !path.ends_with(kSuffix)) return std::nullopt;
  std::string_view stem = path.substr(kPrefix.size(), path.size() - kPrefix.size() - kSuffix.size());
  if (const size_t part = stem.find("-part"); part != std::string_view::npos) {
    const std::string_view mm = stem.substr(part + 5);
    if (!catalog_decimal_u32(mm, /*allow_leading_zeros=*/true)) return std::nullopt;
    stem = stem.substr(0, part);
  }
  return catalog_decimal_u32(stem, /*allow_leading_zeros=*/true);
}

std::optional<std::string> non_finite_float_kv(const GgufFile& f) {
  for (const auto& kv : f.kvs()) {
    const GgufType t = kv.value.type();
    if (t == GgufType::kFloat32 || t == GgufType::kFloat64) {
      const auto v = kv.value.as_float();
      if (v && !std::isfinite(*v)) return std::string(kv.key) + " is " + std::to_string(*v) + " (not a finite number)";
      continue;
    }
    if (t != GgufType::kArray) continue;
    const GgufType et = kv.value.array_type();
    if (et != GgufType::kFloat32 && et != GgufType::kFloat64) continue;
    const auto enc = kv.value.encoded();
    const size_t width = et == GgufType::kFloat32 ? 4 : 8;
    constexpr size_t kHead = 4 + 8;  // element type, count
    const uint64_t n = kv.value.array_size();
    for (uint64_t i = 0; i < n && kHead + (i + 1) * width <= enc.size(); ++i) {
      double d = 0;
      if (width == 4) {
        float x = 0;
        std::memcpy(&x, enc.data() + kHead + i * 4, 4);
        d = x;
      } else {
        std::memcpy(&d, enc.data() + kHead + i * 8, 8);
      }
      if (!std::isfinite(d)) return std::string(kv.key) + "[" + std::to_string(i) + "] is not a finite number";
    }
  }
  return std::nullopt;
}

std::optional<std::string> catalog_kv_refusal(const GgufFile& f) {
  if (auto bad = non_finite_float_kv(f)) return bad;
  for (const auto& kv : f.kvs()) {
    const GgufType t = kv.value.type();
    if (t == GgufType::kString) {
      const auto v = kv.value.as_string();
      if (v && !is_valid_utf8(*v)) return std::string(kv.key) + " is a string that is not valid UTF-8";
      continue;
    }
    if (t != GgufType::kArray) continue;
    const GgufType et = kv.value.array_type();
    if (et == GgufType::kArray) return std::string(kv.key) + " is an array of arrays (nested arrays have no catalog form)";
    if (et != GgufType::kString) continue;
    // Walked in place (a vocabulary holds 10^5 strings; the reader checked every length).
    const auto enc = kv.value.encoded();
    size_t at = 4 + 8;  // element type, count
    const uint64_t n = kv.value.array_size();
    for (uint64_t i = 0; i < n && at + 8 <= enc.size(); ++i) {
      uint64_t len = 0;
      std::memcpy(&len, enc.data() + at, 8);
      at += 8;
      if (len > enc.size() - at) break;
      const std::string_view item(reinterpret_cast<const char*>(enc.data() + at), static_cast<size_t>(len));
      at += static_cast<size_t>(len);
      if (!is_valid_utf8(item)) return std::string(kv.key) + "[" + std::to_string(i) + "] is a string that is not valid UTF-8";
    }
  }
  return std::nullopt;
}

bool catalog_skips_tensor(std::span<const int64_t> ne) noexcept {
  return std::find(ne.begin(), ne.end(), int64_t{0}) != ne.end();
}

PackageCatalog catalog_artifacts_v2(const PackageRootV2& root, std::string_view origin) {
  PackageCatalog cat;
  static_cast<PackageIdentity&>(cat) = schema2::identity_of(root, origin);

  // Artifacts: kinds, path layers, part indexes (rank by id among payloads).
  std::map<std::string, std::string> sidecar_kind;
  for (const auto& s : root.sidecars) sidecar_kind[s.artifact_id] = s.kind;
  std::map<std::string, std::string> publisher_role;
  for (const auto& p : root.publisher_metadata) publisher_role.emplace(p.artifact_id, p.role);
  bool have_carrier = false;
  for (size_t i = 0; i < root.artifacts.size(); ++i) {
    const auto& a = root.artifacts[i];
    CatalogArtifact ca;
    ca.id = a.id;
    ca.path = a.path;
    ca.bytes = a.byte_size;
    ca.sha256 = a.sha256;
    if (a.id == root.source_model.metadata_artifact_id) {
      ca.kind = CatalogArtifactKind::kCarrier;
      ca.role = PartRole::kMetadata;
      cat.carrier = i;
      have_carrier = true;
    } else if (sidecar_kind.contains(a.id)) {
      ca.kind = CatalogArtifactKind::kSidecar;
      ca.role = PartRole::kProjector;
      for (const auto& s : root.sidecars) {
        if (s.artifact_id == a.id) ca.sidecar_kind = s.kind, ca.sidecar_name = s.name;
      }
    } else if (const auto pr = publisher_role.find(a.id); pr != publisher_role.end()) {
      ca.kind = CatalogArtifactKind::kPublisherMetadata;  // not ranked among the payload parts
      ca.publisher_role = pr->second;
    } else {
      ca.kind = CatalogArtifactKind::kPayload;
      ca.read_whole = false;  // a stage reads its tensors' extents
      ca.layer = artifact_path_layer(a.path);
      if (ca.layer) ca.role = PartRole::kLayer;
      if (ca.layer && *ca.layer >= root.layer_count) {
        carrier_fail(origin, "artifact " + a.id + " (" + a.path + "): layer " + std::to_string(*ca.layer) +
                                 " is outside the package's " + std::to_string(root.layer_count) + " layers");
      }
    }
    if (!cat.artifact_index.emplace(a.id, i).second) carrier_fail(origin, "artifact id " + a.id + " appears more than once");
    cat.artifacts.push_back(std::move(ca));
  }
  if (!have_carrier) carrier_fail(origin, "the metadata carrier " + root.source_model.metadata_artifact_id + " is not in the catalog");
  std::vector<size_t> payload;  // by id: part index -> artifact index
  for (size_t i = 0; i < cat.artifacts.size(); ++i) {
    if (cat.artifacts[i].kind == CatalogArtifactKind::kPayload) payload.push_back(i);
  }
  std::sort(payload.begin(), payload.end(), [&](size_t a, size_t b) { return cat.artifacts[a].id < cat.artifacts[b].id; });
  if (payload.empty()) carrier_fail(origin, "the package has no payload artifacts (only the carrier and sidecars)");
  for (size_t p = 0; p < payload.size(); ++p) cat.artifacts[payload[p]].part_index = static_cast<uint32_t>(p);
  for (auto& a : cat.artifacts) a.tensors_listed = false;
  return cat;
}

PackageCatalog build_catalog_v2(const PackageRootV2& root, std::shared_ptr<const GgufFile> carrier_file,
                                std::string_view origin) {
  const GgufFile& f = *carrier_file;
  if (const auto bad = catalog_kv_refusal(f)) {
    carrier_fail(origin, "the metadata carrier " + root.source_model.metadata_artifact_id + ": " + *bad +
                             "; package schema 2 metadata must have a JSON form (finite numbers, UTF-8 strings, "
                             "arrays of scalars: the reference's catalog refuses anything else)");
  }
  PackageCatalog cat = catalog_artifacts_v2(root, origin);
  for (auto& a : cat.artifacts) a.tensors_listed = true;
  std::vector<size_t> payload;  // part index -> artifact index
  for (size_t i = 0; i < cat.artifacts.size(); ++i) {
    if (const auto& a = cat.artifacts[i]; a.kind == CatalogArtifactKind::kPayload) {
      if (payload.size() <= *a.part_index) payload.resize(*a.part_index + 1);
      payload[*a.part_index] = i;
    }
  }

  // The carrier's own rules.
  const std::string cpath = cat.artifacts[cat.carrier].path;
  if (f.file_size() != f.data_offset()) {
    carrier_fail(origin, cpath + ": the metadata carrier holds " + std::to_string(f.file_size() - std::min(f.file_size(), f.data_offset())) +
                             " bytes of tensor payload after its data offset " + std::to_string(f.data_offset()) +
                             " (a carrier has none: its length must equal its data offset)");
  }
  {
    const GgufKv* kv = f.find_kv(kCarrierMetadataOnlyKey);
    if (kv == nullptr || kv->value.type() != GgufType::kBool || kv->value.as_bool() != true) {
      carrier_fail(origin, cpath + ": " + std::string(kCarrierMetadataOnlyKey) +
                               " must be the bool true (the carrier's typed metadata-only marker)");
    }
  }
  if (const uint64_t v = carrier_uint(f, kCarrierLocatorSchemaKey, origin); v != kCarrierLocatorSchema) {
    carrier_fail(origin, cpath + ": " + std::string(kCarrierLocatorSchemaKey) + " is " + std::to_string(v) +
                             "; this reader speaks locator schema 1");
  }
  if (const uint64_t v = carrier_uint(f, kCarrierPartCountKey, origin); v != payload.size()) {
    carrier_fail(origin, cpath + ": " + std::string(kCarrierPartCountKey) + " is " + std::to_string(v) + " but the root lists " +
                             std::to_string(payload.size()) + " payload artifacts (neither the carrier nor a sidecar)");
  }
  cat.architecture = std::string(f.architecture());
  if (cat.architecture.empty()) carrier_fail(origin, cpath + ": the carrier has no general.architecture");

  // The directory's entries the catalog holds: a zero-dimension placeholder
  // is skipped, and the locator arrays index the others (as the reference's
  // resolve_package_carrier does after its reader skipped them).
  std::vector<const GgufTensorInfo*> listed;
  for (const auto& t : f.tensors()) {
    if (!catalog_skips_tensor(t.ne)) listed.push_back(&t);
  }
  const size_t n = listed.size();
  const auto parts = carrier_locator_array(f, kCarrierTensorPartKey, GgufType::kUint32, n, origin);
  const auto offsets = carrier_locator_array(f, kCarrierTensorOffsetKey, GgufType::kUint64, n, origin);
  const auto sizes = carrier_locator_array(f, kCarrierTensorSizeKey, GgufType::kUint64, n, origin);
  const auto aligns = carrier_locator_array(f, kCarrierTensorAlignmentKey, GgufType::kUint32, n, origin);

  cat.tensors.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const GgufTensorInfo& t = *listed[i];
    const std::string tn = "tensor '" + std::string(t.name) + "'";
    if (parts[i] >= payload.size()) {
      carrier_fail(origin, tn + ": part index " + std::to_string(parts[i]) + " names no payload artifact (there are " +
                               std::to_string(payload.size()) + ", ranked by id)");
    }
    CatalogTensor ct;
    ct.name = std::string(t.name);
    ct.ggml_type = t.type;
    for (const int64_t d : t.ne) ct.dims.push_back(static_cast<uint64_t>(d));
    ct.artifact = payload[static_cast<size_t>(parts[i])];
    ct.offset = offsets[i];
    ct.stored_bytes = sizes[i];
    ct.alignment = aligns[i];
    const CatalogArtifact& a = cat.artifacts[ct.artifact];
    const std::string where = " in artifact " + a.id + " (" + a.path + ")";
    if (ct.alignment == 0 || (ct.alignment & (ct.alignment - 1)) != 0) {
      carrier_fail(origin, tn + ": alignment " + std::to_string(ct.alignment) + " is not a non-zero power of two");
    }
    if (ct.offset % ct.alignment != 0) {
      carrier_fail(origin, tn + ": offset " + std::to_string(ct.offset) + " is not aligned to " +
                               std::to_string(ct.alignment) + " bytes" + where);
    }
    if (ct.stored_bytes == 0) carrier_fail(origin, tn + ": stored size is 0 (a stored tensor is not empty)");
    if (ct.stored_bytes != t.bytes) {
      carrier_fail(origin, tn + ": stored size " + std::to_string(ct.stored_bytes) + " differs from the " +
                               std::to_string(t.bytes) + " bytes its type " + std::string(ggml_type_name(t.type)) +
                               " and dims take");
    }
    if (ct.offset > a.bytes || ct.stored_bytes > a.bytes - ct.offset) {
      carrier_fail(origin, tn + ": extent " + std::to_string(ct.offset) + "+" + std::to_string(ct.stored_bytes) +
                               " runs past the end of artifact " + a.id + " (" + a.path + ", " +
                               std::to_string(a.bytes) + " bytes)");
    }
    ct.layer = tensor_name_layer(ct.name);
    ct.role = classify_tensor(ct.name).role;
    if (ct.layer && *ct.layer >= root.layer_count) {
      carrier_fail(origin, tn + ": layer " + std::to_string(*ct.layer) + " is outside the package's " +
                               std::to_string(root.layer_count) + " layers");
    }
    if (a.layer && ct.layer != a.layer) {
      carrier_fail(origin, tn + (ct.layer ? " of layer " + std::to_string(*ct.layer) : std::string(" (no layer)")) +
                               " is stored" + where + ", which holds layer " + std::to_string(*a.layer));
    }
    cat.tensor_index.emplace(ct.name, cat.tensors.size());
    ++cat.artifacts[ct.artifact].tensor_count;
    cat.tensors.push_back(std::move(ct));
  }

  // No two extents of one artifact overlap (sorted by start; each must begin
  // at or after the furthest end seen so far).
  std::vector<size_t> order(cat.tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    const auto& a = cat.tensors[x];
    const auto& b = cat.tensors[y];
    return std::tie(a.artifact, a.offset, x) < std::tie(b.artifact, b.offset, y);
  });
  for (size_t k = 1, furthest = 0; k < order.size(); ++k) {
    const auto& prev = cat.tensors[order[furthest]];
    const auto& cur = cat.tensors[order[k]];
    if (cur.artifact != prev.artifact) {
      furthest = k;
      continue;
    }
    if (cur.offset < prev.offset + prev.stored_bytes) {
      carrier_fail(origin, "tensor '" + cur.name + "': extent " + std::to_string(cur.offset) + "+" +
                               std::to_string(cur.stored_bytes) + " overlaps tensor '" + prev.name + "' (" +
                               std::to_string(prev.offset) + "+" + std::to_string(prev.stored_bytes) + ") in artifact " +
                               cat.artifacts[cur.artifact].id);
    }
    if (cur.offset + cur.stored_bytes > prev.offset + prev.stored_bytes) furthest = k;
  }

  cat.carrier_file = std::move(carrier_file);
  cat.bookkeeping_key = [](std::string_view key) { return is_carrier_key(key) || key.starts_with("split."); };
  return cat;
}

}  // namespace skippy
