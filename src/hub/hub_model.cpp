#include "skippy/hub_model.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "skippy/error.h"
#include "skippy/gguf.h"
#include "skippy/hub.h"
#include "skippy/sha256.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool boundary(char c) { return c == '-' || c == '.' || c == '/'; }

bool has_tag(const std::string& path, const std::string& tag) {
  const std::string p = lower(path), t = lower(tag);
  for (size_t pos = p.find(t); pos != std::string::npos; pos = p.find(t, pos + 1)) {
    const bool left = pos == 0 || boundary(p[pos - 1]);
    const size_t end = pos + t.size();
    const bool right = end == p.size() || boundary(p[end]);
    if (left && right) return true;
  }
  return false;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace

std::vector<std::string> match_distribution(const std::vector<std::string>& paths, const ModelCoordinate& coord) {
  // Group the matching files by model: a split model's shards share a prefix.
  std::map<std::string, std::vector<std::string>> models;
  std::vector<std::string> ggufs;
  for (const auto& p : paths) {
    if (!lower(p).ends_with(".gguf")) continue;
    ggufs.push_back(p);
    const auto name = lower(fs::path(p).filename().string());
    if (name.starts_with("mmproj")) continue;
    if (!has_tag(p.substr(0, p.size() - 5), coord.distribution)) continue;
    const auto split = parse_split_name(p);
    models[split ? split->prefix : p].push_back(p);
  }
  const std::string what = coord.text();
  if (models.empty()) {
    throw_not_found(what + ": no GGUF file of distribution \"" + coord.distribution + "\" in " + coord.repo_id +
                    (ggufs.empty() ? std::string(" (the repository has no .gguf files)") : " (GGUF files: " + join(ggufs) + ")"));
  }
  if (models.size() > 1) {
    std::vector<std::string> names;
    for (const auto& [k, v] : models) names.push_back(v.size() == 1 ? v.front() : k + "-*-of-*.gguf");
    throw_invalid(what + ": \"" + coord.distribution + "\" matches more than one model: " + join(names) +
                  "; use a longer distribution tag");
  }
  auto files = models.begin()->second;
  if (files.size() == 1 && !parse_split_name(files.front())) return files;
  // Every shard of one split model, in order, none missing.
  std::vector<std::pair<uint32_t, std::string>> shards;
  uint32_t count = 0;
  for (const auto& f : files) {
    const auto s = parse_split_name(f);
    if (!s) throw_invalid(what + ": " + f + " sits beside split shards of the same name");
    if (count != 0 && s->count != count) throw_invalid(what + ": shards disagree on the shard count (" + join(files) + ")");
    count = s->count;
    shards.emplace_back(s->index, f);
  }
  std::sort(shards.begin(), shards.end());
  if (shards.size() != count) {
    throw_invalid(what + ": split model has " + std::to_string(shards.size()) + " of its " + std::to_string(count) +
                  " shards in the repository (" + join(files) + ")");
  }
  for (uint32_t i = 0; i < count; ++i) {
    if (shards[i].first != i + 1) throw_invalid(what + ": shard " + std::to_string(i + 1) + " of " + std::to_string(count) + " is missing");
  }
  std::vector<std::string> out;
  for (auto& [i, f] : shards) out.push_back(std::move(f));
  return out;
}

HubModelSource fetch_model_source(const ModelCoordinate& coord, const std::function<void(uint64_t, uint64_t)>& on_progress) {
  HubRepo repo(HubConfig::from_env(), coord.repo_id);
  std::string commit;
  std::vector<HubRepo::RepoFile> listing;
  if (repo.config().offline) {
    // The cache's snapshot of the revision is the listing; LFS blobs are
    // named by their SHA-256.
    const auto c = repo.cache().cached_commit(coord.revision);
    if (!c) {
      throw_not_found(coord.text() + ": revision \"" + coord.revision +
                      "\" is not in the Hugging Face cache and HF_HUB_OFFLINE=1 forbids asking the Hub");
    }
    commit = *c;
    const fs::path snap = repo.cache().snapshot_dir(commit);
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(snap, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      if (!it->is_regular_file(ec)) continue;
      HubRepo::RepoFile f;
      f.path = it->path().lexically_relative(snap).generic_string();
      f.size = it->file_size(ec);
      const auto target = fs::read_symlink(it->path(), ec).filename().string();
      if (is_sha256_hex(target)) f.sha256 = target;
      listing.push_back(std::move(f));
    }
  } else {
    auto info = repo.info(coord.revision);
    commit = info.commit;
    listing = std::move(info.files);
  }
  std::vector<std::string> paths;
  for (const auto& f : listing) paths.push_back(f.path);
  HubModelSource out;
  out.files = match_distribution(paths, coord);
  std::vector<HubFileRequest> want;
  for (const auto& p : out.files) {
    const auto it = std::find_if(listing.begin(), listing.end(), [&](const auto& f) { return f.path == p; });
    want.push_back({p, it->sha256, it->size ? std::optional<uint64_t>(it->size) : std::nullopt,
                    repo.config().offline ? "the cached blob's name" : "the Hub's repository listing"});
  }
  if (!repo.config().offline && !is_commit_hash(coord.revision)) {
    repo.cache().create_dirs();
    repo.cache().write_ref(coord.revision, commit);
  }
  const auto got = repo.ensure_files(commit, want, on_progress);
  for (const auto& g : got) {
    if (g.downloaded) out.downloaded.push_back(g.path);
  }
  out.local = got.front().local;
  auto& p = out.provenance;
  p.model_id = coord.text();
  p.repo = coord.repo_id;
  p.distribution_id = coord.distribution;
  p.revision = commit;
  p.primary_file = out.files.front();
  p.file_paths = out.files;
  for (const auto& w : want) p.expected_sha256.push_back(w.sha256.value_or(""));
  return out;
}

}  // namespace skippy
