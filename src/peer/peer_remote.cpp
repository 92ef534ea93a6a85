// The peer as a Remote of the source layer (skippy/peer.h: make_peer_remote):
// PeerClient for the bytes, the source layer's blob writer for the cache.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "skippy/error.h"
#include "util/file.h"
#include "skippy/source.h"
#include "skippy/gguf.h"
#include "skippy/manifest.h"
#include "skippy/package.h"
#include "skippy/package_catalog.h"
#include "skippy/package_signature.h"
#include "skippy/package_layout.h"
#include "skippy/peer.h"
#include "util/sha256.h"
#include "source/blob_writer.h"
#include "util/parallel.h"
#include "util/text.h"

namespace skippy::peer {
namespace {

// The kind a peer failure has for the source layer (and `fetch --json`).
ErrorKind kind_of(const PeerError& e) noexcept {
  switch (e.peer_kind()) {
    case PeerErrorKind::kRefused:
      if (e.refusal() == Refusal::kDisabled) return ErrorKind::kUnauthorized;
      if (e.refusal() == Refusal::kBusy) return ErrorKind::kTransport;
      return ErrorKind::kNotFound;
    case PeerErrorKind::kFeatureUnavailable:
    case PeerErrorKind::kUntrusted:
      return ErrorKind::kUnauthorized;
    case PeerErrorKind::kTimeout:
    case PeerErrorKind::kTransport:
    case PeerErrorKind::kClosedEarly:
      return ErrorKind::kTransport;
    case PeerErrorKind::kProtocol:
      return ErrorKind::kInvalidInput;
  }
  return ErrorKind::kTransport;
}

// A failure after which the peer is not asked for anything else: it does
// not deal with us, or it cannot be reached or stopped answering.
bool peer_unusable(const PeerError& e) noexcept {
  switch (e.peer_kind()) {
    case PeerErrorKind::kRefused:
      return e.refusal() == Refusal::kDisabled;
    case PeerErrorKind::kFeatureUnavailable:
    case PeerErrorKind::kUntrusted:
    case PeerErrorKind::kTimeout:
    case PeerErrorKind::kTransport:
      return true;
    case PeerErrorKind::kProtocol:
    case PeerErrorKind::kClosedEarly:  // (asked again already: the next file may fare better)
      return false;
  }
  return false;
}

// A failure already worded for the source layer ("peer HOST:PORT: path: why").
class Declined : public Error {
 public:
  using Error::Error;
};

// What a PeerError says, without repeating the path the message starts with.
std::string reason(const PeerError& e) {
  if (e.peer_kind() == PeerErrorKind::kRefused && e.refusal()) return "refused: " + std::string(refusal_text(*e.refusal()));
  return e.what();
}

// The snapshot's manifest, checked against the topology, and the parts our
// stage may ask for.
struct StagePlan {
  std::optional<StageArtifacts> artifacts;
  std::string problem;  // why no part but the manifest can be asked for
};

class PeerRemote final : public Remote {
 public:
  PeerRemote(PeerClient client, PeerRemoteOptions o, std::string repo_id, std::string commit, TopologyStage stage)
      : client_(std::move(client)),
        o_(std::move(o)),
        repo_id_(std::move(repo_id)),
        commit_(std::move(commit)),
        stage_(std::move(stage)) {}

  std::string name() const override { return "peer"; }

  std::optional<std::string> resolve_commit(const HfRepoCache& cache, const std::string& revision,
                                            const std::string&) override {
    // A peer serves the topology's commit and names nothing else.
    if (cache.repo_id() == repo_id_ && revision == commit_) return commit_;
    return std::nullopt;
  }

  std::optional<RemoteListing> list(const HfRepoCache&, const std::string&) override { return std::nullopt; }

  std::vector<RemoteOutcome> fetch(const HfRepoCache& cache, const std::string& commit,
                                   const std::vector<RemoteFile>& files,
                                   const std::function<void(uint64_t)>& on_bytes) override {
    std::vector<RemoteOutcome> out(files.size());
    auto fail_all = [&](ErrorKind kind, const std::string& why) {
      for (size_t i = 0; i < files.size(); ++i) out[i].error = failure(kind, files[i].path, why);
      return out;
    };
    if (cache.repo_id() != repo_id_ || commit != commit_) {
      return fail_all(ErrorKind::kNotFound, "it serves only the topology's package, " + o_.topology.package_ref +
                                                 ", not hf://" + cache.repo_id() + "@" + commit);
    }
    bool any_part = false;
    for (const auto& f : files) {
      any_part = any_part || (f.path != kManifestFileName && f.path != kSignatureFileName && f.path != kValidationFileName);
    }
    StagePlan plan;
    if (any_part) plan = stage_plan(cache);

    std::vector<uint64_t> sizes;
    for (const auto& f : files) sizes.push_back(f.size.value_or(0));
    skippy::detail::run_jobs_largest_first(sizes, std::max(1u, o_.parallel_transfers), [&](size_t i) {
      out[i] = fetch_one(cache, files[i], plan, on_bytes);
    });
    return out;
  }

 private:
  // "peer HOST:PORT: <path>: <why>", with a kind the source layer keeps.
  Declined failure(ErrorKind kind, const std::string& path, const std::string& why) const {
    return Declined(kind, "peer " + o_.endpoint + ": " + path + ": " + why);
  }

  std::optional<Error> unusable() const {
    std::lock_guard g(mu_);
    return down_;
  }
  void mark_unusable(ErrorKind kind, const std::string& why) {
    std::lock_guard g(mu_);
    if (!down_) down_ = Error(kind, why);
  }

  StagePlan stage_plan(const HfRepoCache& cache) const {
    StagePlan p;
    const auto local = cache.snapshot_file(commit_, kManifestFileName);
    if (!local) {
      p.problem = "the snapshot has no " + std::string(kManifestFileName) + " to tell what the stage needs";
      return p;
    }
    try {
      const std::string text = read_small_file(*local, kManifestMaxBytes);
      const std::string sha = sha256_hex(text);
      if (sha != o_.topology.manifest_sha256) {
        p.problem = "the cached " + std::string(kManifestFileName) + " has SHA-256 " + sha + ", the topology's is " +
                    o_.topology.manifest_sha256 + " (the peer serves only the topology's package)";
        return p;
      }
      // The catalog the stage's set is computed from: the root's listing
      // when the package chooses whole parts by role; else (the stage's
      // tensors decide) the reader's catalog once what it reads (the
      // carrier) is in the cache, and only the carrier before. Whether an
      // output of whole parts is tied is not read here: a final stage's set
      // then holds the embeddings, which the stage consumer asks for only
      // when its output is tied (the peer applies the exact rule), so the
      // superset costs at most one refusal for a file nobody asks for.
      OpenedPackage pkg;
      pkg.ref = o_.topology.package_ref;
      pkg.root = cache.snapshot_dir(commit_);
      std::error_code ec;
      pkg.boundary = std::filesystem::canonical(cache.repo_dir(), ec);
      pkg.manifest_sha256 = sha;
      pkg.reader = open_package_reader(text, kManifestFileName);
      pkg.reader->on_open(pkg);
      std::optional<PackageCatalog> catalog = pkg.reader->catalog(pkg, CatalogNeed::root_only());
      if (!catalog->selects_whole_parts) {
        try {
          catalog = pkg.reader->catalog(pkg, CatalogNeed::artifacts());
        } catch (const Error&) {
          p.artifacts = only_carrier(*catalog);
          return p;
        }
      }
      try {
        p.artifacts = stage_artifacts(stage_, *catalog);
      } catch (const Error& e) {
        p.problem = std::string("the topology's stage does not fit the package: ") + e.what();
      }
    } catch (const Error& e) {
      p.problem = std::string("the cached ") + std::string(kManifestFileName) + " cannot be used: " + e.what();
    }
    return p;
  }

  // The carrier, which every stage may have (before the catalog it gives is
  // in the cache).
  StageArtifacts only_carrier(const PackageCatalog& listing) const {
    const CatalogArtifact& carrier = listing.artifacts.at(listing.carrier);
    StageArtifacts s;
    s.range = stage_.layers;
    s.artifacts.push_back({carrier.path, PartRole::kMetadata, std::nullopt, carrier.bytes, carrier.sha256,
                           "every stage reads the metadata carrier"});
    return s;
  }

  RemoteOutcome fetch_one(const HfRepoCache& cache, const RemoteFile& file, const StagePlan& plan,
                          const std::function<void(uint64_t)>& on_bytes) {
    RemoteOutcome o;
    try {
      if (const auto why = unusable()) {
        o.error = failure(why->kind(), file.path, std::string("not asked after ") + why->what());
        return o;
      }
      const bool small = file.path == kSignatureFileName || file.path == kValidationFileName;
      const skippy::detail::ReceivedBlob got = file.path == kManifestFileName ? fetch_manifest(cache, file, on_bytes)
                                               : small ? fetch_small(cache, file, on_bytes)
                                                       : fetch_part(cache, file, plan, on_bytes);
      o.delivered = true;
      o.received = got.received;
      o.verified = got.received && got.verified;
    } catch (const Declined& e) {
      o.error = e;
    } catch (const PeerError& e) {
      if (peer_unusable(e)) mark_unusable(kind_of(e), file.path + ": " + reason(e));
      o.error = failure(kind_of(e), file.path, reason(e));
    } catch (const Error& e) {
      // The blob writer: wrong bytes (discarded), disk full; our own checks.
      o.error = Error(e.kind(), "peer " + o_.endpoint + ": " + e.what());
    } catch (const std::exception& e) {
      o.error = failure(ErrorKind::kIo, file.path, e.what());
    }
    return o;
  }

  std::string what(const std::string& path) const { return "hf://" + repo_id_ + "@" + commit_ + ": " + path; }

  // model-package.json: its size is the peer's word (capped), its SHA-256
  // the topology's. Small: received into memory, then written.
  skippy::detail::ReceivedBlob fetch_manifest(const HfRepoCache& cache, const RemoteFile& file,
                                      const std::function<void(uint64_t)>& on_bytes) {
    if (file.sha256 && !sha256_equal(*file.sha256, o_.topology.manifest_sha256)) {
      throw failure(ErrorKind::kIntegrity, file.path,
                    "wanted with SHA-256 " + *file.sha256 + ", the topology's is " + o_.topology.manifest_sha256);
    }
    std::vector<uint8_t> bytes;
    TransferSink sink;
    sink.on_accept = [&](const TransferAnswer& a) {
      if (a.total_size > kManifestMaxBytes || a.total_size == 0) {
        throw PeerError(PeerErrorKind::kProtocol, "the peer offers a " + std::string(kManifestFileName) + " of " +
                                                      std::to_string(a.total_size) + " bytes (1 to " +
                                                      std::to_string(kManifestMaxBytes) + " allowed)");
      }
      bytes.reserve(static_cast<size_t>(a.total_size));
    };
    sink.on_bytes = [&](std::span<const uint8_t> b) { bytes.insert(bytes.end(), b.begin(), b.end()); };
    fetch_retrying_busy(manifest_request(o_.topology, stage_), sink);
    skippy::detail::BlobSpec spec;
    spec.etag = o_.topology.manifest_sha256;  // lowercase (parse_topology)
    spec.size = bytes.size();
    spec.sha256 = o_.topology.manifest_sha256;
    spec.declared_by = "the topology";
    spec.etag_from = "the topology";
    spec.what = what(file.path);
    return skippy::detail::receive_blob(cache, commit_, file.path, spec, on_bytes, [&](skippy::detail::BlobWriter& w) {
      w.append(std::span<const uint8_t>(bytes).subspan(static_cast<size_t>(w.have())));
    });
  }

  // model-package.json.sig or validation.json, which the manifest does
  // not declare: its SHA-256 is the caller's (validation.json: the
  // sidecar's) when given, else what arrives; the signature check after the
  // fetch judges the bytes. Small: received into memory, then written.
  skippy::detail::ReceivedBlob fetch_small(const HfRepoCache& cache, const RemoteFile& file,
                                           const std::function<void(uint64_t)>& on_bytes) {
    constexpr uint64_t kMaxSmall = 4u << 20;
    TransferRequest r = manifest_request(o_.topology, stage_);
    r.rel_path = file.path;
    r.expected_sha256 = file.sha256;
    r.expected_size = file.size;
    std::vector<uint8_t> bytes;
    TransferSink sink;
    sink.on_accept = [&](const TransferAnswer& a) {
      if (a.total_size > kMaxSmall || a.total_size == 0) {
        throw PeerError(PeerErrorKind::kProtocol, "the peer offers a " + file.path + " of " + std::to_string(a.total_size) +
                                                      " bytes (1 to " + std::to_string(kMaxSmall) + " allowed)");
      }
      bytes.reserve(static_cast<size_t>(a.total_size));
    };
    sink.on_bytes = [&](std::span<const uint8_t> b) { bytes.insert(bytes.end(), b.begin(), b.end()); };
    fetch_retrying_busy(r, sink);
    const std::string sha = sha256_hex(std::span<const uint8_t>(bytes));
    if (file.sha256 && !sha256_equal(*file.sha256, sha)) {
      throw failure(ErrorKind::kIntegrity, file.path, "the peer sent bytes with SHA-256 " + sha + ", " + file.declared_by +
                                                          " declares " + *file.sha256);
    }
    skippy::detail::BlobSpec spec;
    spec.etag = sha;
    spec.size = bytes.size();
    spec.sha256 = sha;
    spec.declared_by = file.sha256 ? file.declared_by : "the bytes received";
    spec.etag_from = "the bytes received";
    spec.what = what(file.path);
    return skippy::detail::receive_blob(cache, commit_, file.path, spec, on_bytes, [&](skippy::detail::BlobWriter& w) {
      w.append(std::span<const uint8_t>(bytes).subspan(static_cast<size_t>(w.have())));
    });
  }

  skippy::detail::ReceivedBlob fetch_part(const HfRepoCache& cache, const RemoteFile& file, const StagePlan& plan,
                                  const std::function<void(uint64_t)>& on_bytes) {
    if (!plan.artifacts) throw failure(ErrorKind::kNotFound, file.path, "not asked: " + plan.problem);
    const PeerArtifact* a = plan.artifacts->find(file.path);
    if (!a) {
      throw failure(ErrorKind::kNotFound, file.path,
                    "not asked: not among the parts stage " + stage_.stage_id + " (layers " +
                        format_layer_range(stage_.layers) + ") may fetch from a peer");
    }
    if ((file.size && *file.size != a->bytes) || (file.sha256 && !sha256_equal(*file.sha256, a->sha256))) {
      throw failure(ErrorKind::kIntegrity, file.path,
                    "not asked: wanted with a size or SHA-256 that the topology's manifest does not declare");
    }
    skippy::detail::BlobSpec spec;
    spec.etag = skippy::detail::ascii_lower(a->sha256);
    spec.size = a->bytes;
    spec.sha256 = file.sha256 ? *file.sha256 : a->sha256;
    spec.declared_by = file.declared_by;
    spec.etag_from = "the manifest";
    spec.what = what(file.path);
    return skippy::detail::receive_blob(cache, commit_, file.path, spec, on_bytes,
                                [&](skippy::detail::BlobWriter& w) { transfer(w, *a); });
  }

  // client_.fetch, with "server busy" asked again after a backoff (doubling,
  // with jitter), each retry said in one line: never silent.
  TransferAnswer fetch_retrying_busy(const TransferRequest& r, const TransferSink& sink) {
    const unsigned attempts = std::max(1u, o_.busy_attempts);
    for (unsigned attempt = 1;; ++attempt) {
      try {
        return client_.fetch(o_.endpoint, r, sink);
      } catch (const PeerError& e) {
        const bool busy = e.refusal() == Refusal::kBusy || e.peer_kind() == PeerErrorKind::kClosedEarly;
        if (!busy || attempt >= attempts) throw;
        const auto base = o_.busy_backoff * (1u << std::min(attempt - 1, 10u));
        std::chrono::milliseconds wait;
        {
          std::lock_guard g(mu_);
          std::uniform_int_distribution<int64_t> jitter(0, base.count() / 2);
          wait = base + std::chrono::milliseconds(jitter(rng_));
        }
        char secs[32];
        std::snprintf(secs, sizeof secs, "%.2f s", static_cast<double>(wait.count()) / 1000);
        say("peer " + o_.endpoint + ": " + r.rel_path + ": " +
            (e.refusal() == Refusal::kBusy ? "server busy" : "closed before the TLS handshake (server busy?)") +
            " (attempt " + std::to_string(attempt) + " of " + std::to_string(attempts) + "), asking again in " + secs);
        std::this_thread::sleep_for(wait);
      }
    }
  }
  void say(const std::string& line) const {
    if (o_.log) {
      o_.log(line);
      return;
    }
    const std::string l = line + "\n";
    (void)!::write(2, l.data(), l.size());  // one write: lines of parallel files never interleave
  }

  // Appends [w.have(), size) from the peer. A connection that drops after
  // bytes arrived is asked again from where it stopped, up to max_attempts.
  void transfer(skippy::detail::BlobWriter& w, const PeerArtifact& a) {
    TransferSink sink;
    sink.on_bytes = [&](std::span<const uint8_t> b) { w.append(b); };
    for (unsigned attempt = 1;; ++attempt) {
      const uint64_t from = w.have();
      w.mark_resumed();  // (no effect from byte 0)
      try {
        fetch_retrying_busy(transfer_request(o_.topology, stage_, a, from), sink);
        return;
      } catch (const PeerError& e) {
        if (attempt >= std::max(1u, o_.max_attempts)) throw;
        if (e.peer_kind() == PeerErrorKind::kTransport && w.have() > from) continue;
        if (e.refusal() == Refusal::kInvalidOffset && from > 0) {
          w.restart();  // our partial file is not one the peer can continue
          continue;
        }
        throw;
      }
    }
  }

  PeerClient client_;
  PeerRemoteOptions o_;
  std::string repo_id_;
  std::string commit_;
  TopologyStage stage_;
  mutable std::mutex mu_;
  std::optional<Error> down_;  // why the peer is not asked any more
  std::mt19937_64 rng_{std::random_device{}()};  // backoff jitter (under mu_)
};

}  // namespace

std::shared_ptr<Remote> make_peer_remote(PeerClient client, PeerRemoteOptions options) {
  const auto commit = pinned_commit(options.topology.package_ref);
  if (!commit) {
    throw_invalid("the topology's package_ref " + options.topology.package_ref +
                  " does not pin a commit (hf://ns/repo@<40-hex commit>): a name that can move is never fetched "
                  "from a peer");
  }
  const std::string repo_id = parse_hf_ref(options.topology.package_ref).repo_id;
  const TopologyStage* stage = options.topology.find_stage(options.stage_id);
  if (!stage) {
    std::string ids;
    for (const auto& s : options.topology.stages) ids += (ids.empty() ? "" : ", ") + s.stage_id;
    throw Error(ErrorKind::kUsage, "stage \"" + options.stage_id + "\" is not in the topology (its stages: " + ids + ")");
  }
  if (stage->node_id != client.identity().node_id()) {
    throw Error(ErrorKind::kUsage, "stage " + stage->stage_id + " of the topology is assigned to node " + stage->node_id +
                                       ", not to this node (" + client.identity().node_id() +
                                       "): the peer serves a stage only to its node");
  }
  TopologyStage s = *stage;
  return std::make_shared<PeerRemote>(std::move(client), std::move(options), repo_id, *commit, std::move(s));
}

}  // namespace skippy::peer
