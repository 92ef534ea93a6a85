// write-package's whole run as one library call: the source (a local file,
// the Hub through the cache, or the Hub streamed), the write, the signature
// and the push, in the order that keeps every promise the command makes (see
// write_and_publish in skippy/hub_publish.h).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hub/xet_source_index.h"
#include "skippy/error.h"
#include "skippy/source.h"
#include "skippy/hub.h"
#include "skippy/hub_publish.h"
#include "skippy/hub_stream.h"
#include "skippy/package_signature.h"
#include "skippy/package_writer.h"
#include "util/env.h"

namespace skippy {

namespace fs = std::filesystem;

namespace {

// The source read once over HTTP ranges: its placeholders become the writer's
// source, its projectors and publisher files come along.
std::unique_ptr<StreamedHubSource> open_streamed(const WriteAndPublishOptions& opt, WritePackageOptions& w,
                                                 WriteAndPublishResult& result) {
  std::error_code ec;
  if (fs::exists(opt.source, ec) || !looks_like_model_coordinate(opt.source)) {
    throw Error(ErrorKind::kUsage, "--stream reads a Hub source, ORG/REPO:DIST (" + opt.source +
                                       " is not one); a local file is read in place already");
  }
  if (!opt.model_id.empty() || !opt.source_file.empty()) {
    throw Error(ErrorKind::kUsage, "--model-id and --source-file are for local sources; a Hub source (" + opt.source +
                                       ") takes them from the Hub");
  }
  if (env::hf_hub_offline()) {
    throw Error(ErrorKind::kOffline, "--stream reads the source from the Hub, and HF_HUB_OFFLINE=1 is set");
  }
  StreamSourceOptions so;
  so.revision = opt.revision;
  const fs::path out(w.out_dir);
  // Beside the package directory (its own leftovers are never touched there).
  so.header_dir = out.parent_path() / ("." + out.filename().string() + ".stream-headers");
  so.publisher_files = opt.hub_publisher_metadata;
  so.disk_budget = w.disk_budget;
  auto streamed = std::make_unique<StreamedHubSource>(opt.source, opt.hub, so);
  if (opt.on_stream_open) opt.on_stream_open(streamed->total_bytes(), w.disk_budget);
  w.source = streamed->local();
  w.provenance = streamed->provenance();
  // The repository's mmproj*.gguf go in as projectors (mesh-llm's jobs do
  // the same), unless a projector of the same name was given.
  for (const auto& p : streamed->fetch_projectors()) {
    const bool named = std::any_of(opt.write.projectors.begin(), opt.write.projectors.end(),
                                   [&](const fs::path& q) { return q.filename() == p.filename(); });
    if (!named) w.projectors.push_back(p);
  }
  // The repository's publisher files, over the same transport (small: whole, beside the headers).
  if (opt.hub_publisher_metadata) {
    for (const auto& f : streamed->fetch_publisher_files()) w.publisher_metadata.push_back(f);
  }
  w.stream_read = [s = streamed.get(), on = opt.on_stream_bytes](size_t shard, uint64_t offset, std::span<uint8_t> into) {
    s->read(shard, offset, into);
    if (on) on(into.size());
  };
  result.streamed = WriteAndPublishResult::Streamed{streamed->total_bytes(), streamed->projector_paths()};
  return streamed;
}

// A local file, or a Hub source brought into (or found in) the HF cache.
// True when it came from the Hub.
bool open_local_or_cached(const WriteAndPublishOptions& opt, WritePackageOptions& w) {
  ModelSourceRequest request{opt.source, opt.model_id, opt.revision, opt.source_file};
  request.publisher_files = opt.hub_publisher_metadata;
  const auto src = open_model_source(request, default_sources(opt.hub), opt.on_source_download);
  if (opt.hub_publisher_metadata && !src.from_hub) {
    throw Error(ErrorKind::kUsage, "--hub-publisher-metadata needs an org/repo:DIST source (for a local "
                                   "source, name the files with --publisher-metadata)");
  }
  for (const auto& warning : src.warnings) {
    if (opt.on_warning) opt.on_warning(warning);
  }
  for (const auto& f : src.publisher_files) w.publisher_metadata.push_back(f);
  w.source = src.local;
  w.provenance = src.provenance;
  return src.from_hub;
}

// The first chunk of each source file, whose hash the Hub's dedupe index
// holds when the source is stored there (PublishSettings::xet_dedupe_hints):
// the package's files are the source's bytes re-cut, so one answer lets every
// package file reference the source's xorbs. A streamed source hashed its
// first bytes as it fetched its headers (StreamedHubSource::xet_dedupe_hints).
// The local copy of each source file, in shard order (the first is `first`,
// the others its siblings under their repository names).
std::vector<fs::path> source_files(const fs::path& first, const SourceProvenance& p) {
  std::vector<fs::path> files{first};
  for (size_t i = 1; i < p.file_paths.size(); ++i) files.push_back(first.parent_path() / fs::path(p.file_paths[i]).filename());
  return files;
}

std::vector<std::string> source_dedupe_hints(const fs::path& first, const SourceProvenance& p) {
  const auto files = source_files(first, p);
  std::vector<std::string> out;
  std::vector<uint8_t> head(128 * 1024);  // a first chunk's most (the chunker's forced cut)
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    in.read(reinterpret_cast<char*>(head.data()), static_cast<std::streamsize>(head.size()));
    const auto n = static_cast<size_t>(std::max<std::streamsize>(0, in.gcount()));
    if (n > 0) out.push_back(xet_first_chunk_hash(std::span<const uint8_t>(head.data(), n)));
  }
  return out;
}

// The publisher, begun (token, repository and branch checked) before a byte
// is written; each finished artifact goes to it, and with a disk budget is
// deleted (its room given back) once the Hub holds it.
std::unique_ptr<HubPublisher> begin_push(const WriteAndPublishOptions& opt, WritePackageOptions& w,
                                         const StreamedHubSource* streamed, bool from_hub) {
  auto settings = opt.publish;
  if (settings.xet_dedupe_hints.empty()) {
    settings.xet_dedupe_hints = streamed ? streamed->xet_dedupe_hints() : source_dedupe_hints(w.source, w.provenance);
  }
  if (settings.xet && !settings.xet_source && from_hub) {
    // Dedupe against the source itself: chunked as the write reads it.
    const auto& p = w.provenance;
    const std::string repo = !p.repo.empty() ? p.repo : p.model_id.substr(0, p.model_id.find(':'));
    const auto paths = !p.file_paths.empty() ? p.file_paths : std::vector<std::string>{p.primary_file};
    settings.xet_source =
        detail::make_xet_source_index(opt.hub, repo, p.revision, source_files(w.source, p), paths, opt.source);
  }
  if (auto index = std::dynamic_pointer_cast<detail::XetSourceIndex>(settings.xet_source)) {
    w.on_source_read = [index, then = w.on_source_read](size_t shard, uint64_t offset,
                                                                              std::span<const uint8_t> bytes) {
      if (then) then(shard, offset, bytes);
      index->observe(shard, offset, bytes);
    };
  }
  // Through Xet, each fragment's chunks are cut in the write pass, so the
  // upload reads back only the bytes of chunks nobody holds.
  w.xet_chunks = settings.xet;
  auto budget = w.disk_budget;
  if (budget) {
    // A failed upload never frees its bytes: wake a writer waiting for room.
    settings.on_failure = [budget, then = settings.on_failure](const Error& e) {
      budget->cancel("an upload failed, so the disk budget cannot be freed");
      if (then) then(e);
    };
  }
  auto pub = std::make_unique<HubPublisher>(opt.hub, *opt.push, settings);
  pub->begin();
  w.on_artifact = [p = pub.get(), budget](const WrittenArtifact& a) {
    if (p->failed()) throw Error(ErrorKind::kTransport, "an upload failed; stopping the write");
    std::function<void()> done;
    if (budget) {
      done = [budget, a] {
        std::error_code ec;
        fs::remove(a.path, ec);  // the Hub holds it now
        budget->release(a.size);
      };
    }
    p->add(a.rel_path, a.path, a.size, a.sha256, std::move(done), a.xet_chunks);
  };
  return pub;
}

}  // namespace

WriteAndPublishResult write_and_publish(const WriteAndPublishOptions& opt) {
  if (!opt.push && opt.max_disk) throw Error(ErrorKind::kUsage, "--max-disk goes with --push");
  if (!opt.publish.tag.empty() && !opt.push) throw Error(ErrorKind::kUsage, "--tag goes with --push");
  if (!opt.publish.tag.empty()) check_tag_name(opt.publish.tag);
  if (!opt.sign_owner.empty()) {
    for (const char* f : {"owner.key", "owner.crt"}) {
      if (!fs::exists(opt.sign_owner / f)) {
        throw Error(ErrorKind::kNotFound, (opt.sign_owner / f).string() +
                                              ": missing (--sign takes an owner directory from identity init-owner)");
      }
    }
  }
  WriteAndPublishResult result;
  WritePackageOptions w = opt.write;
  // The output directory's budget: a streamed source takes its headers,
  // projectors and publisher files from it before fetching any of them.
  if (opt.push && opt.max_disk) w.disk_budget = std::make_shared<DiskBudget>(opt.max_disk);
  std::unique_ptr<StreamedHubSource> streamed;
  bool from_hub = true;
  if (opt.stream) {
    streamed = open_streamed(opt, w, result);
  } else {
    from_hub = open_local_or_cached(opt, w);
  }
  std::unique_ptr<HubPublisher> pub;
  if (opt.push) pub = begin_push(opt, w, streamed.get(), from_hub);
  if (opt.on_write_start) opt.on_write_start();
  try {
    result.written = write_package(w);
  } catch (const Error&) {
    // When an upload failed first, that failure is the story: commit() reports it.
    if (pub && pub->failed()) (void)pub->commit("unused");
    throw;
  }
  const auto& r = *result.written;
  if (opt.on_written) opt.on_written(r);
  // Signed once the package is finished (the sidecar covers validation.json too).
  if (!opt.sign_owner.empty()) result.signature = sign_package(r.package_dir, opt.sign_owner);
  if (pub) {
    // README.md, model-package.json, and validation.json and the sidecar when present.
    const auto meta = add_package_metadata(*pub, r.package_dir, r.manifest_sha256);
    const std::string summary = opt.message.empty() ? "Publish layer package " + r.manifest.model_id + " (" +
                                                          std::to_string(r.manifest.layer_count) + " layers)"
                                                    : opt.message;
    result.published = pub->commit(summary, "model-package.json sha256 " + r.manifest_sha256 +
                                                ", written and published by skippy-model-package write-package --push");
    result.published->signed_by = meta.signed_by;
    result.published->validation_result = meta.validation_result;
  }
  if (w.disk_budget) {
    result.max_disk = w.disk_budget->limit();
    result.disk_peak = w.disk_budget->peak();  // with a streamed source, its headers included
  }
  result.threads = w.threads;
  return result;
}

}  // namespace skippy
