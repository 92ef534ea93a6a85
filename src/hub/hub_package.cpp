#include "hub/hub_package.h"

#include <mutex>
#include <set>

#include "skippy/error.h"
#include "skippy/hub.h"

namespace skippy::detail {
namespace {

namespace fs = std::filesystem;

class HubArtifactSource final : public ArtifactSource {
 public:
  HubArtifactSource(std::shared_ptr<HubRepo> repo, std::string commit, std::function<void(uint64_t, uint64_t)> progress)
      : repo_(std::move(repo)), commit_(std::move(commit)), progress_(std::move(progress)) {}

  void provide(const std::vector<const ArtifactEntry*>& entries) override {
    std::vector<HubFileRequest> want;
    want.reserve(entries.size());
    for (const auto* e : entries) want.push_back({e->path, e->sha256, e->artifact_bytes});
    const auto got = repo_->ensure_files(commit_, want, progress_);
    std::lock_guard g(mu_);
    for (const auto& r : got) {
      if (r.downloaded) fetched_.push_back(r.path);
      if (r.verified) verified_.insert(r.path);
    }
  }
  std::vector<std::string> fetched() const override {
    std::lock_guard g(mu_);
    return fetched_;
  }
  bool verified_while_fetching(const std::string& rel_path) const override {
    std::lock_guard g(mu_);
    return verified_.count(rel_path) != 0;
  }
  std::string name() const override { return "hub"; }
  void note_fetched(const std::string& rel_path) {
    std::lock_guard g(mu_);
    fetched_.push_back(rel_path);
  }

 private:
  std::shared_ptr<HubRepo> repo_;
  std::string commit_;
  std::function<void(uint64_t, uint64_t)> progress_;
  mutable std::mutex mu_;
  std::vector<std::string> fetched_;
  std::set<std::string> verified_;
};

}  // namespace

OpenedPackage open_hf_package(const HfRef& ref, const OpenOptions& options) {
  auto repo = std::make_shared<HubRepo>(HubConfig::from_env(), ref.repo_id);
  const std::string manifest_name(kManifestFileName);
  bool from_cache = false;
  const std::string commit = repo->resolve_commit(ref.revision, manifest_name, &from_cache, options.refresh_revision);
  auto source = std::make_shared<HubArtifactSource>(repo, commit, options.on_progress);
  const auto got = repo->ensure_files(commit, {{manifest_name, std::nullopt, std::nullopt}});
  std::error_code ec;
  const fs::path boundary = fs::canonical(repo->cache().repo_dir(), ec);
  if (ec) throw Error(ErrorKind::kIo, repo->cache().repo_dir().string() + ": cannot resolve: " + ec.message());
  OpenedPackage pkg = open_package_dir(ref.text(), repo->cache().snapshot_dir(commit), boundary);
  pkg.always_verify = true;
  pkg.commit = commit;
  pkg.source = source;
  if (got.front().downloaded) {
    // Counted with the artifacts so `fetch` reports everything it brought.
    source->note_fetched(manifest_name);
  }
  if (!is_commit_hash(ref.revision)) {
    pkg.warnings.push_back("hf://" + ref.repo_id + "@" + ref.revision + " names a branch or tag, which can move; it " +
                           (from_cache ? "resolved through the local cache (refs/" + ref.revision + ")"
                                       : std::string("resolved on the Hub")) +
                           " to commit " + commit + ". Production configs should pin hf://" + ref.repo_id + "@" + commit);
  }
  return pkg;
}

}  // namespace skippy::detail
