// A worker's source chain (sp::make_peer_sources, what `fetch --peer`
// uses): the cache, the peer, then the fallback remotes unless
// HF_HUB_OFFLINE=1; the reference must be the topology's package; a node
// that does not verify under its owner is warned about, not silently
// trusted. In this process, with identities from the library.
#include <gtest/gtest.h>

#include "skippy/peer.h"
#include "skippy/peer_identity.h"
#include "test_util.h"

namespace skippy::test::peer_sources_test {
namespace {

namespace fs = std::filesystem;
namespace sp = ::skippy::peer;  // (skippy::test::peer is the tests' helpers)

constexpr const char* kCommit = "0123456789abcdef0123456789abcdef01234567";

// A remote that is only a name (the chain's order is what is checked).
class NamedRemote : public Remote {
 public:
  explicit NamedRemote(std::string name) : name_(std::move(name)) {}
  std::string name() const override { return name_; }
  std::optional<std::string> resolve_commit(const HfRepoCache&, const std::string&, const std::string&) override {
    return std::nullopt;
  }
  std::optional<RemoteListing> list(const HfRepoCache&, const std::string&) override { return std::nullopt; }
  std::vector<RemoteOutcome> fetch(const HfRepoCache&, const std::string&, const std::vector<RemoteFile>& files,
                                   const std::function<void(uint64_t)>&) override {
    return std::vector<RemoteOutcome>(files.size());
  }

 private:
  std::string name_;
};

struct Cast {
  TempDir dir;
  fs::path owner = dir / "owner", node = dir / "node", stranger_owner = dir / "other-owner";
  sp::PeerSourcesOptions options;
  Cast() {
    sp::init_owner(owner);
    sp::init_owner(stranger_owner);
    const auto id = sp::issue_node(owner, node).node_id;
    options.endpoint = "127.0.0.1:9";
    options.topology_file = dir / "topology.json";
    options.topology.package_ref = std::string("hf://org/layers@") + kCommit;
    options.topology.manifest_sha256 = std::string(64, 'a');
    options.topology.stages = {{"s0", 0, id, {0, 4}}};
    options.stage_id = "s0";
    options.identity_dir = node;
  }
  static std::vector<std::shared_ptr<Remote>> hub() { return {std::make_shared<NamedRemote>("hub")}; }
};

std::vector<std::string> names(const Sources& s) {
  std::vector<std::string> out;
  for (const auto& r : s.remotes) out.push_back(r->name());
  return out;
}

TEST(PeerSources, CacheThenPeerThenTheFallbackUnlessOffline) {
  Cast c;
  ScopedEnv mode(sp::kTransferModeEnv, "");
  {
    ScopedEnv online("HF_HUB_OFFLINE", "0");
    const auto chain = sp::make_peer_sources(parse_hf_ref("hf://org/layers"), c.options, Cast::hub());
    EXPECT_EQ(names(chain.sources), (std::vector<std::string>{"peer", "hub"}));
    EXPECT_FALSE(chain.sources.offline);
    EXPECT_TRUE(chain.warnings.empty());
  }
  ScopedEnv offline("HF_HUB_OFFLINE", "1");
  const auto chain = sp::make_peer_sources(parse_hf_ref(std::string("hf://org/layers@") + kCommit), c.options, Cast::hub());
  EXPECT_EQ(names(chain.sources), (std::vector<std::string>{"peer"})) << "offline: the peer and the cache only";
  EXPECT_TRUE(chain.sources.offline);
}

TEST(PeerSources, TheReferenceMustBeTheTopologysPackage) {
  Cast c;
  auto expect = [&](const std::string& ref, ErrorKind kind, const std::string& needle, const sp::PeerSourcesOptions& o) {
    try {
      (void)sp::make_peer_sources(parse_hf_ref(ref), o, Cast::hub());
      ADD_FAILURE() << ref << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), kind) << e.what();
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect("hf://org/other", ErrorKind::kUsage, "is not the topology's package", c.options);
  expect("hf://org/layers@ffffffffffffffffffffffffffffffffffffffff", ErrorKind::kUsage, "is not the topology's package",
         c.options);
  auto unpinned = c.options;
  unpinned.topology.package_ref = "hf://org/layers@main";
  expect("hf://org/layers", ErrorKind::kInvalidInput, "does not pin a commit", unpinned);
}

TEST(PeerSources, ANodeThatDoesNotVerifyIsWarnedAboutAndTrustedOwnersAreRead) {
  Cast c;
  ScopedEnv mode(sp::kTransferModeEnv, "");
  // The node's owner.crt replaced by another owner's: it no longer verifies.
  fs::copy_file(c.stranger_owner / "owner.crt", c.node / "owner.crt", fs::copy_options::overwrite_existing);
  auto o = c.options;
  o.trusted_owner_certs = {c.stranger_owner / "owner.crt"};
  const auto chain = sp::make_peer_sources(parse_hf_ref("hf://org/layers"), o, Cast::hub());
  ASSERT_EQ(chain.warnings.size(), 1u);
  EXPECT_NE(chain.warnings[0].find("does not verify under its owner.crt: no peer is trusted"), std::string::npos);
  // Open mode trusts any node: nothing to warn about.
  ScopedEnv open(sp::kTransferModeEnv, "open");
  EXPECT_TRUE(sp::make_peer_sources(parse_hf_ref("hf://org/layers"), o, Cast::hub()).warnings.empty());
  // A trusted owner's certificate that is not an owner certificate is refused.
  o.trusted_owner_certs = {c.node / "node.crt"};
  EXPECT_THROW(sp::make_peer_sources(parse_hf_ref("hf://org/layers"), o, Cast::hub()), Error);
}

}  // namespace
}  // namespace skippy::test::peer_sources_test
