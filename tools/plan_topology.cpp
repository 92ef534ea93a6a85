#include "plan_topology.h"

#include <algorithm>
#include <iostream>

#include "skippy/error.h"
#include "util/file.h"
#include "skippy/source.h"
#include "skippy/package_layout.h"
#include "skippy/peer_identity.h"
#include "skippy/peer_topology.h"
#include "util/text.h"

namespace skippy::cli {

void add_plan_topology_options(CLI::App* cmd, PlanTopologyFlags& flags) {
  auto* out = path_option(cmd->add_option("--topology-out", flags.out,
                                          "Also write the split topology of this plan to FILE (serve-artifacts and "
                                          "fetch --peer read it); needs --nodes"));
  auto* nodes = cmd->add_option("--nodes", flags.nodes,
                                "The node running each stage, in stage order (with --stages auto: each node offered), "
                                "NODE,NODE,...: any name for the plan to print; with --topology-out a node id or a "
                                "node identity directory (the topology authorises them)")
                    ->delimiter(',');
  auto* ref = cmd->add_option("--package-ref", flags.package_ref,
                              "With --topology-out: the pinned reference the nodes fetch the package by, "
                              "hf://ns/repo@COMMIT (default: the package's own, when it is an hf:// one or a "
                              "snapshot in the Hugging Face cache)");
  auto* tid = cmd->add_option("--topology-id", flags.topology_id,
                              "With --topology-out: the topology's id (default: plan- and the manifest's first 12 "
                              "SHA-256 digits)");
  auto* rid = cmd->add_option("--run-id", flags.run_id, "With --topology-out: the run's id (default: the topology id)");
  out->needs(nodes);
  for (auto* o : {ref, tid, rid}) o->needs(out);
}

namespace {

// hf://ns/repo@COMMIT for a Hugging Face cache snapshot directory
// (.../models--ns--repo/snapshots/COMMIT), else nullopt.
std::optional<std::string> snapshot_pin(const std::filesystem::path& dir) {
  if (!is_hf_cache_snapshot(dir)) return std::nullopt;
  std::error_code ec;
  const auto abs = std::filesystem::weakly_canonical(dir, ec);
  if (ec) return std::nullopt;
  const auto snapshot = abs.has_filename() ? abs : abs.parent_path();
  const std::string commit = snapshot.filename().string();
  const std::string folder = snapshot.parent_path().parent_path().filename().string();
  if (!folder.starts_with("models--") || commit.size() != 40) return std::nullopt;
  std::string repo = folder.substr(8);
  const auto sep = repo.find("--");
  if (sep == std::string::npos) return std::nullopt;
  repo.replace(sep, 2, "/");
  return "hf://" + repo + "@" + commit;
}

}  // namespace

std::optional<PlanTopologyRequest> plan_topology_request(const PlanTopologyFlags& flags, const std::string& package,
                                                         std::optional<size_t> expected_nodes) {
  if (flags.out.empty() && flags.nodes.empty()) return std::nullopt;
  if (flags.out.empty()) {  // names for the plan only
    PlanTopologyRequest r;
    for (const auto& n : flags.nodes) {
      if (n.empty() || std::any_of(n.begin(), n.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20; })) {
        throw Error(ErrorKind::kUsage, "--nodes: a node name must be non-empty printable text");
      }
      r.node_names.push_back(n);
    }
    if (expected_nodes && r.node_names.size() != *expected_nodes) {
      throw Error(ErrorKind::kUsage, "--nodes gives " + counted(r.node_names.size(), "node") + " for " +
                                         counted(*expected_nodes, "stage") + ": give one per stage, in stage order");
    }
    return r;
  }
  if (flags.package_ref.empty() && !is_hf_ref(package) && !snapshot_pin(package)) {
    throw Error(ErrorKind::kUsage, "--topology-out: " + package + " is a local directory: give --package-ref "
                                   "hf://ns/repo@COMMIT, the pinned reference the nodes fetch it by");
  }
  PlanTopologyRequest r;
  r.out = flags.out;
  r.package_ref = flags.package_ref;
  r.topology_id = flags.topology_id;
  r.run_id = flags.run_id;
  for (const auto& n : flags.nodes) {
    const std::string lower = detail::ascii_lower(n);
    if (peer::is_peer_id(lower)) {
      r.node_ids.push_back(lower);
      r.node_names.push_back(lower.substr(0, 12));
      continue;
    }
    std::error_code ec;
    if (!std::filesystem::is_directory(n, ec)) {
      throw Error(ErrorKind::kUsage, "--nodes: \"" + n + "\" is neither a node id (64 hex digits) nor a node identity "
                                     "directory (identity issue-node --out DIR)");
    }
    const auto info = peer::show_identity(n);
    if (info.node_id.empty()) {
      throw Error(ErrorKind::kUsage, "--nodes: " + n + " is an owner's directory, not a node identity (identity "
                                     "issue-node --owner " + n + " --out DIR makes one)");
    }
    r.node_ids.push_back(info.node_id);
    r.node_names.push_back(std::filesystem::path(n).lexically_normal().filename().empty()
                               ? std::filesystem::path(n).lexically_normal().parent_path().filename().string()
                               : std::filesystem::path(n).lexically_normal().filename().string());
  }
  if (expected_nodes && r.node_ids.size() != *expected_nodes) {
    throw Error(ErrorKind::kUsage, "--nodes gives " + counted(r.node_ids.size(), "node") + " for " +
                                       counted(*expected_nodes, "stage") + ": give one per stage, in stage order");
  }
  if (!r.package_ref.empty() && !peer::pinned_commit(r.package_ref)) {
    throw Error(ErrorKind::kUsage, "--package-ref \"" + r.package_ref + "\" is not hf://ns/repo@COMMIT with a 40-hex "
                                   "commit (a branch or tag can move: peers refuse it)");
  }
  return r;
}

nlohmann::json write_plan_topology(const PlanTopologyRequest& request, const OpenedPlace& pkg,
                                   const std::vector<LayerRange>& ranges, const std::vector<uint32_t>& nodes) {
  peer::Topology t;
  t.package_ref = request.package_ref;
  if (t.package_ref.empty()) t.package_ref = snapshot_pin(pkg.root).value_or("");
  if (t.package_ref.empty()) {
    const auto pin = pin_json(pkg);
    if (pin.is_null()) {
      throw Error(ErrorKind::kUsage, "--topology-out: " + pkg.ref + " is a local directory: give --package-ref "
                                     "hf://ns/repo@COMMIT, the pinned reference the nodes fetch it by");
    }
    t.package_ref = pin["pin"].get<std::string>();
  }
  t.manifest_sha256 = pkg.manifest_sha256;
  t.topology_id = request.topology_id.empty() ? "plan-" + pkg.manifest_sha256.substr(0, 12) : request.topology_id;
  t.run_id = request.run_id.empty() ? t.topology_id : request.run_id;
  for (size_t i = 0; i < ranges.size(); ++i) {
    const uint32_t node = i < nodes.size() ? nodes[i] : static_cast<uint32_t>(i);
    if (node >= request.node_ids.size()) {
      throw Error(ErrorKind::kUsage, "--nodes gives " + counted(request.node_ids.size(), "node") + " but the plan has " +
                                         counted(ranges.size(), "stage"));
    }
    t.stages.push_back({"s" + std::to_string(i), static_cast<uint32_t>(i), request.node_ids[node], ranges[i]});
  }
  const std::string text = peer::format_topology(t);
  write_file_atomic(request.out, text);
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& s : t.stages) {
    stages.push_back({{"stage_id", s.stage_id}, {"node_id", s.node_id}, {"layer_start", s.layers.start},
                      {"layer_end", s.layers.end}});
  }
  return {{"path", request.out.string()}, {"topology_id", t.topology_id}, {"run_id", t.run_id},
          {"package_ref", t.package_ref},  {"manifest_sha256", t.manifest_sha256}, {"stages", stages}};
}

void print_topology_line(const nlohmann::json& written) {
  std::cout << "topology: wrote " << written["path"].get<std::string>() << " ("
            << counted(written["stages"].size(), "stage") << " of " << written["package_ref"].get<std::string>()
            << ")\n";
}

}  // namespace skippy::cli
