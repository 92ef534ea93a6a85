// A package's request defaults for people (skippy/package.h).
#include "skippy/package.h"


namespace skippy {

std::vector<std::string> request_defaults_lines(const nlohmann::json& j) {
  std::vector<std::string> out;
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

}  // namespace skippy
