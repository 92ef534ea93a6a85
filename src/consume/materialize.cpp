#include "skippy/materialize.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <nlohmann/json.hpp>

#include "skippy/env.h"
#include "skippy/error.h"
#include "skippy/file.h"
#include "skippy/gguf.h"
#include "skippy/gguf_writer.h"
#include "skippy/sha256.h"
#include "skippy/stage_view.h"
#include "skippy/verify.h"
#include "util/file_lock.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kSidecarFormat = "skippy-materialized-stage";
constexpr uint64_t kSidecarMaxBytes = 1u << 20;
constexpr std::string_view kMaterializedKeyPrefix = "skippy.materialized.";

bool inside_or_at(const fs::path& p, const fs::path& boundary) {
  const auto& ps = p.native();
  const auto& bs = boundary.native();
  return ps == bs || (ps.size() > bs.size() && ps.compare(0, bs.size(), bs) == 0 && ps[bs.size()] == '/');
}

// Derived files never go into the package directory (spec: a materialization
// MUST NOT become the published repository format).
void refuse_inside_package(const OpenedPackage& pkg, const fs::path& target, std::string_view what) {
  std::error_code ec;
  const auto real = fs::weakly_canonical(fs::absolute(target, ec), ec);
  if (ec) return;  // unresolvable: the write itself reports it
  if (inside_or_at(real, pkg.boundary)) {
    throw_invalid(std::string(what) + " " + target.string() + " is inside the package " + pkg.ref +
                  ": a materialized stage is derived cache and never goes into the package");
  }
}

GgufWriter stage_writer(const OpenedPackage& pkg, const StageView& view) {
  GgufWriter w(view.alignment());
  for (const auto& kv : view.kvs()) {
    if (is_fragment_key(kv.key) || kv.key.starts_with(kMaterializedKeyPrefix)) continue;
    w.add_kv(std::string(kv.key), kv.value);
  }
  w.add_u32(std::string(kMaterializedLayerStartKey), view.range().start);
  w.add_u32(std::string(kMaterializedLayerEndKey), view.range().end);
  w.add_string(std::string(kMaterializedManifestKey), pkg.manifest_sha256);
  w.add_string(std::string(kMaterializedModelIdKey), pkg.manifest.model_id);
  for (const auto& t : view.tensors()) w.add_tensor_from(view.files()[t.part], *t.info);
  return w;
}

// The output as a contiguous run of pieces: the header (from memory), then
// each tensor's bytes (from its part) and its zero padding.
struct Piece {
  uint64_t out_off = 0;
  uint64_t len = 0;
  const MappedFile* src = nullptr;  // tensor bytes at src_off, or
  uint64_t src_off = 0;
  const uint8_t* mem = nullptr;     // header bytes; neither: zeros
};

std::vector<Piece> plan_pieces(const GgufWriter& w, const std::vector<uint8_t>& header) {
  std::vector<Piece> pieces;
  pieces.push_back({0, header.size(), nullptr, 0, header.data()});
  const uint64_t data = w.data_offset();
  for (const auto& t : w.tensors()) {
    if (!t.source && t.bytes != 0) throw Error(ErrorKind::kUsage, "tensor '" + t.name + "' has no source");
    if (t.bytes) pieces.push_back({data + t.offset, t.bytes, t.source.get(), t.source_offset, nullptr});
    const uint64_t padded = (t.bytes + w.alignment() - 1) / w.alignment() * w.alignment();
    if (padded > t.bytes) pieces.push_back({data + t.offset + t.bytes, padded - t.bytes, nullptr, 0, nullptr});
  }
  return pieces;
}

// Streams the pieces into `fd` in order through one bounded buffer: pread
// from the parts (page cache), pwrite to the staged file. Measured on ext4
// with a warm cache, this runs at the speed of cp (a reader thread feeding a
// writer did no better). With `start_writeback` it queues writeback as it
// goes, so the final fsync finds little left to do. Memory stays flat.
void stream_pieces(const std::vector<Piece>& pieces, int fd, const fs::path& name, bool start_writeback,
                   const std::function<void(uint64_t)>& on_bytes) {
  constexpr size_t kChunk = 512u << 10;  // measured: 256 KiB-1 MiB alike, 64 KiB slower
  constexpr uint64_t kWritebackEvery = 32ull << 20;
  std::vector<uint8_t> buf(kChunk);
  uint64_t flushed = 0;
  for (const auto& p : pieces) {
    for (uint64_t done = 0; done < p.len;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, p.len - done));
      if (p.src) {
        p.src->pread_exact(p.src_off + done, {buf.data(), n});
      } else if (p.mem) {
        std::memcpy(buf.data(), p.mem + done, n);
      } else {
        std::memset(buf.data(), 0, n);
      }
      const uint64_t at = p.out_off + done;
      for (size_t written = 0; written < n;) {
        const ssize_t r = ::pwrite(fd, buf.data() + written, n - written, static_cast<off_t>(at + written));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) throw_io(name.string() + ": write failed");
        written += static_cast<size_t>(r);
      }
      done += n;
      if (on_bytes) on_bytes(n);
      const uint64_t end = at + n;
      if (start_writeback && end >= flushed + kWritebackEvery) {
        // Asynchronous: queue writeback of what is written so far.
        (void)::sync_file_range(fd, static_cast<off_t>(flushed), static_cast<off_t>(end - flushed),
                                SYNC_FILE_RANGE_WRITE);
        flushed = end;
      }
    }
  }
}

// Copies the stage's bytes into the staged file `fd` with stream_pieces().
// Blocks are allocated up front (ext4 writes into them markedly faster than
// into a growing file, and a full disk fails here, not midway).
void stream_stage(const GgufWriter& w, int fd, const fs::path& temp, bool start_writeback,
                  const std::function<void(uint64_t)>& on_bytes) {
  const uint64_t total = w.total_size();
  if (::fallocate(fd, 0, 0, static_cast<off_t>(total)) != 0 && errno == ENOSPC) {
    throw_io(temp.string() + ": no space for " + std::to_string(total) + " bytes");
  }
  const auto header = w.header();
  stream_pieces(plan_pieces(w, header), fd, temp, start_writeback, on_bytes);
}

// Checks a staged file before it may be renamed into place: its size, and a
// fresh parse that shows the tensor table the writer laid out.
void check_staged(const GgufWriter& w, int fd, const fs::path& temp) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw_io(temp.string() + ": cannot stat");
  if (static_cast<uint64_t>(st.st_size) != w.total_size()) {
    throw_io(temp.string() + ": wrote " + std::to_string(st.st_size) + " bytes, expected " +
             std::to_string(w.total_size()));
  }
  const GgufFile staged = [&] {
    try {
      return GgufFile::open(temp);
    } catch (const Error& e) {
      throw Error(ErrorKind::kIo, "the staged file does not parse back: " + std::string(e.what()));
    }
  }();
  const auto& want = w.tensors();
  const auto& got = staged.tensors();
  bool same = got.size() == want.size() && staged.data_offset() == w.data_offset();
  for (size_t i = 0; same && i < got.size(); ++i) {
    same = got[i].name == want[i].name && got[i].type == want[i].type && got[i].ne == want[i].ne &&
           got[i].offset == want[i].offset && got[i].bytes == want[i].bytes;
  }
  if (!same) throw Error(ErrorKind::kIo, temp.string() + ": the staged file's tensor table differs from the one written");
}

// Writes the stage to `final_path`: staged, checked, renamed. `durable`
// (cache entries) fsyncs before the rename (AtomicFile), starting writeback
// as it goes so the fsync finds little left; otherwise (--out) it is left to
// the kernel like cp. With options.hash the bytes go through
// GgufWriter::write (read, hash, write; always fsynced) and the file's
// SHA-256 is returned; otherwise "".
std::string write_stage_file(const GgufWriter& w, const fs::path& final_path, bool durable,
                             const MaterializeOptions& options) {
  const uint64_t total = w.total_size();
  uint64_t done = 0;
  std::function<void(uint64_t)> on_bytes;
  if (options.on_progress) {
    on_bytes = [&](uint64_t n) {
      done += n;
      options.on_progress(done, total);
    };
  }
  // --out promises what cp promises (a reader never sees a partial file);
  // cache entries and hashed files are fsynced before the rename.
  const bool fsynced = options.hash || durable;
  AtomicFile out(final_path, fsynced ? Durability::kDurable : Durability::kRenameOnly);
  std::string sha;
  if (options.hash) {
    sha = w.write(out, on_bytes);
    // The writer does not report padding bytes: finish the count.
    if (options.on_progress && done != total) options.on_progress(total, total);
  } else {
    stream_stage(w, out.fd(), out.temp_path(), /*start_writeback=*/fsynced, on_bytes);
  }
  check_staged(w, out.fd(), out.temp_path());
  out.commit();
  return sha;
}

// A cached file holds exactly what materializing would write now: the same
// header bytes, each tensor's bytes equal to its part's, zero padding.
// Reads both sides through bounded buffers (flat memory).
bool content_matches(const GgufWriter& w, const fs::path& cached) {
  const auto f = MappedFile::open(cached);
  if (f->size() != w.total_size()) return false;
  const auto head = w.header();
  constexpr size_t kBuf = 4u << 20;
  std::vector<uint8_t> a(std::max(kBuf, head.size())), b(kBuf);
  f->pread_exact(0, {a.data(), head.size()});
  if (!std::equal(head.begin(), head.end(), a.begin())) return false;
  const uint64_t data = w.data_offset();
  for (const auto& t : w.tensors()) {
    for (uint64_t done = 0; done < t.bytes;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(kBuf, t.bytes - done));
      f->pread_exact(data + t.offset + done, {a.data(), n});
      t.source->pread_exact(t.source_offset + done, {b.data(), n});
      if (std::memcmp(a.data(), b.data(), n) != 0) return false;
      done += n;
    }
    const uint64_t padded = (t.bytes + w.alignment() - 1) / w.alignment() * w.alignment();
    for (uint64_t at = t.bytes; at < padded;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(kBuf, padded - at));
      f->pread_exact(data + t.offset + at, {a.data(), n});
      if (std::any_of(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(n), [](uint8_t x) { return x != 0; })) {
        return false;
      }
      at += n;
    }
  }
  return true;
}

void verify_parts_or_throw(const OpenedPackage& pkg, const StageSelection& sel, bool explicit_verify) {
  if (!explicit_verify) {
    (void)verify_if_required(pkg, sel.parts);
    return;
  }
  const auto report = verify_parts(pkg, sel.parts);
  if (!report.verified) {
    std::string msg = pkg.ref + ": the stage's parts do not match the manifest:";
    for (const auto& p : report.problems) msg += "\n  " + p;
    throw_integrity(msg);
  }
}

struct Sidecar {
  std::string manifest_sha256, model_id, sha256;
  LayerRange range;
  uint64_t size = 0, tensor_count = 0;
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
  return j.dump(2) + "\n";
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
    if ((!s.sha256.empty() && !is_sha256_hex(s.sha256)) || !is_sha256_hex(s.manifest_sha256)) return std::nullopt;
    return s;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// The cached file is reusable: sidecar for this package and range, and the
// file's size and header agree with it; with `verify`, its every byte is
// what materializing would write now (parts verified by the caller).
std::optional<Sidecar> reusable(const OpenedPackage& pkg, LayerRange range, uint64_t tensor_count,
                                const fs::path& gguf, const fs::path& json, const GgufWriter& w, bool verify) {
  const auto s = read_sidecar(json);
  if (!s || !sha256_equal(s->manifest_sha256, pkg.manifest_sha256) || s->range != range ||
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
        !manifest || !sha256_equal(*manifest, pkg.manifest_sha256)) {
      return std::nullopt;
    }
    if (f.file_size() != w.total_size() || f.data_offset() != w.data_offset()) return std::nullopt;
    if (verify && !content_matches(w, gguf)) return std::nullopt;
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

}  // namespace

fs::path default_stage_cache_dir() { return env::skippy_cache_dir() / "stages"; }

std::string stage_cache_key(std::string_view manifest_sha256, LayerRange range) {
  std::string prefix(manifest_sha256.substr(0, 16));
  std::transform(prefix.begin(), prefix.end(), prefix.begin(),
                 [](char c) { return c >= 'A' && c <= 'F' ? static_cast<char>(c - 'A' + 'a') : c; });
  return prefix + "-L" + std::to_string(range.start) + "-" + std::to_string(range.end);
}

MaterializeResult materialize_stage(const OpenedPackage& pkg, const StageSelection& selection,
                                    const MaterializeOptions& options) {
  // Every StageView rule is checked before anything is written or locked.
  const auto view = StageView::open(selection);
  const auto w = stage_writer(pkg, view);
  const bool verify = options.verify || verify_required(pkg);
  MaterializeResult r;
  r.tensor_count = view.tensors().size();
  std::error_code ec;

  if (options.out) {
    refuse_inside_package(pkg, *options.out, "--out");
    if (fs::is_directory(*options.out, ec)) {
      throw_invalid(options.out->string() + ": is a directory (--out names the file to write)");
    }
    if (verify) verify_parts_or_throw(pkg, selection, options.verify);
    r.sha256 = write_stage_file(w, *options.out, /*durable=*/false, options);
    r.path = fs::absolute(*options.out, ec);
    r.bytes = w.total_size();
    return r;
  }

  const fs::path dir = options.cache_dir ? *options.cache_dir : default_stage_cache_dir();
  refuse_inside_package(pkg, dir, "cache directory");
  fs::create_directories(dir, ec);
  if (ec) throw Error(ErrorKind::kIo, dir.string() + ": cannot create the stage cache directory: " + ec.message());
  const std::string name = stage_cache_key(pkg.manifest_sha256, selection.range);
  const fs::path gguf = fs::absolute(dir / (name + ".gguf"), ec);
  const fs::path json = dir / (name + ".json");
  r.path = gguf;
  r.cached = true;
  // Parts first: a reused file is then compared against verified parts.
  if (verify) verify_parts_or_throw(pkg, selection, options.verify);

  // Check-then-build under the entry's lock: concurrent materializers of this
  // stage do the work once; the others wait and reuse it.
  const auto lock = detail::FileLock::acquire(dir / (name + ".lock"), /*wait=*/true);
  if (auto s = reusable(pkg, selection.range, r.tensor_count, gguf, json, w, verify)) {
    r.reused = true;
    r.bytes = s->size;
    if (options.hash && s->sha256.empty()) {
      s->sha256 = sha256_file(gguf);
      write_file_atomic(json, sidecar_json(*s));
    }
    r.sha256 = s->sha256;
    return r;
  }
  // No sidecar while the file is replaced: a crash leaves an entry that is
  // rebuilt, never one that is trusted.
  fs::remove(json, ec);
  r.sha256 = write_stage_file(w, gguf, /*durable=*/true, options);
  r.bytes = w.total_size();
  Sidecar s;
  s.manifest_sha256 = pkg.manifest_sha256;
  s.model_id = pkg.manifest.model_id;
  s.range = selection.range;
  s.size = r.bytes;
  s.sha256 = r.sha256;
  s.tensor_count = r.tensor_count;
  write_file_atomic(json, sidecar_json(s));
  return r;
}

std::vector<StageCacheEntry> list_stage_cache(const fs::path& cache_dir) {
  std::vector<StageCacheEntry> out;
  std::error_code ec;
  for (const auto& [name, files] : scan_cache(cache_dir)) {
    StageCacheEntry e;
    e.name = name;
    e.path = fs::absolute(cache_dir / (name + ".gguf"), ec);
    e.range = *parse_cache_key(name);
    for (const auto& f : files) {
      const auto size = fs::file_size(f, ec);
      if (!ec) e.size += size;
    }
    if (const auto s = read_sidecar(cache_dir / (name + ".json"))) {
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
  for (const auto& [name, files] : scan_cache(cache_dir)) {
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
