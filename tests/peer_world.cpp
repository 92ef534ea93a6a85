// The peer suites' shared World (peer_world.h).
#include "peer_world.h"

#include <span>
#include <stdexcept>

#include "peer_test_util.h"
#include "skippy/peer_identity.h"
#include "util/sha256.h"

namespace skippy::test::peer {

namespace fs = std::filesystem;

World::World(const WorldSpec& spec) : repo(spec.repo) {
  // Identities from the library in this process: the same files as the
  // identity commands write (peer_identity_test.cpp checks those), without
  // eight more processes per suite under the sanitizers.
  owner_a = dir / "owner-a";
  owner_b = dir / "owner-b";
  owner_a_id = skippy::peer::init_owner(owner_a).owner_id;
  owner_b_id = skippy::peer::init_owner(owner_b).owner_id;
  coord = dir / "coord";
  w0 = dir / "w0";
  w1 = dir / "w1";
  stranger = dir / "stranger";
  b1 = dir / "b1";
  coord_id = skippy::peer::issue_node(owner_a, coord).node_id;
  w0_id = skippy::peer::issue_node(owner_a, w0).node_id;
  w1_id = skippy::peer::issue_node(owner_a, w1).node_id;
  stranger_id = skippy::peer::issue_node(owner_a, stranger).node_id;
  b1_id = skippy::peer::issue_node(owner_b, b1).node_id;

  pkg = dir / "pkg";
  if (spec.package == WorldSpec::Package::kBigLayer5) {
    manifest = write_package_with_big_layer5(pkg, spec.big_bytes, spec.seed);
  } else {
    written = write_schema_v2_package(data_path("llama-tiny-q8_0.gguf"), pkg);
  }
  manifest_sha = sha256_hex(read_text(pkg / "model-package.json"));

  if (spec.hub) {
    hub = std::make_unique<HubStandin>();
    commit = hub->publish(repo, pkg);
  } else {
    commit = spec.commit;
  }
  ref = "hf://" + repo + "@" + commit;
  hf = dir / "coord-hf";
  place_in_hf_cache(pkg, hf, repo, commit);
  verify_cache = dir / "skippy-cache";
  topology = dir / "topology.json";
  write_topology(topology, ref, manifest_sha, {{"s0", 0, w0_id, 0, 4}, {"s1", 1, w1_id, 4, 8}});
}

const World::File* World::load(const std::string& rel) const {
  std::lock_guard g(mu_);
  auto& f = files_[rel];
  if (!f) {
    const fs::path p = pkg / rel;
    std::error_code ec;
    if (rel.empty() || !fs::is_regular_file(p, ec)) return nullptr;
    f = std::make_unique<File>();
    f->bytes = slurp(p);
    f->sha256 = sha256_hex(std::span<const uint8_t>(f->bytes));
  }
  return f.get();
}

const std::vector<uint8_t>* World::file(const std::string& rel) const {
  const File* f = load(rel);
  return f ? &f->bytes : nullptr;
}

const std::vector<uint8_t>& World::bytes_of(const std::string& rel) const {
  const File* f = load(rel);
  if (!f) throw std::runtime_error("the package holds no " + rel);
  return f->bytes;
}

const std::string& World::sha_of(const std::string& rel) const {
  const File* f = load(rel);
  if (!f) throw std::runtime_error("the package holds no " + rel);
  return f->sha256;
}

std::vector<std::string> World::file_paths() const {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(pkg)) {
    if (e.is_regular_file()) out.push_back(fs::relative(e.path(), pkg).generic_string());
  }
  return out;
}

std::set<std::string> World::s1_parts() {
  return {"shared/metadata.gguf",    "layers/layer-00004.gguf", kBigLayer,           "layers/layer-00006.gguf",
          "layers/layer-00007.gguf", "shared/output.gguf",      "shared/embeddings.gguf"};
}

}  // namespace skippy::test::peer
