// Package schema 2 stage admission descriptors (see skippy/stage_admission.h).
#include "format/json_output.h"
#include "format/stage_admission_json.h"
#include "skippy/stage_admission.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "format/manifest_json.h"
#include "skippy/error.h"
#include "skippy/gguf.h"

namespace skippy {
namespace {

using manifest_detail::FieldReader;
using manifest_detail::index_path;
using manifest_detail::json;
using manifest_detail::quote;

bool sidecar_less(const V2Sidecar& a, const V2Sidecar& b) {
  return std::tie(a.kind, a.name, a.artifact_id) < std::tie(b.kind, b.name, b.artifact_id);
}

std::string describe_sidecar(const V2Sidecar& s) {
  return "(" + s.kind + ", " + (s.name ? quote(*s.name) : std::string("no name")) + ", " + quote(s.artifact_id) + ")";
}

void refuse_unknown_members(const json& obj, std::string_view path, std::initializer_list<std::string_view> known,
                            const FieldReader& r) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (!manifest_detail::is_one_of(it.key(), known)) {
      r.fail(manifest_detail::field_path(path, it.key()), "not a stage admission field");
    }
  }
}

bool is_package_id(const std::string& s) {
  constexpr std::string_view kPrefix = "sha256:";
  if (s.size() != kPrefix.size() + 64 || !s.starts_with(kPrefix)) return false;
  return std::all_of(s.begin() + static_cast<std::ptrdiff_t>(kPrefix.size()), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace

StageAdmission parse_stage_admission(std::string_view json_text, std::string_view origin) {
  const FieldReader r{std::string(origin)};
  StageAdmission a;
  // The tensor ids go straight from the parser into `a`, checked one by one
  // as they arrive (a document node per id would cost several times the
  // text): a descriptor is refused at its first bad id, and at the first id
  // past the most tensors any package's catalog can hold (a catalog is one
  // GGUF tensor directory), so it never costs more than that many ids.
  const uint64_t most_ids = GgufLimits{}.max_tensor_count;
  bool in_ids = false, last_key_is_ids = false;
  auto take_ids = [&](int depth, json::parse_event_t event, json& parsed) -> bool {
    using E = json::parse_event_t;
    if (depth == 1 && event == E::key) {
      last_key_is_ids = parsed.is_string() && parsed.get_ref<const std::string&>() == "resident_tensor_ids";
      return true;
    }
    if (depth == 1 && event == E::array_start && last_key_is_ids) {
      in_ids = true;
      return true;
    }
    if (depth == 1 && event == E::array_end) in_ids = false;
    if (!in_ids || depth != 2) return true;
    const std::string path = index_path("resident_tensor_ids", a.resident_tensor_ids.size());
    if (event == E::object_start || event == E::array_start) {
      r.fail(path, std::string("must be a string, got ") + (event == E::object_start ? "an object" : "an array"));
    }
    if (event != E::value) return true;
    std::string id = r.text(parsed, path);
    if (!a.resident_tensor_ids.empty() && !(a.resident_tensor_ids.back() < id)) {
      r.fail(path, "tensor ids are not strictly sorted: " + quote(a.resident_tensor_ids.back()) + " then " + quote(id) +
                       (a.resident_tensor_ids.back() == id ? " (named twice)" : ""));
    }
    if (a.resident_tensor_ids.size() >= most_ids) {
      r.fail(path, "more than " + std::to_string(most_ids) +
                       " tensor ids, more tensors than any package's catalog can hold");
    }
    a.resident_tensor_ids.push_back(std::move(id));
    return false;  // held in `a`, not in the document
  };
  const json j = manifest_detail::parse_strict_json(json_text, r, 64, take_ids);
  r.expect_object(j, "");
  refuse_unknown_members(j, "", {"package_id", "resident_tensor_ids", "sidecars"}, r);
  a.package_id = r.text(r.require(j, "package_id", ""), "package_id");
  if (!is_package_id(a.package_id)) {
    r.fail("package_id", quote(a.package_id) + " is not a package id (\"sha256:\" and 64 lowercase hex digits)");
  }
  r.expect_array(r.require(j, "resident_tensor_ids", ""), "resident_tensor_ids");
  const json& sidecars = r.require(j, "sidecars", "");
  r.expect_array(sidecars, "sidecars");
  for (size_t i = 0; i < sidecars.size(); ++i) {
    const std::string path = index_path("sidecars", i);
    const json& e = sidecars[i];
    r.expect_object(e, path);
    refuse_unknown_members(e, path, {"kind", "artifact_id", "name"}, r);
    V2Sidecar s;
    s.kind = r.text(r.require(e, "kind", path), path + ".kind");
    if (s.kind != kSidecarKindMmproj) {
      r.fail(path + ".kind", "unknown sidecar kind " + quote(s.kind) + " (package schema 2 defines only \"mmproj\")");
    }
    s.artifact_id = r.text(r.require(e, "artifact_id", path), path + ".artifact_id");
    s.name = r.opt_text(e, "name", path);
    if (!a.sidecars.empty() && !sidecar_less(a.sidecars.back(), s)) {
      r.fail(path, "sidecars are not strictly sorted (by kind, name, artifact_id): " + describe_sidecar(a.sidecars.back()) +
                       " then " + describe_sidecar(s));
    }
    a.sidecars.push_back(std::move(s));
  }
  return a;
}

nlohmann::ordered_json detail::admission_sidecars_json(const StageAdmission& a) {
  nlohmann::ordered_json sidecars = nlohmann::ordered_json::array();
  for (const auto& s : a.sidecars) {
    nlohmann::ordered_json o;
    o["kind"] = s.kind;
    o["artifact_id"] = s.artifact_id;
    if (s.name) o["name"] = *s.name;
    sidecars.push_back(std::move(o));
  }
  return sidecars;
}

std::string stage_admission_json(const StageAdmission& a) {
  // nlohmann's compact dump escapes as serde_json does (\" \\ \b \f \n \r
  // \t, other controls \u00xx lowercase, UTF-8 and '/' as they are).
  nlohmann::ordered_json doc;
  doc["package_id"] = a.package_id;
  doc["resident_tensor_ids"] = a.resident_tensor_ids;
  doc["sidecars"] = detail::admission_sidecars_json(a);
  return json_output(doc);
}

void check_stage_admission(const StageAdmission& a, const PackageCatalog& cat, std::string_view origin) {
  const std::string who(origin);
  // A descriptor names tensors by id: a package whose stages are whole
  // parts has no tensor ids to admit.
  if (cat.selects_whole_parts) {
    throw_invalid(who + ": a stage admission descriptor admits a stage of a package schema 2 package; " +
                  (cat.model_id.empty() ? std::string("this package") : cat.model_id) + " is schema " +
                  std::to_string(cat.schema_version));
  }
  if (a.package_id != cat.package_id) {
    throw_invalid(who + ": package_id: stage admission package id " + quote(a.package_id) +
                  " does not match the package's " + quote(cat.package_id) + " (a descriptor for another package)");
  }
  for (size_t i = 0; i < a.sidecars.size(); ++i) {
    if (i > 0 && !sidecar_less(a.sidecars[i - 1], a.sidecars[i])) {
      throw_invalid(who + ": " + index_path("sidecars", i) + ": sidecars are not strictly sorted");
    }
  }
  for (size_t i = 0; i < a.resident_tensor_ids.size(); ++i) {
    const auto& id = a.resident_tensor_ids[i];
    if (id.empty()) throw_invalid(who + ": " + index_path("resident_tensor_ids", i) + ": tensor id is empty");
    if (i > 0 && !(a.resident_tensor_ids[i - 1] < id)) {
      throw_invalid(who + ": " + index_path("resident_tensor_ids", i) + ": tensor ids are not strictly sorted");
    }
    const CatalogTensor* t = cat.find_tensor(id);
    if (t == nullptr) {
      throw_invalid(who + ": " + index_path("resident_tensor_ids", i) + ": unknown tensor " + quote(id) +
                    " (not in the package's tensor catalog)");
    }
    if (t->alias_of) {
      throw_invalid(who + ": " + index_path("resident_tensor_ids", i) + ": tensor " + quote(id) + " aliases " +
                    quote(*t->alias_of) + "; a stage admits only tensors that own their bytes");
    }
  }
  const auto& declared = cat.sidecars;
  for (size_t i = 0; i < a.sidecars.size(); ++i) {
    if (std::find(declared.begin(), declared.end(), a.sidecars[i]) == declared.end()) {
      throw_invalid(who + ": " + index_path("sidecars", i) + ": unknown sidecar " + describe_sidecar(a.sidecars[i]) +
                    " (not one of the package's sidecars)");
    }
  }
}

std::vector<size_t> stage_admission_artifacts(const StageAdmission& a, const PackageCatalog& cat) {
  std::map<std::string, size_t> by_id;
  by_id.emplace(cat.artifacts.at(cat.carrier).id, cat.carrier);
  for (const auto& id : a.resident_tensor_ids) {
    const CatalogTensor* t = cat.find_tensor(id);
    if (t == nullptr) throw_invalid(cat.model_id + ": unknown tensor " + quote(id));
    by_id.emplace(cat.artifact_of(*t).id, t->artifact);
  }
  for (const auto& s : a.sidecars) {
    const auto it = std::find_if(cat.artifacts.begin(), cat.artifacts.end(),
                                 [&](const CatalogArtifact& c) { return c.id == s.artifact_id; });
    if (it == cat.artifacts.end()) throw_invalid(cat.model_id + ": missing required artifact " + quote(s.artifact_id));
    by_id.emplace(it->id, static_cast<size_t>(it - cat.artifacts.begin()));
  }
  std::vector<size_t> out;
  out.reserve(by_id.size());
  for (const auto& [id, index] : by_id) out.push_back(index);
  return out;
}

uint64_t stage_admission_tensor_bytes(const StageAdmission& a, const PackageCatalog& cat) {
  std::set<std::tuple<size_t, uint64_t, uint64_t>> seen;
  uint64_t total = 0;
  for (const auto& id : a.resident_tensor_ids) {
    const CatalogTensor* t = cat.find_tensor(id);
    if (t == nullptr) throw_invalid(cat.model_id + ": unknown tensor " + quote(id));
    if (seen.emplace(t->artifact, t->offset, t->stored_bytes).second) {
      total = checked_add(total, t->stored_bytes, cat.model_id + ": the stage's tensor bytes");
    }
  }
  return total;
}

StageAdmission make_stage_admission(const PackageCatalog& cat, std::vector<std::string> names,
                                    std::vector<V2Sidecar> sidecars) {
  StageAdmission a;
  a.package_id = cat.package_id;
  std::sort(names.begin(), names.end());
  if (const auto dup = std::adjacent_find(names.begin(), names.end()); dup != names.end()) {
    throw_invalid(cat.model_id + ": tensor " + quote(*dup) + " is named more than once");
  }
  a.resident_tensor_ids = std::move(names);
  std::sort(sidecars.begin(), sidecars.end(), sidecar_less);
  a.sidecars = std::move(sidecars);
  return a;
}

}  // namespace skippy
