// identity init-owner / issue-node / show, through the real CLI, checked
// with the openssl command-line tool where an independent view helps.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "peer_test_util.h"
#include "skippy/error.h"
#include "skippy/peer_identity.h"
#include "util/sha256.h"
#include "test_util.h"

namespace skippy {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::run_cli;
using test::TempDir;

unsigned mode_of(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
  return st.st_mode & 07777;
}

// The spec of an id, computed by openssl: SHA-256 of the raw 32-byte key,
// i.e. the last 32 bytes of the DER SubjectPublicKeyInfo of an Ed25519 key.
std::string openssl_fingerprint(const fs::path& cert, const fs::path& tmp) {
  const fs::path der = tmp / "pub.der";
  const auto r = test::run_program("sh", {"-c", "openssl x509 -in '" + cert.string() + "' -noout -pubkey | openssl pkey -pubin "
                                                "-outform DER -out '" + der.string() + "'"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto spki = test::read_file(der);
  EXPECT_EQ(spki.size(), 44u);  // 12-byte Ed25519 SPKI header + 32-byte key
  return sha256_hex(std::span<const uint8_t>(spki.data() + spki.size() - 32, 32));
}

TEST(PeerIdentity, OwnerAndNodeIdsAreKeyFingerprints) {
  TempDir t;
  const auto owner = run_cli({"identity", "init-owner", "--dir", (t / "owner").string(), "--json"});
  ASSERT_EQ(owner.exit_code, 0) << owner.err;
  const auto o = json::parse(owner.out);
  EXPECT_EQ(o["kind"], "owner");
  EXPECT_FALSE(o.contains("node_id"));
  const std::string owner_id = o["owner_id"];
  EXPECT_TRUE(peer::is_peer_id(owner_id));
  EXPECT_EQ(owner_id, openssl_fingerprint(t / "owner" / "owner.crt", t.path()));

  const auto node = run_cli({"identity", "issue-node", "--owner", (t / "owner").string(), "--out", (t / "node").string(), "--json"});
  ASSERT_EQ(node.exit_code, 0) << node.err;
  const auto n = json::parse(node.out);
  EXPECT_EQ(n["kind"], "node");
  EXPECT_EQ(n["owner_id"], owner_id);
  EXPECT_EQ(n["owner_verified"], true);
  EXPECT_EQ(n["node_id"], openssl_fingerprint(t / "node" / "node.crt", t.path()));
  EXPECT_NE(n["node_id"], owner_id);

  // show agrees, for both kinds of directory; human output is the id alone on stdout.
  const auto show = run_cli({"identity", "show", "--dir", (t / "node").string(), "--json"});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_EQ(json::parse(show.out)["node_id"], n["node_id"]);
  EXPECT_EQ(json::parse(show.out)["owner_id"], owner_id);
  const auto show_owner = run_cli({"identity", "show", "--dir", (t / "owner").string()});
  EXPECT_EQ(show_owner.out, owner_id + "\n");

  // openssl agrees the node certificate chains to the owner certificate.
  const auto verify = test::run_program("openssl", {"verify", "-CAfile", (t / "node" / "owner.crt").string(),
                                                    (t / "node" / "node.crt").string()});
  EXPECT_EQ(verify.exit_code, 0) << verify.out << verify.err;

  // The library's view is the same.
  const auto id = peer::NodeIdentity::load(t / "node");
  EXPECT_EQ(id.node_id(), n["node_id"]);
  EXPECT_EQ(id.owner_id(), owner_id);
  EXPECT_TRUE(id.owner_verified());
  EXPECT_EQ(peer::owner_id_of_certificate(t / "owner" / "owner.crt"), owner_id);
  EXPECT_THROW(peer::owner_id_of_certificate(t / "node" / "node.crt"), Error);  // not a self-signed CA
}

TEST(PeerIdentity, KeysArePrivateAndWrittenAtomically) {
  TempDir t;
  test::peer::make_owner(t / "owner");
  test::peer::make_node(t / "owner", t / "node");
  EXPECT_EQ(mode_of(t / "owner" / "owner.key"), 0600u);
  EXPECT_EQ(mode_of(t / "node" / "node.key"), 0600u);
  EXPECT_EQ(mode_of(t / "owner"), 0700u);
  EXPECT_EQ(mode_of(t / "node"), 0700u);
  // No temporary left behind.
  for (const auto& d : {t / "owner", t / "node"}) {
    for (const auto& e : fs::directory_iterator(d)) {
      EXPECT_EQ(e.path().filename().string().find(".partial"), std::string::npos) << e.path();
    }
  }
  // An existing identity is never overwritten.
  const auto again = run_cli({"identity", "init-owner", "--dir", (t / "owner").string()});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("already holds an identity"), std::string::npos) << again.err;
  const auto over = run_cli({"identity", "issue-node", "--owner", (t / "owner").string(), "--out", (t / "node").string()});
  EXPECT_EQ(over.exit_code, 1);
}

TEST(PeerIdentity, AKeyOthersMayReadIsRefused) {
  TempDir t;
  test::peer::make_owner(t / "owner");
  test::peer::make_node(t / "owner", t / "node");
  for (const unsigned mode : {0644u, 0640u, 0604u, 0660u}) {
    fs::permissions(t / "owner" / "owner.key", static_cast<fs::perms>(mode), fs::perm_options::replace);
    const auto r = run_cli({"identity", "issue-node", "--owner", (t / "owner").string(), "--out", (t / "n2").string()});
    EXPECT_EQ(r.exit_code, 1) << mode;
    EXPECT_NE(r.err.find("are too open"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("chmod 600"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(t / "n2" / "node.key"));
  }
  fs::permissions(t / "node" / "node.key", static_cast<fs::perms>(0644), fs::perm_options::replace);
  try {
    (void)peer::NodeIdentity::load(t / "node");
    ADD_FAILURE() << "a world-readable node key was loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("node.key: permissions 0644 are too open"), std::string::npos) << e.what();
  }
  // serve-artifacts refuses it too, before listening.
  test::peer::write_topology(t / "topo.json", "hf://org/x@0123456789abcdef0123456789abcdef01234567", std::string(64, 'a'),
                             {{"s0", 0, std::string(64, 'b'), 0, 1}});
  const auto s = run_cli({"serve-artifacts", "--listen", "127.0.0.1:0", "--topology", (t / "topo.json").string(),
                          "--identity", (t / "node").string()},
                         {"MESH_LLM_ARTIFACT_TRANSFER=trusted"});
  EXPECT_EQ(s.exit_code, 1);
  EXPECT_NE(s.err.find("too open"), std::string::npos) << s.err;
}

TEST(PeerIdentity, ANodeOfAnotherOwnerDoesNotVerifyUnderOurs) {
  TempDir t;
  test::peer::make_owner(t / "a");
  test::peer::make_owner(t / "b");
  test::peer::make_node(t / "a", t / "node");
  // Swap in owner B's certificate beside a node signed by owner A.
  fs::copy_file(t / "b" / "owner.crt", t / "node" / "owner.crt", fs::copy_options::overwrite_existing);
  const auto show = run_cli({"identity", "show", "--dir", (t / "node").string(), "--json"});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_EQ(json::parse(show.out)["owner_verified"], false);
  EXPECT_FALSE(peer::NodeIdentity::load(t / "node").owner_verified());
  // A missing directory, an empty one.
  EXPECT_EQ(run_cli({"identity", "show", "--dir", (t / "none").string()}).exit_code, 1);
  fs::create_directories(t / "empty");
  EXPECT_EQ(run_cli({"identity", "show", "--dir", (t / "empty").string()}).exit_code, 1);
  EXPECT_EQ(run_cli({"identity", "show"}).exit_code, 2);
}

}  // namespace
}  // namespace skippy
