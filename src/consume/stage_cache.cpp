// The stage cache (see skippy/materialize.h): entries, sidecars, the reuse
// rules and the lock, list and prune; write_materialized puts a job's file
// there (or at --out) for either package schema.
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "format/json_output.h"
#include "util/env.h"
#include "skippy/error.h"
#include "util/file.h"
#include "skippy/gguf.h"
#include "util/sha256.h"
#include "stage_file.h"
#include "util/file_lock.h"

namespace skippy {
namespace materialize_detail {

namespace fs = std::filesystem;

constexpr std::string_view kSidecarFormat = "skippy-materialized-stage";
constexpr uint64_t kSidecarMaxBytes = 1u << 20;

struct Sidecar {
  std::string manifest_sha256, model_id, sha256;
  LayerRange range;
  uint64_t size = 0, tensor_count = 0;
  // Built from parts whose SHA-256 matched the package's digests (entries
  // without it, or from older versions, are rebuilt, never trusted).
  bool parts_verified = false;
};

std::string sidecar_json(const Sidecar& s) {
  nlohmann::ordered_json j;
  j["format"] = kSidecarFormat;
  j["manifest_sha256"] = s.manifest_sha256;
  j["model_id"] = s.model_id;
  j["layer_start"] = s.range.start;
  j["layer_end"] = s.range.end;
  j["size"] = s.size;
  j["sha256"] = s.sha256.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(s.sha256);
  j["tensor_count"] = s.tensor_count;
  j["parts_verified"] = s.parts_verified;
  return json_output(j, 2) + "\n";
}

std::optional<Sidecar> read_sidecar(const fs::path& p) {
  try {
    const auto j = nlohmann::json::parse(read_small_file(p, kSidecarMaxBytes));
    if (j.at("format").get<std::string>() != kSidecarFormat) return std::nullopt;
    Sidecar s;
    s.manifest_sha256 = j.at("manifest_sha256").get<std::string>();
    s.model_id = j.at("model_id").get<std::string>();
    s.range.start = j.at("layer_start").get<uint32_t>();
    s.range.end = j.at("layer_end").get<uint32_t>();
    s.size = j.at("size").get<uint64_t>();
    if (!j.at("sha256").is_null()) s.sha256 = j.at("sha256").get<std::string>();
    s.tensor_count = j.at("tensor_count").get<uint64_t>();
    s.parts_verified = j.contains("parts_verified") && j["parts_verified"].is_boolean() && j["parts_verified"].get<bool>();
    if ((!s.sha256.empty() && !is_sha256_hex(s.sha256)) || !is_sha256_hex(s.manifest_sha256)) return std::nullopt;
    return s;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// The cached file is reusable: sidecar for this package and range, and the
// file's size and header agree with it; with `verify`, its every byte is
// what materializing would write now (parts verified by the caller).
std::optional<Sidecar> reusable(const StageFileJob& job, LayerRange range, const fs::path& gguf,
                                const fs::path& json) {
  const GgufWriter& w = *job.writer;
  const uint64_t tensor_count = w.tensors().size();
  const auto s = read_sidecar(json);
  if (!s || !sha256_equal(s->manifest_sha256, job.manifest_sha256) || s->range != range ||
      s->tensor_count != tensor_count) {
    return std::nullopt;
  }
  try {
    std::error_code ec;
    if (fs::file_size(gguf, ec) != s->size || ec) return std::nullopt;
    const auto f = GgufFile::open(gguf);
    if (f.tensors().size() != tensor_count || f.file_size() != s->size) return std::nullopt;
    const auto start = f.find_kv(kMaterializedLayerStartKey);
    const auto end = f.find_kv(kMaterializedLayerEndKey);
    const auto manifest = f.get_string(kMaterializedManifestKey);
    if (!start || !end || start->value.as_uint() != range.start || end->value.as_uint() != range.end ||
        !manifest || !sha256_equal(*manifest, job.manifest_sha256)) {
      return std::nullopt;
    }
    if (f.file_size() != w.total_size() || f.data_offset() != w.data_offset()) return std::nullopt;
    if (job.verify && !content_matches(w, gguf)) return std::nullopt;
  } catch (const Error&) {
    return std::nullopt;
  }
  return s;
}

// "<16 lowercase hex>-L<start>-<end>" -> the range; nullopt otherwise.
std::optional<LayerRange> parse_cache_key(std::string_view name) {
  if (name.size() < 16 + 5) return std::nullopt;
  for (size_t i = 0; i < 16; ++i) {
    const char c = name[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return std::nullopt;
  }
  if (name.substr(16, 2) != "-L") return std::nullopt;
  const auto rest = name.substr(18);
  const auto dash = rest.find('-');
  if (dash == std::string_view::npos) return std::nullopt;
  auto num = [](std::string_view s, uint32_t& out) {
    if (s.empty() || s.size() > 9) return false;
    out = 0;
    for (const char c : s) {
      if (c < '0' || c > '9') return false;
      out = out * 10 + static_cast<uint32_t>(c - '0');
    }
    return true;
  };
  LayerRange r;
  if (!num(rest.substr(0, dash), r.start) || !num(rest.substr(dash + 1), r.end)) return std::nullopt;
  return r;
}

// The entry a cache file belongs to: "<key>.gguf|.json|.lock" or a hidden
// temporary of one (temporary_path_for's names).
std::optional<std::string> entry_of(const std::string& file) {
  std::string_view f = file;
  if (f.starts_with(".")) {
    if (!is_temporary_name(f)) return std::nullopt;
    f = f.substr(1, f.rfind(".partial-") - 1);
  }
  for (std::string_view ext : {".gguf", ".json", ".lock"}) {
    if (f.size() > ext.size() && f.ends_with(ext)) {
      const std::string_view name = f.substr(0, f.size() - ext.size());
      if (parse_cache_key(name)) return std::string(name);
      return std::nullopt;
    }
  }
  return std::nullopt;
}

std::map<std::string, std::vector<fs::path>> scan_cache(const fs::path& dir) {
  std::map<std::string, std::vector<fs::path>> entries;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    if (const auto name = entry_of(it->path().filename().string())) entries[*name].push_back(it->path());
  }
  return entries;
}


MaterializeResult write_materialized(const StageFileJob& job, const MaterializeOptions& options) {
  const GgufWriter& w = *job.writer;
  MaterializeResult r;
  r.tensor_count = w.tensors().size();
  std::error_code ec;

  if (options.out) {
    refuse_inside_package(job.ref, job.boundary, *options.out, "--out");
    if (fs::is_directory(*options.out, ec)) {
      throw_invalid(options.out->string() + ": is a directory (--out names the file to write)");
    }
    if (job.verify && job.verify_parts) job.verify_parts();
    r.sha256 = write_stage_file(w, *options.out, /*durable=*/false, options);
    r.path = fs::absolute(*options.out, ec);
    r.bytes = w.total_size();
    return r;
  }
  if (!job.range) {
    throw Error(ErrorKind::kUsage, job.ref + ": a stage selected by tensor names is not cached: give an output file");
  }
  const LayerRange range = *job.range;

  const fs::path dir = options.cache_dir ? *options.cache_dir : default_stage_cache_dir();
  refuse_inside_package(job.ref, job.boundary, dir, "cache directory");
  fs::create_directories(dir, ec);
  if (ec) throw Error(ErrorKind::kIo, dir.string() + ": cannot create the stage cache directory: " + ec.message());
  const std::string name = stage_cache_key(job.manifest_sha256, range);
  const fs::path gguf = fs::absolute(dir / (name + ".gguf"), ec);
  const fs::path json = dir / (name + ".json");
  r.path = gguf;
  r.cached = true;
  // Parts first: a reused file is then compared against verified parts.
  if (job.verify && job.verify_parts) job.verify_parts();

  // Check-then-build under the entry's lock: concurrent materializers of this
  // stage do the work once; the others wait and reuse it.
  const auto lock = detail::FileLock::acquire(dir / (name + ".lock"), /*wait=*/true);
  auto s_reused = reusable(job, range, gguf, json);
  if (s_reused && !job.verify && !s_reused->parts_verified) s_reused.reset();
  if (auto& s = s_reused) {
    r.reused = true;
    r.bytes = s->size;
    if (options.hash && s->sha256.empty()) {
      s->sha256 = sha256_file(gguf);
      write_file_atomic(json, sidecar_json(*s), Durability::kDurable, options.io_env);
    }
    r.sha256 = s->sha256;
    return r;
  }
  // Nothing enters the shared cache from unverified bytes: every later run
  // of this manifest would reuse it, from whatever copy of the package.
  if (!job.verify && job.verify_parts) job.verify_parts();
  // No sidecar while the file is replaced: a crash leaves an entry that is
  // rebuilt, never one that is trusted.
  fs::remove(json, ec);
  r.sha256 = write_stage_file(w, gguf, /*durable=*/true, options);
  r.bytes = w.total_size();
  Sidecar s;
  s.manifest_sha256 = job.manifest_sha256;
  s.model_id = job.model_id;
  s.range = range;
  s.size = r.bytes;
  s.sha256 = r.sha256;
  s.tensor_count = r.tensor_count;
  s.parts_verified = static_cast<bool>(job.verify_parts);
  write_file_atomic(json, sidecar_json(s), Durability::kDurable, options.io_env);
  return r;
}

}  // namespace materialize_detail

namespace fs = std::filesystem;

fs::path default_stage_cache_dir() { return env::skippy_cache_dir() / "stages"; }

std::string stage_cache_key(std::string_view manifest_sha256, LayerRange range) {
  std::string prefix(manifest_sha256.substr(0, 16));
  std::transform(prefix.begin(), prefix.end(), prefix.begin(),
                 [](char c) { return c >= 'A' && c <= 'F' ? static_cast<char>(c - 'A' + 'a') : c; });
  return prefix + "-L" + std::to_string(range.start) + "-" + std::to_string(range.end);
}

std::vector<StageCacheEntry> list_stage_cache(const fs::path& cache_dir) {
  std::vector<StageCacheEntry> out;
  std::error_code ec;
  for (const auto& [name, files] : materialize_detail::scan_cache(cache_dir)) {
    StageCacheEntry e;
    e.name = name;
    e.path = fs::absolute(cache_dir / (name + ".gguf"), ec);
    e.range = *materialize_detail::parse_cache_key(name);
    for (const auto& f : files) {
      const auto size = fs::file_size(f, ec);
      if (!ec) e.size += size;
    }
    if (const auto s = materialize_detail::read_sidecar(cache_dir / (name + ".json"))) {
      e.manifest_sha256 = s->manifest_sha256;
      e.model_id = s->model_id;
      e.tensor_count = s->tensor_count;
      e.sha256 = s->sha256;
      const auto size = fs::file_size(e.path, ec);
      e.complete = !ec && size == s->size && s->range == e.range;
    }
    out.push_back(std::move(e));
  }
  return out;
}

PruneResult prune_stage_cache(const fs::path& cache_dir, std::optional<std::string_view> manifest_sha256) {
  PruneResult r;
  const std::string prefix = manifest_sha256 ? stage_cache_key(*manifest_sha256, {}).substr(0, 16) : "";
  std::error_code ec;
  for (const auto& [name, files] : materialize_detail::scan_cache(cache_dir)) {
    if (!prefix.empty() && !name.starts_with(prefix)) continue;
    auto lock = detail::FileLock::acquire(cache_dir / (name + ".lock"), /*wait=*/false);
    if (!lock) {
      r.busy.push_back(name);
      continue;
    }
    // Rescan under the lock: the entry's files may have changed meanwhile.
    const fs::path lock_path = cache_dir / (name + ".lock");
    for (std::string ext : {".json", ".gguf"}) {
      const auto p = cache_dir / (name + ext);
      const auto size = fs::file_size(p, ec);
      if (!ec && fs::remove(p, ec)) r.freed_bytes += size;
    }
    for (const auto& f : files) {
      if (f == lock_path) continue;
      const auto size = fs::file_size(f, ec);
      if (!ec && fs::remove(f, ec)) r.freed_bytes += size;
    }
    lock->unlink_file();
    r.removed.push_back(name);
  }
  if (!r.removed.empty()) fsync_directory(cache_dir);
  return r;
}

}  // namespace skippy
