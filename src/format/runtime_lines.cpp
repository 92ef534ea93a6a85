// The reference runtime lines and their word on a package
// (skippy/abi.h). The rows are facts read from each line's
// sources at the commits they name; the rosters are in split_rosters.cpp.
#include "skippy/abi.h"

#include <algorithm>

#include "format/split_rosters.h"

namespace skippy {
namespace {

// Upstream's loader (identity_from_package_v2) refuses a root whose
// native_abi_version is not its skippy_ffi ABI; its format crate's root
// holds publisher_metadata/publisher_defaults, and its Generation holds
// speculative_decoding only (deny_unknown_fields). Its ABI: the roster's
// recipe, which the runtime refuses unless it equals its compiled ABI.
//
// The fork's loader dropped the ABI check ("the producer's native ABI is
// provenance, not a package-format requirement"); its format crate holds
// both publisher fields and generation.request_defaults.
//
// Release v0.76.1: the exact rule at ABI 0.1.41 (not seen in its ffi
// constants: unconfirmed), and a Generation of speculative_decoding only
// (upstream's generation-defaults migration notes: "v0.76.1 uses
// deny_unknown_fields for the canonical generation object and would reject"
// request_defaults); the publisher fields came after it. No roster known.
constexpr RuntimeLine kLines[] = {
    {.id = "upstream",
     .label = "upstream 822f7e91",
     .repo = "Mesh-LLM/mesh-llm",
     .abi = "0.1.57",
     .abi_source = "crates/skippy-api/src/split-certified.json@da919a0c (native_recipe.skippy_abi)",
     .abi_confirmed = true,
     .abi_rule = AbiRule::kExact,
     .abi_rule_source = "crates/skippy-api/src/package.rs@822f7e91 (identity_from_package_v2)",
     .accepts_publisher_fields = true,
     .accepts_request_defaults = false,
     .fields_source = "crates/skippy-package-format/src/lib.rs@f5b8ef0a",
     .roster = &rosters::kUpstream},
    {.id = "fork",
     .label = "fork d39f791d",
     .repo = "marlucool/mesh-llm",
     .abi = "0.1.64",
     .abi_source = "crates/mesh-llm-host-runtime/src/inference/skippy/split-certified.json@05a82c5f (native_recipe.skippy_abi)",
     .abi_confirmed = true,
     .abi_rule = AbiRule::kProvenance,
     .abi_rule_source = "crates/mesh-llm-host-runtime/src/inference/skippy/package.rs@d39f791d (identity_from_package_v2)",
     .accepts_publisher_fields = true,
     .accepts_request_defaults = true,
     .fields_source = "crates/skippy-package-format/src/lib.rs@05a82c5f",
     .roster = &rosters::kFork},
    {.id = "release-0.76.1",
     .label = "release 0.76.1",
     .repo = "Mesh-LLM/mesh-llm",
     .abi = "0.1.41",
     .abi_source = "release v0.76.1 (unconfirmed: catalog packages were built at 0.1.53/0.1.54)",
     .abi_confirmed = false,
     .abi_rule = AbiRule::kExact,
     .abi_rule_source = "release v0.76.1's identity_from_package_v2",
     .accepts_publisher_fields = false,
     .accepts_request_defaults = false,
     .fields_source = "docs/model-package-generation-defaults-migration.md@0d6795c7 (v0.76.1 denies unknown generation fields)",
     .roster = nullptr},
};

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty()) out += sep;
    out += p;
  }
  return out;
}

}  // namespace

bool SplitRoster::certifies(std::string_view architecture) const {
  return std::binary_search(architectures.begin(), architectures.end(), architecture);
}

std::span<const RuntimeLine> runtime_lines() { return kLines; }

const RuntimeLine* find_runtime_line(std::string_view id) {
  for (const auto& l : kLines) {
    if (l.id == id) return &l;
  }
  return nullptr;
}

std::string_view abi_rule_name(AbiRule rule) {
  switch (rule) {
    case AbiRule::kExact: return "exact";
    case AbiRule::kProvenance: return "provenance";
    case AbiRule::kSameMajorNoNewerMinor: break;
  }
  return "same-major-no-newer-minor";
}

RuntimeLineVerdict judge_runtime_line(const RuntimeLine& line, const PackageIdentity& id, std::string_view architecture) {
  RuntimeLineVerdict v;
  v.line = &line;
  if (id.schema_version != 2) {
    v.refusals.push_back("refuses package schema " + std::to_string(id.schema_version) +
                         " (its nodes split schema 2 only: \"split serving requires package schema 2\")");
  } else {
    if (line.abi_rule == AbiRule::kExact && id.abi_version != line.abi) {
      v.abi_refused = true;
      v.refusals.push_back("refuses native ABI \"" + id.abi_version + "\" (exact rule: its runtime is " +
                           std::string(line.abi) + (line.abi_confirmed ? "" : ", unconfirmed") +
                           "; restamp-package --native-abi-version " + std::string(line.abi) + " moves the package)");
    }
    if (!line.accepts_publisher_fields) {
      std::vector<std::string> present;
      if (!id.publisher_metadata.empty()) present.push_back("publisher_metadata");
      if (id.publisher_defaults) present.push_back("publisher_defaults");
      if (!present.empty()) {
        v.refusals.push_back("refuses " + join(present, " and ") +
                             " (root fields its format crate does not know; it denies unknown fields)");
      }
    }
    if (!line.accepts_request_defaults && !id.request_defaults_document.is_null()) {
      v.refusals.push_back(
          "refuses generation.request_defaults (a field its format crate does not know; it denies unknown fields)");
    }
  }
  if (line.roster != nullptr && !architecture.empty()) v.splits = line.roster->certifies(architecture);
  return v;
}

std::vector<RuntimeLineVerdict> judge_runtime_lines(const PackageIdentity& id, std::string_view architecture) {
  std::vector<RuntimeLineVerdict> out;
  for (const auto& l : kLines) out.push_back(judge_runtime_line(l, id, architecture));
  return out;
}

nlohmann::json runtime_lines_json(const std::vector<RuntimeLineVerdict>& verdicts) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& v : verdicts) {
    const RuntimeLine& l = *v.line;
    auto str = [](std::string_view text) { return std::string(text); };
    out.push_back({{"line", str(l.id)},
                   {"label", str(l.label)},
                   {"repo", str(l.repo)},
                   {"abi", str(l.abi)},
                   {"abi_confirmed", l.abi_confirmed},
                   {"abi_source", str(l.abi_source)},
                   {"abi_rule", str(abi_rule_name(l.abi_rule))},
                   {"abi_rule_source", str(l.abi_rule_source)},
                   {"accepts_publisher_fields", l.accepts_publisher_fields},
                   {"accepts_request_defaults", l.accepts_request_defaults},
                   {"fields_source", str(l.fields_source)},
                   {"admits", v.admits()},
                   {"refusals", v.refusals},
                   {"splits", v.splits ? nlohmann::json(*v.splits) : nlohmann::json(nullptr)},
                   {"roster_source", l.roster ? nlohmann::json(str(l.roster->source)) : nlohmann::json(nullptr)}});
  }
  return out;
}

std::string runtime_line_text(const RuntimeLineVerdict& v, std::string_view architecture) {
  const RuntimeLine& l = *v.line;
  std::string s = std::string(l.label) + " (ABI " + std::string(l.abi) + (l.abi_confirmed ? "" : "?") + ", " +
                  std::string(abi_rule_name(l.abi_rule)) + "): " +
                  (v.admits() ? std::string("admits") : join(v.refusals, "; "));
  if (v.splits) {
    s += *v.splits ? "; splits " + std::string(architecture)
                   : "; does not split " + std::string(architecture) + " (not on its roster)";
  }
  return s;
}

std::optional<std::string> runtime_lines_warning(const PackageIdentity& id) {
  std::vector<std::string> refused, admitted;
  bool for_content = false;
  for (const auto& v : judge_runtime_lines(id, "")) {
    if (v.admits()) {
      admitted.push_back(std::string(v.line->label));
      continue;
    }
    if (v.refusals.size() > (v.abi_refused ? 1u : 0u)) for_content = true;
    refused.push_back(std::string(v.line->label) + " (" + join(v.refusals, "; ") + ")");
  }
  if (!for_content) return std::nullopt;
  return "mesh-llm runtime lines refusing this package: " + join(refused, ", ") + "; admitted by " +
         (admitted.empty() ? std::string("none of them") : join(admitted, ", ")) +
         " (inspect lists each line's word; docs/runtime-lines.md)";
}

std::optional<std::string> split_roster_warning(std::string_view architecture) {
  if (architecture.empty()) return std::nullopt;
  std::vector<std::string> refusing;
  for (const auto& l : kLines) {
    if (l.roster != nullptr && !l.roster->certifies(architecture)) {
      refusing.push_back(std::string(l.label) + " (" + std::string(l.roster->source) + ")");
    }
  }
  if (refusing.empty()) return std::nullopt;
  return "architecture \"" + std::string(architecture) + "\" is not on the split-certification roster of " +
         join(refusing, ", ") +
         ": their nodes refuse to split it (they serve it whole, or split it only when started with --split "
         "--allow-uncertified-split)";
}

}  // namespace skippy
