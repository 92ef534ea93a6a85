// materialize_source (skippy/materialize.h): the source model's file(s)
// laid out again from a package, as its reader says they were
// (PackageReader::source_layout), written and hashed in one pass, renamed
// into place only when every file is the one the package records.
#include <algorithm>
#include <array>
#include <functional>
#include <future>
#include <map>
#include <set>

#include "gguf/gguf_writer.h"
#include "skippy/error.h"
#include "skippy/materialize.h"
#include "skippy/package_layout.h"
#include "skippy/verify.h"
#include "stage_file.h"
#include "util/file.h"
#include "util/sha256.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;

// Where each source file goes: inside `out` under its source name, or `out`
// itself for a source of one file. Nothing is created here.
std::vector<fs::path> rebuild_targets(const std::vector<SourceFile>& files, const fs::path& out, bool& into_dir) {
  if (out.empty()) throw Error(ErrorKind::kUsage, "materialize --as-source needs --out DIR or --out FILE");
  std::error_code ec;
  into_dir = fs::is_directory(out, ec) || files.size() > 1;
  if (files.size() > 1 && fs::exists(out, ec) && !fs::is_directory(out, ec)) {
    throw Error(ErrorKind::kUsage, "--out " + out.string() + " is a file, and the source is " +
                                       std::to_string(files.size()) + " files (" + files.front().path +
                                       ", ...): give a directory (made when missing)");
  }
  if (!into_dir) return {out};
  std::vector<fs::path> targets;
  std::set<fs::path> names;
  for (const auto& f : files) {
    const fs::path name = fs::path(f.path).filename();
    if (name.empty() || name == "." || name == ".." || !names.insert(name).second) {
      throw_invalid("source_model.files names \"" + f.path + "\", which gives no file name of its own in --out " +
                    out.string());
    }
    targets.push_back(out / name);
  }
  return targets;
}

// The file the layout describes, its KVs (less the last when `drop_last`)
// and tensors; tensor bytes read from `files` at each tensor's locator.
GgufWriter source_file_writer(const PackageCatalog& cat, const SourceLayout::File& f, bool drop_last, uint32_t no,
                              uint32_t count, uint64_t total, const std::map<size_t, std::shared_ptr<const MappedFile>>& files) {
  GgufWriter w(f.alignment);
  for (size_t i = 0; i + (drop_last ? 1 : 0) < f.kvs.size(); ++i) w.add_kv_borrowed(std::string(f.kvs[i]->key), f.kvs[i]->value);
  for (const auto& k : f.split_keys) {
    const auto v = gguf_split_kv(k, no, count, total);
    if (!v) throw_invalid("split key " + k + " cannot hold shard " + std::to_string(no) + " of " + std::to_string(count));
    w.add_kv(k, v->type, v->encoded);
  }
  for (const size_t i : f.tensors) {
    const CatalogTensor& t = cat.tensors.at(i);
    std::vector<int64_t> ne;
    for (const uint64_t d : t.dims) ne.push_back(static_cast<int64_t>(d));
    w.add_tensor(t.name, t.ggml_type, std::move(ne), files.at(t.artifact), t.offset);
    if (w.tensors().back().bytes != t.stored_bytes) {
      throw_invalid("tensor '" + t.name + "' stores " + std::to_string(t.stored_bytes) + " bytes, not the " +
                    std::to_string(w.tensors().back().bytes) + " its type and dims take");
    }
  }
  (void)w.header();  // refuses an alignment without its general.alignment KV
  return w;
}

// Writes `w`'s file into `out` and returns the SHA-256 of the bytes
// written: the header, then each tensor's bytes read from its part into one
// of two buffers and copied into place (copy_file_range, pwrite where the
// kernel cannot), then its zero padding. Hashing a chunk runs on a second
// thread while the next one is read and the current one written; chunks are
// hashed in order (one hash at a time, each awaited before the next starts),
// and a buffer is refilled only after its hash is done. Memory: two chunks.
std::string write_hashed(const GgufWriter& w, AtomicFile& out, const std::function<void(uint64_t)>& on_bytes) {
  constexpr size_t kChunk = 8u << 20;
  out.preallocate(w.total_size());
  Sha256 sha;
  const auto head = w.header();
  out.pwrite_all(0, head);
  sha.update(head);
  if (on_bytes) on_bytes(head.size());
  std::array<std::vector<uint8_t>, 2> buf = {std::vector<uint8_t>(kChunk), std::vector<uint8_t>(kChunk)};
  std::future<void> hashing;
  size_t next = 0;
  // Awaits the chunk being hashed, then hashes buf[b][0..n): in the
  // background, or here when it is too small to be worth a thread.
  const auto hash_next = [&](size_t b, size_t n) {
    if (hashing.valid()) hashing.get();
    if (n < (1u << 20)) {
      sha.update({buf[b].data(), n});
      return;
    }
    hashing = std::async(std::launch::async, [&sha, &buf, b, n] { sha.update({buf[b].data(), n}); });
  };
  const uint64_t data = w.data_offset();
  for (const auto& t : w.tensors()) {
    for (uint64_t done = 0; done < t.bytes;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, t.bytes - done));
      const size_t b = next++ % 2;
      // buf[b] was hashed two chunks ago: hash_next awaited that before starting the last one.
      t.source->pread_exact(t.source_offset + done, {buf[b].data(), n});
      hash_next(b, n);
      out.pwrite_all(data + t.offset + done, {buf[b].data(), n});
      done += n;
      if (on_bytes) on_bytes(n);
    }
    const uint64_t padded = (t.bytes + w.alignment() - 1) / w.alignment() * w.alignment();
    if (padded > t.bytes) {
      // A pad is less than the alignment (a u32): one zeroed chunk holds it.
      const size_t n = static_cast<size_t>(padded - t.bytes);
      const size_t b = next++ % 2;
      if (hashing.valid()) hashing.get();  // buf[b] may still be hashed two chunks back
      std::fill_n(buf[b].begin(), n, uint8_t{0});
      hash_next(b, n);
      out.pwrite_all(data + t.offset + t.bytes, {buf[b].data(), n});
      if (on_bytes) on_bytes(n);
    }
  }
  if (hashing.valid()) hashing.get();
  return sha.hex_digest();
}

// Removes a directory this run made, when the run fails (it is empty then:
// the temporaries inside went with their AtomicFiles).
struct MadeDirectory {
  fs::path dir;
  bool keep = false;
  ~MadeDirectory() {
    std::error_code ec;
    if (!dir.empty() && !keep) fs::remove(dir, ec);
  }
};

}  // namespace

std::vector<RebuiltSourceFile> materialize_source(const OpenedPackage& opened, const SourceRebuildOptions& options) {
  const auto& files = opened.identity().source_model.files;
  const std::string who = opened.ref + ": cannot rebuild the source";
  for (size_t i = 0; i < files.size(); ++i) {
    if (!files[i].size_bytes || !files[i].sha256 || !is_sha256_hex(*files[i].sha256)) {
      throw_invalid(who + ": the package does not record the size and SHA-256 of " + files[i].path +
                    " (source_model.files[" + std::to_string(i) + "]), so a rebuild could not be checked");
    }
  }
  bool into_dir = false;
  const auto targets = rebuild_targets(files, options.out, into_dir);
  for (const auto& t : targets) {
    materialize_detail::refuse_inside_package(opened.ref, opened.boundary, t, "--out",
                                              "the source's files are rebuilt outside the package");
  }

  // Every model part: the layout names tensors in all of them.
  const OpenedCatalog pkg = opened.catalog(CatalogNeed::all());
  const PackageCatalog& cat = pkg.catalog;
  const SourceLayout layout = opened.reader->source_layout(cat);
  if (!layout.missing.empty()) throw_invalid(who + ": the package does not record " + layout.missing);
  if (layout.files.size() != files.size()) {
    throw_invalid(who + ": its layout describes " + std::to_string(layout.files.size()) + " files, source_model.files " +
                  std::to_string(files.size()));
  }
  std::vector<StagePart> parts = all_parts(cat);
  std::erase_if(parts, [](const StagePart& p) {
    return p.kind == CatalogArtifactKind::kSidecar || p.kind == CatalogArtifactKind::kPublisherMetadata;
  });
  provide_parts(pkg, parts);
  std::map<size_t, std::shared_ptr<const MappedFile>> part_files;
  for (const auto& p : parts) {
    if (p.tensor_count != 0) part_files[cat.artifact_index.at(p.artifact_id)] = MappedFile::open(p.path);
  }

  // Each file laid out and sized before anything is written.
  uint64_t all_tensors = 0, total = 0;
  for (const auto& f : layout.files) all_tensors += f.tensors.size();
  std::vector<GgufWriter> writers;
  for (size_t i = 0; i < files.size(); ++i) {
    const uint64_t want = *files[i].size_bytes;
    const auto count = static_cast<uint32_t>(files.size());
    const std::string what = who + ": " + files[i].path;
    std::optional<GgufWriter> w;
    uint64_t laid_out = 0;
    for (const bool drop : {false, true}) {
      if (drop && !(i == 0 && layout.last_kv_maybe_added)) break;
      try {
        GgufWriter c = source_file_writer(cat, layout.files[i], drop, static_cast<uint32_t>(i), count, all_tensors, part_files);
        if (!drop) laid_out = c.total_size();
        if (c.total_size() == want) w.emplace(std::move(c));
      } catch (const Error& e) {
        // What the package says cannot be laid out (a repeated key, a tensor GGUF refuses).
        if (!drop) throw Error(ErrorKind::kInvalidInput, what + ": " + e.what());
      }
      if (w) break;
    }
    if (!w) {
      throw_invalid(what + " would be " + std::to_string(laid_out) + " bytes, and the source file was " +
                    std::to_string(want) + " (source_model.files[" + std::to_string(i) + "].size_bytes): the package " +
                    "does not record the source's exact layout" + (layout.assumed.empty() ? "" : " (" + layout.assumed + ")"));
    }
    total += want;
    writers.push_back(std::move(*w));
  }
  if (options.verify) {
    materialize_detail::throw_unless_verified(pkg.ref, "parts do not match the package", verify_parts(pkg, parts));
  } else {
    (void)verify_if_required(pkg, parts);
  }

  MadeDirectory made;
  if (into_dir) {
    std::error_code ec;
    if (!fs::is_directory(options.out, ec)) {
      if (!fs::create_directory(options.out, ec) || ec) {
        throw Error(ErrorKind::kIo, "--out " + options.out.string() + ": cannot create the directory: " + ec.message());
      }
      made.dir = options.out;
    }
  }
  uint64_t done = 0;
  const auto on_bytes = [&](uint64_t n) {
    done += n;
    if (options.on_progress) options.on_progress(std::min(done, total), total);
  };
  std::vector<std::unique_ptr<AtomicFile>> outs;
  std::vector<RebuiltSourceFile> result;
  for (size_t i = 0; i < files.size(); ++i) {
    outs.push_back(std::make_unique<AtomicFile>(targets[i], Durability::kRenameOnly, options.io_env));
    const std::string sha = write_hashed(writers[i], *outs.back(), on_bytes);
    if (!sha256_equal(sha, *files[i].sha256)) {
      std::string msg = who + ": the rebuilt " + files[i].path + " has SHA-256 " + sha + ", the source's is " +
                        *files[i].sha256 + " (source_model.files[" + std::to_string(i) + "]); nothing was written";
      VerifyOptions vo;
      vo.use_cache = false;
      const auto report = verify_parts(pkg, parts, vo);
      if (!report.verified) {
        msg += ". Parts that are not what the package declares:";
        for (const auto& p : report.problems) msg += "\n  " + p;
      } else {
        msg += ". Every part is what the package declares, so the package does not record the source's exact layout" +
               (layout.assumed.empty() ? std::string() : " (" + layout.assumed + ")");
      }
      throw_integrity(msg);
    }
    result.push_back({files[i].path, targets[i], writers[i].total_size(), sha});
  }
  for (auto& o : outs) o->commit();
  made.keep = true;
  return result;
}

}  // namespace skippy
