// The runtime's ABI admission rule, per package schema (skippy/abi.h): one
// home for the check select, fetch, materialize and the C API apply.
#include <string>

#include "skippy/abi.h"
#include "util/env.h"
#include "skippy/error.h"

namespace skippy {

std::optional<std::string> runtime_abi_refusal(uint32_t schema_version, std::string_view package_abi,
                                               AbiVersion runtime, AbiRule rule) {
  const std::string rt = format_abi_version(runtime);
  const std::string declared = "\"" + std::string(package_abi) + "\"";
  if (schema_version >= 2) {
    // The fork's loader: the producer's ABI is provenance, never refused.
    if (rule == AbiRule::kProvenance) return std::nullopt;
    // mesh-llm compares the strings: "0.1.064" is not "0.1.64".
    if (package_abi == rt) return std::nullopt;
    return "package schema 2 declares native ABI " + declared + ", the runtime's ABI is " + rt +
           " (by the exact rule, mesh-llm upstream's and its release's, a schema 2 package is admitted only at "
           "exactly its runtime's ABI; its fork's newest loader takes the ABI as provenance: --runtime-abi " +
           rt + ":provenance)";
  }
  const auto v = parse_abi_version(package_abi);
  if (v && abi_compatible(*v, runtime)) return std::nullopt;
  return "package schema 1 declares skippy ABI " + declared + ", the runtime's ABI is " + rt +
         " (schema 1 needs the same major and a minor no newer than the runtime's)";
}

void check_runtime_abi(uint32_t schema_version, std::string_view package_abi, AbiVersion runtime,
                       std::string_view package_ref, AbiRule rule) {
  const auto why = runtime_abi_refusal(schema_version, package_abi, runtime, rule);
  if (!why) return;
  const std::string rt = format_abi_version(runtime);
  const std::string ref(package_ref);
  std::string fix;
  if (schema_version >= 2) {
    const std::string restamp = "skippy-model-package restamp-package DIR --native-abi-version " + rt;
    if (ref.starts_with("hf://")) {
      fix = "re-stamp a local copy for this runtime (only model-package.json changes): copy the directory `skippy-model-package fetch " +
            ref + "` prints to DIR, then run `" + restamp + "`";
    } else {
      fix = "re-stamp it for this runtime (only model-package.json changes): skippy-model-package restamp-package " + ref +
            " --native-abi-version " + rt;
    }
  } else {
    fix = "write the package again for this runtime (write-package), or convert it to schema 2 (convert-package --to 2 "
          "--native-abi-version " + rt + ")";
  }
  throw Error(ErrorKind::kInvalidInput, ref + ": " + *why + "; " + fix);
}

std::string native_abi_version_to_write(std::string_view requested) {
  if (requested.empty()) return format_abi_version(kDefaultNativeAbiV2);
  const auto v = parse_abi_version(requested);
  if (!v) {
    throw Error(ErrorKind::kUsage,
                "--native-abi-version: \"" + std::string(requested) + "\" is not MAJOR.MINOR.PATCH (e.g. 0.1.64)");
  }
  return format_abi_version(*v);
}

namespace {

// One --runtime-abi / SKIPPY_RUNTIME_ABI value (runtime_abi_from's forms);
// `what` names where it came from in the error.
RuntimeAbi parse_runtime_abi(const std::string& text, const std::string& what) {
  if (const RuntimeLine* line = find_runtime_line(text)) {
    return {*parse_abi_version(line->abi), line->abi_rule, line};
  }
  std::string version = text;
  AbiRule rule = AbiRule::kExact;
  if (const auto colon = text.find(':'); colon != std::string::npos) {
    version = text.substr(0, colon);
    const std::string r = text.substr(colon + 1);
    if (r == "exact") {
      rule = AbiRule::kExact;
    } else if (r == "provenance") {
      rule = AbiRule::kProvenance;
    } else {
      throw Error(ErrorKind::kUsage, what + "=\"" + text + "\": the rule after ':' is exact or provenance, not \"" + r + "\"");
    }
  }
  const auto v = parse_abi_version(version);
  if (!v) {
    std::string lines;
    for (const auto& l : runtime_lines()) lines += (lines.empty() ? "" : ", ") + std::string(l.id);
    throw Error(ErrorKind::kUsage, what + "=\"" + text +
                                       "\" is not MAJOR.MINOR.PATCH[:exact|:provenance] (e.g. 0.1.64) nor a runtime line (" +
                                       lines + ")");
  }
  return {*v, rule, nullptr};
}

}  // namespace

std::optional<RuntimeAbi> runtime_abi_from(const std::optional<std::string>& flag) {
  if (flag && !flag->empty()) return parse_runtime_abi(*flag, "--runtime-abi");
  const auto e = env::runtime_abi();
  if (!e) return std::nullopt;
  return parse_runtime_abi(*e, "SKIPPY_RUNTIME_ABI");
}

}  // namespace skippy
