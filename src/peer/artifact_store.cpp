#include "peer/artifact_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "skippy/error.h"
#include "skippy/gguf.h"
#include "util/file.h"
#include "skippy/source.h"
#include "skippy/package_signature.h"
#include "util/sha256.h"
#include "skippy/stage.h"
#include "skippy/package.h"
#include "skippy/verify.h"
#include "util/text.h"

namespace skippy::peer::detail {
namespace {

namespace fs = std::filesystem;

bool inside(const fs::path& p, const fs::path& boundary) {
  const auto& ps = p.native();
  const auto& bs = boundary.native();
  return ps.size() > bs.size() && ps.compare(0, bs.size(), bs) == 0 && ps[bs.size()] == '/';
}

// What identifies one state of a file (as the verification cache does).
std::string state_of(const struct stat& st) {
  return std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" +
         std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + ":" +
         std::to_string(st.st_ctim.tv_sec) + "." + std::to_string(st.st_ctim.tv_nsec);
}

// Opens a file of the cache read-only, refusing anything but a regular file
// without ever blocking on it: O_NONBLOCK for the open (a FIFO would wait for
// a writer), fstat, then the flag cleared. O_NOFOLLOW: `real` is already
// canonical, so a symlink there now was swapped in. -1 with *why set.
int open_regular_nonblocking(const fs::path& real, const std::string& what, std::string* why) {
  const int fd = ::open(real.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    *why = what + (errno == ENXIO ? " is not a regular file (a FIFO or socket)" : " cannot be opened: " + std::string(std::strerror(errno)));
    return -1;
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    *why = what + " is not a regular file" +
           (S_ISFIFO(st.st_mode) ? " (a FIFO)" : S_ISDIR(st.st_mode) ? " (a directory)" : S_ISSOCK(st.st_mode) ? " (a socket)" : "");
    ::close(fd);
    return -1;
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    *why = what + ": cannot clear O_NONBLOCK";
    ::close(fd);
    return -1;
  }
  return fd;
}

Decision refuse(Refusal r, std::string why) {
  Decision d;
  d.refusal = r;
  d.why = std::move(why);
  return d;
}

// How the server's log names an artifact: as its package does (by its id
// and path, or by its role and path).
std::string describe(const OpenedPlace& pkg, const CatalogArtifact& a) {
  if (pkg.names_artifacts_by_id) return "artifact " + a.id + " (" + a.path + ")";
  const PartRole role = a.role.value_or(PartRole::kMetadata);
  if (role == PartRole::kLayer && a.layer) return "layer " + std::to_string(*a.layer) + " (" + a.path + ")";
  return std::string(part_role_name(role)) + " (" + a.path + ")";
}

// What a request expects that the package does not declare, if anything.
std::optional<std::string> expectation_problem(const wire::Request& req, uint64_t size, const std::string& sha) {
  if (req.expected_size && *req.expected_size != size) {
    return "the request expects " + std::to_string(*req.expected_size) + " bytes, the manifest says " + std::to_string(size);
  }
  if (req.expected_sha256 && !sha256_equal(wire::to_hex(*req.expected_sha256), sha)) {
    return "the request expects SHA-256 " + wire::to_hex(*req.expected_sha256) + ", the manifest says " + sha;
  }
  return std::nullopt;
}

// The declared artifact as the part open_verified checks.
StagePart part_of(const PackageCatalog& listing, const CatalogArtifact& a) {
  for (auto& p : all_parts(listing)) {
    if (p.rel_path == a.path) return p;
  }
  throw Error(ErrorKind::kUsage, a.path + ": not among the package's artifacts");
}


}  // namespace

ServedFile::~ServedFile() {
  if (fd >= 0) ::close(fd);
}

ArtifactStore::ArtifactStore(Topology topology, fs::path hf_cache, std::optional<fs::path> verification_cache_dir,
                             std::vector<fs::path> trusted_signers)
    : topology_(std::move(topology)),
      commit_(pinned_commit(topology_.package_ref).value_or("")),
      repo_dir_(HfRepoCache(hf_cache, parse_hf_ref(topology_.package_ref).repo_id).repo_dir()),
      snapshot_dir_(HfRepoCache(hf_cache, parse_hf_ref(topology_.package_ref).repo_id).snapshot_dir(
          commit_.empty() ? std::string(40, '0') : commit_)),
      verification_cache_dir_(std::move(verification_cache_dir)),
      trusted_signers_(std::move(trusted_signers)) {
  if (commit_.empty()) {
    throw_invalid("topology package_ref " + topology_.package_ref +
                  " does not pin a 40-hex commit: only hf://ns/repo@<commit> refs are eligible for peer transfer "
                  "(a branch or tag can move)");
  }
}

std::shared_ptr<std::mutex> ArtifactStore::path_lock(const std::string& rel_path) {
  std::lock_guard g(mu_);
  auto& m = verifying_[rel_path];
  if (!m) m = std::make_shared<std::mutex>();
  return m;
}

std::shared_ptr<const ArtifactStore::Package> ArtifactStore::load_package(std::string* why) {
  std::error_code ec;
  const fs::path boundary = fs::canonical(repo_dir_, ec);
  if (ec) {
    *why = "the package's repo folder is not in the Hugging Face cache";
    return nullptr;
  }
  const fs::path path = snapshot_dir_ / std::string(kManifestFileName);
  if (!fs::exists(fs::symlink_status(path, ec))) {
    *why = "commit " + commit_ + " has no model-package.json in the cache";
    return nullptr;
  }
  const fs::path real = fs::canonical(path, ec);
  if (ec) {
    *why = "model-package.json is a dangling symlink";
    return nullptr;
  }
  if (!inside(real, boundary)) {
    *why = "model-package.json resolves to " + real.string() + ", outside the repo folder";
    return nullptr;
  }
  const int fd = open_regular_nonblocking(real, "model-package.json", why);
  if (fd < 0) return nullptr;
  ServedFile holder{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    *why = "model-package.json cannot be examined (fstat)";
    return nullptr;
  }
  if (static_cast<uint64_t>(st.st_size) > kManifestMaxBytes) {
    *why = "model-package.json is " + std::to_string(st.st_size) + " bytes, over the 16 MiB cap for peer transfer";
    return nullptr;
  }
  const std::string state = state_of(st);
  {
    std::lock_guard g(mu_);
    if (package_ && package_->state == state) return package_;
  }
  auto text = std::make_shared<std::string>(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < text->size()) {
    const ssize_t n = ::pread(fd, text->data() + done, text->size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *why = "model-package.json: read failed";
      return nullptr;
    }
    done += static_cast<size_t>(n);
  }
  const std::string sha = sha256_hex(*text);
  if (!sha256_equal(sha, topology_.manifest_sha256)) {
    *why = "model-package.json in the cache hashes to " + sha + ", the topology says " + topology_.manifest_sha256;
    return nullptr;
  }
  auto pkg = std::make_shared<OpenedPackage>();
  std::shared_ptr<const PackageCatalog> listing;
  try {
    // The package's artifacts as its reader lists them, before any file is read.
    pkg->reader = open_package_reader(*text, "model-package.json");
    listing = std::make_shared<const PackageCatalog>(pkg->reader->catalog(*pkg, CatalogNeed::root_only()));
  } catch (const Error& e) {
    *why = std::string("model-package.json does not parse: ") + e.what();
    return nullptr;
  }
  if (!trusted_signers_.empty()) {
    // the signature must vouch for exactly the bytes just read.
    try {
      const auto sig = check_package_trust(snapshot_dir_, trusted_signers_, topology_.package_ref);
      if (!sig || !sha256_equal(sig->manifest_sha256, sha)) {
        *why = "model-package.json changed while its signature was checked";
        return nullptr;
      }
    } catch (const Error& e) {
      *why = std::string("not served: ") + e.what();
      return nullptr;
    }
  }
  pkg->ref = topology_.package_ref;
  pkg->root = snapshot_dir_;
  pkg->boundary = boundary;
  pkg->always_verify = true;
  pkg->manifest_sha256 = sha;
  pkg->commit = commit_;
  try {
    pkg->reader->on_open(*pkg);
  } catch (const Error& e) {
    *why = std::string("not served: ") + e.what();
    return nullptr;
  }
  auto p = std::make_shared<Package>();
  p->state = state;
  p->text = std::move(text);
  p->pkg = std::move(pkg);
  p->listing = std::move(listing);
  std::lock_guard g(mu_);
  package_ = p;
  return p;
}

std::shared_ptr<ServedFile> ArtifactStore::open_verified(const OpenedPackage& pkg, StagePart part,
                                                         std::string* why) {
  std::error_code ec;
  // The manifest's own rule, re-checked: a declared path is a safe relative path.
  if (!is_safe_relative_path(part.rel_path)) {
    *why = part.rel_path + ": not a safe relative path";
    return nullptr;
  }
  const fs::path path = pkg.root / part.rel_path;
  if (!fs::exists(fs::symlink_status(path, ec))) {
    *why = part.rel_path + " is not in the cache";
    return nullptr;
  }
  const fs::path real = fs::canonical(path, ec);
  if (ec) {
    *why = part.rel_path + " is a dangling symlink";
    return nullptr;
  }
  // Snapshot files link into ../../blobs: the boundary is the repo folder.
  if (!inside(real, pkg.boundary)) {
    *why = part.rel_path + " resolves to " + real.string() + ", outside the repo folder " + pkg.boundary.string();
    return nullptr;
  }
  // Never blocks: a FIFO (or a socket, a device) in place of a blob is
  // refused here, before anything reads or hashes it.
  auto file = std::make_shared<ServedFile>();
  file->fd = open_regular_nonblocking(real, part.rel_path, why);
  struct stat st {};
  if (file->fd < 0) return nullptr;
  if (::fstat(file->fd, &st) != 0) {
    *why = part.rel_path + " cannot be examined (fstat)";
    return nullptr;
  }
  if (static_cast<uint64_t>(st.st_size) != part.bytes) {
    *why = part.rel_path + " is " + std::to_string(st.st_size) + " bytes, the manifest says " +
           std::to_string(part.bytes) + " (damaged or partial: never served)";
    return nullptr;
  }
  part.path = real;
  part.reason = "peer transfer";
  VerifyOptions vo;
  vo.threads = 1;
  vo.cache_dir = verification_cache_dir_;
  VerifyReport report;
  {
    // One hash per file at a time: a second request waits, then hits the record.
    const auto lock = path_lock(part.rel_path);
    std::lock_guard g(*lock);
    report = verify_parts(pkg, {part}, vo);
  }
  if (!report.verified) {
    *why = "damaged, never served: " + (report.problems.empty() ? part.rel_path : report.problems.front());
    return nullptr;
  }
  struct stat now {};
  if (::stat(real.c_str(), &now) != 0 || state_of(now) != state_of(st)) {
    *why = part.rel_path + " changed while it was being verified";
    return nullptr;
  }
  return file;
}

Decision ArtifactStore::authorize(const wire::Request& req, const std::string& peer_node_id) {
  const Topology& t = topology_;
  // 3. The package, the topology, the stage.
  const auto commit = pinned_commit(req.package_ref);
  if (!commit) {
    return refuse(Refusal::kUnavailable,
                  "package ref " + req.package_ref + " does not pin a 40-hex commit (a branch or tag can move)");
  }
  if (req.topology_id != t.topology_id) return refuse(Refusal::kUnavailable, "topology \"" + req.topology_id + "\" is not the active one");
  if (req.run_id != t.run_id) return refuse(Refusal::kUnavailable, "run \"" + req.run_id + "\" is not the topology's run");
  {
    const HfRef a = parse_hf_ref(req.package_ref);
    const HfRef b = parse_hf_ref(t.package_ref);
    if (a.repo_id != b.repo_id || a.revision != b.revision) {
      return refuse(Refusal::kUnavailable, "package " + req.package_ref + " is not the topology's " + t.package_ref);
    }
  }
  const std::string manifest_sha = wire::to_hex(req.manifest_sha256);
  if (manifest_sha != t.manifest_sha256) {
    return refuse(Refusal::kUnavailable, "manifest SHA-256 " + manifest_sha + " is not the topology's " + t.manifest_sha256);
  }
  const TopologyStage* stage = t.find_stage(req.stage_id);
  if (!stage) return refuse(Refusal::kUnavailable, "no stage \"" + req.stage_id + "\" in the topology");
  if (stage->node_id != peer_node_id) {
    return refuse(Refusal::kUnavailable, "stage " + stage->stage_id + " is assigned to node " + stage->node_id.substr(0, 16) +
                                             "..., not to the requester");
  }
  std::string why;
  const auto package = load_package(&why);
  if (!package) return refuse(Refusal::kUnavailable, why);
  // the signature sidecar and validation.json, for either schema.
  if (req.rel_path == kSignatureFileName || req.rel_path == kValidationFileName) {
    return small_file(req, package->pkg->boundary);
  }
  // 4. What this stage may have.
  if (req.rel_path == kManifestFileName) {
    if (auto bad = expectation_problem(req, package->text->size(), manifest_sha)) return refuse(Refusal::kUnavailable, *bad);
    if (req.offset > package->text->size()) {
      return refuse(Refusal::kInvalidOffset, "offset " + std::to_string(req.offset) + " is beyond the manifest's " +
                                                 std::to_string(package->text->size()) + " bytes");
    }
    Decision d;
    d.accepted = true;
    d.memory = package->text;
    d.size = package->text->size();
    d.sha256 = manifest_sha;
    d.what = "manifest";
    return d;
  }
  const PackageCatalog& listing = *package->listing;
  const bool by_id = package->pkg->names_artifacts_by_id;
  const CatalogArtifact* declared = nullptr;
  for (const auto& a : listing.artifacts) {
    if (a.path == req.rel_path) declared = &a;
  }
  if (!declared) {
    return refuse(Refusal::kUnavailable,
                  req.rel_path + " is not declared in the " + (by_id ? "artifact catalog" : "manifest"));
  }
  const std::string what = describe(*package->pkg, *declared);
  try {
    check_stage_layers(*stage, listing.layer_count);
  } catch (const Error& e) {
    return refuse(Refusal::kUnavailable, what + ": " + e.what());
  }
  // The carrier is every stage's; anything else is the stage's when its
  // artifact set (stage_artifacts, the consumer's selection) holds it,
  // computed from the package's catalog: schema 2's from the verified
  // carrier, schema 1's from the manifest's artifacts (and, for the
  // embeddings of a final stage, the verified output's header: whether the
  // output is tied to them).
  if (declared->kind != CatalogArtifactKind::kCarrier) {
    StageArtifacts allowed;
    const PeerArtifact* a = nullptr;
    for (const bool read_output : {false, true}) {
      const auto catalog = catalog_of(package, read_output, &why);
      if (!catalog) return refuse(Refusal::kUnavailable, what + ": " + why);
      try {
        allowed = stage_artifacts(*stage, *catalog);
      } catch (const Error& e) {
        return refuse(Refusal::kUnavailable, what + ": " + e.what());
      }
      a = allowed.find(req.rel_path);
      if (!a || allowed.output_tie_known || a->role != PartRole::kEmbeddings || allowed.owns_input) break;
    }
    if (!a) {
      std::string defined = "layers " + format_layer_range(stage->layers) + " of " + std::to_string(listing.layer_count);
      if (stage->admission) {
        defined = "its admission descriptor's " + std::to_string(stage->admission->resident_tensor_ids.size()) +
                  " tensor(s) and " + std::to_string(stage->admission->sidecars.size()) + " sidecar(s)";
      } else if (declared->role == PartRole::kEmbeddings && allowed.owns_output && !allowed.owns_input) {
        defined += ", output not tied";
      }
      return refuse(Refusal::kUnavailable,
                    what + " is not part of stage " + stage->stage_id + " (" + defined +
                        (listing.selects_whole_parts ? "" : ", package schema " + std::to_string(listing.schema_version)) + ")");
    }
  }
  if (auto bad = expectation_problem(req, declared->bytes, declared->sha256)) {
    return refuse(Refusal::kUnavailable, what + ": " + *bad);
  }
  // 5. The file: inside the repo folder, the declared size, verified.
  auto file = open_verified(*package->pkg, part_of(listing, *declared), &why);
  if (!file) return refuse(Refusal::kUnavailable, why);
  // 6. The offset.
  if (req.offset > declared->bytes) {
    return refuse(Refusal::kInvalidOffset, "offset " + std::to_string(req.offset) + " is beyond " + what + "'s " +
                                               std::to_string(declared->bytes) + " bytes");
  }
  Decision d;
  d.accepted = true;
  d.file = std::move(file);
  d.size = declared->bytes;
  d.sha256 = skippy::detail::ascii_lower(declared->sha256);
  d.what = what;
  return d;
}

void ArtifactStore::require_trusted() const {
  if (trusted_signers_.empty()) return;
  std::error_code ec;
  if (!fs::exists(snapshot_dir_ / std::string(kManifestFileName), ec)) {
    throw_not_found(topology_.package_ref + ": not in the Hugging Face cache (" + snapshot_dir_.string() +
                    "): with trusted signers the package is checked before serving; fetch it first (with --trust-signer)");
  }
  const auto sig = check_package_trust(snapshot_dir_, trusted_signers_, topology_.package_ref);
  if (sig && !sha256_equal(sig->manifest_sha256, topology_.manifest_sha256)) {
    throw_integrity(topology_.package_ref + ": the signed model-package.json has SHA-256 " + sig->manifest_sha256 +
                    ", the topology's is " + topology_.manifest_sha256);
  }
}

void ArtifactStore::require_admissions() {
  std::vector<const TopologyStage*> admitted;
  for (const auto& st : topology_.stages) {
    if (st.admission) admitted.push_back(&st);
  }
  if (admitted.empty()) return;
  const std::string who = topology_.package_ref + ": stage " + admitted.front()->stage_id + "'s admission descriptor";
  std::string why;
  const auto package = load_package(&why);
  if (!package) {
    throw_not_found(who + " is checked against the package before serving, and the package cannot be read: " + why +
                    " (fetch it first)");
  }
  if (package->listing->selects_whole_parts) {
    throw_invalid(who + ": a stage admission descriptor defines a stage by its tensors; this package is schema " +
                  std::to_string(package->listing->schema_version) + ", whose stages are their layer ranges");
  }
  const auto catalog = catalog_of(package, /*read_output=*/false, &why);
  if (!catalog) throw_invalid(who + " cannot be checked: " + why);
  for (const TopologyStage* st : admitted) {
    check_stage_admission(*st->admission, *catalog,
                          topology_.package_ref + ": stage " + st->stage_id + "'s admission descriptor");
  }
}

Decision ArtifactStore::small_file(const wire::Request& req, const fs::path& boundary) {
  constexpr uint64_t kMaxSmallFile = 4u << 20;
  const fs::path path = snapshot_dir_ / req.rel_path;
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(path, ec))) {
    return refuse(Refusal::kUnavailable, req.rel_path + ": not in the cache for commit " + commit_);
  }
  const fs::path real = fs::canonical(path, ec);
  if (ec || !inside(real, boundary)) return refuse(Refusal::kUnavailable, req.rel_path + " resolves outside the repo folder");
  std::string why;
  const int fd = open_regular_nonblocking(real, req.rel_path, &why);
  if (fd < 0) return refuse(Refusal::kUnavailable, why);
  ServedFile holder{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) > kMaxSmallFile || st.st_size == 0) {
    return refuse(Refusal::kUnavailable, req.rel_path + ": empty, or over the " + std::to_string(kMaxSmallFile) + "-byte cap");
  }
  auto text = std::make_shared<std::string>(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < text->size()) {
    const ssize_t n = ::pread(fd, text->data() + done, text->size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return refuse(Refusal::kUnavailable, req.rel_path + ": read failed");
    done += static_cast<size_t>(n);
  }
  const std::string sha = sha256_hex(*text);
  if (req.expected_size && *req.expected_size != text->size()) {
    return refuse(Refusal::kUnavailable, req.rel_path + ": the request expects " + std::to_string(*req.expected_size) + " bytes");
  }
  if (req.expected_sha256 && !sha256_equal(wire::to_hex(*req.expected_sha256), sha)) {
    return refuse(Refusal::kUnavailable, req.rel_path + ": the request expects SHA-256 " + wire::to_hex(*req.expected_sha256) +
                                             ", the cached file's is " + sha);
  }
  if (req.offset > text->size()) {
    return refuse(Refusal::kInvalidOffset, "offset " + std::to_string(req.offset) + " is beyond " + req.rel_path + "'s " +
                                               std::to_string(text->size()) + " bytes");
  }
  Decision d;
  d.accepted = true;
  d.size = text->size();
  d.memory = std::move(text);
  d.sha256 = sha;
  d.what = req.rel_path == kSignatureFileName ? "signature sidecar" : "validation result";
  return d;
}

std::shared_ptr<const PackageCatalog> ArtifactStore::catalog_of(const std::shared_ptr<const Package>& package,
                                                               bool read_output, std::string* why) {
  const PackageCatalog& listing = *package->listing;
  const bool whole_parts = listing.selects_whole_parts;
  if (whole_parts && !read_output) return package->listing;
  {
    std::lock_guard g(mu_);
    if (catalog_ && catalog_package_ == package) return catalog_;
  }
  const std::string needed = whole_parts ? "cannot tell whether the output is tied to the embeddings: "
                                         : "cannot tell what the stage needs without its metadata carrier: ";
  std::shared_ptr<const PackageCatalog> catalog;
  try {
    // The reader's catalog of a final stage's artifacts (the range of the
    // last layer reads only what says whether the output is tied).
    const LayerRange final_layer{listing.layer_count - 1, listing.layer_count};
    catalog = std::make_shared<const PackageCatalog>(package->pkg->reader->catalog(*package->pkg, CatalogNeed::artifacts(final_layer)));
  } catch (const std::exception& e) {
    *why = whole_parts ? needed + e.what() : std::string("the metadata carrier cannot be read: ") + e.what();
    return nullptr;
  }
  // What the reader read, verified before its catalog is trusted.
  for (const auto& a : catalog->artifacts) {
    if (!a.read_for_catalog || a.hashed_on_read) continue;
    if (!open_verified(*package->pkg, part_of(listing, a), why)) {
      *why = needed + *why;
      return nullptr;
    }
  }
  std::lock_guard g(mu_);
  catalog_package_ = package;
  catalog_ = catalog;
  return catalog;
}

std::string ArtifactStore::preverify() {
  try {
    std::string why;
    const auto package = load_package(&why);
    if (!package) return "nothing to preverify: " + why;
    const OpenedPackage& pkg = *package->pkg;
    const auto parts = all_parts(*package->listing);  // every declared artifact
    size_t ok = 0, missing = 0;
    std::vector<std::string> bad;
    for (const auto& part : parts) {
      if (cancelled_.load()) return "preverify stopped: the server is shutting down";
      std::error_code ec;
      if (!fs::exists(fs::symlink_status(pkg.root / part.rel_path, ec))) {
        ++missing;
        continue;
      }
      if (open_verified(pkg, part, &why)) {
        ++ok;
      } else {
        bad.push_back(why);
      }
    }
    std::string out = "preverified " + std::to_string(ok) + " of " + std::to_string(parts.size()) + " artifact(s) (" +
                      std::to_string(missing) + " not in the cache";
    if (!bad.empty()) out += ", " + std::to_string(bad.size()) + " refused: " + bad.front() + (bad.size() > 1 ? "; ..." : "");
    return out + ")";
  } catch (const std::exception& e) {
    return std::string("preverify failed: ") + e.what();
  }
}

}  // namespace skippy::peer::detail
