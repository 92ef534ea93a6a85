// package schema 2: parsing and the root rules (see skippy/manifest_v2.h).
#include "skippy/manifest_v2.h"

#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "format/manifest_json.h"
#include "format/manifest_v2_detail.h"
#include "skippy/error.h"
#include "util/file.h"
#include "skippy/manifest.h"
#include "skippy/package.h"
#include "util/control_chars.h"

namespace skippy {
// Not file-local: manifest_v2_defaults.cpp parses the newer root fields with
// the same readers (format/manifest_v2_detail.h).
namespace manifest_v2_detail {

using manifest_detail::describe;
using manifest_detail::field_path;
using manifest_detail::FieldReader;
using manifest_detail::index_path;
using manifest_detail::quote;
using json = nlohmann::json;

constexpr int kV2MaxJsonDepth = 64;

json parse_v2_json_text(std::string_view text, const FieldReader& r) {
  if (text.size() > kManifestMaxBytes) {
    r.fail("", "manifest is " + std::to_string(text.size()) + " bytes; the limit is 16 MiB");
  }
  // serde refuses a repeated field; the DOM would keep the last one silently.
  return parse_strict_json(text, r, kV2MaxJsonDepth);
}

// serde's deny_unknown_fields: every member of `obj` must be declared.
// `why` explains particular refusals (fields of schema 1, fields the
// reference moved elsewhere).
void v2_refuse_unknown(const json& obj, std::string_view path, std::initializer_list<std::string_view> known,
                    const FieldReader& r,
                    std::initializer_list<std::pair<std::string_view, std::string_view>> why) {
  for (const auto& [k, v] : obj.items()) {
    if (manifest_detail::is_one_of(k, known)) continue;
    std::string problem = "unknown field (package schema 2 refuses fields it does not declare)";
    for (const auto& [name, reason] : why) {
      if (k == name) problem = std::string(reason);
    }
    r.fail(field_path(path, k), problem);
  }
}

const json& v2_object_member(const json& obj, std::string_view key, std::string_view parent, const FieldReader& r) {
  const json& v = r.require(obj, key, parent);
  r.expect_object(v, field_path(parent, key));
  return v;
}

std::string v2_str(const json& obj, std::string_view key, std::string_view parent, const FieldReader& r) {
  return r.string(r.require(obj, key, parent), field_path(parent, key));
}

std::optional<std::string> v2_opt_str(const json& obj, std::string_view key, std::string_view parent,
                                   const FieldReader& r) {
  const json* v = FieldReader::find(obj, key);
  if (v == nullptr) return std::nullopt;
  return r.string(*v, field_path(parent, key));
}

uint32_t v2_u32(const json& obj, std::string_view key, std::string_view parent, const FieldReader& r) {
  return r.u32(r.require(obj, key, parent), field_path(parent, key));
}

std::optional<uint32_t> v2_opt_u32(const json& obj, std::string_view key, std::string_view parent,
                                const FieldReader& r) {
  const json* v = FieldReader::find(obj, key);
  if (v == nullptr) return std::nullopt;
  return r.u32(*v, field_path(parent, key));
}

std::vector<uint32_t> v2_u32_list(const json& obj, std::string_view key, std::string_view parent,
                               const FieldReader& r, bool required) {
  const json* v = FieldReader::find(obj, key);
  if (v == nullptr) {
    if (required) r.fail(field_path(parent, key), "missing required field");
    return {};
  }
  const std::string path = field_path(parent, key);
  r.expect_array(*v, path);
  std::vector<uint32_t> out;
  for (size_t i = 0; i < v->size(); ++i) out.push_back(r.u32((*v)[i], index_path(path, i)));
  return out;
}

// ------------------------------------------------------------- generation

V2WindowPolicy parse_v2_window_policy(const json& j, std::string_view path, const FieldReader& r) {
  r.expect_object(j, path);
  v2_refuse_unknown(j, path, {"default", "initial_window", "min_window", "max_window", "pipeline_depth"}, r);
  V2WindowPolicy p;
  p.default_mode = v2_str(j, "default", path, r);
  p.initial_window = v2_u32(j, "initial_window", path, r);
  p.min_window = v2_u32(j, "min_window", path, r);
  p.max_window = v2_u32(j, "max_window", path, r);
  p.pipeline_depth = v2_opt_u32(j, "pipeline_depth", path, r);
  return p;
}

std::string v2_type_tag(const json& j, std::string_view path, const FieldReader& r,
                     std::initializer_list<std::string_view> types) {
  r.expect_object(j, path);
  const std::string type = v2_str(j, "type", path, r);
  if (!manifest_detail::is_one_of(type, types)) {
    std::string list;
    for (auto t : types) list += (list.empty() ? "" : ", ") + std::string(t);
    r.fail(field_path(path, "type"), "unknown variant " + quote(type) + " (expected one of " + list + ")");
  }
  return type;
}

V2Proposer parse_v2_proposer(const json& j, std::string_view path, const FieldReader& r) {
  V2Proposer p;
  p.type = v2_type_tag(j, path, r, {"native-mtp", "ngram-cache", "ngram-suffix"});
  if (p.type == "native-mtp") {
    v2_refuse_unknown(j, path, {"type", "prediction_depth", "layer_indices"}, r);
    p.prediction_depth = v2_u32(j, "prediction_depth", path, r);
    p.layer_indices = v2_u32_list(j, "layer_indices", path, r, /*required=*/true);
  } else {
    v2_refuse_unknown(j, path, {"type", "ngram_min", "ngram_max", "max_proposal_tokens", "history_scope"}, r);
    p.ngram_min = v2_u32(j, "ngram_min", path, r);
    p.ngram_max = v2_u32(j, "ngram_max", path, r);
    p.max_proposal_tokens = v2_u32(j, "max_proposal_tokens", path, r);
    p.history_scope = v2_str(j, "history_scope", path, r);
  }
  return p;
}

V2Strategy parse_v2_strategy(const json& j, std::string_view path, const FieldReader& r) {
  V2Strategy s;
  s.type = v2_type_tag(j, path, r, {"native-mtp", "ngram-cache", "ngram-suffix", "composite"});
  if (s.type == "native-mtp") {
    v2_refuse_unknown(j, path, {"type", "proposer", "prediction_depth", "layer_indices", "window_policy"}, r);
    s.proposer = v2_opt_str(j, "proposer", path, r);
    s.prediction_depth = v2_opt_u32(j, "prediction_depth", path, r);
    s.layer_indices = v2_u32_list(j, "layer_indices", path, r, /*required=*/false);
  } else if (s.type == "composite") {
    v2_refuse_unknown(j, path, {"type", "primary", "extender", "extension_policy", "window_policy"}, r);
    s.primary = v2_str(j, "primary", path, r);
    s.extender = v2_str(j, "extender", path, r);
    const std::string ep = field_path(path, "extension_policy");
    const json& e = v2_object_member(j, "extension_policy", path, r);
    v2_refuse_unknown(e, ep, {"max_tokens", "initial_tokens", "tail_backoff_proposals"}, r);
    V2ExtensionPolicy pol;
    pol.max_tokens = v2_u32(e, "max_tokens", ep, r);
    pol.initial_tokens = v2_opt_u32(e, "initial_tokens", ep, r);
    pol.tail_backoff_proposals = v2_opt_u32(e, "tail_backoff_proposals", ep, r);
    s.extension_policy = pol;
  } else {
    v2_refuse_unknown(j, path, {"type", "proposer", "window_policy"}, r);
    s.proposer = v2_str(j, "proposer", path, r);
  }
  if (const json* w = FieldReader::find(j, "window_policy")) {
    s.window_policy = parse_v2_window_policy(*w, field_path(path, "window_policy"), r);
  }
  return s;
}

V2Generation parse_generation_v2(const json& j, const FieldReader& r) {
  const std::string path = "generation";
  r.expect_object(j, path);
  v2_refuse_unknown(j, path, {"request_defaults", "speculative_decoding"}, r,
                 {{"policy", "a schema 1 field; package schema 2 carries only request_defaults and speculative_decoding"},
                  {"thresholds", "a schema 1 field; package schema 2 carries only request_defaults and speculative_decoding"}});
  V2Generation g;
  if (const json* rd = FieldReader::find(j, "request_defaults")) {
    g.request_defaults = parse_v2_request_defaults(*rd, "generation.request_defaults", r);
  }
  if (const json* sd = FieldReader::find(j, "speculative_decoding")) {
    const std::string sp = "generation.speculative_decoding";
    r.expect_object(*sd, sp);
    v2_refuse_unknown(*sd, sp, {"default", "proposers", "strategies"}, r);
    V2SpeculativeDecoding d;
    d.default_strategy = v2_str(*sd, "default", sp, r);
    if (const json* ps = FieldReader::find(*sd, "proposers")) {
      r.expect_object(*ps, sp + ".proposers");
      for (const auto& [name, v] : ps->items()) {
        d.proposers[name] = parse_v2_proposer(v, sp + ".proposers[" + name + "]", r);
      }
    }
    if (const json* ss = FieldReader::find(*sd, "strategies")) {
      r.expect_object(*ss, sp + ".strategies");
      for (const auto& [name, v] : ss->items()) {
        d.strategies[name] = parse_v2_strategy(v, sp + ".strategies[" + name + "]", r);
      }
    }
    g.speculative_decoding = std::move(d);
  }
  return g;
}

// ------------------------------------------------------------------ root

V2SourceModel parse_v2_source_model(const json& root, const FieldReader& r) {
  const std::string path = "source_model";
  const json& j = v2_object_member(root, "source_model", "", r);
  v2_refuse_unknown(j, path,
                 {"sha256", "metadata_artifact_id", "repo", "revision", "primary_file", "canonical_ref",
                  "distribution_id", "files"},
                 r, {{"path", "a schema 1 field; package schema 2 does not record the writer's local path"}});
  V2SourceModel s;
  s.sha256 = v2_str(j, "sha256", path, r);
  s.metadata_artifact_id = v2_str(j, "metadata_artifact_id", path, r);
  s.repo = v2_opt_str(j, "repo", path, r);
  s.revision = v2_opt_str(j, "revision", path, r);
  s.primary_file = v2_opt_str(j, "primary_file", path, r);
  s.canonical_ref = v2_opt_str(j, "canonical_ref", path, r);
  s.distribution_id = v2_opt_str(j, "distribution_id", path, r);
  if (const json* files = FieldReader::find(j, "files")) {
    const std::string fp = path + ".files";
    r.expect_array(*files, fp);
    for (size_t i = 0; i < files->size(); ++i) {
      const std::string ip = index_path(fp, i);
      const json& f = (*files)[i];
      r.expect_object(f, ip);
      v2_refuse_unknown(f, ip, {"path", "byte_size", "sha256"}, r);
      V2SourceFile sf;
      sf.path = v2_str(f, "path", ip, r);
      sf.byte_size = r.u64(r.require(f, "byte_size", ip), ip + ".byte_size");
      sf.sha256 = v2_str(f, "sha256", ip, r);
      s.files.push_back(std::move(sf));
    }
  }
  return s;
}

constexpr std::string_view kV2SchemaOneField =
    "a schema 1 field in a manifest whose schema_version is 2 (package schema 2 does not declare it)";

PackageRootV2 parse_root_v2(const json& j, const FieldReader& r) {
  r.expect_object(j, "");
  v2_refuse_unknown(j, "",
                 {"schema_version", "package_id", "model_id", "source_model", "format", "layer_count",
                  "artifact_catalog", "sidecars", "publisher_metadata", "publisher_defaults", "generation",
                  "native_abi_version", "generator_version", "created_at_unix_secs"},
                 r,
                 {{"model_metadata", "must not appear in the root: schema 2 rebuilds it from the metadata carrier"},
                  {"tensor_catalog", "must not appear in the root: schema 2 rebuilds it from the metadata carrier"},
                  // A schema 1 manifest whose schema_version says 2 (or a
                  // hand-made mix): say which schema the field belongs to.
                  {"activation_width", kV2SchemaOneField},
                  {"shared", kV2SchemaOneField},
                  {"layers", kV2SchemaOneField},
                  {"projectors", kV2SchemaOneField},
                  {"skippy_abi_version", kV2SchemaOneField}});
  PackageRootV2 m;
  m.schema_version = v2_u32(j, "schema_version", "", r);
  if (m.schema_version != kPackageSchemaV2) {
    r.fail("schema_version", "expected schema version 2, got " + std::to_string(m.schema_version));
  }
  m.package_id = v2_str(j, "package_id", "", r);
  m.model_id = v2_str(j, "model_id", "", r);
  m.source_model = parse_v2_source_model(j, r);
  m.format = v2_str(j, "format", "", r);
  m.layer_count = v2_u32(j, "layer_count", "", r);
  {
    const json& cat = v2_object_member(j, "artifact_catalog", "", r);
    v2_refuse_unknown(cat, "artifact_catalog", {"entries"}, r);
    const json& entries = r.require(cat, "entries", "artifact_catalog");
    r.expect_array(entries, "artifact_catalog.entries");
    for (size_t i = 0; i < entries.size(); ++i) {
      const std::string ip = index_path("artifact_catalog.entries", i);
      const json& e = entries[i];
      r.expect_object(e, ip);
      v2_refuse_unknown(e, ip, {"id", "path", "byte_size", "sha256"}, r);
      V2Artifact a;
      a.id = v2_str(e, "id", ip, r);
      a.path = v2_str(e, "path", ip, r);
      a.byte_size = r.u64(r.require(e, "byte_size", ip), ip + ".byte_size");
      a.sha256 = v2_str(e, "sha256", ip, r);
      m.artifacts.push_back(std::move(a));
    }
  }
  if (const json* sc = FieldReader::find(j, "sidecars")) {
    r.expect_array(*sc, "sidecars");
    for (size_t i = 0; i < sc->size(); ++i) {
      const std::string ip = index_path("sidecars", i);
      const json& e = (*sc)[i];
      r.expect_object(e, ip);
      v2_refuse_unknown(e, ip, {"kind", "artifact_id", "name"}, r);
      V2Sidecar s;
      s.kind = v2_str(e, "kind", ip, r);
      if (s.kind != kSidecarKindMmproj) {
        r.fail(ip + ".kind", "unknown sidecar kind " + quote(s.kind) + " (package schema 2 defines only \"mmproj\")");
      }
      s.artifact_id = v2_str(e, "artifact_id", ip, r);
      s.name = v2_opt_str(e, "name", ip, r);
      m.sidecars.push_back(std::move(s));
    }
  }
  parse_v2_publisher(j, m, r);
  if (const json* g = FieldReader::find(j, "generation")) m.generation = parse_generation_v2(*g, r);
  m.native_abi_version = v2_str(j, "native_abi_version", "", r);
  m.generator_version = v2_str(j, "generator_version", "", r);
  m.created_at_unix_secs = r.u64(r.require(j, "created_at_unix_secs", ""), "created_at_unix_secs");
  return m;
}

// --------------------------------------------------------------- the rules

bool v2_blank(std::string_view s) {
  for (char c : s) {
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v') return false;
  }
  return true;
}

bool v2_lower_sha256(std::string_view s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool v2_artifact_identifier(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                    c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

void v2_require_not_blank(const FieldReader& r, std::string_view path, std::string_view v) {
  if (v2_blank(v)) r.fail(path, "must not be empty");
}

// Identity fields are printed and compared by people: no control (C0, C1,
// DEL) or bidirectional control code point (skippy/control_chars.h's rule).
void v2_require_no_controls(const FieldReader& r, std::string_view path, std::string_view v) {
  if (const auto why = control_character_problem(v)) r.fail(path, *why + ": " + quote(v));
}

void v2_require_sha256(const FieldReader& r, std::string_view path, std::string_view v) {
  if (!v2_lower_sha256(v)) r.fail(path, "must be 64 lowercase hexadecimal characters, got " + quote(v));
}

void v2_require_path(const FieldReader& r, std::string_view path, std::string_view v) {
  // Ours is the stricter rule: the reference's also refuses a leading "./"
  // but lets Rust's Path normalise an inner "." away.
  if (!is_safe_relative_path(v)) {
    try {
      check_safe_relative_path(v, "path");
    } catch (const Error& e) {
      std::string why = e.what();
      if (why.rfind("path: ", 0) == 0) why.erase(0, 6);
      r.fail(path, why + " (must be a normalized relative package path)");
    }
  }
}

void validate_generation_v2(const V2Generation& g, uint32_t layer_count, const FieldReader& r) {
  if (g.request_defaults) validate_v2_request_defaults(*g.request_defaults, r);
  if (!g.speculative_decoding) return;
  const auto& sd = *g.speculative_decoding;
  const std::string base = "generation.speculative_decoding";
  auto layers_in_range = [&](const std::vector<uint32_t>& idx, const std::string& path) {
    for (size_t i = 0; i < idx.size(); ++i) {
      if (idx[i] >= layer_count) {
        r.fail(index_path(path, i), "layer index " + std::to_string(idx[i]) + " is out of range for layer_count " +
                                        std::to_string(layer_count));
      }
    }
  };
  if (v2_blank(sd.default_strategy)) r.fail(base + ".default", "default must not be empty");
  for (const auto& [name, p] : sd.proposers) {
    const std::string pp = base + ".proposers[" + name + "]";
    if (v2_blank(name)) r.fail(base + ".proposers", "proposer names must not be empty");
    if (p.type == "native-mtp") {
      if (p.prediction_depth == 0) r.fail(pp + ".prediction_depth", "prediction_depth must be greater than zero");
      if (p.layer_indices.empty()) r.fail(pp + ".layer_indices", "layer_indices must not be empty");
      layers_in_range(p.layer_indices, pp + ".layer_indices");
    } else {
      if (p.ngram_min == 0 || p.ngram_max < p.ngram_min) {
        r.fail(pp, "ngram_min and ngram_max must satisfy 1 <= ngram_min <= ngram_max");
      }
      if (p.max_proposal_tokens == 0) r.fail(pp + ".max_proposal_tokens", "max_proposal_tokens must be greater than zero");
      if (v2_blank(p.history_scope)) r.fail(pp + ".history_scope", "history_scope must not be empty");
    }
  }
  for (const auto& [name, s] : sd.strategies) {
    const std::string sp = base + ".strategies[" + name + "]";
    if (v2_blank(name)) r.fail(base + ".strategies", "strategy names must not be empty");
    auto require_proposer = [&](const std::string& field, const std::string& ref,
                                std::initializer_list<std::string_view> allowed) {
      if (v2_blank(ref)) r.fail(sp + "." + field, "proposer reference must not be empty");
      const auto it = sd.proposers.find(ref);
      if (it == sd.proposers.end()) r.fail(sp + "." + field, "references undeclared proposer " + quote(ref));
      if (!manifest_detail::is_one_of(it->second.type, allowed)) {
        r.fail(sp + "." + field, "proposer " + quote(ref) + " has kind " + quote(it->second.type) +
                                     ", which is not compatible with this strategy");
      }
    };
    if (s.window_policy) {
      const auto& w = *s.window_policy;
      const std::string wp = sp + ".window_policy";
      if (v2_blank(w.default_mode)) r.fail(wp + ".default", "window_policy.default must not be empty");
      if (w.initial_window == 0 || w.min_window == 0 || w.max_window == 0) {
        r.fail(wp, "window_policy windows must be greater than zero");
      }
      if (w.pipeline_depth == 0u) r.fail(wp + ".pipeline_depth", "window_policy.pipeline_depth must be greater than zero");
      if (w.min_window > w.max_window) r.fail(wp, "window_policy min_window must not exceed max_window");
      if (w.initial_window < w.min_window || w.initial_window > w.max_window) {
        r.fail(wp, "window_policy initial_window must lie within min_window..max_window");
      }
    }
    if (s.type == "native-mtp") {
      const bool depth = s.prediction_depth.has_value();
      const bool layers = !s.layer_indices.empty();
      if (s.proposer && !depth && !layers) {
        require_proposer("proposer", *s.proposer, {"native-mtp"});
      } else if (!s.proposer && depth && layers) {
        if (*s.prediction_depth == 0) r.fail(sp + ".prediction_depth", "prediction_depth must be greater than zero");
        layers_in_range(s.layer_indices, sp + ".layer_indices");
      } else if (s.proposer) {
        r.fail(sp, "native-mtp strategy must set either proposer or the inline prediction_depth/layer_indices form, not both");
      } else if (depth) {
        r.fail(sp + ".layer_indices", "inline native-mtp strategy must declare layer_indices alongside prediction_depth");
      } else if (layers) {
        r.fail(sp + ".prediction_depth", "inline native-mtp strategy must declare prediction_depth alongside layer_indices");
      } else {
        r.fail(sp, "native-mtp strategy must set either proposer or the inline prediction_depth/layer_indices form");
      }
    } else if (s.type == "composite") {
      const auto e = s.extension_policy.value_or(V2ExtensionPolicy{});
      const std::string ep = sp + ".extension_policy";
      if (e.max_tokens == 0) r.fail(ep + ".max_tokens", "extension_policy.max_tokens must be greater than zero");
      if (e.initial_tokens == 0u) r.fail(ep + ".initial_tokens", "extension_policy.initial_tokens must be greater than zero");
      if (e.initial_tokens && *e.initial_tokens > e.max_tokens) {
        r.fail(ep + ".initial_tokens", "extension_policy.initial_tokens must not exceed max_tokens");
      }
      if (e.tail_backoff_proposals == 0u) {
        r.fail(ep + ".tail_backoff_proposals", "extension_policy.tail_backoff_proposals must be greater than zero");
      }
      require_proposer("primary", s.primary, {"native-mtp"});
      require_proposer("extender", s.extender, {"ngram-cache", "ngram-suffix"});
    } else {
      require_proposer("proposer", s.proposer.value_or(""), {s.type});
    }
  }
  if (!v2_blank(sd.default_strategy) && !sd.strategies.contains(sd.default_strategy)) {
    r.fail(base + ".default", "default strategy " + quote(sd.default_strategy) + " is not declared under strategies");
  }
}

void validate_root_v2(const PackageRootV2& m, const FieldReader& r) {
  if (m.schema_version != kPackageSchemaV2) {
    r.fail("schema_version", "expected schema version 2, got " + std::to_string(m.schema_version));
  }
  v2_require_not_blank(r, "model_id", m.model_id);
  v2_require_not_blank(r, "format", m.format);
  v2_require_not_blank(r, "native_abi_version", m.native_abi_version);
  v2_require_not_blank(r, "generator_version", m.generator_version);
  {
    const auto& s = m.source_model;
    const std::pair<const char*, const std::string*> fields[] = {
        {"model_id", &m.model_id}, {"format", &m.format}, {"native_abi_version", &m.native_abi_version},
        {"generator_version", &m.generator_version}, {"source_model.metadata_artifact_id", &s.metadata_artifact_id}};
    for (const auto& [name, v] : fields) v2_require_no_controls(r, name, *v);
    const std::pair<const char*, const std::optional<std::string>*> optional_fields[] = {
        {"source_model.repo", &s.repo}, {"source_model.revision", &s.revision},
        {"source_model.primary_file", &s.primary_file}, {"source_model.canonical_ref", &s.canonical_ref},
        {"source_model.distribution_id", &s.distribution_id}};
    for (const auto& [name, v] : optional_fields) {
      if (*v) v2_require_no_controls(r, name, **v);
    }
    for (size_t i = 0; i < m.artifacts.size(); ++i) {
      v2_require_no_controls(r, index_path("artifact_catalog.entries", i) + ".id", m.artifacts[i].id);
    }
    for (size_t i = 0; i < m.sidecars.size(); ++i) {
      v2_require_no_controls(r, index_path("sidecars", i) + ".artifact_id", m.sidecars[i].artifact_id);
      if (m.sidecars[i].name) v2_require_no_controls(r, index_path("sidecars", i) + ".name", *m.sidecars[i].name);
    }
  }
  if (m.layer_count == 0) r.fail("layer_count", "layer count must be greater than zero");
  if (!m.package_id.starts_with("sha256:")) r.fail("package_id", "digest must use the sha256:<hex> form");
  v2_require_sha256(r, "package_id", std::string_view(m.package_id).substr(7));
  const auto& s = m.source_model;
  v2_require_sha256(r, "source_model.sha256", s.sha256);
  v2_require_not_blank(r, "source_model.metadata_artifact_id", s.metadata_artifact_id);
  if (s.files.empty()) r.fail("source_model.files", "source file inventory must not be empty");
  if (m.artifacts.empty()) r.fail("artifact_catalog.entries", "artifact catalog must not be empty");
  {
    // Totals fit 64 bits: every tensor lies inside its artifact, so each sum
    // a reader takes (bytes of a stage, of the package) is bounded by these.
    uint64_t total = 0;
    for (size_t i = 0; i < m.artifacts.size(); ++i) {
      if (__builtin_add_overflow(total, m.artifacts[i].byte_size, &total)) {
        r.fail(index_path("artifact_catalog.entries", i) + ".byte_size", "the artifacts' sizes add up past 2^64");
      }
    }
    total = 0;
    for (size_t i = 0; i < s.files.size(); ++i) {
      if (__builtin_add_overflow(total, s.files[i].byte_size, &total)) {
        r.fail(index_path("source_model.files", i) + ".byte_size", "the source files' sizes add up past 2^64");
      }
    }
  }

  std::set<std::string_view> source_paths;
  for (size_t i = 0; i < s.files.size(); ++i) {
    const std::string ip = index_path("source_model.files", i);
    v2_require_path(r, ip + ".path", s.files[i].path);
    v2_require_sha256(r, ip + ".sha256", s.files[i].sha256);
    if (!source_paths.insert(s.files[i].path).second) {
      r.fail(ip + ".path", "source file path " + quote(s.files[i].path) + " appears more than once");
    }
  }
  if (!s.primary_file) r.fail("source_model.primary_file", "primary source file is required");
  v2_require_path(r, "source_model.primary_file", *s.primary_file);
  if (!source_paths.contains(*s.primary_file)) {
    r.fail("source_model.primary_file", "primary file " + quote(*s.primary_file) + " is absent from source_model.files");
  }

  std::set<std::string_view> ids, paths;
  for (size_t i = 0; i < m.artifacts.size(); ++i) {
    const auto& a = m.artifacts[i];
    const std::string ip = index_path("artifact_catalog.entries", i);
    if (!v2_artifact_identifier(a.id)) {
      r.fail(ip + ".id", "identifier " + quote(a.id) + " contains unsupported characters (allowed: A-Z a-z 0-9 - _ .)");
    }
    v2_require_path(r, ip + ".path", a.path);
    if (a.path == kManifestFileName) r.fail(ip + ".path", "an artifact cannot be model-package.json");
    v2_require_sha256(r, ip + ".sha256", a.sha256);
    if (!ids.insert(a.id).second) r.fail(ip + ".id", "artifact id " + quote(a.id) + " appears more than once");
    if (!paths.insert(a.path).second) r.fail(ip + ".path", "artifact path " + quote(a.path) + " appears more than once");
  }

  // The carrier binding.
  const V2Artifact* carrier = nullptr;
  for (const auto& a : m.artifacts) {
    if (a.id == s.metadata_artifact_id) carrier = &a;
  }
  if (carrier == nullptr) {
    r.fail("source_model.metadata_artifact_id",
           "metadata artifact " + quote(s.metadata_artifact_id) + " is absent from the artifact catalog");
  }
  if (!carrier->path.ends_with(".gguf") || carrier->path.ends_with("/.gguf") || carrier->path == ".gguf") {
    r.fail("source_model.metadata_artifact_id", "metadata artifact " + quote(carrier->id) + " (" + carrier->path +
                                                    ") is not a GGUF artifact");
  }
  for (const auto& sc : m.sidecars) {
    if (sc.artifact_id == carrier->id) {
      r.fail("source_model.metadata_artifact_id", "metadata artifact " + quote(carrier->id) + " has a sidecar role");
    }
  }
  for (const auto& f : s.files) {
    if (f.path == *s.primary_file && f.sha256 != s.sha256) {
      r.fail("source_model.sha256", "source model digest does not match the primary source file " + quote(f.path));
    }
  }

  std::set<std::pair<std::string, std::optional<std::string>>> seen;
  for (size_t i = 0; i < m.sidecars.size(); ++i) {
    const auto& sc = m.sidecars[i];
    const std::string ip = index_path("sidecars", i);
    if (sc.kind != kSidecarKindMmproj) r.fail(ip + ".kind", "unknown sidecar kind " + quote(sc.kind));
    if (!seen.emplace(sc.kind, sc.name).second) {
      r.fail(ip, "sidecar (" + sc.kind + ", " + (sc.name ? quote(*sc.name) : std::string("no name")) +
                     ") appears more than once");
    }
    if (!ids.contains(sc.artifact_id)) r.fail(ip + ".artifact_id", "artifact " + quote(sc.artifact_id) + " does not exist");
    if (sc.name) v2_require_not_blank(r, ip + ".name", *sc.name);
  }
  validate_v2_publisher(m, r);
  if (m.generation) validate_generation_v2(*m.generation, m.layer_count, r);

  const std::string expected = compute_package_id_v2(m);
  if (m.package_id != expected) {
    r.fail("package_id", "package identity " + quote(m.package_id) + " does not match the canonical identity " +
                             quote(expected) + " recomputed from the root");
  }
}

}  // namespace manifest_v2_detail

using namespace manifest_v2_detail;

std::optional<uint32_t> peek_schema_version(std::string_view json_text) noexcept {
  try {
    const json j = json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/false);
    if (!j.is_object()) return std::nullopt;
    const auto it = j.find("schema_version");
    if (it == j.end() || !it->is_number_unsigned()) return std::nullopt;
    const auto v = it->get<uint64_t>();
    if (v > UINT32_MAX) return std::nullopt;
    return static_cast<uint32_t>(v);
  } catch (...) {
    return std::nullopt;
  }
}

PackageRootV2 parse_package_root_v2(std::string_view json_text, std::string_view origin) {
  const FieldReader r{std::string(origin)};
  const json j = parse_v2_json_text(json_text, r);
  PackageRootV2 m = parse_root_v2(j, r);
  validate_root_v2(m, r);
  return m;
}

void validate_package_root_v2(const PackageRootV2& root, std::string_view origin) {
  validate_root_v2(root, FieldReader{std::string(origin)});
}

bool declares_schema_v2(const std::filesystem::path& dir) noexcept {
  try {
    std::error_code ec;
    const auto manifest = dir / std::string(kManifestFileName);
    if (!std::filesystem::is_regular_file(manifest, ec)) return false;
    return package_root_schema(read_small_file(manifest, kManifestMaxBytes)).schema == kPackageSchemaV2;
  } catch (...) {
    return false;
  }
}

}  // namespace skippy
