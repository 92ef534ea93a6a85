// package schema 2: the root's compact JSON and its package_id.
//
// The package_id is what every reader recomputes and compares, so the bytes
// must be exactly the reference's: serde_json::to_vec of its PackageRoot
// struct, i.e. no whitespace, fields in declaration order, `None` optionals
// and the serde-skipped empties left out, maps (BTreeMap) in byte order of
// their keys, integers in decimal, strings escaped as serde_json does
// (\" \\ \b \f \n \r \t, other bytes below 0x20 as \u00xx in lowercase hex,
// everything else, '/' and non-ASCII included, as is), floats as ryu
// writes them (serde_json's f64: the shortest digits that read back, "1.0",
// "0.001", "1e16", "1.5e-7").
#include <algorithm>
#include <charconv>
#include <cmath>
#include <optional>
#include <string>
#include <functional>
#include <tuple>
#include <utility>

#include "skippy/manifest_v2.h"
#include "util/sha256.h"

namespace skippy {
namespace {

// The Rust ryu crate's layout of the shortest round-trip digits of `v`
// (serde_json's f64 serializer); null for what JSON cannot hold, as serde_json.
std::string ryu_f64(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  const std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));  // [-]d[.ddd]e[+-]XX
  std::string out;
  size_t i = 0;
  if (sci[0] == '-') out += '-', i = 1;
  const size_t e = sci.find('e');
  std::string digits;
  for (size_t k = i; k < e; ++k) {
    if (sci[k] != '.') digits += sci[k];
  }
  int exp10 = 0;
  std::from_chars(sci.data() + e + 1 + (sci[e + 1] == '+' ? 1 : 0), sci.data() + sci.size(), exp10);
  if (digits == "0") return out + "0.0";
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  const int length = static_cast<int>(digits.size());
  const int k = exp10 - (length - 1);  // v = digits * 10^k
  const int kk = length + k;           // 10^(kk-1) <= |v| < 10^kk
  if (k >= 0 && kk <= 16) {
    out += digits + std::string(static_cast<size_t>(k), '0') + ".0";
  } else if (kk > 0 && kk <= 16) {
    out += digits.substr(0, static_cast<size_t>(kk)) + "." + digits.substr(static_cast<size_t>(kk));
  } else if (kk > -5 && kk <= 0) {
    out += "0." + std::string(static_cast<size_t>(-kk), '0') + digits;
  } else if (length == 1) {
    out += digits + "e" + std::to_string(kk - 1);
  } else {
    out += digits.substr(0, 1) + "." + digits.substr(1) + "e" + std::to_string(kk - 1);
  }
  return out;
}

class CompactJson {
 public:
  std::string take() { return std::move(out_); }

  void begin_object() { open('{'); }
  void end_object() { close('}'); }
  void begin_array() { open('['); }
  void end_array() { close(']'); }

  void key(std::string_view k) {
    comma();
    string_token(k);
    out_ += ':';
    after_key_ = true;
  }
  void value(std::string_view s) {
    comma();
    string_token(s);
  }
  void value(uint64_t v) {
    comma();
    out_ += std::to_string(v);
  }
  void value_i64(int64_t v) {
    comma();
    out_ += std::to_string(v);
  }
  void value_f64(double v) {
    comma();
    out_ += ryu_f64(v);
  }
  void value_bool(bool v) {
    comma();
    out_ += v ? "true" : "false";
  }
  // The common shapes.
  void member(std::string_view k, std::string_view s) { key(k), value(s); }
  void member(std::string_view k, uint64_t v) { key(k), value(v); }
  template <class T>
  void member_if(std::string_view k, const std::optional<T>& v) {
    if (v) member(k, *v);
  }
  void member_list(std::string_view k, const std::vector<uint32_t>& values) {
    key(k);
    begin_array();
    for (uint32_t v : values) value(uint64_t{v});
    end_array();
  }

 private:
  void open(char c) {
    comma();
    out_ += c;
    first_ = true;
  }
  void close(char c) {
    out_ += c;
    first_ = false;
  }
  // Before a value or key: a comma unless it is the first in its container
  // or the value of the key just written.
  void comma() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (!first_) out_ += ',';
    first_ = false;
  }
  void string_token(std::string_view s) {
    static constexpr char kHex[] = "0123456789abcdef";
    out_ += '"';
    for (const char ch : s) {
      const auto c = static_cast<unsigned char>(ch);
      switch (c) {
        case '"': out_ += "\\\""; break;
        case '\\': out_ += "\\\\"; break;
        case '\b': out_ += "\\b"; break;
        case '\f': out_ += "\\f"; break;
        case '\n': out_ += "\\n"; break;
        case '\r': out_ += "\\r"; break;
        case '\t': out_ += "\\t"; break;
        default:
          if (c < 0x20) {
            out_ += "\\u00";
            out_ += kHex[c >> 4];
            out_ += kHex[c & 0xf];
          } else {
            out_ += ch;
          }
      }
    }
    out_ += '"';
  }

  std::string out_;
  bool first_ = true;
  bool after_key_ = false;
};

void write_window_policy(CompactJson& w, const V2WindowPolicy& p) {
  w.begin_object();
  w.member("default", p.default_mode);
  w.member("initial_window", p.initial_window);
  w.member("min_window", p.min_window);
  w.member("max_window", p.max_window);
  w.member_if("pipeline_depth", p.pipeline_depth);
  w.end_object();
}

// ProposerSpec / StrategySpec flatten an internally tagged enum: the tag
// ("type") first, then the variant's fields in declaration order.
void write_proposer(CompactJson& w, const V2Proposer& p) {
  w.begin_object();
  w.member("type", p.type);
  if (p.type == "native-mtp") {
    w.member("prediction_depth", p.prediction_depth);
    w.member_list("layer_indices", p.layer_indices);
  } else {
    w.member("ngram_min", p.ngram_min);
    w.member("ngram_max", p.ngram_max);
    w.member("max_proposal_tokens", p.max_proposal_tokens);
    w.member("history_scope", p.history_scope);
  }
  w.end_object();
}

void write_strategy(CompactJson& w, const V2Strategy& s) {
  w.begin_object();
  w.member("type", s.type);
  if (s.type == "native-mtp") {
    w.member_if("proposer", s.proposer);
    w.member_if("prediction_depth", s.prediction_depth);
    if (!s.layer_indices.empty()) w.member_list("layer_indices", s.layer_indices);
  } else if (s.type == "composite") {
    w.member("primary", s.primary);
    w.member("extender", s.extender);
    w.key("extension_policy");
    const V2ExtensionPolicy e = s.extension_policy.value_or(V2ExtensionPolicy{});
    w.begin_object();
    w.member("max_tokens", e.max_tokens);
    w.member_if("initial_tokens", e.initial_tokens);
    w.member_if("tail_backoff_proposals", e.tail_backoff_proposals);
    w.end_object();
  } else {
    w.member("proposer", s.proposer.value_or(""));
  }
  if (s.window_policy) {
    w.key("window_policy");
    write_window_policy(w, *s.window_policy);
  }
  w.end_object();
}

void write_strings(CompactJson& w, std::string_view k, const std::optional<std::vector<std::string>>& v) {
  if (!v) return;
  w.key(k);
  w.begin_array();
  for (const auto& s : *v) w.value(s);
  w.end_array();
}
void write_f64(CompactJson& w, std::string_view k, const std::optional<double>& v) {
  if (v) w.key(k), w.value_f64(*v);
}
void write_i32(CompactJson& w, std::string_view k, const std::optional<int32_t>& v) {
  if (v) w.key(k), w.value_i64(*v);
}

// GenerationProfile's fields in the reference's declaration order.
void write_profile(CompactJson& w, const V2GenerationProfile& p) {
  w.begin_object();
  w.member_if("max_tokens", p.max_tokens);
  write_strings(w, "stop", p.stop);
  write_f64(w, "temperature", p.temperature);
  write_f64(w, "top_p", p.top_p);
  write_i32(w, "top_k", p.top_k);
  write_f64(w, "min_p", p.min_p);
  write_f64(w, "typical_p", p.typical_p);
  write_f64(w, "top_nsigma", p.top_nsigma);
  write_f64(w, "presence_penalty", p.presence_penalty);
  write_f64(w, "frequency_penalty", p.frequency_penalty);
  w.member_if("seed", p.seed);
  if (p.logit_bias) {
    w.key("logit_bias");
    w.begin_object();
    for (const auto& [token, bias] : *p.logit_bias) w.key(token), w.value_f64(bias);
    w.end_object();
  }
  write_f64(w, "repeat_penalty", p.repeat_penalty);
  write_i32(w, "repeat_last_n", p.repeat_last_n);
  write_f64(w, "dynatemp_range", p.dynatemp_range);
  write_f64(w, "dynatemp_exponent", p.dynatemp_exponent);
  if (p.dry) {
    w.key("dry");
    w.begin_object();
    write_f64(w, "multiplier", p.dry->multiplier);
    write_f64(w, "base", p.dry->base);
    write_i32(w, "allowed_length", p.dry->allowed_length);
    write_i32(w, "penalty_last_n", p.dry->penalty_last_n);
    write_strings(w, "sequence_breakers", p.dry->sequence_breakers);
    w.end_object();
  }
  if (p.xtc) {
    w.key("xtc");
    w.begin_object();
    write_f64(w, "probability", p.xtc->probability);
    write_f64(w, "threshold", p.xtc->threshold);
    w.end_object();
  }
  write_i32(w, "mirostat_mode", p.mirostat_mode);
  write_f64(w, "mirostat_entropy", p.mirostat_entropy);
  write_f64(w, "mirostat_learning_rate", p.mirostat_learning_rate);
  write_strings(w, "samplers", p.samplers);
  w.member_if("sampler_sequence", p.sampler_sequence);
  if (p.ignore_eos) w.key("ignore_eos"), w.value_bool(*p.ignore_eos);
  if (p.reasoning) {
    w.key("reasoning");
    w.begin_object();
    w.member_if("enabled", p.reasoning->enabled);
    w.member_if("format", p.reasoning->format);
    if (p.reasoning->budget_tokens) {
      w.member("budget", uint64_t{*p.reasoning->budget_tokens});
    } else {
      w.member_if("budget", p.reasoning->budget_level);
    }
    w.end_object();
  }
  w.key("provenance");
  w.begin_object();
  w.member("source_repo", p.provenance.source_repo);
  w.member("revision", p.provenance.revision);
  w.member("file", p.provenance.file);
  w.member("section", p.provenance.section);
  w.member("url", p.provenance.url);
  w.end_object();
  w.end_object();
}

void write_request_defaults(CompactJson& w, const V2RequestDefaults& d) {
  w.begin_object();
  w.key("selection");
  w.begin_object();
  w.member("default", d.selection_default);
  w.member_if("reasoning_enabled", d.reasoning_enabled);
  w.member_if("reasoning_disabled", d.reasoning_disabled);
  w.end_object();
  w.key("profiles");
  w.begin_object();
  for (const auto& [name, p] : d.profiles) w.key(name), write_profile(w, p);
  w.end_object();
  w.end_object();
}

void write_generation(CompactJson& w, const V2Generation& g) {
  w.begin_object();
  if (g.request_defaults) {
    w.key("request_defaults");
    write_request_defaults(w, *g.request_defaults);
  }
  if (g.speculative_decoding) {
    const auto& sd = *g.speculative_decoding;
    w.key("speculative_decoding");
    w.begin_object();
    w.member("default", sd.default_strategy);
    if (!sd.proposers.empty()) {
      w.key("proposers");
      w.begin_object();
      for (const auto& [name, p] : sd.proposers) w.key(name), write_proposer(w, p);
      w.end_object();
    }
    if (!sd.strategies.empty()) {
      w.key("strategies");
      w.begin_object();
      for (const auto& [name, s] : sd.strategies) w.key(name), write_strategy(w, s);
      w.end_object();
    }
    w.end_object();
  }
  w.end_object();
}

}  // namespace

std::string package_root_v2_json(const PackageRootV2& root) {
  CompactJson w;
  w.begin_object();
  w.member("schema_version", root.schema_version);
  w.member("package_id", root.package_id);
  w.member("model_id", root.model_id);
  {
    const auto& s = root.source_model;
    w.key("source_model");
    w.begin_object();
    w.member("sha256", s.sha256);
    w.member("metadata_artifact_id", s.metadata_artifact_id);
    w.member_if("repo", s.repo);
    w.member_if("revision", s.revision);
    w.member_if("primary_file", s.primary_file);
    w.member_if("canonical_ref", s.canonical_ref);
    w.member_if("distribution_id", s.distribution_id);
    if (!s.files.empty()) {
      w.key("files");
      w.begin_array();
      for (const auto& f : s.files) {
        w.begin_object();
        w.member("path", f.path);
        w.member("byte_size", f.byte_size);
        w.member("sha256", f.sha256);
        w.end_object();
      }
      w.end_array();
    }
    w.end_object();
  }
  w.member("format", root.format);
  w.member("layer_count", root.layer_count);
  w.key("artifact_catalog");
  w.begin_object();
  w.key("entries");
  w.begin_array();
  for (const auto& a : root.artifacts) {
    w.begin_object();
    w.member("id", a.id);
    w.member("path", a.path);
    w.member("byte_size", a.byte_size);
    w.member("sha256", a.sha256);
    w.end_object();
  }
  w.end_array();
  w.end_object();
  if (!root.sidecars.empty()) {
    w.key("sidecars");
    w.begin_array();
    for (const auto& s : root.sidecars) {
      w.begin_object();
      w.member("kind", s.kind);
      w.member("artifact_id", s.artifact_id);
      w.member_if("name", s.name);
      w.end_object();
    }
    w.end_array();
  }
  if (!root.publisher_metadata.empty()) {
    w.key("publisher_metadata");
    w.begin_array();
    for (const auto& p : root.publisher_metadata) {
      w.begin_object();
      w.member("role", p.role);
      w.member("artifact_id", p.artifact_id);
      w.member("source_repo", p.source_repo);
      w.member("source_revision", p.source_revision);
      w.member("source_path", p.source_path);
      w.end_object();
    }
    w.end_array();
  }
  if (root.publisher_defaults) {
    w.key("publisher_defaults");
    w.begin_object();
    for (const auto& [name, decl] : {std::pair<const char*, const std::optional<V2DtypeDeclaration>*>{
                                         "compute_dtype", &root.publisher_defaults->compute_dtype},
                                     {"kv_cache_dtype", &root.publisher_defaults->kv_cache_dtype}}) {
      if (!*decl) continue;
      w.key(name);
      w.begin_object();
      w.member("dtype", (*decl)->dtype);
      w.member("artifact_id", (*decl)->artifact_id);
      w.member("json_path", (*decl)->json_path);
      w.end_object();
    }
    w.end_object();
  }
  if (root.generation) {
    w.key("generation");
    write_generation(w, *root.generation);
  }
  w.member("native_abi_version", root.native_abi_version);
  w.member("generator_version", root.generator_version);
  w.member("created_at_unix_secs", root.created_at_unix_secs);
  w.end_object();
  return w.take();
}

std::string package_id_v2_preimage(const PackageRootV2& root) {
  PackageRootV2 n = root;
  n.package_id.clear();
  n.created_at_unix_secs = 0;
  // Stable sorts, as Rust's sort_by: equal keys keep their order.
  std::stable_sort(n.source_model.files.begin(), n.source_model.files.end(),
                   [](const auto& a, const auto& b) { return a.path < b.path; });
  std::stable_sort(n.artifacts.begin(), n.artifacts.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  // Sidecar's Ord: (kind, name, artifact_id); Option orders None first.
  std::stable_sort(n.sidecars.begin(), n.sidecars.end(), [](const auto& a, const auto& b) {
    return std::tie(a.kind, a.name, a.artifact_id) < std::tie(b.kind, b.name, b.artifact_id);
  });
  // PublisherMetadata's derived Ord: role (by its declaration rank), then
  // artifact_id, source_repo, source_revision, source_path.
  auto role_rank = [](const std::string& role) {
    return static_cast<size_t>(std::find(std::begin(kPublisherRoles), std::end(kPublisherRoles), role) -
                               std::begin(kPublisherRoles));
  };
  std::stable_sort(n.publisher_metadata.begin(), n.publisher_metadata.end(), [&](const auto& a, const auto& b) {
    const size_t ra = role_rank(a.role), rb = role_rank(b.role);
    return std::tie(ra, a.artifact_id, a.source_repo, a.source_revision, a.source_path) <
           std::tie(rb, b.artifact_id, b.source_repo, b.source_revision, b.source_path);
  });
  return package_root_v2_json(n);
}

std::string compute_package_id_v2(const PackageRootV2& root) {
  return "sha256:" + sha256_hex(package_id_v2_preimage(root));
}

}  // namespace skippy
