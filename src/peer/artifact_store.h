// The serving side's authorization (ArtifactServer steps 3-6 in
// skippy/peer.h): which artifact of the package in the local Hugging Face
// cache a request may have, verified, or why not. Blocking (it may hash a
// file whose verification record is missing); thread-safe. Internal to
// src/peer.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "peer/protocol.h"
#include "skippy/package.h"
#include "skippy/package_catalog.h"
#include "skippy/peer.h"
#include "skippy/stage.h"

namespace skippy::peer::detail {

// An open file being served; closes its descriptor when the last user goes.
struct ServedFile {
  int fd = -1;
  ~ServedFile();
};

struct Decision {
  bool accepted = false;
  Refusal refusal = Refusal::kUnavailable;
  std::string why;        // for the server's log only, never the wire
  // accepted: exactly one of memory (the manifest) or file.
  std::shared_ptr<const std::string> memory;
  std::shared_ptr<ServedFile> file;
  uint64_t size = 0;
  std::string sha256;     // lowercase hex
  std::string what;       // e.g. "layer 3", "manifest"
};

class ArtifactStore {
 public:
  // with `trusted_signers`, the package is served only while its
  // signature sidecar verifies and names one of them (checked each time the
  // manifest is read; every request is refused otherwise).
  ArtifactStore(Topology topology, std::filesystem::path hf_cache,
                std::optional<std::filesystem::path> verification_cache_dir,
                std::vector<std::filesystem::path> trusted_signers = {});

  // with trusted signers, throws what check_package_trust finds wrong
  // with the cached package now (kNotFound when it is not in the cache).
  // serve-artifacts calls it before listening: it does not start on a
  // package its anchors do not vouch for.
  void require_trusted() const;

  // Package schema 2 stages defined by admission descriptors
  // (TopologyStage::admission): throws unless the topology's package is in
  // the cache (its manifest the topology's), is schema 2, and every
  // descriptor passes check_stage_admission against its catalog (built from
  // the verified carrier): another package_id, an unknown tensor or sidecar
  // is refused naming the stage. serve-artifacts calls it before listening.
  // Nothing when no stage has a descriptor.
  void require_admissions();

  // `peer_node_id` is the authenticated requester (the caller has checked
  // that the request names it).
  Decision authorize(const wire::Request& request, const std::string& peer_node_id);

  // Verifies every declared artifact present in the cache (through the
  // verification cache); a summary line for the log. Never throws.
  std::string preverify();
  // Makes preverify() stop before its next file (shutdown).
  void cancel() noexcept { cancelled_.store(true); }

 private:
  struct Package {  // model-package.json as last read, keyed by file state
    std::string state;  // dev/ino/size/mtime/ctime of the resolved file
    std::shared_ptr<const std::string> text;
    // The package as its reader opened it (place: root, boundary, manifest SHA-256).
    std::shared_ptr<const OpenedPackage> pkg;
    // The artifacts as the package's reader lists them before reading any
    // file (CatalogNeed::root_only).
    std::shared_ptr<const PackageCatalog> listing;
  };
  // The topology's package if it is in the cache and its manifest is the
  // topology's; else a refusal reason in *why.
  std::shared_ptr<const Package> load_package(std::string* why);
  // Resolves, checks and verifies one declared artifact; on success an open
  // descriptor whose file is the one verified. Else a reason in *why.
  std::shared_ptr<ServedFile> open_verified(const OpenedPackage& pkg, StagePart part, std::string* why);
  // The catalog a stage's artifact set is computed from (stage_artifacts):
  // the listing, when the package chooses whole parts by role and the
  // question is not whether the output is tied; else the reader's catalog
  // of a final stage's artifacts (a reader of whole parts reads the
  // output's header; another its carrier), every file it read verified.
  // Kept while the manifest is the same; else null with *why.
  std::shared_ptr<const PackageCatalog> catalog_of(const std::shared_ptr<const Package>& package, bool read_output,
                                                   std::string* why);
  std::shared_ptr<std::mutex> path_lock(const std::string& rel_path);
  // model-package.json.sig or validation.json, read from the snapshot
  // (inside the repo folder, a regular file, capped), served like the manifest.
  Decision small_file(const wire::Request& request, const std::filesystem::path& boundary);

  const Topology topology_;
  const std::string commit_;
  const std::filesystem::path repo_dir_;
  const std::filesystem::path snapshot_dir_;
  const std::optional<std::filesystem::path> verification_cache_dir_;
  const std::vector<std::filesystem::path> trusted_signers_;

  std::atomic<bool> cancelled_{false};
  std::mutex mu_;
  std::shared_ptr<const Package> package_;
  std::shared_ptr<const Package> catalog_package_;  // the package catalog_ was built for
  std::shared_ptr<const PackageCatalog> catalog_;
  std::map<std::string, std::shared_ptr<std::mutex>> verifying_;
};

}  // namespace skippy::peer::detail
