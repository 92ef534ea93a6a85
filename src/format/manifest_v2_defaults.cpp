// package schema 2: the root's newer members, read and checked as strictly
// as the rest of the root (skippy/manifest_v2.h): generation.request_defaults
// (the reference format crate's GenerationRequestDefaults), publisher_metadata
// and publisher_defaults.
#include <cctype>
#include <cmath>
#include <limits>
#include <set>
#include <tuple>

#include "format/manifest_v2_detail.h"
#include "skippy/error.h"

namespace skippy {
namespace manifest_v2_detail {
namespace {

using manifest_detail::describe;
using manifest_detail::field_path;
using manifest_detail::index_path;
using manifest_detail::quote;

// serde's f64: any JSON number.
std::optional<double> rd_opt_f64(const json& obj, std::string_view key, std::string_view parent, const FieldReader& r) {
  const json* v = FieldReader::find(obj, key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) r.fail(field_path(parent, key), "invalid type: " + describe(*v) + ", expected a number");
  return v->get<double>();
}

// serde's i32: a JSON integer in range (1.0 is not one).
std::optional<int32_t> rd_opt_i32(const json& obj, std::string_view key, std::string_view parent, const FieldReader& r) {
  const json* v = FieldReader::find(obj, key);
  if (v == nullptr) return std::nullopt;
  const std::string path = field_path(parent, key);
  if (v->is_number_unsigned()) {
    const auto u = v->get<uint64_t>();
    if (u > uint64_t{INT32_MAX}) r.fail(path, describe(*v) + " does not fit a 32-bit signed integer");
    return static_cast<int32_t>(u);
  }
  if (!v->is_number_integer()) r.fail(path, "invalid type: " + describe(*v) + ", expected an integer");
  const auto i = v->get<int64_t>();
  if (i < INT32_MIN || i > INT32_MAX) r.fail(path, describe(*v) + " does not fit a 32-bit signed integer");
  return static_cast<int32_t>(i);
}

std::optional<std::vector<std::string>> rd_opt_strings(const json& obj, std::string_view key, std::string_view parent,
                                                       const FieldReader& r) {
  const json* v = FieldReader::find(obj, key);
  if (v == nullptr) return std::nullopt;
  const std::string path = field_path(parent, key);
  r.expect_array(*v, path);
  std::vector<std::string> out;
  for (size_t i = 0; i < v->size(); ++i) out.push_back(r.string((*v)[i], index_path(path, i)));
  return out;
}

std::optional<std::string> rd_opt_variant(const json& obj, std::string_view key, std::string_view parent,
                                          const FieldReader& r, std::initializer_list<std::string_view> variants) {
  auto v = v2_opt_str(obj, key, parent, r);
  if (v && !manifest_detail::is_one_of(*v, variants)) {
    std::string list;
    for (auto t : variants) list += (list.empty() ? "" : ", ") + std::string(t);
    r.fail(field_path(parent, key), "unknown variant " + quote(*v) + " (expected one of " + list + ")");
  }
  return v;
}

V2GenerationProfile rd_profile(const json& j, const std::string& path, const FieldReader& r) {
  r.expect_object(j, path);
  v2_refuse_unknown(j, path,
                    {"max_tokens", "stop", "temperature", "top_p", "top_k", "min_p", "typical_p", "top_nsigma",
                     "presence_penalty", "frequency_penalty", "seed", "logit_bias", "repeat_penalty", "repeat_last_n",
                     "dynatemp_range", "dynatemp_exponent", "dry", "xtc", "mirostat_mode", "mirostat_entropy",
                     "mirostat_learning_rate", "samplers", "sampler_sequence", "ignore_eos", "reasoning", "provenance"},
                    r);
  V2GenerationProfile p;
  p.max_tokens = v2_opt_u32(j, "max_tokens", path, r);
  p.stop = rd_opt_strings(j, "stop", path, r);
  p.temperature = rd_opt_f64(j, "temperature", path, r);
  p.top_p = rd_opt_f64(j, "top_p", path, r);
  p.top_k = rd_opt_i32(j, "top_k", path, r);
  p.min_p = rd_opt_f64(j, "min_p", path, r);
  p.typical_p = rd_opt_f64(j, "typical_p", path, r);
  p.top_nsigma = rd_opt_f64(j, "top_nsigma", path, r);
  p.presence_penalty = rd_opt_f64(j, "presence_penalty", path, r);
  p.frequency_penalty = rd_opt_f64(j, "frequency_penalty", path, r);
  if (const json* v = FieldReader::find(j, "seed")) p.seed = r.u64(*v, path + ".seed");
  if (const json* lb = FieldReader::find(j, "logit_bias")) {
    const std::string lp = path + ".logit_bias";
    r.expect_object(*lb, lp);
    std::map<std::string, double> m;
    for (const auto& [token, bias] : lb->items()) {
      if (!bias.is_number()) r.fail(lp + "[" + token + "]", "invalid type: " + describe(bias) + ", expected a number");
      m[token] = bias.get<double>();
    }
    p.logit_bias = std::move(m);
  }
  p.repeat_penalty = rd_opt_f64(j, "repeat_penalty", path, r);
  p.repeat_last_n = rd_opt_i32(j, "repeat_last_n", path, r);
  p.dynatemp_range = rd_opt_f64(j, "dynatemp_range", path, r);
  p.dynatemp_exponent = rd_opt_f64(j, "dynatemp_exponent", path, r);
  if (const json* d = FieldReader::find(j, "dry")) {
    const std::string dp = path + ".dry";
    r.expect_object(*d, dp);
    v2_refuse_unknown(*d, dp, {"multiplier", "base", "allowed_length", "penalty_last_n", "sequence_breakers"}, r);
    V2DryDefaults dry;
    dry.multiplier = rd_opt_f64(*d, "multiplier", dp, r);
    dry.base = rd_opt_f64(*d, "base", dp, r);
    dry.allowed_length = rd_opt_i32(*d, "allowed_length", dp, r);
    dry.penalty_last_n = rd_opt_i32(*d, "penalty_last_n", dp, r);
    dry.sequence_breakers = rd_opt_strings(*d, "sequence_breakers", dp, r);
    p.dry = std::move(dry);
  }
  if (const json* x = FieldReader::find(j, "xtc")) {
    const std::string xp = path + ".xtc";
    r.expect_object(*x, xp);
    v2_refuse_unknown(*x, xp, {"probability", "threshold"}, r);
    p.xtc = V2XtcDefaults{rd_opt_f64(*x, "probability", xp, r), rd_opt_f64(*x, "threshold", xp, r)};
  }
  p.mirostat_mode = rd_opt_i32(j, "mirostat_mode", path, r);
  p.mirostat_entropy = rd_opt_f64(j, "mirostat_entropy", path, r);
  p.mirostat_learning_rate = rd_opt_f64(j, "mirostat_learning_rate", path, r);
  p.samplers = rd_opt_strings(j, "samplers", path, r);
  p.sampler_sequence = v2_opt_str(j, "sampler_sequence", path, r);
  if (const json* v = FieldReader::find(j, "ignore_eos")) {
    if (!v->is_boolean()) r.fail(path + ".ignore_eos", "invalid type: " + describe(*v) + ", expected a boolean");
    p.ignore_eos = v->get<bool>();
  }
  if (const json* re = FieldReader::find(j, "reasoning")) {
    const std::string rp = path + ".reasoning";
    r.expect_object(*re, rp);
    v2_refuse_unknown(*re, rp, {"enabled", "format", "budget"}, r);
    V2ReasoningDefaults rd;
    rd.enabled = rd_opt_variant(*re, "enabled", rp, r, {"auto", "off", "on"});
    rd.format = rd_opt_variant(*re, "format", rp, r, {"auto", "none", "deepseek", "deepseek-legacy", "hidden"});
    if (const json* b = FieldReader::find(*re, "budget")) {
      // serde's untagged enum: a u32 token count, else a level.
      if (b->is_number()) {
        rd.budget_tokens = r.u32(*b, rp + ".budget");
      } else {
        rd.budget_level = rd_opt_variant(*re, "budget", rp, r, {"auto", "low", "medium", "high", "unrestricted"});
      }
    }
    p.reasoning = std::move(rd);
  }
  {
    const std::string pp = path + ".provenance";
    const json& pv = v2_object_member(j, "provenance", path, r);
    v2_refuse_unknown(pv, pp, {"source_repo", "revision", "file", "section", "url"}, r);
    p.provenance = {v2_str(pv, "source_repo", pp, r), v2_str(pv, "revision", pp, r), v2_str(pv, "file", pp, r),
                    v2_str(pv, "section", pp, r), v2_str(pv, "url", pp, r)};
  }
  return p;
}

bool rd_hex40(std::string_view s) {
  if (s.size() != 40) return false;
  for (char c : s) {
    if (!std::isxdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

std::string_view rd_trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// The reference's validate_generation_profile, rule for rule.
void rd_validate_profile(const std::string& name, const V2GenerationProfile& p, const FieldReader& r) {
  const std::string base = "generation.request_defaults.profiles[" + name + "]";
  auto at = [&](std::string_view field) { return base + "." + std::string(field); };
  if (p.max_tokens == 0u) r.fail(at("max_tokens"), "max_tokens must be greater than zero");
  if (p.stop) {
    for (size_t i = 0; i < p.stop->size(); ++i) v2_require_not_blank(r, index_path(at("stop"), i), (*p.stop)[i]);
  }
  const std::pair<const char*, const std::optional<double>*> floats[] = {
      {"temperature", &p.temperature},           {"top_p", &p.top_p},
      {"min_p", &p.min_p},                       {"typical_p", &p.typical_p},
      {"top_nsigma", &p.top_nsigma},             {"presence_penalty", &p.presence_penalty},
      {"frequency_penalty", &p.frequency_penalty}, {"repeat_penalty", &p.repeat_penalty},
      {"dynatemp_range", &p.dynatemp_range},     {"dynatemp_exponent", &p.dynatemp_exponent},
      {"mirostat_entropy", &p.mirostat_entropy}, {"mirostat_learning_rate", &p.mirostat_learning_rate}};
  for (const auto& [field, v] : floats) {
    if (*v && !std::isfinite(**v)) r.fail(at(field), "value must be finite");
  }
  constexpr double kMax = std::numeric_limits<double>::max();
  const std::tuple<const char*, const std::optional<double>*, double, double, const char*> ranges[] = {
      {"temperature", &p.temperature, 0.0, 100.0, "0..=100"},
      {"presence_penalty", &p.presence_penalty, -2.0, 2.0, "-2..=2"},
      {"frequency_penalty", &p.frequency_penalty, -2.0, 2.0, "-2..=2"},
      {"top_nsigma", &p.top_nsigma, -1.0, kMax, "-1.."},
      {"dynatemp_range", &p.dynatemp_range, 0.0, kMax, "0.."},
      {"dynatemp_exponent", &p.dynatemp_exponent, 0.0, kMax, "0.."},
      {"top_p", &p.top_p, 0.0, 1.0, "0..=1"},
      {"min_p", &p.min_p, 0.0, 1.0, "0..=1"},
      {"typical_p", &p.typical_p, 0.0, 1.0, "0..=1"}};
  for (const auto& [field, v, lo, hi, text] : ranges) {
    if (*v && (**v < lo || **v > hi)) r.fail(at(field), std::string("value must be within ") + text);
  }
  if (p.repeat_penalty && *p.repeat_penalty <= 0.0) r.fail(at("repeat_penalty"), "repeat_penalty must be greater than zero");
  if (p.top_k && *p.top_k < 0) r.fail(at("top_k"), "top_k must be greater than or equal to zero");
  if (p.repeat_last_n && *p.repeat_last_n < -1) r.fail(at("repeat_last_n"), "repeat_last_n must be greater than or equal to -1");
  if (p.seed && *p.seed > UINT32_MAX) r.fail(at("seed"), "seed must fit in the native u32 field");
  if (p.logit_bias) {
    for (const auto& [token, bias] : *p.logit_bias) {
      bool valid_token = !token.empty() && token.size() <= 10;
      int64_t id = 0;
      for (size_t i = 0; valid_token && i < token.size(); ++i) {
        const char c = token[i];
        if (i == 0 && c == '+' && token.size() > 1) continue;  // Rust's i32 parse takes a leading '+'
        if (c < '0' || c > '9') valid_token = false;
        else id = id * 10 + (c - '0');
      }
      if (!valid_token || id > INT32_MAX || !std::isfinite(bias) || bias < -100.0 || bias > 100.0) {
        r.fail(at("logit_bias[" + token + "]"),
               "logit bias keys must be signed token ids and values must be within -100..=100");
      }
    }
  }
  if (p.mirostat_mode && (*p.mirostat_mode < 0 || *p.mirostat_mode > 2)) r.fail(at("mirostat_mode"), "mirostat_mode must be 0, 1, or 2");
  if (p.mirostat_entropy && *p.mirostat_entropy <= 0.0) r.fail(at("mirostat_entropy"), "value must be greater than zero");
  if (p.mirostat_learning_rate && *p.mirostat_learning_rate <= 0.0) {
    r.fail(at("mirostat_learning_rate"), "value must be greater than zero");
  }
  if (p.samplers) {
    for (size_t i = 0; i < p.samplers->size(); ++i) {
      const auto& s = (*p.samplers)[i];
      v2_require_not_blank(r, index_path(at("samplers"), i), s);
      if (!manifest_detail::is_one_of(s, {"penalties", "dry", "top_n_sigma", "top_k", "typical_p", "typ_p", "top_p",
                                          "min_p", "xtc", "temperature", "temp"})) {
        r.fail(index_path(at("samplers"), i), "unsupported sampler name " + quote(s));
      }
    }
  }
  if (p.sampler_sequence) {
    v2_require_not_blank(r, at("sampler_sequence"), *p.sampler_sequence);
    for (const char c : *p.sampler_sequence) {
      if (std::isspace(static_cast<unsigned char>(c))) continue;
      if (std::string_view("edskypmxt").find(c) == std::string_view::npos) {
        r.fail(at("sampler_sequence"), "sampler sequence contains an unsupported code");
      }
    }
  }
  if (p.dry) {
    const auto& d = *p.dry;
    if ((d.multiplier && *d.multiplier < 0.0) || (d.base && *d.base <= 0.0) || (d.allowed_length && *d.allowed_length < 0) ||
        (d.penalty_last_n && *d.penalty_last_n < -1)) {
      r.fail(at("dry"), "DRY values are outside native sampler bounds");
    }
    if (d.sequence_breakers) {
      for (size_t i = 0; i < d.sequence_breakers->size(); ++i) {
        const auto& b = (*d.sequence_breakers)[i];
        if (b.empty() || b.size() >= 16) {
          r.fail(index_path(at("dry.sequence_breakers"), i),
                 "DRY sequence breakers must be non-empty and shorter than 16 bytes");
        }
      }
    }
  }
  if (p.xtc) {
    if (p.xtc->probability && !(*p.xtc->probability >= 0.0 && *p.xtc->probability <= 1.0)) {
      r.fail(at("xtc.probability"), "value must be within 0..=1");
    }
    if (p.xtc->threshold && !(*p.xtc->threshold >= 0.0 && *p.xtc->threshold <= 1.0)) {
      r.fail(at("xtc.threshold"), "value must be within 0..=1");
    }
  }
  const auto& pv = p.provenance;
  const std::string pp = base + ".provenance";
  const std::pair<const char*, const std::string*> fields[] = {
      {"source_repo", &pv.source_repo}, {"revision", &pv.revision}, {"file", &pv.file},
      {"section", &pv.section},         {"url", &pv.url}};
  for (const auto& [field, v] : fields) {
    v2_require_not_blank(r, pp + "." + field, *v);
    v2_require_no_controls(r, pp + "." + field, *v);
  }
  const std::string_view revision = rd_trim(pv.revision);
  if (!rd_hex40(revision)) r.fail(pp + ".revision", "provenance revision must be an immutable 40-character Git commit SHA");
  if (!pv.url.starts_with("https://") && !pv.url.starts_with("http://")) {
    r.fail(pp + ".url", "provenance URL must use http or https");
  }
  bool named = false;
  size_t start = 0;
  for (size_t i = 0; i <= pv.url.size(); ++i) {
    if (i < pv.url.size() && std::string_view("/?#&=").find(pv.url[i]) == std::string_view::npos) continue;
    if (std::string_view(pv.url).substr(start, i - start) == revision) named = true;
    start = i + 1;
  }
  if (!named) r.fail(pp + ".url", "provenance URL must contain the exact revision as a distinct path or query segment");
}

}  // namespace

V2RequestDefaults parse_v2_request_defaults(const json& j, std::string_view path, const FieldReader& r) {
  const std::string base(path);
  r.expect_object(j, base);
  v2_refuse_unknown(j, base, {"selection", "profiles"}, r);
  V2RequestDefaults d;
  {
    const std::string sp = base + ".selection";
    const json& sel = v2_object_member(j, "selection", base, r);
    v2_refuse_unknown(sel, sp, {"default", "reasoning_enabled", "reasoning_disabled"}, r);
    d.selection_default = v2_str(sel, "default", sp, r);
    d.reasoning_enabled = v2_opt_str(sel, "reasoning_enabled", sp, r);
    d.reasoning_disabled = v2_opt_str(sel, "reasoning_disabled", sp, r);
  }
  const json& profiles = v2_object_member(j, "profiles", base, r);
  for (const auto& [name, v] : profiles.items()) d.profiles[name] = rd_profile(v, base + ".profiles[" + name + "]", r);
  return d;
}

void validate_v2_request_defaults(const V2RequestDefaults& d, const FieldReader& r) {
  const std::string base = "generation.request_defaults";
  if (d.profiles.empty()) r.fail(base + ".profiles", "at least one generation profile is required");
  for (const auto& [name, p] : d.profiles) {
    if (!v2_artifact_identifier(name)) {
      r.fail(base + ".profiles[" + name + "]",
             "identifier " + quote(name) + " contains unsupported characters (allowed: A-Z a-z 0-9 - _ .)");
    }
    rd_validate_profile(name, p, r);
  }
  const std::pair<const char*, const std::string*> selected[] = {
      {"default", &d.selection_default},
      {"reasoning_enabled", d.reasoning_enabled ? &*d.reasoning_enabled : nullptr},
      {"reasoning_disabled", d.reasoning_disabled ? &*d.reasoning_disabled : nullptr}};
  for (const auto& [field, v] : selected) {
    if (v == nullptr) continue;
    const std::string at = base + ".selection." + field;
    if (v2_blank(*v)) r.fail(at, "selected profile must not be empty");
    if (!d.profiles.contains(*v)) r.fail(at, "references undeclared generation profile " + quote(*v));
  }
}

void parse_v2_publisher(const json& root, PackageRootV2& m, const FieldReader& r) {
  if (const json* pm = FieldReader::find(root, "publisher_metadata")) {
    r.expect_array(*pm, "publisher_metadata");
    for (size_t i = 0; i < pm->size(); ++i) {
      const std::string ip = index_path("publisher_metadata", i);
      const json& e = (*pm)[i];
      r.expect_object(e, ip);
      v2_refuse_unknown(e, ip, {"role", "artifact_id", "source_repo", "source_revision", "source_path"}, r);
      V2PublisherMetadata p;
      (void)r.require(e, "role", ip);
      p.role = *rd_opt_variant(e, "role", ip, r, {kPublisherRoles[0], kPublisherRoles[1], kPublisherRoles[2],
                                                   kPublisherRoles[3], kPublisherRoles[4]});
      p.artifact_id = v2_str(e, "artifact_id", ip, r);
      p.source_repo = v2_str(e, "source_repo", ip, r);
      p.source_revision = v2_str(e, "source_revision", ip, r);
      p.source_path = v2_str(e, "source_path", ip, r);
      m.publisher_metadata.push_back(std::move(p));
    }
  }
  if (const json* pd = FieldReader::find(root, "publisher_defaults")) {
    const std::string base = "publisher_defaults";
    r.expect_object(*pd, base);
    v2_refuse_unknown(*pd, base, {"compute_dtype", "kv_cache_dtype"}, r);
    V2PublisherDefaults d;
    for (const char* name : {"compute_dtype", "kv_cache_dtype"}) {
      const json* v = FieldReader::find(*pd, name);
      if (v == nullptr) continue;
      const std::string dp = base + "." + name;
      r.expect_object(*v, dp);
      v2_refuse_unknown(*v, dp, {"dtype", "artifact_id", "json_path"}, r);
      (void)r.require(*v, "dtype", dp);
      V2DtypeDeclaration decl;
      decl.dtype = *rd_opt_variant(*v, "dtype", dp, r, {kPublisherDtypes[0], kPublisherDtypes[1], kPublisherDtypes[2],
                                                         kPublisherDtypes[3], kPublisherDtypes[4], kPublisherDtypes[5],
                                                         kPublisherDtypes[6], kPublisherDtypes[7]});
      decl.artifact_id = v2_str(*v, "artifact_id", dp, r);
      decl.json_path = v2_str(*v, "json_path", dp, r);
      (std::string_view(name) == "compute_dtype" ? d.compute_dtype : d.kv_cache_dtype) = std::move(decl);
    }
    m.publisher_defaults = std::move(d);
  }
}

void validate_v2_publisher(const PackageRootV2& m, const FieldReader& r) {
  std::set<std::string_view> ids;
  for (const auto& a : m.artifacts) ids.insert(a.id);
  std::set<std::pair<std::string_view, std::string_view>> seen;
  for (size_t i = 0; i < m.publisher_metadata.size(); ++i) {
    const auto& p = m.publisher_metadata[i];
    const std::string ip = index_path("publisher_metadata", i);
    if (!manifest_detail::is_one_of(p.role, {kPublisherRoles[0], kPublisherRoles[1], kPublisherRoles[2],
                                             kPublisherRoles[3], kPublisherRoles[4]})) {
      r.fail(ip + ".role", "unknown publisher metadata role " + quote(p.role));
    }
    if (!seen.emplace(p.role, p.source_path).second) {
      r.fail(ip, "publisher metadata (" + p.role + ", " + quote(p.source_path) + ") appears more than once");
    }
    if (!ids.contains(p.artifact_id)) r.fail(ip + ".artifact_id", "artifact " + quote(p.artifact_id) + " does not exist");
    if (p.artifact_id == m.source_model.metadata_artifact_id) {
      r.fail(ip + ".artifact_id", "the metadata carrier cannot be publisher metadata");
    }
    for (const auto& s : m.sidecars) {
      if (s.artifact_id == p.artifact_id) r.fail(ip + ".artifact_id", "artifact " + quote(p.artifact_id) + " is a sidecar");
    }
    v2_require_not_blank(r, ip + ".source_repo", p.source_repo);
    v2_require_not_blank(r, ip + ".source_revision", p.source_revision);
    for (const auto& [field, v] : {std::pair<const char*, const std::string*>{"artifact_id", &p.artifact_id},
                                   {"source_repo", &p.source_repo}, {"source_revision", &p.source_revision}}) {
      v2_require_no_controls(r, ip + "." + field, *v);
    }
    if (!rd_hex40(p.source_revision)) {
      r.fail(ip + ".source_revision", "publisher metadata revision must be an immutable 40-character commit");
    }
    v2_require_path(r, ip + ".source_path", p.source_path);
    if (m.source_model.repo != p.source_repo) {
      r.fail(ip + ".source_repo", "publisher metadata repository " + quote(p.source_repo) + " differs from source_model.repo");
    }
    if (m.source_model.revision != p.source_revision) {
      r.fail(ip + ".source_revision", "publisher metadata revision differs from source_model.revision");
    }
  }
  if (!m.publisher_defaults) return;
  for (const char* name : {"compute_dtype", "kv_cache_dtype"}) {
    const bool compute = std::string_view(name) == "compute_dtype";
    const auto& decl = compute ? m.publisher_defaults->compute_dtype : m.publisher_defaults->kv_cache_dtype;
    if (!decl) continue;
    const std::string path = std::string("publisher_defaults.") + name;
    if (!manifest_detail::is_one_of(decl->dtype, {kPublisherDtypes[0], kPublisherDtypes[1], kPublisherDtypes[2],
                                                  kPublisherDtypes[3], kPublisherDtypes[4], kPublisherDtypes[5],
                                                  kPublisherDtypes[6], kPublisherDtypes[7]})) {
      r.fail(path + ".dtype", "unknown dtype " + quote(decl->dtype));
    }
    if (!ids.contains(decl->artifact_id)) {
      r.fail(path + ".artifact_id", "artifact " + quote(decl->artifact_id) + " does not exist");
    }
    const V2PublisherMetadata* bound = nullptr;
    for (const auto& p : m.publisher_metadata) {
      if (p.artifact_id == decl->artifact_id) {
        bound = &p;
        break;
      }
    }
    if (bound == nullptr) r.fail(path + ".artifact_id", "typed publisher default is not bound to publisher_metadata");
    const bool role_ok = bound->role == "model_config" || (!compute && bound->role == "hf_quant_config");
    if (!role_ok) r.fail(path + ".artifact_id", std::string("publisher default ") + name + " cannot be sourced from " + bound->role);
    v2_require_not_blank(r, path + ".json_path", decl->json_path);
  }
}

}  // namespace manifest_v2_detail

V2RequestDefaults parse_request_defaults_v2(std::string_view json_text, std::string_view origin) {
  const manifest_detail::FieldReader r{std::string(origin)};
  const manifest_detail::json j = manifest_detail::parse_strict_json(json_text, r, 64);
  V2RequestDefaults d = manifest_v2_detail::parse_v2_request_defaults(j, "generation.request_defaults", r);
  manifest_v2_detail::validate_v2_request_defaults(d, r);
  return d;
}

}  // namespace skippy
