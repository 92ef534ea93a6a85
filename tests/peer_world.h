// The cast every peer-transfer suite shares, built once per suite: two
// owners and their nodes, a package (llama-tiny with one layer made big
// enough to cut, stall and resume, or a schema 2 package), the
// coordinator's Hugging Face cache holding it, optionally the local Hub
// stand-in publishing it, and a topology that pins it.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "hub_standin.h"
#include "schema_v2_package.h"
#include "skippy/manifest.h"
#include "test_util.h"

namespace skippy::test::peer {

// The package's layer that write_package_with_big_layer5 replaces by noise.
inline constexpr const char* kBigLayer = "layers/layer-00005.gguf";

struct WorldSpec {
  enum class Package { kBigLayer5, kSchemaV2 };
  std::string repo;                      // the package's repository id
  Package package = Package::kBigLayer5;
  uint64_t big_bytes = 4ull << 20;       // kBigLayer5: layer 5's size
  uint64_t seed = 1;                     // kBigLayer5: layer 5's noise
  // Published on a Hub stand-in (its commit is pinned) when set, else
  // placed in the cache at this fixed commit.
  bool hub = true;
  std::string commit = "0123456789abcdef0123456789abcdef01234567";
};

class World {
 public:
  explicit World(const WorldSpec& spec);
  World(const World&) = delete;
  World& operator=(const World&) = delete;

  TempDir dir;
  // Owner A issues the coordinator, workers w0 and w1 and a node in no
  // stage (stranger); owner B issues b1.
  std::filesystem::path owner_a, owner_b, coord, w0, w1, stranger, b1;
  std::string owner_a_id, owner_b_id, coord_id, w0_id, w1_id, stranger_id, b1_id;
  std::filesystem::path pkg;           // the package as written
  std::filesystem::path hf;            // the coordinator's Hugging Face cache
  std::filesystem::path verify_cache;  // a verification cache for the coordinator
  std::filesystem::path topology;      // stages s0 (w0, layers 0..4) and s1 (w1, 4..8), pinned to `ref`
  std::unique_ptr<HubStandin> hub;     // null unless spec.hub
  std::string repo, commit, ref, manifest_sha;
  PackageManifest manifest;            // kBigLayer5
  SchemaV2Package written;             // kSchemaV2

  // The package's files, read once (tests ask from several threads);
  // file() is null for a path the package does not hold.
  const std::vector<uint8_t>* file(const std::string& rel) const;
  const std::vector<uint8_t>& bytes_of(const std::string& rel) const;
  const std::string& sha_of(const std::string& rel) const;
  std::vector<std::string> file_paths() const;  // every file of the package

  // kBigLayer5: the parts of stage s1 (layers 4..8: metadata, its layers,
  // output, and the embeddings the tied output needs).
  static std::set<std::string> s1_parts();

 private:
  struct File {
    std::vector<uint8_t> bytes;
    std::string sha256;
  };
  const File* load(const std::string& rel) const;
  mutable std::mutex mu_;
  mutable std::map<std::string, std::unique_ptr<File>> files_;
};

// A test suite sharing one World: `class X : public WorldSuite<X>` with a
// public `static WorldSpec spec()`.
template <class Suite>
class WorldSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { w_ = new World(Suite::spec()); }
  static void TearDownTestSuite() {
    delete w_;
    w_ = nullptr;
  }
  static const World& w() { return *w_; }

 private:
  static inline World* w_ = nullptr;
};

}  // namespace skippy::test::peer
