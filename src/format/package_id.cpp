// package schema 2: the root's compact JSON and its package_id.
//
// The package_id is what every reader recomputes and compares, so the bytes
// must be exactly the reference's: serde_json::to_vec of its PackageRoot
// struct, i.e. no whitespace, fields in declaration order, `None` optionals
// and the serde-skipped empties left out, maps (BTreeMap) in byte order of
// their keys, integers in decimal, strings escaped as serde_json does
// (\" \\ \b \f \n \r \t, other bytes below 0x20 as \u00xx in lowercase hex,
// everything else, '/' and non-ASCII included, as is).
#include <algorithm>
#include <optional>
#include <string>
#include <tuple>

#include "skippy/manifest_v2.h"
#include "util/sha256.h"

namespace skippy {
namespace {

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

void write_generation(CompactJson& w, const V2Generation& g) {
  w.begin_object();
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
  return package_root_v2_json(n);
}

std::string compute_package_id_v2(const PackageRootV2& root) {
  return "sha256:" + sha256_hex(package_id_v2_preimage(root));
}

}  // namespace skippy
