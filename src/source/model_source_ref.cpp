// write-package's sources: a local GGUF, or an org/repo:distribution
// coordinate resolved through the cache and the remotes (skippy/source.h).
#include <algorithm>
#include <cctype>
#include <map>

#include "source/hub_provenance.h"
#include "skippy/error.h"
#include "skippy/gguf.h"
#include "skippy/source.h"
#include "skippy/manifest.h"
#include "util/sha256.h"
#include "skippy/verify.h"
#include "source/fetch_chain.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool boundary(char c) { return c == '-' || c == '.' || c == '/'; }

// A git commit as people copy it: 7 to 40 hex digits (64 in a SHA-256
// repository). A branch or a tag is not one.
bool looks_like_commit(const std::string& rev) {
  if (rev.size() < 7 || (rev.size() > 40 && rev.size() != 64)) return false;
  for (const char c : rev) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

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

// A source that is neither a file here nor an ORG/REPO:DIST coordinate: say
// what it looks like and what would work.
[[noreturn]] void explain_unknown_source(const std::string& source) {
  if (is_hf_ref(source)) {
    const auto rest = source.substr(5);
    throw Error(ErrorKind::kUsage, source + " is a package reference (hf://): write-package reads a model, a local "
                                            ".gguf file or a Hub coordinate ORG/REPO:DIST without hf:// (e.g. " +
                                            rest.substr(0, rest.find_first_of("@")) + ")");
  }
  const auto slash = source.find('/');
  const bool coordinate_like = !source.starts_with('/') && !source.starts_with('.') && slash != std::string::npos &&
                               source.find('/', slash + 1) == std::string::npos && !lower(source).ends_with(".gguf");
  if (coordinate_like && source.find(':') == std::string::npos) {
    throw Error(ErrorKind::kUsage, source + " is not a file here; as a Hub source it needs its distribution: " + source +
                                       ":DIST (the quantization tag in the GGUF file names, e.g. " + source + ":Q4_K_M)");
  }
  throw_not_found(source + ": no such file (a source is a local .gguf file, or a Hub coordinate ORG/REPO:DIST)");
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

ResolvedModelSource open_model_source(const ModelSourceRequest& req, const Sources& sources, const ProgressFn& on_progress) {
  ResolvedModelSource out;
  std::error_code ec;
  const bool exists = fs::exists(req.source, ec);
  if (exists || !looks_like_model_coordinate(req.source)) {
    if (!exists) explain_unknown_source(req.source);
    if (req.model_id.empty() || req.revision.empty() || req.source_file.empty()) {
      throw Error(ErrorKind::kUsage,
                  req.source + " is a local file: a local source needs explicit provenance, --model-id ORG/REPO:DIST "
                               "--source-revision COMMIT --source-file NAME (or name the Hub source itself, ORG/REPO:DIST)");
    }
    if (const auto problem = model_id_problem(req.model_id)) {
      throw Error(ErrorKind::kUsage, "--model-id \"" + req.model_id + "\" " + *problem +
                                         " (the source model's Hub coordinate, e.g. org/Model-GGUF:Q4_K_M)");
    }
    out.local = req.source;
    out.provenance.model_id = req.model_id;
    out.provenance.revision = req.revision;
    out.provenance.primary_file = req.source_file;
    if (!looks_like_commit(req.revision)) {
      out.warnings.push_back("--source-revision \"" + req.revision +
                             "\" is not a commit (a branch or tag moves on): the package records it as the source's "
                             "revision, so nobody can be sure which bytes it was; give the commit the file came from "
                             "(7 to 64 hex digits, as the Hub's file page shows)");
    }
    return out;
  }
  // A Hub source: the remote's answers are the provenance.
  if (!req.model_id.empty() || !req.source_file.empty()) {
    throw Error(ErrorKind::kUsage, "--model-id and --source-file are for local sources; a Hub source (" + req.source +
                                       ") takes them from the Hub");
  }
  auto coord = parse_model_coordinate(req.source);
  if (!req.revision.empty()) coord.revision = req.revision;
  detail::FetchChain chain(sources, coord.repo_id);
  std::string declared_by;
  const RemoteListing listing = chain.list(coord.revision, &declared_by);
  std::vector<std::string> paths;
  for (const auto& f : listing.files) paths.push_back(f.path);
  const auto files = match_distribution(paths, coord);
  std::vector<RemoteFile> want;
  for (const auto& p : files) {
    const auto it = std::find_if(listing.files.begin(), listing.files.end(), [&](const auto& f) { return f.path == p; });
    want.push_back({p, it->sha256, it->size ? std::optional<uint64_t>(it->size) : std::nullopt, declared_by});
  }
  const auto local = chain.bring(listing.commit, want, on_progress);
  if (req.publisher_files) {
    std::vector<RemoteFile> extra;
    for (const auto name : detail::kHubPublisherFiles) {
      const auto it = std::find_if(listing.files.begin(), listing.files.end(), [&](const auto& f) { return f.path == name; });
      if (it == listing.files.end()) continue;
      extra.push_back({std::string(name), it->sha256, it->size ? std::optional<uint64_t>(it->size) : std::nullopt,
                       declared_by, detail::kPublisherFileMaxBytes});
    }
    if (!extra.empty()) {
      const auto got = chain.bring(listing.commit, extra, on_progress);
      out.publisher_files.assign(got.begin(), got.end());
    }
  }
  out.downloaded = chain.fetched();
  // The shards' SHA-256s were checked while they downloaded (or an earlier
  // run recorded them): the verification cache says so, and the writer
  // then hashes only the fragments (one SHA-256 stream, not two).
  const std::string scope = "hf:" + coord.repo_id + "@" + listing.commit;
  std::vector<FileClaim> claims, fresh;
  for (size_t i = 0; i < files.size(); ++i) {
    if (!want[i].sha256 || !want[i].size) continue;
    FileClaim c{local[i], files[i], *want[i].sha256, *want[i].size};
    if (chain.verified(files[i])) fresh.push_back(c);
    claims.push_back(std::move(c));
  }
  record_verifications(scope, fresh);
  const auto vouched = cached_verifications(scope, claims);
  out.local = local.front();
  out.from_hub = true;
  std::vector<std::string> expected;
  for (const auto& w : want) expected.push_back(w.sha256.value_or(""));
  out.provenance = detail::hub_source_provenance(coord, listing.commit, files, std::move(expected));
  auto& p = out.provenance;
  for (size_t i = 0, k = 0; i < files.size(); ++i) {
    if (!want[i].sha256 || !want[i].size) continue;
    p.shard_verified[i] = vouched[k++];
  }
  return out;
}

}  // namespace skippy

namespace skippy::detail {

SourceProvenance hub_source_provenance(const ModelCoordinate& coord, const std::string& commit,
                                       const std::vector<std::string>& files, std::vector<std::string> expected_sha256) {
  SourceProvenance p;
  p.model_id = coord.text();
  p.repo = coord.repo_id;
  p.distribution_id = coord.distribution;
  p.revision = commit;
  p.primary_file = files.front();
  p.file_paths = files;
  p.expected_sha256 = std::move(expected_sha256);
  p.shard_verified.assign(files.size(), false);
  return p;
}

}  // namespace skippy::detail
