#include <iostream>

#include "cli.h"
#include "skippy/peer_identity.h"

namespace skippy::cli {
namespace {

nlohmann::json identity_json(const peer::IdentityInfo& info) {
  nlohmann::json j;
  if (info.kind == peer::IdentityInfo::Kind::kNode) {
    j["kind"] = "node";
    j["node_id"] = info.node_id;
    j["owner_id"] = info.owner_id.empty() ? nlohmann::json() : nlohmann::json(info.owner_id);
  } else {
    j["kind"] = "owner";
    j["owner_id"] = info.owner_id;
  }
  j["owner_verified"] = info.owner_verified;
  j["not_after"] = info.not_after;
  j["certificate"] = info.certificate.string();
  return j;
}

int print_identity(const peer::IdentityInfo& info, bool json, const char* done) {
  if (json) {
    print_json(identity_json(info));
    return kExitOk;
  }
  const bool node = info.kind == peer::IdentityInfo::Kind::kNode;
  if (done) std::cerr << done << "\n";
  if (node) {
    std::cerr << "node id:  " << info.node_id << "\n"
              << "owner id: " << (info.owner_id.empty() ? std::string("(no owner.crt)") : info.owner_id)
              << (info.owner_verified ? " (verified: node.crt is signed by owner.crt)" : " (NOT verified)") << "\n";
  } else {
    std::cerr << "owner id: " << info.owner_id << "\n";
  }
  std::cerr << "certificate " << info.certificate.string() << " valid until " << info.not_after << "\n";
  std::cout << (node ? info.node_id : info.owner_id) << "\n";
  return kExitOk;
}

}  // namespace

// identity's --help after its options: examples, then what it does.
constexpr const char* kIdentityHelp =
    "Examples:\n"
    "  skippy-model-package identity init-owner --dir ~/.skippy/owner\n"
    "  skippy-model-package identity issue-node --owner ~/.skippy/owner --out ~/.skippy/node\n"
    "  skippy-model-package identity show --dir ~/.skippy/node --json\n"
    "An owner is a signing key whose self-signed certificate (owner.crt) signs the certificates of its nodes.\n"
    "A node id (and an owner id) is the lowercase hex SHA-256 of the raw 32-byte Ed25519 public key.\n"
    "Private keys are written 0600 (atomically); a key that group or others may read is refused.";

Command register_identity(CLI::App& app) {
  auto* cmd = app.add_subcommand("identity", "Owner and node identities for peer cache transfer (Ed25519 + X.509)");
  cmd->require_subcommand(1);
  cmd->footer(kIdentityHelp);
  struct Args {
    std::string dir, owner, out;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  auto* init = cmd->add_subcommand("init-owner", "Create an owner signing key and its self-signed certificate");
  path_option(init->add_option("--dir", a->dir, "Directory for owner.key and owner.crt (created 0700 if missing)"))->required();
  init->add_flag("--json", a->json, "Print one JSON document on stdout");
  init->footer("Example:\n  skippy-model-package identity init-owner --dir ~/.skippy/owner\n"
               "Writes owner.key (0600) and owner.crt (self-signed, 20 years); prints the owner id. Refuses a\n"
               "directory that already holds a key.");
  auto* issue = cmd->add_subcommand("issue-node", "Create a node key and a certificate signed by an owner");
  path_option(issue->add_option("--owner", a->owner, "The owner directory (owner.key, owner.crt)"))->required();
  path_option(issue->add_option("--out", a->out, "Directory for node.key, node.crt and a copy of owner.crt"))->required();
  issue->add_flag("--json", a->json, "Print one JSON document on stdout");
  issue->footer("Example:\n  skippy-model-package identity issue-node --owner ~/.skippy/owner --out ~/.skippy/node\n"
                "Writes node.key (0600), node.crt (signed by the owner, 10 years) and a copy of owner.crt;\n"
                "prints the node id, which goes into the topology's node_id.");
  auto* show = cmd->add_subcommand("show", "Print the ids of a node or owner directory");
  show->add_option("--dir", a->dir, "A node directory (node.crt) or an owner directory (owner.crt)")->required();
  show->add_flag("--json", a->json, "Print one JSON document on stdout: node_id (node dirs), owner_id");
  show->footer("Example:\n  skippy-model-package identity show --dir ~/.skippy/node --json\n"
               "Reads certificates only (no private key). owner_verified says whether node.crt verifies under\n"
               "the owner.crt beside it.");
  return {cmd, [a, init, issue, show]() {
            if (init->parsed()) return print_identity(peer::init_owner(a->dir), a->json, "created an owner identity");
            if (issue->parsed()) return print_identity(peer::issue_node(a->owner, a->out), a->json, "issued a node identity");
            if (show->parsed()) return print_identity(peer::show_identity(a->dir), a->json, nullptr);
            return kExitUsage;
          }};
}

}  // namespace skippy::cli
