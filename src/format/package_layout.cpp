#include "skippy/package_layout.h"

#include <charconv>
#include <cstdio>

#include "skippy/error.h"
#include "util/file.h"
#include "util/sha256.h"
#include "skippy/gguf.h"
#include "skippy/manifest.h"
#include "skippy/model_source.h"

namespace skippy {

std::optional<std::string> interrupted_write_package(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  bool marked = fs::exists(dir / kInProgressMarker, ec);
  uint64_t files = 0, bytes = 0;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name == kInProgressMarker || !it->is_regular_file(ec)) continue;
    marked = marked || is_temporary_name(name);
    ++files;
    bytes += it->file_size(ec);
  }
  if (!marked) return std::nullopt;
  return "an interrupted write-package left " + std::to_string(files) + " partial file" + (files == 1 ? "" : "s") +
         " (" + std::to_string(bytes) + " bytes); rerun it to finish, or delete the directory";
}

std::string layer_artifact_path(uint32_t layer_index) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "layers/layer-%05u.gguf", layer_index);
  return buf;
}

std::string_view part_role_name(PartRole r) noexcept {
  switch (r) {
    case PartRole::kMetadata: return "metadata";
    case PartRole::kEmbeddings: return "embeddings";
    case PartRole::kLayer: return "layer";
    case PartRole::kOutput: return "output";
    case PartRole::kProjector: return "projector";
  }
  return "metadata";
}

bool fragment_keeps_kv(PartRole role, std::string_view key, std::string_view architecture) noexcept {
  if (key.starts_with("split.")) return false;
  if (role == PartRole::kMetadata) return true;
  if (key == "general.architecture" || key == "general.alignment") return true;
  return !architecture.empty() && key.size() > architecture.size() + 1 && key.starts_with(architecture) &&
         key[architecture.size()] == '.';
}

bool is_fragment_key(std::string_view key) noexcept {
  return key.starts_with("skippy.package.") || key.starts_with("skippy.slice.");
}

std::optional<GgufSplitKv> gguf_split_kv(std::string_view key, uint32_t no, uint32_t count, uint64_t tensors) {
  const auto little_endian = [](uint64_t v, size_t bytes) {
    std::vector<uint8_t> out(bytes);
    for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
    return out;
  };
  if (key == "split.no" && no <= UINT16_MAX) return GgufSplitKv{GgufType::kUint16, little_endian(no, 2)};
  if (key == "split.count" && count <= UINT16_MAX) return GgufSplitKv{GgufType::kUint16, little_endian(count, 2)};
  if (key == "split.tensors.count" && tensors <= INT32_MAX) {
    return GgufSplitKv{GgufType::kInt32, little_endian(tensors, 4)};
  }
  return std::nullopt;
}

FragmentIdentity read_fragment_identity(const GgufFile& f, std::string_view name) {
  const std::string where(name);
  FragmentIdentity id;
  if (const auto* kv = f.find_kv(kRoleKey)) {
    id.dialect = FragmentDialect::kPackage;
    const auto role = kv->value.as_string();
    if (!role) throw_invalid(where + ": " + std::string(kRoleKey) + " is not a string");
    for (auto r : {PartRole::kMetadata, PartRole::kEmbeddings, PartRole::kLayer, PartRole::kOutput}) {
      if (*role == part_role_name(r)) id.role = r;
    }
    if (!id.role) throw_invalid(where + ": " + std::string(kRoleKey) + " \"" + std::string(*role) + "\" is not a part role");
    const auto* start = f.find_kv(kLayerStartKey);
    const auto* end = f.find_kv(kLayerEndKey);
    if (*id.role == PartRole::kLayer) {
      const auto s = start ? start->value.as_uint() : std::nullopt;
      const auto e = end ? end->value.as_uint() : std::nullopt;
      if (!s || *s > UINT32_MAX || !e || *e != *s + 1) {
        throw_invalid(where + ": a layer fragment needs " + std::string(kLayerStartKey) + " = N and " +
                      std::string(kLayerEndKey) + " = N + 1");
      }
      id.layer = static_cast<uint32_t>(*s);
    } else if (start || end) {
      throw_invalid(where + ": carries " + std::string(kLayerStartKey) + "/" + std::string(kLayerEndKey) + " but is the " +
                    std::string(part_role_name(*id.role)) + " fragment");
    }
    return id;
  }
  if (const auto* kv = f.find_kv(kSliceStageIndexKey)) {
    id.dialect = FragmentDialect::kSlice;
    const auto stage = kv->value.as_int();
    if (!stage || *stage < 0 || *stage > INT32_MAX) throw_invalid(where + ": " + std::string(kSliceStageIndexKey) + " is not an index");
    if (*stage == 0) id.role = PartRole::kMetadata;
    else if (*stage == 1) id.role = PartRole::kEmbeddings;
    else if (*stage == 2) id.role = PartRole::kOutput;
    else if (*stage >= kSliceLayerStageBase) {
      id.role = PartRole::kLayer;
      id.layer = static_cast<uint32_t>(*stage - kSliceLayerStageBase);
      const auto* start = f.find_kv(kSliceLayerStartKey);
      const auto s = start ? start->value.as_int() : std::nullopt;
      if (start && (!s || *s != *id.layer)) {
        throw_invalid(where + ": " + std::string(kSliceLayerStartKey) + " disagrees with " +
                      std::string(kSliceStageIndexKey) + " " + std::to_string(*stage));
      }
    } else {
      throw_invalid(where + ": " + std::string(kSliceStageIndexKey) + " " + std::to_string(*stage) + " names no part");
    }
  }
  return id;
}

LayerRange parse_layer_range(std::string_view text) {
  const auto dots = text.find("..");
  auto bad = [&]() -> LayerRange {
    throw Error(ErrorKind::kUsage, "layer range \"" + std::string(text) + "\" is not START..END (half-open, e.g. 0..4)");
  };
  if (dots == std::string_view::npos) return bad();
  auto num = [&](std::string_view s, uint32_t& out) {
    if (s.empty() || s.size() > 9) return false;
    const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return ec == std::errc() && p == s.data() + s.size();
  };
  LayerRange r;
  if (!num(text.substr(0, dots), r.start) || !num(text.substr(dots + 2), r.end)) return bad();
  if (r.end < r.start) {
    throw Error(ErrorKind::kUsage, "layer range " + std::string(text) + " ends before it starts");
  }
  if (r.empty()) {
    throw Error(ErrorKind::kUsage, "layer range " + std::string(text) + " is empty (half-open: " + std::string(text) +
                                       " holds no layer; " + std::to_string(r.start) + ".." + std::to_string(r.start + 1) +
                                       " is layer " + std::to_string(r.start) + ")");
  }
  return r;
}

std::string format_layer_range(LayerRange r) { return std::to_string(r.start) + ".." + std::to_string(r.end); }

void check_stage_range(std::string_view who, LayerRange range, uint32_t layer_count) {
  const std::string w(who);
  if (range.empty()) throw_invalid(w + ": layer range " + format_layer_range(range) + " is empty");
  if (range.end > layer_count) {
    throw_invalid(w + ": layer range " + format_layer_range(range) + " is outside the package's " +
                  std::to_string(layer_count) + " layers (0.." + std::to_string(layer_count) + ")");
  }
}

std::optional<std::string_view> stage_reads(TensorRole role, uint32_t layer, LayerRange range, uint32_t layer_count,
                                            bool tied_output) noexcept {
  const bool owns_input = range.start == 0;
  const bool owns_output = range.end == layer_count;
  switch (role) {
    case TensorRole::kLayer:
      if (layer >= range.start && layer < range.end) return "layer in range";
      return std::nullopt;
    case TensorRole::kEmbeddings:
      if (owns_input) return "the stage owns the input boundary (range starts at 0)";
      if (owns_output && tied_output) return "the output projection is tied to the token embeddings (no output.weight)";
      return std::nullopt;
    case TensorRole::kOutput:
      if (owns_output) return "the stage owns the output boundary (range ends at layer_count)";
      return std::nullopt;
    case TensorRole::kGlobal:
      break;
  }
  return "a tensor without a layer: every stage reads it";
}

namespace {
bool strictly_inside_boundary(const std::filesystem::path& p, const std::filesystem::path& boundary) {
  const auto ps = p.native();
  const auto bs = boundary.native();
  return ps.size() > bs.size() && ps.compare(0, bs.size(), bs) == 0 && ps[bs.size()] == '/';
}
}  // namespace

std::filesystem::path local_package_boundary(const std::filesystem::path& dir, std::error_code& ec) {
  namespace fs = std::filesystem;
  fs::path real = fs::canonical(dir, ec);
  if (ec) return {};
  const fs::path snapshots = real.parent_path();
  const fs::path repo = snapshots.parent_path();
  std::error_code ignored;
  if (snapshots.filename() == "snapshots" && repo.filename().native().starts_with("models--") &&
      fs::is_directory(repo / "blobs", ignored)) {
    return repo;
  }
  return real;
}

namespace {

// The cache repository folder (models--NS--REPO, holding blobs/) whose
// snapshot `dir` is or lies in; empty when none.
std::filesystem::path cache_repo_of(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path real = fs::weakly_canonical(dir, ec);
  if (ec) return {};
  for (fs::path p = real; p.has_relative_path() && p != p.root_path(); p = p.parent_path()) {
    const fs::path snapshots = p.parent_path();
    const fs::path repo = snapshots.parent_path();
    const std::string name = repo.filename().string();
    if (snapshots.filename() == "snapshots" &&
        (name.starts_with("models--") || name.starts_with("datasets--") || name.starts_with("spaces--")) &&
        fs::is_directory(repo / "blobs", ec)) {
      return repo;
    }
  }
  return {};
}

}  // namespace

bool is_hf_cache_snapshot(const std::filesystem::path& dir) noexcept {
  try {
    return !cache_repo_of(dir).empty();
  } catch (...) {
    return false;
  }
}

void refuse_hf_cache_snapshot(const std::filesystem::path& dir, std::string_view what) {
  const auto repo = cache_repo_of(dir);
  if (repo.empty()) return;
  throw Error(ErrorKind::kUsage,
              dir.string() + " is a snapshot in the Hugging Face cache (" + repo.string() + "): " + std::string(what) +
                  " would write into it, and its files are links to blobs every hf:// reader of the cache shares. "
                  "Copy the package first (cp -rL " + dir.string() + " COPY) and work on the copy");
}

void check_cached_blob_name(const std::filesystem::path& real, const std::filesystem::path& boundary,
                            std::string_view declared_sha256, std::string_view label) {
  namespace fs = std::filesystem;
  if (real.parent_path() != boundary / "blobs") return;
  const std::string name = real.filename().string();
  if (name.size() != 64 || !is_sha256_hex(name)) return;  // a git blob id names a small file: no digest to compare
  if (sha256_equal(name, declared_sha256)) return;
  throw Error(ErrorKind::kIntegrity, std::string(label) + ": links to the cache blob " + name +
                                         ", whose name is another file's SHA-256 (the package declares " +
                                         std::string(declared_sha256) + ")");
}

std::filesystem::path check_package_file(const std::filesystem::path& root, const std::filesystem::path& boundary,
                                         std::string_view rel, uint64_t declared_bytes, const PackageFileNames& n) {
  namespace fs = std::filesystem;
  if (!is_safe_relative_path(rel)) throw_invalid(n.unsafe);
  const fs::path p = root / rel;
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(p, ec))) throw_invalid(n.label + ": missing" + n.missing_note);
  const fs::path real = fs::canonical(p, ec);
  if (ec) throw_invalid(n.label + ": cannot resolve (" + ec.message() + "): a dangling symlink?");
  if (!strictly_inside_boundary(real, boundary)) {
    throw_invalid(n.label + ": resolves to " + real.string() + ", outside the package (" + boundary.string() + ")");
  }
  if (!fs::is_regular_file(real, ec)) throw_invalid(n.label + ": not a regular file");
  const auto size = fs::file_size(real, ec);
  if (ec) throw_invalid(n.label + ": cannot stat: " + ec.message());
  if (size != declared_bytes) {
    throw_invalid(n.label + ": " + std::to_string(size) + " bytes, " + n.declared + " " + std::to_string(declared_bytes) +
                  " (truncated or replaced?)");
  }
  return real;
}

PackageFileNames manifest_file_names(std::string_view ref, std::string_view rel, std::string_view role) {
  const std::string r(ref), p(rel), w(role);
  return {r + ": " + p, r + ": " + w + " path \"" + p + "\" is not a safe relative path", " (" + w + ")",
          "manifest says artifact_bytes"};
}

PackageFileNames catalog_file_names(std::string_view ref, std::string_view id, std::string_view rel) {
  const std::string label = std::string(ref) + ": artifact " + std::string(id) + " (" + std::string(rel) + ")";
  return {label, label + ": not a safe relative path", "", "the catalog says byte_size"};
}

}  // namespace skippy
