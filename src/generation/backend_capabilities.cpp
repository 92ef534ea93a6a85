// Backend capability descriptions: the built-ins and the JSON file for any
// other backend (spec: "Backends advertise capability and performance
// evidence to the resolver").
#include <algorithm>
#include <array>

#include "format/manifest_json.h"
#include "generation/wording.h"
#include "skippy/error.h"
#include "util/file.h"
#include "skippy/policy.h"

namespace skippy {
namespace {

using json = nlohmann::json;
using generation_detail::is_known_switch;

constexpr uint64_t kBackendFileMaxBytes = uint64_t{1} << 20;
constexpr int kBackendJsonMaxDepth = 8;

constexpr std::array<std::string_view, 4> kBuiltinNames = {"reference", "cpu", "cuda", "metal"};

[[noreturn]] void fail(std::string_view origin, std::string_view field, const std::string& problem) {
  std::string msg(origin);
  if (!field.empty()) msg += ": " + std::string(field);
  throw_invalid(msg + ": " + problem);
}

// Strict JSON (the one rule, format/manifest_json.h: no duplicate keys,
// bounded nesting, errors naming the origin), after a size bound.
json parse_strict(std::string_view text, std::string_view origin) {
  if (text.size() > kBackendFileMaxBytes) {
    fail(origin, "", std::to_string(text.size()) + " bytes; the limit is " + std::to_string(kBackendFileMaxBytes));
  }
  return manifest_detail::parse_strict_json(text, manifest_detail::FieldReader(std::string(origin)), kBackendJsonMaxDepth);
}

}  // namespace

bool BackendCapabilities::runs(ExecutionPath path) const noexcept {
  return std::find(paths.begin(), paths.end(), path) != paths.end();
}

std::span<const std::string_view> builtin_backend_names() noexcept { return kBuiltinNames; }

std::optional<BackendCapabilities> builtin_backend(std::string_view name) {
  using P = ExecutionPath;
  BackendCapabilities b;
  b.name = std::string(name);
  if (name == "reference" || name == "cuda" || name == "metal") {
    b.paths = {P::kDense, P::kDirectSparse, P::kCompactFlash, P::kSparseChunked};
  } else if (name == "cpu") {
    // No compact selected-KV flash kernel with parity evidence on CPU: the
    // resolver must fall back (and log it) when a package asks for it.
    b.paths = {P::kDense, P::kDirectSparse, P::kSparseChunked};
  } else {
    return std::nullopt;
  }
  return b;
}

BackendCapabilities parse_backend_capabilities(std::string_view json_text, std::string_view origin) {
  const json j = parse_strict(json_text, origin);
  if (!j.is_object()) fail(origin, "", "expected a JSON object");
  BackendCapabilities b;
  const auto name = j.find("name");
  if (name == j.end() || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    fail(origin, "name", "a non-empty string is required");
  }
  b.name = name->get<std::string>();
  if (b.name.size() > 128) fail(origin, "name", "longer than 128 bytes");
  const auto paths = j.find("paths");
  if (paths == j.end() || !paths->is_array()) fail(origin, "paths", "an array of path names is required");
  for (size_t i = 0; i < paths->size(); ++i) {
    const json& p = (*paths)[i];
    const std::string field = "paths[" + std::to_string(i) + "]";
    if (!p.is_string()) fail(origin, field, "not a string");
    const auto path = parse_execution_path(p.get_ref<const std::string&>());
    if (!path) {
      fail(origin, field, "unknown path \"" + p.get<std::string>() +
                              "\" (known: dense, direct-sparse, compact-flash, sparse-chunked)");
    }
    if (b.runs(*path)) fail(origin, field, "duplicate path \"" + p.get<std::string>() + "\"");
    b.paths.push_back(*path);
  }
  if (const auto ev = j.find("evidence"); ev != j.end()) {
    if (!ev->is_object()) fail(origin, "evidence", "expected an object: experimental switch -> evidence reference");
    for (const auto& [k, v] : ev->items()) {
      const std::string field = "evidence." + k;
      if (!is_known_switch(k)) fail(origin, field, "unknown experimental switch");
      if (!v.is_string() || v.get_ref<const std::string&>().empty()) {
        fail(origin, field, "expected a non-empty string naming the evidence");
      }
      b.evidence.emplace(k, v.get<std::string>());
    }
  }
  return b;
}

BackendCapabilities load_backend_capabilities(const std::filesystem::path& path) {
  return parse_backend_capabilities(read_small_file(path, kBackendFileMaxBytes), path.string());
}

BackendCapabilities backend_by_name_or_file(const std::string& name_or_path) {
  if (auto b = builtin_backend(name_or_path)) return *b;
  if (name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".json")) {
    return load_backend_capabilities(name_or_path);
  }
  throw Error(ErrorKind::kUsage, "--backend \"" + name_or_path +
                                     "\": not a built-in backend (reference, cpu, cuda, metal) nor a "
                                     "description file (a path containing '/' or ending in .json)");
}

}  // namespace skippy
