// plan --topology-out FILE --nodes ID,ID,...: the active split topology
// (skippy/peer_topology.h) of the plan just made, for serve-artifacts and
// fetch --peer. Every plan mode (bytes, memory, time) and both schemas write
// it through write_plan_topology.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "cli.h"

namespace skippy::cli {

struct PlanTopologyRequest {
  std::filesystem::path out;          // empty: --nodes names the plan's nodes, no topology is written
  std::vector<std::string> node_ids;  // with `out`, resolved: 64 lowercase hex each
  // How the plan names each node (stage order, or --bandwidth order): a
  // name as given, an identity directory's name, a node id's first 12 digits.
  std::vector<std::string> node_names;
  std::string package_ref;            // --package-ref, or empty: the package's own pinned hf:// reference
  std::string topology_id;            // empty: "plan-" + the manifest digest's first 12 digits
  std::string run_id;                 // empty: the topology id
};

// Registers --topology-out, --nodes, --package-ref, --topology-id and
// --run-id on `cmd`; the result is filled once the command line is parsed.
struct PlanTopologyFlags {
  std::string out;
  std::vector<std::string> nodes;
  std::string package_ref;
  std::string topology_id;
  std::string run_id;
};
void add_plan_topology_options(CLI::App* cmd, PlanTopologyFlags& flags);

// The request the flags make (nullopt without --topology-out or --nodes),
// checked before any package is opened. Without --topology-out a --nodes
// value is any name (the plan prints it); with it, each is a node id (64 hex
// digits) or a node identity directory (its id is read), since the topology
// authorises them. `expected_nodes`, when known, is how many there must be;
// a local `package` needs --package-ref unless it is a Hugging Face cache
// snapshot (its repository and commit are the reference). Usage errors exit 2.
std::optional<PlanTopologyRequest> plan_topology_request(const PlanTopologyFlags& flags, const std::string& package,
                                                         std::optional<size_t> expected_nodes);

// Writes the topology of `ranges` (stage i runs on node_ids[nodes[i]]) for
// `pkg` atomically to request.out; returns what to report under "topology"
// in --json ({"path", "topology_id", "run_id", "package_ref", "stages"}).
nlohmann::json write_plan_topology(const PlanTopologyRequest& request, const OpenedPlace& pkg,
                                   const std::vector<LayerRange>& ranges, const std::vector<uint32_t>& nodes);

// The one line human output adds: "topology: wrote FILE (N stages, REF)".
void print_topology_line(const nlohmann::json& written);

}  // namespace skippy::cli
