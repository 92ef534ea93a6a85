// What the commands show of a schema 2 root (see schema_v2_cli.h).
#include "schema_v2_cli.h"

#include "skippy/manifest_v2.h"

namespace skippy::cli {

nlohmann::json root_member_json(const PackageRootV2& root, const char* member, nlohmann::json absent) {
  const auto j = nlohmann::json::parse(package_root_v2_json(root));
  return j.contains(member) ? j[member] : absent;
}

nlohmann::json request_defaults_json(const PackageRootV2& root) {
  if (!root.generation || !root.generation->request_defaults) return nullptr;
  return nlohmann::json::parse(package_root_v2_json(root))["generation"]["request_defaults"];
}

std::vector<std::string> request_defaults_lines(const PackageRootV2& root) {
  std::vector<std::string> out;
  const auto j = request_defaults_json(root);
  if (j.is_null()) return out;
  const auto& sel = j["selection"];
  for (const auto& [name, p] : j["profiles"].items()) {
    std::vector<std::string> roles;
    if (sel["default"] == name) roles.emplace_back("default");
    if (sel.value("reasoning_enabled", "") == name) roles.emplace_back("reasoning on");
    if (sel.value("reasoning_disabled", "") == name) roles.emplace_back("reasoning off");
    std::string line = name;
    if (!roles.empty()) {
      line += " (";
      for (size_t i = 0; i < roles.size(); ++i) line += (i ? ", " : "") + roles[i];
      line += ")";
    }
    std::string values;
    for (const auto& [k, v] : p.items()) {
      if (k == "provenance") continue;
      values += (values.empty() ? ": " : ", ") + k + " " + (v.is_string() ? v.get<std::string>() : v.dump());
    }
    const auto& pv = p["provenance"];
    const std::string rev = pv["revision"].get<std::string>();
    out.push_back(line + values + " (" + pv["source_repo"].get<std::string>() + "@" + rev.substr(0, 7) + " " +
                  pv["file"].get<std::string>() + ")");
  }
  return out;
}

}  // namespace skippy::cli
