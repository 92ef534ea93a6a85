// open_package: a local directory in place, or an hf:// repository through
// the Hugging Face cache and the remotes in order (see skippy/source.h).
#include "skippy/source.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <fstream>
#include <mutex>
#include <set>

#include "util/env.h"
#include "util/file.h"
#include "skippy/manifest.h"
#include "skippy/package_signature.h"
#include "util/sha256.h"
#include "util/text.h"
#include "source/fetch_chain.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;

// The ArtifactSource of a repository package: what select_stage asks for
// comes from the cache, else from the remotes.
class RepoArtifactSource final : public ArtifactSource {
 public:
  RepoArtifactSource(std::shared_ptr<detail::FetchChain> chain, std::string commit, ProgressFn progress)
      : chain_(std::move(chain)), commit_(std::move(commit)), progress_(std::move(progress)) {}

  void provide(const std::vector<const ArtifactEntry*>& entries) override {
    std::vector<RemoteFile> want;
    want.reserve(entries.size());
    for (const auto* e : entries) want.push_back({e->path, e->sha256, e->artifact_bytes, "the manifest"});
    chain_->bring(commit_, want, progress_);
  }
  std::vector<std::string> fetched() const override { return chain_->fetched(); }
  std::map<std::string, std::string> origins() const override { return chain_->origins(); }
  bool verified_while_fetching(const std::string& rel_path) const override { return chain_->verified(rel_path); }
  std::vector<std::string> notes() const override { return chain_->notes(); }

  // From the headers cache (<skippy cache>/headers/<sha256>: the longest
  // prefix read so far of that content), else from the remotes.
  std::optional<std::vector<uint8_t>> head(const ArtifactEntry& e, uint64_t length) override {
    length = std::min(length, e.artifact_bytes);
    const fs::path kept = env::skippy_cache_dir() / "headers" / detail::ascii_lower(e.sha256);
    std::error_code ec;
    const bool valid_name = is_sha256_hex(e.sha256);
    if (valid_name && fs::is_regular_file(kept, ec) && fs::file_size(kept, ec) >= length && !ec) {
      std::vector<uint8_t> bytes(static_cast<size_t>(length));
      std::ifstream in(kept, std::ios::binary);
      if (in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(length))) return bytes;
    }
    auto bytes = chain_->read_head(commit_, {e.path, e.sha256, e.artifact_bytes, "the manifest"}, length);
    if (valid_name) {
      try {
        fs::create_directories(kept.parent_path());
        write_file_atomic(kept, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()),
                          Durability::kRenameOnly, chain_->sources().io_env);
      } catch (const Error&) {
        // a cache that cannot be written costs a request next time, nothing more
      }
    }
    return bytes;
  }

 private:
  std::shared_ptr<detail::FetchChain> chain_;
  std::string commit_;
  ProgressFn progress_;
};

OpenedPackage open_repo_package(const HfRef& ref, const Sources& sources, const OpenOptions& options) {
  auto chain = std::make_shared<detail::FetchChain>(sources, ref.repo_id);
  const std::string manifest_name(kManifestFileName);
  bool from_cache = false;
  const std::string commit = chain->resolve_commit(ref.revision, manifest_name, options.refresh_revision, &from_cache);
  chain->bring(commit, {{manifest_name, std::nullopt, std::nullopt, "the manifest", kManifestMaxBytes}}, {});
  // Fetched or a cache hit: the manifest's blob name (its git blob id) vouches
  // for its bytes, checked every time (it is small), as fragments are.
  chain->cache().check_small_blob(commit, manifest_name, kManifestMaxBytes);
  // With trusted signers the signature sidecar travels with the manifest (it
  // is declared nowhere in it); a repository without one is then refused by
  // check_trust. Without them nothing more is asked of the remotes.
  if (!sources.trusted_signers.empty() || options.with_signature) {
    // Required with trusted signers (a missing sidecar is check_trust's to
    // refuse, anything else fails here); only reported otherwise (inspect):
    // then nothing about it may fail the open (offline, a peer only).
    const bool required = !sources.trusted_signers.empty();
    bool signed_here = false;
    try {
      chain->bring(commit,
                   {{std::string(kSignatureFileName), std::nullopt, std::nullopt, "the repository", kSignatureMaxBytes}}, {});
      signed_here = true;
    } catch (const Error& e) {
      if (required && e.kind() != ErrorKind::kNotFound) throw;
    }
    // a sidecar that covers validation.json names its SHA-256: bring it
    // checked against that digest (check_trust then verifies the signature).
    if (signed_here) {
      if (const auto digest = signed_validation_sha256(chain->cache().snapshot_dir(commit))) {
        try {
          chain->bring(commit, {{std::string(kValidationFileName), *digest, std::nullopt, "the signature sidecar",
                                 kValidationMaxBytes}},
                       {});
        } catch (const Error&) {
          if (required) throw;
        }
      }
    }
  }
  const auto& cache = chain->cache();
  std::error_code ec;
  const fs::path boundary = fs::canonical(cache.repo_dir(), ec);
  if (ec) throw Error(ErrorKind::kIo, cache.repo_dir().string() + ": cannot resolve: " + ec.message());
  auto source = std::make_shared<RepoArtifactSource>(chain, commit, options.on_progress);
  std::vector<std::string> warnings;
  std::string revision_kind = "commit";
  if (!is_commit_hash(ref.revision)) {
    // a tag names one commit for good; a branch ("main" always is one)
    // moves. A name no remote can classify (offline, a peer) counts as moving.
    const std::optional<bool> tag = ref.revision == "main" ? std::optional<bool>(false) : chain->is_tag(ref.revision);
    revision_kind = !tag ? "ref" : *tag ? "tag" : "branch";
    if (!tag || !*tag) {
      warnings.push_back("hf://" + ref.repo_id + "@" + ref.revision + " names " +
                         (tag ? std::string("a branch") : std::string("a branch or tag")) + ", which can move; it " +
                         (from_cache ? "resolved through the local cache (refs/" + ref.revision + ")"
                                     : std::string("resolved on the Hub")) +
                         " to commit " + commit + ". Production configs should pin hf://" + ref.repo_id + "@" + commit);
    }
  }
  const fs::path snapshot = cache.snapshot_dir(commit);
  // With trusted signers the manifest's signature is checked before the
  // reader brings any file it names (check_trust checks it again, on the
  // bytes read).
  if (!sources.trusted_signers.empty()) (void)check_package_trust(snapshot, sources.trusted_signers, ref.text());
  OpenedPackage out = open_package_dir(ref.text(), snapshot, boundary, std::move(source));
  // What the repository resolution adds.
  out.always_verify = true;
  out.commit = commit;
  out.revision_kind = revision_kind;
  out.warnings.insert(out.warnings.end(), warnings.begin(), warnings.end());
  return out;
}

// With trusted signers: the package must carry a signature of one of them
// over the manifest bytes open_package_dir (open_catalog_dir) read.
void check_trust(OpenedPlace& pkg, const Sources& sources) {
  if (sources.trusted_signers.empty()) return;
  pkg.signature = check_package_trust(pkg.root, sources.trusted_signers, pkg.ref);
  if (pkg.signature->manifest_sha256 != pkg.manifest_sha256) {
    throw_integrity(pkg.ref + ": model-package.json changed while it was read (SHA-256 " + pkg.manifest_sha256 +
                    ", signed " + pkg.signature->manifest_sha256 + ")");
  }
  pkg.always_verify = true;  // the signature vouches for the digests; the bytes must match them
}

}  // namespace

OpenedPackage open_package(std::string_view ref, const Sources& sources, const OpenOptions& options) {
  OpenedPackage out;
  if (is_hf_ref(ref)) {
    out = open_repo_package(parse_hf_ref(ref), sources, options);
  } else {
    // Local: the trust check comes before the reader reads any file the root names, as for hf://.
    if (!sources.trusted_signers.empty() && std::filesystem::exists(fs::path(ref) / std::string(kManifestFileName))) {
      (void)check_package_trust(fs::path(ref), sources.trusted_signers, std::string(ref));
    }
    out = open_local_package(fs::path(ref));
  }
  check_trust(out, sources);
  return out;
}

}  // namespace skippy
